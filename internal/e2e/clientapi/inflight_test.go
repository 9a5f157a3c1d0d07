package clientapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A duplicate that arrives while the first request runs is waited out at
// whatever in-flight status the contract chose (in-flight.status: 400..599,
// but 400 and 422), not only at the default 409: the engine answers
// IDEMPOTENCY_KEY_IN_USE at that status, the Doer waits its Retry-After and
// gets the first request's replay.
func TestInFlightStatusWaitedOut(t *testing.T) {
	for _, status := range []int{409, 423, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			pol := idem.MustCompile(idem.Spec{Operation: "createOrder", Semantics: idem.Strict,
				InFlight: idem.InFlightSpec{Status: status, RetryAfter: time.Second}})
			eng := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
			var runs atomic.Int32
			entered, release := make(chan struct{}), make(chan struct{})
			srv := httptest.NewServer(eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				runs.Add(1)
				close(entered)
				<-release
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{"ok":true}`)
			})))
			defer srv.Close()
			var once sync.Once
			letFirstFinish := func() { once.Do(func() { close(release) }) }
			defer letFirstFinish()
			send := func(d *idemclient.Doer) (*http.Response, *idemclient.Call, error) {
				ctx, call := idemclient.Start(context.Background(), idemclient.WithKey("k-1"))
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"a":1}`))
				require.NoError(t, err)
				resp, err := d.Do(req)
				return resp, call, err
			}

			firstDone := make(chan error, 1)
			go func() {
				resp, _, err := send(idemclient.NewDoer(srv.Client(), idemclient.DefaultPolicy()))
				if err == nil {
					resp.Body.Close()
				}
				firstDone <- err
			}()
			<-entered

			// The duplicate's wait lets the first request finish.
			clock := newVClock()
			clock.onSleep = func(time.Duration) {
				letFirstFinish()
				assert.NoError(t, <-firstDone)
			}
			var hl []idemclient.Attempt
			d := idemclient.NewDoer(srv.Client(), idemclient.DefaultPolicy(), idemclient.WithClock(clock),
				idemclient.WithRandom(func() float64 { return 0 }),
				idemclient.WithAttemptHook(func(_ context.Context, a idemclient.Attempt) { hl = append(hl, a) }))
			resp, call, err := send(d)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			assert.JSONEq(t, `{"ok":true}`, string(body))
			assert.Equal(t, 2, call.Attempts())
			require.Len(t, hl, 2)
			assert.Equal(t, status, hl[0].Status)
			assert.Equal(t, idemclient.CodeKeyInUse, hl[0].Code)
			assert.Equal(t, []time.Duration{time.Second}, clock.Slept(), "the in-flight answer's Retry-After")
			assert.Equal(t, int32(1), runs.Load())
		})
	}
}

// The generated policies carry the in-use wait derived from each
// operation's in-flight block: lease + max(retry-after, backoff max).
func TestGeneratedInUseWait(t *testing.T) {
	for op, want := range map[string]time.Duration{
		"claimCoupon":   38 * time.Second, // lease 30s + max(retry-after 1s, backoff max 8s)
		"recordEvent":   12 * time.Second, // lease 10s + max(retry-after 2s, backoff max 2s)
		"createPayment": 38 * time.Second, // the contract's defaults: the library's default too
	} {
		p, ok := api.IdempotentClientPolicy(op)
		require.True(t, ok, op)
		assert.Equal(t, want, p.InUseWait, op)
	}
	assert.Equal(t, idemclient.DefaultPolicy().InUseWait, 38*time.Second)
}

// A duplicate behind a first request that runs longer than the attempts'
// waits (six Retry-After waits, more than the policy's 4 attempts) is
// waited out under the generated policy and gets the first request's
// replay: the in-use answers do not use up the attempts.
func TestInFlightLongerThanAttempts(t *testing.T) {
	pol := idem.MustCompile(idem.Spec{Operation: "claimCoupon", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{RetryAfter: time.Second}})
	eng := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: idem.Anonymous})
	var runs atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		close(entered)
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})))
	defer srv.Close()
	var once sync.Once
	letFirstFinish := func() { once.Do(func() { close(release) }) }
	defer letFirstFinish()
	p, ok := api.IdempotentClientPolicy("claimCoupon")
	require.True(t, ok)
	send := func(d *idemclient.Doer) (*http.Response, *idemclient.Call, error) {
		ctx, call := idemclient.Start(context.Background(), idemclient.WithKey("0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d"))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"a":1}`))
		require.NoError(t, err)
		resp, err := d.Do(req)
		return resp, call, err
	}
	firstDone := make(chan error, 1)
	go func() {
		resp, _, err := send(idemclient.NewDoer(srv.Client(), p))
		if err == nil {
			resp.Body.Close()
		}
		firstDone <- err
	}()
	<-entered

	clock := newVClock()
	sleeps := 0
	clock.onSleep = func(time.Duration) {
		if sleeps++; sleeps == 6 {
			letFirstFinish()
			assert.NoError(t, <-firstDone)
		}
	}
	resp, call, err := send(idemclient.NewDoer(srv.Client(), p, idemclient.WithClock(clock)))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, 7, call.Attempts(), "six in-use answers, then the replay")
	assert.Equal(t, int32(1), runs.Load())
}
