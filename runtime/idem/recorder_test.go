package idem_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

var errBrokenPipe = errors.New("write: broken pipe")

// brokenClient is a ResponseWriter whose connection breaks after ok bytes:
// the write that crosses it returns what was accepted and an error, and
// every later one fails.
type brokenClient struct {
	h    http.Header
	code int
	n    int
	ok   int
}

func (b *brokenClient) Header() http.Header { return b.h }
func (b *brokenClient) WriteHeader(c int)   { b.code = c }
func (b *brokenClient) Write(p []byte) (int, error) {
	room := b.ok - b.n
	if room <= 0 {
		return 0, errBrokenPipe
	}
	if len(p) > room {
		b.n += room
		return room, errBrokenPipe
	}
	b.n += len(p)
	return len(p), nil
}

// sendTo serves a keyed request to h through w.
func sendTo(h http.Handler, w http.ResponseWriter, key string) {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, r)
}

func TestClientGoneMidResponse(t *testing.T) {
	full := strings.Repeat("0123456789", 1000)
	t.Run("the whole response is recorded", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		var werrs []error
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(201)
			for i := 0; i < 10; i++ {
				_, err := io.WriteString(w, full[i*1000:(i+1)*1000])
				werrs = append(werrs, err)
			}
			werrs = append(werrs, http.NewResponseController(w).Flush())
		}))
		client := &brokenClient{h: http.Header{}, ok: 1500}
		sendTo(h, client, "k")
		assert.Equal(t, 1500, client.n)
		for _, err := range werrs {
			assert.NoError(t, err, "the handler's writes go on to the record")
		}
		w := send(h, req{key: "k", body: `{}`})
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, full, w.Body.String(), "the retry gets the whole response")
		assert.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("io.Copy is not cut short", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.Copy(w, io.MultiReader(strings.NewReader(full[:4000]), strings.NewReader(full[4000:])))
			assert.NoError(t, err)
		}))
		sendTo(h, &brokenClient{h: http.Header{}, ok: 10}, "k")
		assert.Equal(t, full, send(h, req{key: "k", body: `{}`}).Body.String())
	})
	t.Run("too large to record", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		spec := strictSpec()
		spec.Response.MaxBytes = 2500
		var werrs []error
		h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			for i := 0; i < 4; i++ {
				_, err := io.WriteString(w, full[i*1000:(i+1)*1000])
				werrs = append(werrs, err)
			}
			werrs = append(werrs, http.NewResponseController(w).Flush())
		}))
		sendTo(h, &brokenClient{h: http.Header{}, ok: 1500}, "k")
		require.Len(t, werrs, 5)
		assert.NoError(t, werrs[0])
		assert.NoError(t, werrs[1], "the client is gone, the response is still recorded")
		for _, err := range werrs[2:] {
			assert.ErrorIs(t, err, errBrokenPipe, "neither reaches the client nor the record: the handler may stop")
		}
		requireProblem(t, send(h, req{key: "k", body: `{}`}), 409, idem.CodeResponseUnavailable)
		assert.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("a framing error keeps what the client got", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		var werr error
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
			_, werr = io.WriteString(w, "no body allowed")
		}))
		srv := httptest.NewServer(h)
		defer srv.Close()
		do := func() *http.Response { return postOverServer(t, srv) }
		require.Equal(t, 204, do().StatusCode)
		assert.ErrorIs(t, werr, http.ErrBodyNotAllowed)
		w := send(h, req{key: "k", body: `{}`})
		assert.Equal(t, 204, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		assert.Empty(t, w.Body.String())
	})
}

// The client of a real server reads a little of a large streamed response
// and hangs up; net/http's writes then fail.
func TestClientGoneRealServer(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Response.MaxBytes = 8 << 20
	chunk := strings.Repeat("y", 64<<10)
	gone := make(chan struct{})
	done := make(chan struct{})
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		f.calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, chunk)
		_ = http.NewResponseController(w).Flush()
		<-gone
		for i := 0; i < 63; i++ {
			_, _ = io.WriteString(w, chunk)
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	rq, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
	require.NoError(t, err)
	rq.Header.Set("Idempotency-Key", "k")
	rq.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{}
	resp, err := (&http.Client{Transport: tr}).Do(rq)
	require.NoError(t, err)
	_, _ = resp.Body.Read(make([]byte, 1000))
	_ = resp.Body.Close() // the client goes away
	tr.CloseIdleConnections()
	close(gone)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return")
	}
	var w *httptest.ResponseRecorder
	require.Eventually(t, func() bool {
		w = send(h, req{key: "k", body: `{}`})
		return w.Code == 200
	}, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, strings.Repeat(chunk, 64), w.Body.String())
	assert.Equal(t, int32(1), f.calls.Load())
}

