package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// Regression tests of a review of CaptureBody under a timeout middleware
// inside it (http.TimeoutHandler in oapi-codegen's
// StdHTTPServerOptions.Middlewares): the Call outlives CaptureBody, which
// must not put the capture's buffer back to the pool while the Call's body
// (the handler's reader, the fingerprint input) aliases it.

// detach is a timeout middleware that fires when the test says so: it runs
// next on a goroutine of its own, with a ResponseWriter of its own, and
// returns when leave is closed (or next returned), letting next go on, as
// http.TimeoutHandler does when its timer fires. The test waits for those
// goroutines to end before it does.
func detach(t *testing.T, next http.Handler, leave <-chan struct{}) http.Handler {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // before the store closes (cleanups run last first)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			next.ServeHTTP(httptest.NewRecorder(), r)
		}()
		select {
		case <-leave:
			w.WriteHeader(http.StatusServiceUnavailable)
		case <-done:
		}
	})
}

func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing after 10s", what)
		panic("unreachable")
	}
}

// Engine.Handler inside CaptureBody, a timeout middleware in between: the
// handler reads its body after CaptureBody returned and other requests
// went through CaptureBody. It reads its own body. (Before the capture's
// buffer was held for the Call, CaptureBody pooled it on return, another
// request's Begin drained into it, and the handler read that request's
// bytes.)
func TestCaptureBodyTimeoutHandlerReadsOwnBody(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	got := make(chan string, 1)
	leave, resume := make(chan struct{}), make(chan struct{})
	slow := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(leave) // the timeout fires: CaptureBody returns
		<-resume     // other requests went through CaptureBody meanwhile
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		w.WriteHeader(201)
	}))
	h := idem.CaptureBody(0)(detach(t, slow, leave))
	fast := idem.CaptureBody(0)(f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(201)
	})))
	a := `{"item":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`
	b := `{"item":"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"}`
	postRaw(h, "ka", []byte(a))
	for i := range 20 { // sync.Pool: a few tries to land on the same buffer
		postRaw(fast, fmt.Sprint("kb", i), []byte(b))
	}
	close(resume)
	if s := recvWithin(t, got, "the handler of request A"); s != a {
		t.Fatalf("the handler of request A read %q, want its own body %q", s, a)
	}
}

// gatedBegin is a plain Store (a memstore's Begin, Finish and Get, none of
// its optional interfaces) whose next Begin, once armed, waits for unblock,
// having closed entered.
type gatedBegin struct {
	ms      *memstore.Store
	armed   atomic.Bool
	entered chan struct{}
	unblock chan struct{}
}

func (s *gatedBegin) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if s.armed.CompareAndSwap(true, false) {
		close(s.entered)
		<-s.unblock
		ctx = context.WithoutCancel(ctx) // as when the store answered as a timeout fired
	}
	return s.ms.Begin(ctx, req)
}

func (s *gatedBegin) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	return s.ms.Finish(ctx, key, token, state, response)
}

func (s *gatedBegin) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	return s.ms.Get(ctx, key)
}

