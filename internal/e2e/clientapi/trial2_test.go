package clientapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// recordEvent's contract has in-flight.wait 2s: the server holds a
// duplicate up to 2s for the first request to finish. A caller resuming
// with the key of a call that still runs (a double click), under a
// per-attempt timeout of 200ms, gets the first request's replay: the
// generated policy carries the wait, and the attempts the server may hold
// get the timeout plus the wait. (Before, every attempt timed out at
// 200ms and the call ended with ErrAttemptsExhausted although the event
// was recorded.)
func TestAttemptTimeoutUnderInFlightWait(t *testing.T) {
	e := newEnv(t)
	p, ok := api.IdempotentClientPolicy(api.IdempotentClientOpRecordEvent)
	require.True(t, ok)
	require.Equal(t, 2*time.Second, p.InFlightWait)

	key := uuid.Must(uuid.NewV7()).String()
	h := e.shop.Hold("recordEvent")
	first := newClient(t, e.srv.URL, e.srv.Client())
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := first.RecordEvent(context.Background(), api.Event{Name: "x"}, idemclient.WithKey(key))
		firstDone <- err
	}()
	<-h.entered
	time.AfterFunc(1500*time.Millisecond, func() { close(h.release) })

	c := newClient(t, e.srv.URL, e.srv.Client(), idemclient.WithAttemptTimeout(200*time.Millisecond))
	resp, k, err := c.RecordEvent(context.Background(), api.Event{Name: "x"}, idemclient.WithKey(key))
	require.NoError(t, err)
	require.NoError(t, <-firstDone)
	assert.Equal(t, key, k)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode())
	assert.Equal(t, "true", resp.HTTPResponse.Header.Get("Idempotent-Replayed"))
	assert.Len(t, c.Attempts(key), 1, "held once, not timed out")
	assert.Equal(t, 1, e.shop.Executions("recordEvent", key))
}

// traced answers 503 to the first request of every key and records the
// X-Trace-Id and X-On-Behalf-Of headers of every request.
type traced struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string][]string // key -> "trace behalf" per request
}

func (tr *traced) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key") + r.Header.Get("X-Request-Key")
	tr.mu.Lock()
	tr.seen[key] = append(tr.seen[key], r.Header.Get("X-Trace-Id")+" "+r.Header.Get("X-On-Behalf-Of"))
	n := len(tr.seen[key])
	tr.mu.Unlock()
	if n == 1 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	tr.next.ServeHTTP(w, r)
}

func (tr *traced) Seen(key string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.seen[key]...)
}

// Per-call request editors (idemclient.WithRequestEditors) reach
// oapi-codegen's method: what they set is carried by every attempt; a
// client's WithCallOptions adds editors (and other options) to every call
// of the copy it returns, the call's own after them.
func TestRequestEditorsAndClientCallOptions(t *testing.T) {
	tr := &traced{seen: map[string][]string{}}
	e := newEnv(t, func(h http.Handler) http.Handler { tr.next = h; return tr })
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()
	header := func(name, value string) func(context.Context, *http.Request) error {
		return func(_ context.Context, r *http.Request) error { r.Header.Set(name, value); return nil }
	}

	_, key, err := c.RecordEvent(ctx, api.Event{Name: "x"}, idemclient.WithRequestEditors(header("X-Trace-Id", "t-1")))
	require.NoError(t, err)
	assert.Equal(t, []string{"t-1 ", "t-1 "}, tr.Seen(key), "both attempts")

	// Client-wide: an editor, a key generator (typed uuid key parameter
	// and undeclared header alike) and a policy override.
	var n atomic.Int32
	gen := func(f idemclient.KeyFormat) (string, error) {
		return fmt.Sprintf("0190b4a2-7c1e-7d3f-9a4b-%012d", n.Add(1)), nil // v7, deterministic
	}
	cc := c.WithCallOptions(idemclient.WithRequestEditors(header("X-On-Behalf-Of", "u-9")), idemclient.WithKeyGenerator(gen))
	_, key, err = cc.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithRequestEditors(header("X-Trace-Id", "t-2")))
	require.NoError(t, err)
	assert.Equal(t, "0190b4a2-7c1e-7d3f-9a4b-000000000001", key)
	assert.Equal(t, []string{"t-2 u-9", "t-2 u-9"}, tr.Seen(key))
	_, key, err = cc.RecordEvent(ctx, api.Event{Name: "x"})
	require.NoError(t, err)
	assert.Equal(t, "0190b4a2-7c1e-7d3f-9a4b-000000000002", key)

	once := cc.WithCallOptions(idemclient.WithPolicyOverride(func(p *idemclient.Policy) { p.MaxAttempts = 1 }))
	resp, key, err := once.RecordEvent(ctx, api.Event{Name: "x"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode(), "one attempt: the 503 is the answer")
	assert.Equal(t, "0190b4a2-7c1e-7d3f-9a4b-000000000003", key)
	assert.Equal(t, []string{" u-9"}, tr.Seen(key))

	// The original client is unchanged.
	_, key, err = c.RecordEvent(ctx, api.Event{Name: "x"})
	require.NoError(t, err)
	assert.NotContains(t, key, "0190b4a2-7c1e-7d3f-9a4b-")
	assert.Equal(t, []string{" ", " "}, tr.Seen(key))
}