// Hijacking through http.ResponseController must not reach the connection
// through the recorder's Unwrap: nothing written on it could be recorded.
func TestHijackRefused(t *testing.T) {
	f := newFixture(t, idem.Options{})
	var hijackErr, deadlineErr error
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		rc := http.NewResponseController(w)
		deadlineErr = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		conn, _, err := rc.Hijack()
		hijackErr = err
		if err == nil {
			_, _ = io.WriteString(conn, "HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
			_ = conn.Close()
			return
		}
		w.WriteHeader(http.StatusNotImplemented)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func() *http.Response { return postOverServer(t, srv) }
	assert.Equal(t, http.StatusNotImplemented, do().StatusCode)
	assert.ErrorIs(t, hijackErr, http.ErrNotSupported)
	assert.NoError(t, deadlineErr, "the rest of ResponseController still reaches the connection")
	resp := do()
	assert.Equal(t, http.StatusNotImplemented, resp.StatusCode, "a 5xx frees the key: the retry runs again")
	assert.Empty(t, resp.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, int32(2), f.calls.Load())
}

// A handler that returns early, writing nothing, because its client went
// away did not answer: the key is freed, and the retry runs it again.
func TestClientGoneBeforeResponse(t *testing.T) {
	// answer: what the handler does once its client left (nothing: it
	// returns; or it writes a status).
	run := func(t *testing.T, f *fixture, spec idem.Spec, answer int) (first, retry *httptest.ResponseRecorder) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if f.calls.Add(1) == 1 {
				cancel() // the client goes away while the handler runs
			}
			if r.Context().Err() != nil {
				if answer != 0 {
					w.WriteHeader(answer)
				}
				return
			}
			w.WriteHeader(201)
			_, _ = io.WriteString(w, "created")
		}))
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k")
		r.Header.Set("Content-Type", "application/json")
		first = httptest.NewRecorder()
		h.ServeHTTP(first, r)
		return first, send(h, req{key: "k", body: `{}`})
	}
	// Nothing written is net/http's implicit 200, an answer: the handler may
	// have done its work, so it is recorded and replayed, whatever the
	// failure policy.
	for _, tc := range []struct {
		name     string
		failures idem.FailurePolicy
	}{{"failures retry", idem.FailuresRetry}, {"failures replay", idem.FailuresReplay}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			spec.Failures = tc.failures
			_, w := run(t, f, spec, 0)
			require.Equal(t, 200, w.Code, w.Body.String())
			assert.Empty(t, w.Body.String())
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "the retry replays")
			assert.Equal(t, int32(1), f.calls.Load())
			ev, ok := f.obs.find(idem.EventExecuted)
			require.True(t, ok)
			assert.Equal(t, idem.StateCompleted, ev.State)
			assert.Equal(t, 200, ev.Status)
		})
	}
	t.Run("transactional", func(t *testing.T) {
		// The handler's writes roll back: nothing written frees the key.
		f, ft := newTxFixture(t)
		_, w := run(t, f, strictSpec(), 0)
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Equal(t, int32(2), f.calls.Load())
		assert.Equal(t, 1, ft.rollbacks)
		ev, ok := f.obs.find(idem.EventExecuted)
		require.True(t, ok)
		assert.Equal(t, idem.StateFailed, ev.State)
		assert.Equal(t, 0, ev.Status, "no response")
	})
	t.Run("a handler that gives up writes an error status", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		_, w := run(t, f, strictSpec(), http.StatusServiceUnavailable)
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Empty(t, w.Header().Get("Idempotent-Replayed"), "the retry executes")
		assert.Equal(t, int32(2), f.calls.Load())
	})
}

// A plain handler that does its work regardless of its context and relies on
// the implicit 200, under an upstream deadline (chi's middleware.Timeout):
// the retry replays the empty 200 and never runs the side effect again.
func TestImplicitOKAfterDeadline(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the work outlasts the deadline, and is done
		f.calls.Add(1)
	}))
	timeout := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Millisecond)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
	w := send(timeout, req{key: "k", body: `{}`})
	require.Equal(t, 200, w.Code)
	w = send(timeout, req{key: "k", body: `{}`})
	require.Equal(t, 200, w.Code)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load(), "the side effect ran once")
}

// postOverServer POSTs {} to srv's /orders with the key "k" and returns the
// response, its body read and closed.
func postOverServer(t *testing.T, srv *httptest.Server) *http.Response {
	t.Helper()
	rq, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
	require.NoError(t, err)
	rq.Header.Set("Idempotency-Key", "k")
	rq.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(rq)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp
}