// The strict path: Begin drains the capture, and the fingerprint input
// aliases the capture's buffer. A timeout middleware inside CaptureBody lets
// the request go while Begin waits on the store; other requests go through
// CaptureBody; Begin, back from the store with the record of a release
// whose fingerprint setting differs (Spec.CompatibleFingerprints),
// computes the compatible fingerprint over the request's own bytes: the
// identical retry is replayed. (Before the buffer was held for the Call,
// it was computed over another request's bytes: 422.)
func TestCaptureBodyTimeoutStrictBeginHashesOwnBody(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	st := &gatedBegin{ms: ms, entered: make(chan struct{}), unblock: make(chan struct{})}
	spec := strictSpec()
	spec.Operation = "op"
	old := newFixtureStore(t, ms, st, idem.Options{Principal: idem.Anonymous})
	body := []byte(`{"item":"x","t":"1111111111111111111111"}`)
	if w := postRaw(old.eng.Handler(mustCompile(t, spec), old.createOrder()), "K", body); w.Code != 201 {
		t.Fatalf("release N: %d %s", w.Code, w.Body)
	}
	spec2 := spec
	spec2.Volatile = []string{"/t"}
	spec2.CompatibleFingerprints = []idem.FingerprintSpec{{}}
	f := newFixtureStore(t, ms, st, idem.Options{Principal: idem.Anonymous})
	p2 := mustCompile(t, spec2)
	got := make(chan int, 1)
	strictLike := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the strict decoder
		c := f.eng.Begin(r, p2, idem.RequestKey)
		defer c.End()
		rw := httptest.NewRecorder()
		c.Respond(rw)
		if c.Decision() == idem.Execute {
			rw.WriteHeader(299)
		}
		got <- rw.Code
	})
	h := idem.CaptureBody(0)(detach(t, strictLike, st.entered))
	st.armed.Store(true)
	postRaw(h, "K", body) // the timeout fires while Begin waits on the store
	other := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.ReadAll(r.Body) }))
	for range 20 {
		postRaw(other, "", []byte(`{"item":"y","t":"2222222222222222222222"}`))
	}
	close(st.unblock)
	if code := recvWithin(t, got, "Begin"); code != 201 {
		t.Fatalf("the identical retry of release N's request got %d, want the replayed 201", code)
	}
}

// The error handler's answer is being written when CaptureBody returns (a
// timeout fires mid-answer): AnswerHandlerError took the Call, so
// CaptureBody's close leaves it alone; the answer is recorded once and
// replayed.
func TestHandlerErrorTimeoutMidAnswer(t *testing.T) {
	for _, body := range []bool{true, false} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		p := mustCompile(t, replaySpec())
		leave, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := wrapperRun(f, p, w, r, func() error { return errors.New("boom") })
			if err == nil {
				return
			}
			defer close(done)
			idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) {
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(503)
				_, _ = w.Write([]byte("part1 "))
				close(leave) // the timeout fires: CaptureBody returns and closes its bound
				<-resume
				_, _ = w.Write([]byte("part2"))
			})
		})
		post(idem.CaptureBody(0)(detach(t, strict, leave)), "k", body)
		close(resume)
		recvWithin(t, done, "the answer")
		again := post(idem.CaptureBody(0)(strict), "k", body)
		if f.calls.Load() != 1 || again.Code != 503 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != "part1 part2" {
			t.Errorf("body=%v: retry %d replayed=%q %q, ran %d: want the answer recorded and replayed, run once",
				body, again.Code, again.Header().Get("Idempotent-Replayed"), again.Body, f.calls.Load())
		}
		if n := count(f.obs.kinds(), idem.EventExecuted); n != 1 {
			t.Errorf("body=%v: %d executed events, want 1", body, n)
		}
	}
}

// The error handler panics mid-answer while a timeout fires, at various
// points: the Call ends once (no race), and the key is freed or failed,
// never left claimed.
func TestHandlerErrorTimeoutAnswerPanics(t *testing.T) {
	for _, body := range []bool{true, false} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		spec := replaySpec()
		spec.InFlight.Lease = 200 * time.Millisecond
		p := mustCompile(t, spec)
		for i := range 200 {
			done := make(chan struct{})
			d := time.Duration(i%20) * 50 * time.Microsecond
			strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(done)
				defer func() { _ = recover() }()
				err := wrapperRun(f, p, w, r, func() error { return errors.New("boom") })
				idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) {
					if i%2 == 0 {
						w.WriteHeader(500)
					}
					time.Sleep(d)
					panic("answer panics")
				})
			})
			h := idem.CaptureBody(0)(http.TimeoutHandler(strict, 500*time.Microsecond, "timeout"))
			key := fmt.Sprint("k", i)
			post(h, key, body)
			recvWithin(t, done, "the strict handler")
			bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = wrapperRun(f, p, w, r, func() error { return nil })
			})
			if again := post(bare, key, body); again.Code == http.StatusConflict {
				t.Fatalf("body=%v %d: key still claimed: %s", body, i, again.Body)
			}
		}
	}
}

