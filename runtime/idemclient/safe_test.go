package idemclient

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithSafeRetries retries a GET (no Call, no match) on a 503, without a
// key, honouring Retry-After; a POST still passes through once; without
// the option a GET passes through once. (Before, a GET was never retried.)
func TestSafeRetries(t *testing.T) {
	var fail atomic.Int32
	srv := newRecServer(t, func(int, *http.Request) reply {
		if fail.Add(-1) >= 0 {
			return reply{status: 503, header: map[string]string{"Retry-After": "1"}}
		}
		return reply{status: 200, body: `{}`}
	})
	clock := newFakeClock()
	var h hookLog
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(clock), WithAttemptHook(h.hook), WithSafeRetries(fastPolicy(3)))
	get := func(d *Doer, method string) *http.Response {
		req, err := http.NewRequestWithContext(context.Background(), method, srv.URL+"/payments/p1", nil)
		require.NoError(t, err)
		resp, err := d.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	fail.Store(2)
	resp := get(d, http.MethodGet)
	assert.Equal(t, 200, resp.StatusCode)
	seen := srv.Seen()
	require.Len(t, seen, 3)
	for _, s := range seen {
		assert.Empty(t, s.Key, "no key")
	}
	assert.Len(t, h.attempts(), 3)
	assert.Equal(t, "1s", clock.Sleeps()[0].String(), "Retry-After honoured")

	fail.Store(1)
	assert.Equal(t, 503, get(d, http.MethodPost).StatusCode, "not a safe method: passed through")
	assert.Len(t, srv.Seen(), 4)

	fail.Store(1)
	assert.Equal(t, 503, get(NewDoer(http.DefaultClient, Policy{}), http.MethodGet).StatusCode, "off by default")
	assert.Len(t, srv.Seen(), 5)
}
