package idem_test

import (
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// panicShapes are the ways a handler runs under the engine: Engine.Handler,
// the Begin/End shape of the generated HTTPMiddleware (serve), and the
// generated strict wrapper's (strict: the operation, then Complete's Visit),
// each with a handler that panics before writing anything when boom says so.
func panicShapes(eng *idem.Engine, p *idem.Policy, calls *atomic.Int32, boom *atomic.Bool) map[string]http.Handler {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("X-Request-Note", "1") // set before the panic: it goes with the 500
		// set before the panic, but they describe the response the handler
		// meant to send: dropped
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Last-Modified", "Mon, 07 Dec 2026 07:39:47 GMT")
		w.Header().Set("Content-Range", "bytes 0-9/10")
		w.Header().Set("Content-Disposition", `attachment; filename="order.json"`)
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set(http.TrailerPrefix+"X-Digest", "abc")
		if boom.Load() {
			panic("kaboom")
		}
		w.WriteHeader(http.StatusCreated)
	})
	strict := func(inVisit bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := eng.Begin(r, p, idem.RequestKey)
			defer c.End()
			if c.Decision() != idem.Execute {
				c.Respond(w)
				return
			}
			c.Writer(w)
			calls.Add(1)
			if boom.Load() && !inVisit {
				panic("kaboom") // the operation
			}
			_ = c.Complete(w, func(w http.ResponseWriter) error {
				if boom.Load() {
					panic("kaboom") // its Visit, before writing
				}
				w.WriteHeader(http.StatusCreated)
				return nil
			})
		})
	}
	return map[string]http.Handler{
		"Handler": eng.Handler(p, handler),
		"HTTPMiddleware": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := eng.Begin(r, p, idem.RequestKey)
			defer c.End()
			if c.Decision() != idem.Execute {
				c.Respond(w)
				return
			}
			handler.ServeHTTP(c.Writer(w), c.Request())
			c.Finish()
		}),
		"strict":       strict(false),
		"strict visit": strict(true),
	}
}

// panicServer serves h at POST /orders and a warm-up route at GET /warm,
// recording the values of the panics that reach the outermost handler,
// and how many of its runs have ended (returned or panicked).
type panicServer struct {
	*httptest.Server
	mu     sync.Mutex
	panics []any
	ended  int
}

func newPanicServer(t *testing.T, h http.Handler, http2 bool) *panicServer {
	ps := &panicServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /warm", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			ps.mu.Lock()
			ps.ended++
			if v != nil {
				ps.panics = append(ps.panics, v)
			}
			ps.mu.Unlock()
			if v != nil {
				panic(v) // on to net/http, as without this wrapper
			}
		}()
		h.ServeHTTP(w, r)
	}))
	ps.Server = httptest.NewUnstartedServer(mux)
	ps.Config.ErrorLog = log.New(io.Discard, "", 0)
	if http2 {
		ps.EnableHTTP2 = true
		ps.StartTLS()
	} else {
		ps.Start()
	}
	t.Cleanup(ps.Close)
	return ps
}

// waitPanics returns the panics recorded once there are n (the client may
// get the engine's answer before the panic reaches the recorder).
func (ps *panicServer) waitPanics(t *testing.T, n int) []any {
	t.Helper()
	var got []any
	assert.Eventually(t, func() bool {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		got = slices.Clone(ps.panics)
		return len(got) >= n
	}, 5*time.Second, time.Millisecond)
	return got
}

// endedPanics waits until n runs of h have ended and returns the panics
// that reached the outermost handler by then.
func (ps *panicServer) endedPanics(t *testing.T, n int) []any {
	t.Helper()
	var got []any
	require.Eventually(t, func() bool {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		got = slices.Clone(ps.panics)
		return ps.ended >= n
	}, 5*time.Second, time.Millisecond, "runs of the handler ended")
	return got
}

