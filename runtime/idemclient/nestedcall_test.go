package idemclient

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handlerDoer serves requests in process: the handler's r.Context() is
// the attempt's context.
type handlerDoer struct{ h http.Handler }

func (d handlerDoer) Do(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// routeDoer serves host "front" in process, the rest through rest.
type routeDoer struct {
	front http.Handler
	rest  HTTPDoer
}

func (r routeDoer) Do(req *http.Request) (*http.Response, error) {
	if req.URL.Host == "front" {
		return handlerDoer{r.front}.Do(req)
	}
	return r.rest.Do(req)
}

// frontHandler calls downstream, through *d, as a new logical call
// started on the request's context (an attempt's context).
func frontHandler(d **Doer, downstream string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := Start(r.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, downstream, strings.NewReader(payload))
		resp, err := (*d).Do(req)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		resp.Body.Close()
		w.WriteHeader(201)
	})
}

// A new logical call (its own Call) started on another Doer's attempt
// context (an in-process handler calling a downstream service) is managed
// as any call: its key is sent, and no nested-Doer warning is logged.
func TestNestedNewCallManaged(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	downstream := newRecServer(t, unavailableOnce(201))
	down := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock()))
	up := NewDoer(handlerDoer{frontHandler(&down, downstream.URL)}, fastPolicy(3), WithClock(newFakeClock()))
	ctx, _ := Start(context.Background())
	resp, err := up.Do(post(t, ctx, "http://front/x", payload))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
	seen := downstream.Seen()
	require.Len(t, seen, 2, "the downstream call is retried")
	assert.NotEmpty(t, seen[0].Key, "the downstream call went out without its Idempotency-Key")
	assert.Equal(t, seen[0].Key, seen[1].Key)
	assert.NotContains(t, logs.String(), "passes them through")
}

// The same with one Doer for every outgoing call.
func TestNestedNewCallSameDoer(t *testing.T) {
	downstream := newRecServer(t, nil)
	var d *Doer
	d = NewDoer(routeDoer{front: frontHandler(&d, downstream.URL), rest: http.DefaultClient}, fastPolicy(3), WithClock(newFakeClock()))
	ctx, _ := Start(context.Background())
	resp, err := d.Do(post(t, ctx, "http://front/x", payload))
	require.NoError(t, err)
	resp.Body.Close()
	seen := downstream.Seen()
	require.Len(t, seen, 1)
	assert.NotEmpty(t, seen[0].Key, "the downstream call went out without its key")
}