// HandlerErrorPending and AnswerHandlerError on requests CaptureBody never
// saw, a nil body, a nil request, and one CaptureBody returned from.
func TestHandlerErrorNoBound(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/x", nil)
	r.Body = nil
	if idem.HandlerErrorPending(r) || idem.HandlerErrorPending(nil) {
		t.Fatal("pending without a bound")
	}
	r2 := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader("x"))
	if idem.HandlerErrorPending(r2) {
		t.Fatal("pending without a bound")
	}
	w := httptest.NewRecorder()
	idem.AnswerHandlerError(w, nil, errors.New("e"), func(w http.ResponseWriter, err error) { w.WriteHeader(418) })
	idem.AnswerHandlerError(w, r, errors.New("e"), func(w http.ResponseWriter, err error) { w.WriteHeader(418) })
	if w.Code != 418 {
		t.Fatal(w.Code)
	}
	var kept *http.Request
	idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { kept = r })).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil))
	if idem.HandlerErrorPending(kept) {
		t.Fatal("pending after CaptureBody returned")
	}
}

// The operation returns its error after CaptureBody returned (a timeout
// middleware inside it fired): the error handler adapter answers to w, the
// key is freed, and the warning says the request was not bounded.
func TestHandlerErrorLateWithAdapter(t *testing.T) {
	for _, body := range []bool{true, false} {
		var logs lockedBuffer
		f := newFixture(t, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		p := mustCompile(t, replaySpec())
		leave, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		answered := false
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(done)
			err := wrapperRun(f, p, w, r, func() error {
				close(leave) // the timeout fires: CaptureBody returns
				<-resume
				return errors.New("boom")
			})
			if err == nil {
				return
			}
			idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) {
				answered = true
				http.Error(w, err.Error(), 500)
			})
		})
		post(idem.CaptureBody(0)(detach(t, strict, leave)), "k", body)
		close(resume)
		recvWithin(t, done, "the strict handler")
		again := post(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = wrapperRun(f, p, w, r, func() error { return nil })
		}), "k", body)
		if !answered || again.Code != 201 || f.calls.Load() != 2 || !strings.Contains(logs.String(), "not bounded by CaptureBody") {
			t.Errorf("body=%v: answered %v, retry %d, ran %d; logs %s", body, answered, again.Code, f.calls.Load(), logs.String())
		}
	}
}

// A strict middleware that runs the operation a second time within the
// same request (after the first returned its error, before the error
// handler ran): the first Call still holds the key, so the second gets
// 409; the first's answer is recorded and replayed.
func TestHandlerErrorSecondRunSameRequest(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	var second []int // the second run's status, per request
	h := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := wrapperRun(f, p, w, r, func() error { return errors.New("boom1") })
		rw := httptest.NewRecorder()
		_ = wrapperRun(f, p, rw, r, func() error { return errors.New("boom2") })
		second = append(second, rw.Code)
		if err != nil {
			idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), http.StatusBadGateway) })
		}
	}))
	first := post(h, "k", true)
	again := post(h, "k", true)
	if first.Code != 502 || second[0] != http.StatusConflict || again.Code != 502 || again.Header().Get("Idempotent-Replayed") != "true" || f.calls.Load() != 1 {
		t.Errorf("first %d %q, second runs %v; retry %d replayed=%q %q; ran %d",
			first.Code, first.Body, second, again.Code, again.Header().Get("Idempotent-Replayed"), again.Body, f.calls.Load())
	}
}

