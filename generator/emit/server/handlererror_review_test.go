package server_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/gentest"
)

// Regression tests of a review of the strict handler error hand-off, in
// generated code: an echo.HTTPError returned by an operation keeps its
// status when the strict server is wired by hand (it became a 500 behind a
// wrapper error type), and http.TimeoutHandler in
// StdHTTPServerOptions.Middlewares (inside CaptureBody) neither leaks the
// key nor races (-race).

func TestHandlerErrorReviewEcho(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runHandlerErrorModule(t, gentest.StrictEcho, "echo", "example.com/reviewecho", reviewEchoTest)
}

const reviewEchoTest = `package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{ pays, charges int }

func (s *service) Pay(context.Context, PayRequestObject) (PayResponseObject, error) {
	s.pays++
	return nil, echo.NewHTTPError(http.StatusNotFound, "no such account")
}
func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) {
	s.charges++
	return nil, echo.NewHTTPError(http.StatusNotFound, "no such account")
}
func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	return nil, echo.NewHTTPError(http.StatusNotFound, "no such payment")
}

func do(e *echo.Echo, path, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader("{\"amount\":1}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	return w
}

// CaptureBody and StrictMiddleware by hand, without ErrorHandler: echo's
// DefaultHTTPErrorHandler gets the *echo.HTTPError itself.
func TestByHandHTTPError(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	e := echo.New()
	e.Use(x.CaptureBody)
	s := &service{}
	RegisterHandlers(e, NewStrictHandler(s, []StrictMiddlewareFunc{x.StrictMiddleware}))
	for _, p := range []string{"/pay", "/charge"} {
		if w := do(e, p, "k1"); w.Code != http.StatusNotFound {
			t.Fatalf("%s by hand: %d %s, want the operation's 404", p, w.Code, w.Body)
		}
	}
}

// RegisterStrictHandlers: the 404 is answered, recorded and replayed.
func TestInstalledHTTPError(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	e := echo.New()
	s := &service{}
	x.RegisterStrictHandlers(e, s, nil)
	a, b := do(e, "/pay", "k2"), do(e, "/pay", "k2")
	if a.Code != 404 || b.Code != 404 || b.Header().Get("Idempotent-Replayed") != "true" || s.pays != 1 {
		t.Fatalf("%d / %d %q, ran %d: want the 404 recorded and replayed", a.Code, b.Code, b.Header().Get("Idempotent-Replayed"), s.pays)
	}
}
`

func TestHandlerErrorReviewStdTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runHandlerErrorModule(t, gentest.StrictStdHTTP, "", "example.com/reviewstd", reviewStdTest)
}

const reviewStdTest = `package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct {
	voids atomic.Int32
	done  chan struct{}
}

func (s *service) Pay(context.Context, PayRequestObject) (PayResponseObject, error)       { return nil, nil }
func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) { return nil, nil }
func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	n := s.voids.Add(1)
	defer func() { go func() { time.Sleep(20 * time.Millisecond); s.done <- struct{}{} }() }()
	if n == 1 {
		time.Sleep(100 * time.Millisecond) // slower than the route's timeout
		return nil, errors.New("void failed after the side effect")
	}
	return Void204Response{}, nil
}

func do(h http.Handler, key string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/void", nil)
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func timeout(h http.Handler) http.Handler { return http.TimeoutHandler(h, 20*time.Millisecond, "timeout") }

// A per-route timeout in StdHTTPServerOptions.Middlewares (inside
// CaptureBody), the strict server wired by hand without
// ResponseErrorHandler: once the operation returned its error, the key is
// free (it stayed claimed, the heartbeat extending it).
func TestTimeoutByHand(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{done: make(chan struct{}, 4)}
	h := HandlerWithOptions(NewStrictHandlerWithOptions(s, []StrictMiddlewareFunc{x.StrictMiddleware}, StrictHTTPServerOptions{}),
		StdHTTPServerOptions{Middlewares: []MiddlewareFunc{timeout, x.CaptureBody}})
	do(h, "k1")
	<-s.done
	if again := do(h, "k1"); again.Code != http.StatusNoContent || s.voids.Load() != 2 {
		t.Fatalf("retry after the operation failed: %d %s (ran %d), want it run again", again.Code, again.Body, s.voids.Load())
	}
}

// The same with StrictHandler (ResponseErrorHandler installed), under
// -race: the error handler (the handler's goroutine) and CaptureBody (the
// request's) do not both end the Call.
func TestTimeoutStrictHandler(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{done: make(chan struct{}, 4)}
	h := x.StrictHandler(s, nil, StrictHTTPServerOptions{}, StdHTTPServerOptions{Middlewares: []MiddlewareFunc{timeout}})
	do(h, "k2")
	<-s.done
	if again := do(h, "k2"); again.Code != http.StatusNoContent || s.voids.Load() != 2 {
		t.Fatalf("retry after the operation failed: %d %s (ran %d), want it run again", again.Code, again.Body, s.voids.Load())
	}
}
`
