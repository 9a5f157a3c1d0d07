package idemclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithSafeRetries does not hold back a streaming GET (server-sent events,
// a long poll, a watch): a success whose length is unknown streams, as it
// did without the option. An error status is still read within the
// attempt (and retried); a success of a known length within the buffer
// too.
func TestSafeRetriesStreamingGET(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "data: hello\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	for _, safe := range []bool{false, true} {
		var opts []Option
		if safe {
			opts = append(opts, WithSafeRetries(safePolicy()))
		}
		d := NewDoer(srv.Client(), Policy{}, opts...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
		resp, err := d.Do(req)
		if assert.NoError(t, err, "safe=%v: the stream's head did not come back", safe) {
			buf := make([]byte, 64)
			n, _ := resp.Body.Read(buf)
			assert.Contains(t, string(buf[:n]), "hello")
			resp.Body.Close()
		}
		cancel()
	}
}

// A safe request's success of a known length within the buffer is read
// within the attempt; an error status is read and retried.
func TestSafeRetriesBuffersKnownAndErrors(t *testing.T) {
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: 503, body: `{"code":"X"}`}
		}
		return reply{status: 200, body: strings.Repeat("x", 100)}
	})
	d := NewDoer(srv.Client(), Policy{}, WithClock(newFakeClock()), WithSafeRetries(fastPolicy(3)))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := d.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	_, streamed := resp.Body.(*cancelBody)
	assert.False(t, streamed, "a body of a known length within the buffer is read within the attempt")
	assert.Len(t, srv.Seen(), 2)
}

// safePolicy is a policy for safe methods: connection errors and the
// statuses a GET may well succeed after.
func safePolicy() Policy {
	return Policy{MaxAttempts: 3, On: RetryOn{Connection: true, Statuses: []int{429, 502, 503, 504}}}
}

// A GET with a body it cannot buffer (no GetBody, over the limit) is sent
// once, whole, as it was without WithSafeRetries, not refused unsent.
func TestSafeRetriesUnbufferableGET(t *testing.T) {
	srv := newRecServer(t, func(int, *http.Request) reply { return reply{status: 503} })
	d := NewDoer(srv.Client(), Policy{}, WithClock(newFakeClock()), WithSafeRetries(safePolicy()), WithRequestBodyLimit(8))
	body := `{"query":"a long search body"}`
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/search", io.NopCloser(strings.NewReader(body)))
	resp, err := d.Do(req)
	require.NoError(t, err, "sent once before the option")
	resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode, "sent once: not retried")
	seen := srv.Seen()
	require.Len(t, seen, 1)
	assert.Equal(t, body, seen[0].Body, "the whole body")
}
