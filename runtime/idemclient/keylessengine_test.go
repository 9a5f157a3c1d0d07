package idemclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// lossyAuth sets a new Authorization on every attempt (a token refreshed
// or re-signed below the Doer) and loses the first attempt's response.
type lossyAuth struct {
	inner HTTPDoer
	n     atomic.Int32
}

func (l *lossyAuth) Do(req *http.Request) (*http.Response, error) {
	n := l.n.Add(1)
	req.Header.Set("Authorization", fmt.Sprintf("Bearer token-%d", n))
	resp, err := l.inner.Do(req)
	if err == nil && n == 1 {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &lostErr{}
	}
	return resp, err
}

type lostErr struct{}

func (*lostErr) Error() string   { return "read: connection reset by peer" }
func (*lostErr) Timeout() bool   { return false }
func (*lostErr) Temporary() bool { return true }

// keylessServer is the real engine under a window contract whose key is
// optional, and a handler counting its runs.
func keylessServer(t *testing.T, spec idem.Spec) (*httptest.Server, *atomic.Int32) {
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	eng := idem.New(store, idem.Options{Principal: idem.Anonymous})
	var runs atomic.Int32
	srv := httptest.NewServer(eng.Middleware(idem.MustCompile(spec))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(201)
	})))
	t.Cleanup(srv.Close)
	return srv, &runs
}

// Under fingerprint headers that change between attempts, a keyless retry
// is another fingerprint: KeylessDedupe would run the operation twice (the
// reason the generated policy leaves it false for such an operation),
// and without it the keyless call is sent once: the lost response is an
// error, the operation ran once. A keyed call runs once either way.
func TestKeylessFingerprintHeader(t *testing.T) {
	spec := idem.Spec{
		Operation: "createRefund", Method: "POST", Path: "/refunds",
		Semantics: idem.Window, Key: idem.KeySpec{Required: idem.Optional},
		FingerprintHeaders: []string{"Authorization"},
	}
	for _, c := range []struct {
		name            string
		keyless, dedupe bool
		wantRuns        int32
		wantErr         bool
	}{
		{"keyed", false, false, 1, false},
		{"keyless, KeylessDedupe (not generated for it)", true, true, 2, false},
		{"keyless, as generated", true, false, 1, true},
	} {
		srv, runs := keylessServer(t, spec) // a fresh store: the cases' first attempts share a fingerprint
		p := fastPolicy(3)
		p.On.Connection = true
		p.KeyOptional, p.KeylessDedupe = true, c.dedupe
		d := NewDoer(&lossyAuth{inner: srv.Client()}, Policy{}, WithClock(newFakeClock()))
		var opts []CallOption
		if c.keyless {
			opts = append(opts, WithoutKey())
		}
		ctx, _ := p.Start(context.Background(), opts...)
		resp, err := d.Do(post(t, ctx, srv.URL+"/refunds", `{"amount":5}`))
		if c.wantErr {
			require.Error(t, err, c.name)
		} else {
			require.NoError(t, err, c.name)
			resp.Body.Close()
		}
		assert.Equal(t, c.wantRuns, runs.Load(), c.name)
	}
}

// Without fingerprint headers, a keyless retry after a lost response is
// deduped; two keyless calls differing only in a volatile member are one
// (the second a replay); in a non-volatile member, two.
func TestKeylessDedupeEngine(t *testing.T) {
	srv, runs := keylessServer(t, idem.Spec{
		Operation: "createRefund", Method: "POST", Path: "/refunds",
		Semantics: idem.Window, Key: idem.KeySpec{Required: idem.Optional},
		Volatile: []string{"/client_time"},
	})
	p := fastPolicy(3)
	p.On.Connection = true
	p.KeyOptional, p.KeylessDedupe = true, true
	do := func(inner HTTPDoer, body string) *http.Response {
		d := NewDoer(inner, Policy{}, WithClock(newFakeClock()))
		ctx, _ := p.Start(context.Background(), WithoutKey())
		resp, err := d.Do(post(t, ctx, srv.URL+"/refunds", body))
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	do(&lossyAuth{inner: srv.Client()}, `{"amount":5,"client_time":"t1"}`)
	assert.EqualValues(t, 1, runs.Load(), "lost response retried keyless: deduped")
	r := do(srv.Client(), `{"amount":5,"client_time":"t2"}`)
	assert.EqualValues(t, 1, runs.Load(), "volatile member differs: a replay")
	assert.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	do(srv.Client(), `{"amount":6,"client_time":"t2"}`)
	assert.EqualValues(t, 2, runs.Load())
}