// servePanicShape serves panicShapes' name over f's engine (HTTP/2 over
// TLS, or HTTP/1.1); its handler panics until boom is cleared.
func servePanicShape(t *testing.T, f *fixture, name string, http2 bool) (ps *panicServer, boom *atomic.Bool) {
	boom = &atomic.Bool{}
	boom.Store(true)
	return newPanicServer(t, panicShapes(f.eng, mustCompile(t, strictSpec()), &f.calls, boom)[name], http2), boom
}

// newStoreDownFixture is a FailOpen fixture whose store refuses every
// Begin (marked ErrNothingDone): each keyed request runs unprotected.
func newStoreDownFixture(t *testing.T, opts idem.Options) *fixture {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	down := &markedStore{Store: ms, err: idem.NothingDone(errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"))}
	opts.FailOpen = true
	return newFixtureStore(t, ms, down, opts)
}

// warmClient is a client with n idle keep-alive connections to url (warm),
// on which Go's Transport would send a request again after a dropped
// connection.
func warmClient(t *testing.T, url string, n int) *http.Client {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 100}}
	t.Cleanup(c.CloseIdleConnections)
	warm(t, c, url, n)
	return c
}

// warm opens n idle keep-alive connections in c's pool.
func warm(t *testing.T, c *http.Client, url string, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := c.Get(url + "/warm")
			if assert.NoError(t, err) {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// postKey posts an order with key in Idempotency-Key (none if key is
// empty): the response (nil if none came), its body as far as it was read,
// and the error of sending it or else of reading its body.
func postKey(c *http.Client, url, key string) (*http.Response, []byte, error) {
	return postHeader(c, url, "Idempotency-Key", key)
}

// postHeader is postKey with the key in the header named header.
func postHeader(c *http.Client, url, header, key string) (*http.Response, []byte, error) {
	req, _ := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(`{"item":1}`))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(header, key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func requirePanicProblem(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
	}
	require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	assert.Equal(t, idem.CodeHandlerPanicked, p.Code)
	assert.Equal(t, 500, p.Status)
}

// A handler that panics before writing anything, under plain net/http over
// HTTP/1.1: the client gets a complete 500 (before, net/http dropped the
// connection and Go's Transport sent the keyed request again on every warm
// idle connection at once, each run finding the key free), the handler ran
// once, the panic went on with its value, and the key is free for a retry.
func TestPanicAnsweredHTTP1(t *testing.T) {
	for _, name := range []string{"Handler", "HTTPMiddleware", "strict", "strict visit"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			ps, boom := servePanicShape(t, f, name, false)
			c := warmClient(t, ps.URL, 20)
			resp, body, err := postKey(c, ps.URL, "k")
			assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once: the Transport did not send the request again")
			require.NoError(t, err, "the client gets an answer")
			requirePanicProblem(t, resp, body)
			if !strings.HasPrefix(name, "strict") {
				assert.Equal(t, "1", resp.Header.Get("X-Request-Note"), "headers set before the panic go with it")
			}
			for _, k := range []string{"Location", "ETag", "Last-Modified", "Content-Range", "Content-Disposition", "Trailer"} {
				assert.Empty(t, resp.Header.Values(k), "%s describes the response the handler meant to send", k)
			}
			assert.Empty(t, resp.Trailer, "no trailers")
			assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once: the Transport did not send the request again")
			assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1), "the panic went on, with its value")

			boom.Store(false)
			resp, _, err = postKey(c, ps.URL, "k")
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode, "the key was freed: the retry runs")
			assert.Equal(t, int32(2), f.calls.Load())
		})
	}
}

// Over HTTP/2 the stream is reset after the handler panics; the client
// still gets the 500's status, and the request is not sent again.
func TestPanicAnsweredHTTP2(t *testing.T) {
	for _, name := range []string{"Handler", "strict"} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			ps, _ := servePanicShape(t, f, name, true)
			c := ps.Client()
			resp, _, err := postKey(c, ps.URL, "k")
			if resp == nil {
				require.NoError(t, err, "the client gets the status")
			}
			assert.Equal(t, 2, resp.ProtoMajor)
			assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			assert.Equal(t, int32(1), f.calls.Load(), "not sent again")
			assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1))
		})
	}
}

