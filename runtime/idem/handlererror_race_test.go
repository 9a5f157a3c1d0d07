package idem_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Regression tests of a review of the strict handler error hand-off
// (HandlerFailed, AnswerHandlerError, CaptureBody's bound): a timeout
// middleware inside CaptureBody, an error type the error handler looks
// for, a body replaced inside CaptureBody.

// wrapperRun is what the generated std-http strict wrapper does (Begin,
// End deferred, Writer, run, HandlerFailed); op is the operation.
func wrapperRun(f *fixture, p *idem.Policy, w http.ResponseWriter, r *http.Request, op func() error) error {
	c := f.eng.Begin(r, p, idem.RequestKey)
	defer c.End()
	if c.Decision() != idem.Execute {
		c.Respond(w)
		return nil
	}
	c.Writer(w)
	f.calls.Add(1)
	if err := op(); err != nil {
		return c.HandlerFailed(err)
	}
	w.WriteHeader(201)
	_ = c.Finish()
	return nil
}

// http.TimeoutHandler inside CaptureBody (one of
// StdHTTPServerOptions.Middlewares, which StrictHandler puts inside
// CaptureBody), no error handler adapter: the operation outlives
// CaptureBody, and its late HandlerFailed must not hand the Call on to a
// bound that CaptureBody has closed (it was handed to a pooled empty body
// already put back: the key stayed claimed, the heartbeat extending it).
func TestHandlerErrorTimeoutNoAdapterFreesKey(t *testing.T) {
	for _, body := range []bool{false, true} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		spec := replaySpec()
		spec.InFlight.Lease = 300 * time.Millisecond
		p := mustCompile(t, spec)
		done := make(chan error, 1)
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := wrapperRun(f, p, w, r, func() error {
				time.Sleep(150 * time.Millisecond) // outlives the timeout
				return errors.New("boom")
			})
			if err != nil {
				http.Error(w, err.Error(), 500) // oapi-codegen's default: no adapter
			}
			done <- err
		})
		h := idem.CaptureBody(0)(http.TimeoutHandler(strict, 50*time.Millisecond, "timeout"))
		post(h, "k1", body)
		<-done
		time.Sleep(2 * spec.InFlight.Lease)
		// a retry through a handler without CaptureBody
		bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := wrapperRun(f, p, w, r, func() error { return nil }); err != nil {
				http.Error(w, err.Error(), 500)
			}
		})
		again := post(bare, "k1", body)
		assert.Equal(t, 201, again.Code, "body %v: the key is free: %s", body, again.Body)
	}
}

// http.TimeoutHandler inside CaptureBody with the adapter: when the
// timeout fires between HandlerFailed and the error handler, CaptureBody
// (the request's goroutine) and AnswerHandlerError (the handler's) must
// not both end the Call (data races under -race; a recorder's buffer put
// back to the pool while the error handler wrote into it): each Call ends
// once.
func TestHandlerErrorTimeoutEndsOnce(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	n := 2000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		done := make(chan struct{})
		d := time.Duration(i%40) * 25 * time.Microsecond
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(done)
			err := wrapperRun(f, p, w, r, func() error { return errors.New("boom") })
			time.Sleep(d) // strict middlewares in front, between the wrapper and the error handler
			if err != nil {
				idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) })
			}
		})
		h := idem.CaptureBody(0)(http.TimeoutHandler(strict, 500*time.Microsecond, "timeout"))
		post(h, fmt.Sprint("k", i), i%2 == 0)
		<-done
	}
	time.Sleep(50 * time.Millisecond)
	// A request whose context the timeout canceled before Begin ran is
	// not executed: each Call that ran ends once.
	assert.Equal(t, int(f.calls.Load()), count(f.obs.kinds(), idem.EventExecuted), "each Call ends once")
}