// End panics while the Call waits for its error's answer (HandlerFailed
// handed it on): End ends it, and HandlerErrorPending no longer reports
// it pending.
func TestHandlerErrorPendingAfterEndPanics(t *testing.T) {
	for _, body := range []bool{true, false} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		p := mustCompile(t, replaySpec())
		var before, after bool
		h := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			func() {
				defer func() { _ = recover() }()
				c := f.eng.Begin(r, p, idem.RequestKey)
				defer c.End()
				c.Writer(w)
				_ = c.HandlerFailed(errors.New("boom"))
				before = idem.HandlerErrorPending(r)
				panic("after HandlerFailed")
			}()
			after = idem.HandlerErrorPending(r)
		}))
		post(h, "k", body)
		if !before || after {
			t.Errorf("body=%v: pending %v after HandlerFailed (want true), %v after End panicked (want false)", body, before, after)
		}
	}
}

// Every way a Call over a capture ends drops its hold on the capture's
// buffer exactly once: once the request and its Calls are done, nothing
// holds it and it went back to the pool.
func TestCaptureBodyHoldsBalance(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	boom := errors.New("boom")
	strictRun := func(w http.ResponseWriter, r *http.Request, op func() error) error {
		_, _ = io.ReadAll(r.Body) // the strict decoder
		return wrapperRun(f, p, w, r, op)
	}
	cases := map[string]http.HandlerFunc{
		"handler": f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			w.WriteHeader(201)
		})).ServeHTTP,
		"handler panics": f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			panic("boom")
		})).ServeHTTP,
		"strict": func(w http.ResponseWriter, r *http.Request) {
			_ = strictRun(w, r, func() error { return nil })
		},
		"strict error answered": func(w http.ResponseWriter, r *http.Request) {
			if err := strictRun(w, r, func() error { return boom }); err != nil {
				idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) })
			}
		},
		"strict error not answered": func(w http.ResponseWriter, r *http.Request) {
			_ = strictRun(w, r, func() error { return boom }) // CaptureBody ends the Call
		},
		"strict End panics while pending": func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			c := f.eng.Begin(r, p, idem.RequestKey)
			defer c.End()
			c.Writer(w)
			_ = c.HandlerFailed(boom)
			panic("after HandlerFailed")
		},
		"two runs": func(w http.ResponseWriter, r *http.Request) {
			err := strictRun(w, r, func() error { return boom })
			_ = wrapperRun(f, p, httptest.NewRecorder(), r, func() error { return boom })
			if err != nil {
				idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) })
			}
		},
	}
	for name, h := range cases {
		for _, key := range []string{"k-" + name, "k-" + name} { // executed, then replayed
			var kept *http.Request
			serve := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				kept = r
				h(w, r)
			}))
			func() {
				defer func() { _ = recover() }()
				postRaw(serve, key, []byte(`{"item":"x"}`))
			}()
			if n, pooled, ok := idem.CaptureHolds(kept); !ok || n != 0 || !pooled {
				t.Errorf("%s: %d holders, pooled %v (capture %v); want 0, pooled", name, n, pooled, ok)
			}
		}
	}

	// A Call that outlives CaptureBody (a timeout middleware inside it)
	// holds the buffer until it ends.
	leave, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var kept *http.Request
	slow := f.eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(leave)
		<-resume
		w.WriteHeader(201)
	}))
	h := idem.CaptureBody(0)(detach(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		kept = r
		slow.ServeHTTP(w, r)
	}), leave))
	postRaw(h, "k-timeout", []byte(`{"item":"x"}`))
	if n, pooled, _ := idem.CaptureHolds(kept); n != 1 || pooled {
		t.Errorf("timeout, CaptureBody returned: %d holders, pooled %v; want the Call's, not pooled", n, pooled)
	}
	close(resume)
	recvWithin(t, done, "the handler")
	if n, pooled, _ := idem.CaptureHolds(kept); n != 0 || !pooled {
		t.Errorf("timeout, the Call ended: %d holders, pooled %v; want 0, pooled", n, pooled)
	}
}