// A panic after the status was sent goes on as before: the engine writes
// nothing more (the client got the status, so the Transport does not send
// the request again) and frees the key.
func TestPanicAfterStatusNotAnswered(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "part")
		http.NewResponseController(w).Flush()
		panic("kaboom")
	}))
	ps := newPanicServer(t, h, false)
	c := warmClient(t, ps.URL, 10)
	resp, body, err := postKey(c, ps.URL, "k")
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Error(t, err, "the response is cut short")
	assert.Equal(t, "part", string(body))
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1))
}

// An outer recover middleware still gets the panic, after the engine's
// answer (its own comes too late and is dropped by net/http).
func TestPanicReachesOuterRecover(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		panic(http.ErrAbortHandler)
	}))
	var got any
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			got = recover()
			http.Error(w, "internal error", http.StatusInternalServerError)
		}()
		h.ServeHTTP(w, r)
	})
	w := send(outer, req{key: "k", body: `{}`})
	assert.Equal(t, http.ErrAbortHandler, got)
	res := w.Result() // the header as sent: http.Error then changed the map
	assert.Equal(t, 500, res.StatusCode)
	assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	assert.True(t, strings.HasPrefix(w.Body.String(), `{"type":`), "the engine's answer comes first: %s", w.Body.String())
	assert.Contains(t, w.Body.String(), idem.CodeHandlerPanicked)
}

// In transactional mode nothing reached the client before the commit: a
// panic after the handler wrote its (buffered) response is answered with
// the 500, and what the handler wrote is not sent.
func TestPanicAnsweredTransactional(t *testing.T) {
	f, ft := newTxFixture(t)
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Insert(r.Context(), "half")
		w.Header().Set("X-Handler", "1")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
		panic("oops")
	}))
	var w *httptest.ResponseRecorder
	func() {
		defer func() { assert.Equal(t, "oops", recover()) }()
		w = httptest.NewRecorder()
		hr := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		hr.Header.Set("Idempotency-Key", "k")
		h.ServeHTTP(w, hr)
	}()
	requireProblem(t, w, 500, idem.CodeHandlerPanicked)
	assert.Empty(t, w.Header().Get("X-Handler"))
	assert.Empty(t, ft.rows)
	assert.Equal(t, 1, ft.rollbacks)
}

// End called from a deferred function (not deferred itself) cannot see the
// panic: it frees the key and writes nothing, as before.
func TestPanicEndNotDeferred(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := f.eng.Begin(r, p, idem.RequestKey)
		defer func() { c.End() }()
		c.Writer(w)
		panic("kaboom")
	})
	w := httptest.NewRecorder()
	func() {
		defer func() { assert.Equal(t, "kaboom", recover()) }()
		hr := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Idempotency-Key", "k")
		h.ServeHTTP(w, hr)
	}()
	assert.False(t, w.Flushed)
	assert.Empty(t, w.Body.String())
	require.Equal(t, http.StatusCreated, send(f.eng.Handler(p, f.createOrder()), req{key: "k", body: `{}`}).Code, "the key was freed")
}

// noFlushWriter is a wrapper in front of the engine that neither flushes
// nor unwraps (a metrics middleware's).
type noFlushWriter struct {
	http.ResponseWriter
	status int
}

func (w *noFlushWriter) WriteHeader(s int) { w.status = s; w.ResponseWriter.WriteHeader(s) }

//go:noinline
func panickingOperation() { panic("kaboom") }