// With a body, HandlerFailed racing CaptureBody's release (a timeout
// inside it) hands the Call to an open bound or to none: either way the
// key is free once the handler returned.
func TestHandlerErrorCaptureReleaseRace(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	n := 1000
	if testing.Short() {
		n = 200
	}
	for i := range n {
		done := make(chan struct{})
		d := time.Duration(i%40) * 25 * time.Microsecond
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(done)
			err := wrapperRun(f, p, w, r, func() error {
				time.Sleep(d)
				return errors.New("boom")
			})
			if err != nil {
				http.Error(w, err.Error(), 500) // no adapter
			}
		})
		h := idem.CaptureBody(0)(http.TimeoutHandler(strict, 500*time.Microsecond, "timeout"))
		key := fmt.Sprint("k", i)
		post(h, key, true)
		<-done
		again := post(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = wrapperRun(f, p, w, r, func() error { return nil })
		}), key, true)
		if again.Code == http.StatusConflict {
			t.Fatalf("request %d: the key is still claimed after the handler returned: %s", i, again.Body)
		}
	}
}

// A middleware inside CaptureBody that replaces r.Body (chi's RequestSize,
// http.MaxBytesReader, kin-openapi's validator) leaves a request without
// a body unbounded: the key is freed, and the warning says the request
// was not bounded instead of pointing at the error handler. A request
// with a body stays bounded (its context leads to the capture).
func TestHandlerErrorBodyReplaced(t *testing.T) {
	for _, body := range []bool{true, false} {
		var logs bytes.Buffer
		f := newFixture(t, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		p := mustCompile(t, replaySpec())
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := wrapperRun(f, p, w, r, func() error {
				_, _ = io.Copy(io.Discard, r.Body)
				return errors.New("boom")
			})
			if err != nil {
				idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) })
			}
		})
		limit := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
				next.ServeHTTP(w, r)
			})
		}
		h := idem.CaptureBody(0)(limit(strict))
		post(h, "k1", body)
		again := post(h, "k1", body)
		if body {
			assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, int32(1), f.calls.Load())
			continue
		}
		assert.Equal(t, int32(2), f.calls.Load(), "the key is freed")
		assert.Contains(t, logs.String(), "not bounded by CaptureBody")
		assert.NotContains(t, logs.String(), "ResponseErrorHandler")
	}
}

type apiError struct {
	status int
	err    error
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %v", e.status, e.err) }
func (e *apiError) Unwrap() error { return e.err }

var errNotFound = errors.New("not found")

// A user strict middleware (outside StrictMiddleware) that maps the
// operation's error to its own type, wrapping it, and an error handler
// that answers by that type: the error handler gets the mapped error (it
// got the operation's own error: 404 became 500, stored and replayed).
func TestHandlerErrorAnswerGetsMappedError(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	h := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := wrapperRun(f, p, w, r, func() error { return errNotFound })
		if err != nil {
			err = &apiError{status: 404, err: err} // the user's strict middleware
			idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) {
				var ae *apiError
				if errors.As(err, &ae) {
					http.Error(w, err.Error(), ae.status)
					return
				}
				http.Error(w, err.Error(), 500)
			})
		}
	}))
	first, again := post(h, "k1", true), post(h, "k1", true)
	assert.Equal(t, 404, first.Code, first.Body.String())
	assert.Equal(t, 404, again.Code)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
}

// Without the adapter (a hand-wired strict server, echo's
// DefaultHTTPErrorHandler, an error handler with a type switch), the
// error handler gets the operation's error itself: err.(*T) matches (it
// got a wrapper, and answered 500).
func TestHandlerErrorNoAdapterTypeAssertion(t *testing.T) {
	for _, body := range []bool{true, false} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		p := mustCompile(t, replaySpec())
		h := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			err := wrapperRun(f, p, w, r, func() error { return &apiError{status: 404, err: errNotFound} })
			if err != nil {
				if ae, ok := err.(*apiError); ok { // as echo.DefaultHTTPErrorHandler does with *echo.HTTPError
					http.Error(w, err.Error(), ae.status)
					return
				}
				http.Error(w, err.Error(), 500)
			}
		}))
		first := post(h, "k1", body)
		assert.Equal(t, 404, first.Code, "body %v: %s", body, first.Body)
		post(h, "k1", body)
		assert.Equal(t, int32(2), f.calls.Load(), "body %v: not installed, the key is freed", body)
	}
}