// Behind a ResponseWriter that cannot flush the engine's 500 (
// http.TimeoutHandler's buffer, a wrapper without Flush nor Unwrap), a
// panic going on would lose it, and the Transport sent the request again
// on every idle connection (21 runs with 20 idle connections): the engine
// keeps the panic instead, logs it with its stack at Error, reports it
// with the run's event, and returns, so that the 500 is sent.
func TestPanicAnsweredWithoutFlush(t *testing.T) {
	for name, wrap := range map[string]func(http.Handler) http.Handler{
		"TimeoutHandler": func(h http.Handler) http.Handler { return http.TimeoutHandler(h, 5*time.Second, "timeout") },
		"no Flush": func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(&noFlushWriter{ResponseWriter: w}, r) })
		},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &lockedBuffer{}
			f := newFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
			var boom atomic.Bool
			boom.Store(true)
			h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				w.Header().Set("X-Before", "1")
				if boom.Load() {
					panickingOperation()
				}
				w.WriteHeader(http.StatusCreated)
			}))
			ps := newPanicServer(t, wrap(h), false)
			c := warmClient(t, ps.URL, 20)
			resp, body, err := postKey(c, ps.URL, "k")
			require.NoError(t, err, "the client gets an answer")
			requirePanicProblem(t, resp, body)
			assert.Equal(t, "1", resp.Header.Get("X-Before"))
			assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once: the Transport did not send the request again")
			assert.Empty(t, ps.endedPanics(t, 1), "the run ended without a panic: it ended in the engine")
			assert.Contains(t, logs.String(), "level=ERROR")
			assert.Contains(t, logs.String(), "panic=kaboom")
			assert.Contains(t, logs.String(), "panickingOperation", "the stack it unwound from")
			assert.Contains(t, logs.String(), "key=k")
			ev, ok := f.obs.find(idem.EventExecuted)
			require.True(t, ok, "events: %v", f.obs.kinds())
			assert.Equal(t, idem.StateFailed, ev.State)
			require.Error(t, ev.Err)
			assert.Contains(t, ev.Err.Error(), "kaboom")

			boom.Store(false)
			resp, _, err = postKey(c, ps.URL, "k")
			require.NoError(t, err)
			assert.Equal(t, http.StatusCreated, resp.StatusCode, "the key was freed: the retry runs")
		})
	}
}

// A kept panic that is an error is found in the event's Err with errors.Is.
func TestPanicKeptErrorUnwraps(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(io.ErrUnexpectedEOF)
	}))
	w := send(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(&noFlushWriter{ResponseWriter: w}, r) }),
		req{key: "k", body: `{}`})
	requireProblem(t, w, 500, idem.CodeHandlerPanicked)
	ev, ok := f.obs.find(idem.EventExecuted)
	require.True(t, ok)
	assert.ErrorIs(t, ev.Err, io.ErrUnexpectedEOF)
}

// A handler that panics before writing anything in an unprotected run of
// a request that carries a key (FailOpen, the store failing at Begin) is
// answered as a protected run's is, with a detail that says it ran
// unprotected: before, net/http dropped the connection and Go's Transport
// sent the keyed request again on every warm idle connection (21 runs
// with 20 idle connections), each run unprotected too. The panic goes on.
func TestPanicAnsweredUnprotected(t *testing.T) {
	for _, name := range []string{"Handler", "HTTPMiddleware", "strict", "strict visit"} {
		t.Run(name, func(t *testing.T) {
			f := newStoreDownFixture(t, idem.Options{})
			ps, _ := servePanicShape(t, f, name, false)
			c := warmClient(t, ps.URL, 20)
			resp, body, err := postKey(c, ps.URL, "k")
			assert.Equal(t, int32(1), f.calls.Load(), "the handler ran once: the Transport did not send the request again")
			require.NoError(t, err, "the client gets an answer")
			requirePanicProblem(t, resp, body)
			assert.Contains(t, string(body), "without idempotency protection")
			assert.Empty(t, resp.Header.Values("Location"), "it describes the response the handler meant to send")
			assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1), "the panic went on, with its value")
			ev, ok := f.obs.find(idem.EventExecuted)
			require.True(t, ok, "events: %v", f.obs.kinds())
			assert.False(t, ev.Protected)
			assert.Equal(t, http.StatusInternalServerError, ev.Status)
			assert.Equal(t, idem.CodeHandlerPanicked, ev.Code)
		})
	}
}

// Over HTTP/2, an unprotected run (FailOpen, the store failing) whose
// handler panics before writing: the client gets the engine's 500 before
// the stream is reset, and the handler ran once.
func TestPanicAnsweredUnprotectedHTTP2(t *testing.T) {
	for _, name := range []string{"Handler", "HTTPMiddleware", "strict", "strict visit"} {
		t.Run(name, func(t *testing.T) {
			f := newStoreDownFixture(t, idem.Options{})
			ps, _ := servePanicShape(t, f, name, true)
			resp, body, err := postKey(ps.Client(), ps.URL, "k")
			require.NotNil(t, resp, "the client gets the status: %v", err)
			assert.Equal(t, 2, resp.ProtoMajor)
			assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
			assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
			if err == nil { // the body came before the reset
				assert.Contains(t, string(body), "without idempotency protection")
			}
			assert.Equal(t, int32(1), f.calls.Load(), "not sent again")
			assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1), "the panic went on")
			ev, ok := f.obs.find(idem.EventExecuted)
			require.True(t, ok, "events: %v", f.obs.kinds())
			assert.False(t, ev.Protected)
			assert.Equal(t, idem.CodeHandlerPanicked, ev.Code)
		})
	}
}

// Unprotected behind a ResponseWriter that cannot flush (see
// TestPanicAnsweredWithoutFlush): the engine keeps the panic, logs it,
// and returns, so that the 500 is sent.
func TestPanicAnsweredUnprotectedWithoutFlush(t *testing.T) {
	logs := &lockedBuffer{}
	f := newStoreDownFixture(t, idem.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		panickingOperation()
	}))
	ps := newPanicServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(&noFlushWriter{ResponseWriter: w}, r) }), false)
	c := warmClient(t, ps.URL, 20)
	resp, body, err := postKey(c, ps.URL, "k")
	require.NoError(t, err, "the client gets an answer")
	requirePanicProblem(t, resp, body)
	assert.Equal(t, int32(1), f.calls.Load())
	assert.Empty(t, ps.endedPanics(t, 1), "the run ended without a panic: it ended in the engine")
	assert.Contains(t, logs.String(), "level=ERROR")
	assert.Contains(t, logs.String(), "panic=kaboom")
	assert.Contains(t, logs.String(), "panickingOperation", "the stack it unwound from")
	ev, ok := f.obs.find(idem.EventExecuted)
	require.True(t, ok, "events: %v", f.obs.kinds())
	assert.ErrorContains(t, ev.Err, "kaboom")
}

// A request without a key (an optional key left out) runs unprotected and
// the engine only passes it through: its panic goes on untouched (net/http
// drops the connection), and the Transport does not send a POST without
// a key again.
func TestPanicKeylessNotAnswered(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	spec := strictSpec()
	spec.Key.Required = idem.Optional
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		panic("kaboom")
	}))
	ps := newPanicServer(t, h, false)
	c := warmClient(t, ps.URL, 5)
	resp, _, err := postKey(c, ps.URL, "")
	require.Error(t, err, "no answer: %v", resp)
	assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1))
	assert.Equal(t, int32(1), f.calls.Load())
}

// An unprotected run whose handler sent its status before it panicked is
// not answered: the panic goes on, and nothing more is written.
func TestPanicAfterStatusUnprotected(t *testing.T) {
	f := newStoreDownFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "part")
		panic("kaboom")
	}))
	w := httptest.NewRecorder()
	func() {
		defer func() { assert.Equal(t, "kaboom", recover()) }()
		hr := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("Idempotency-Key", "k")
		h.ServeHTTP(w, hr)
	}()
	assert.Equal(t, http.StatusAccepted, w.Code)
	assert.Equal(t, "part", w.Body.String())
}

// An unprotected run whose handler flushed before it wrote anything (a
// server-sent events stream: net/http sent its implicit 200) and then
// panicked is not answered: the engine's 500 would be written into that
// 200 stream (before: it was, as the flush did not count as a status
// sent). Behind a ResponseWriter that cannot flush, nothing was sent, and
// the panic is answered.
func TestPanicAfterFlushUnprotected(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flush    func(w http.ResponseWriter)
		noFlush  bool // a ResponseWriter that cannot flush in front of the engine
		answered bool
	}{
		{"ResponseController", func(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }, false, false},
		{"Flusher", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }, false, false},
		{"cannot flush", func(w http.ResponseWriter) {
			assert.ErrorIs(t, http.NewResponseController(w).Flush(), http.ErrNotSupported)
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStoreDownFixture(t, idem.Options{})
			h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				w.Header().Set("Content-Type", "text/event-stream")
				tc.flush(w)
				panic("kaboom")
			}))
			front := h
			if tc.noFlush {
				front = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(&noFlushWriter{ResponseWriter: w}, r) })
			}
			ps := newPanicServer(t, front, false)
			c := warmClient(t, ps.URL, 5)
			// body: what came before the stream was cut, if it was
			resp, body, err := postKey(c, ps.URL, "k")
			require.NotNil(t, resp, "the header came with the flush, or the engine's 500: %v", err)
			if tc.answered {
				require.NoError(t, err)
				requirePanicProblem(t, resp, body)
				assert.Empty(t, ps.endedPanics(t, 1), "kept: the engine's 500 is sent as the run returns")
			} else {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
				assert.NotContains(t, string(body), idem.CodeHandlerPanicked, "the 500 problem was written into the flushed 200 stream")
				assert.Error(t, err, "the stream was cut as the panic went on")
				assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1), "the panic went on")
			}
			assert.Equal(t, int32(1), f.calls.Load())
		})
	}
}

// A request the engine found no key in runs unprotected; when it still
// carries an Idempotency-Key or X-Idempotency-Key header, Go's Transport
// resends it after a dropped connection all the same (Request.isReplayable
// looks at the header, not at where the operation reads its key), so its
// panic is answered: before, net/http dropped the connection and the
// Transport sent the request again on every idle connection (6 runs for 5
// idle connections), each unprotected. Its detail says no key was found.
func TestPanicAnsweredKeylessWithKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    idem.KeySpec
		header string
	}{
		{"optional key left out, X-Idempotency-Key", idem.KeySpec{Required: idem.Optional}, "X-Idempotency-Key"},
		{"query key left out, Idempotency-Key", idem.KeySpec{Carrier: idem.CarrierQuery, Name: "key", Required: idem.Optional}, "Idempotency-Key"},
		{"body key left out, Idempotency-Key", idem.KeySpec{Carrier: idem.CarrierBody, Name: "/idempotency_key", Required: idem.Optional}, "Idempotency-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, withObs := range []bool{false, true} {
				ms := memstore.New(memstore.Options{SweepInterval: -1})
				t.Cleanup(func() { _ = ms.Close() })
				opts := idem.Options{Principal: idem.Anonymous, Logger: discardLogger}
				var obs *events
				if withObs {
					// An Observer has the engine wrap every unprotected
					// run's writer; without one, only those it answers.
					obs = &events{}
					opts.Observer = obs
				}
				eng := idem.New(ms, opts)
				var calls atomic.Int32
				spec := strictSpec()
				spec.Key = tc.key
				h := eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					calls.Add(1)
					panic("kaboom")
				}))
				ps := newPanicServer(t, h, false)
				c := warmClient(t, ps.URL, 5)
				resp, body, err := postHeader(c, ps.URL, tc.header, "k")
				require.NoError(t, err, "the client gets an answer (observer: %v)", withObs)
				requirePanicProblem(t, resp, body)
				assert.Contains(t, string(body), "carried no idempotency key")
				assert.Equal(t, int32(1), calls.Load(), "the handler ran once: the Transport did not send the request again")
				assert.Equal(t, []any{"kaboom"}, ps.waitPanics(t, 1), "the panic went on")
				if withObs {
					ev, ok := obs.find(idem.EventExecuted)
					require.True(t, ok, "events: %v", obs.kinds())
					assert.Equal(t, http.StatusInternalServerError, ev.Status)
					assert.Equal(t, idem.CodeHandlerPanicked, ev.Code)
				}
			}
		})
	}
}
