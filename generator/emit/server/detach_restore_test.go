package server_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/gentest"
)

// runPlainModule is runCaseModule for a plain (not strict) server on router.
func runPlainModule(t *testing.T, srv gentest.Server, router, path, src string) {
	t.Helper()
	runCaseModule(t, srv, map[string]string{"server.router": router, "server.strict": "false"}, path, "review_test.go", src)
}

// with DetachHandler, the plain gin and echo wrappers leave the
// framework context's request with the detached context that End cancels:
// an outer middleware running after c.Next() / next(ctx) sees
// context.Canceled although the client is still there.
func TestDetachGinPlainOuterContextRestored(t *testing.T) {
	runPlainModule(t, gentest.Gin, "gin", "example.com/reviewgindetach", reviewGinDetach)
}

func TestDetachEchoPlainOuterContextRestored(t *testing.T) {
	runPlainModule(t, gentest.Echo, "echo", "example.com/reviewechodetach", reviewEchoDetach)
}

const reviewGinDetach = `package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{}

func (s *service) Pay(c *gin.Context, _ PayParams)       { c.JSON(201, map[string]int{"run": 1}) }
func (s *service) Charge(c *gin.Context, _ ChargeParams) { c.Status(500) }
func (s *service) Void(c *gin.Context, _ VoidParams)     { c.Status(500) }

func TestOuterContextAfterNext(t *testing.T) {
	for _, detach := range []time.Duration{0, time.Second} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, DetachHandler: detach})
		gin.SetMode(gin.ReleaseMode)
		r := gin.New()
		var after error
		r.Use(func(c *gin.Context) {
			c.Next()
			after = c.Request.Context().Err() // e.g. an audit write with the request's context
		})
		r.Use(x.HTTPMiddleware)
		RegisterHandlers(r, &service{})
		req := httptest.NewRequest("POST", "/pay", strings.NewReader("{\"amount\":1}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		_ = x.Close()
		if w.Code != http.StatusCreated {
			t.Fatalf("detach %v: %d %s", detach, w.Code, w.Body)
		}
		if after != nil {
			t.Errorf("detach %v: outer middleware after c.Next() sees the request context ended (%v), client still connected", detach, after)
		}
	}
}
`

const reviewEchoDetach = `package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{}

func (s *service) Pay(c echo.Context, _ PayParams) error       { return c.JSON(201, map[string]int{"run": 1}) }
func (s *service) Charge(c echo.Context, _ ChargeParams) error { return c.NoContent(500) }
func (s *service) Void(c echo.Context, _ VoidParams) error     { return c.NoContent(500) }

func TestOuterContextAfterNext(t *testing.T) {
	for _, detach := range []time.Duration{0, time.Second} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, DetachHandler: detach})
		e := echo.New()
		var after error
		e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				err := next(c)
				after = c.Request().Context().Err() // e.g. an audit write with the request's context
				return err
			}
		})
		e.Use(x.HTTPMiddleware)
		RegisterHandlers(e, &service{})
		req := httptest.NewRequest("POST", "/pay", strings.NewReader("{\"amount\":1}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		_ = x.Close()
		if w.Code != http.StatusCreated {
			t.Fatalf("detach %v: %d %s", detach, w.Code, w.Body)
		}
		if after != nil {
			t.Errorf("detach %v: outer middleware after next(c) sees the request context ended (%v), client still connected", detach, after)
		}
	}
}
`

// gin strict, DetachHandler on, an operation error marked
// NothingDone: End ran in full before gin's strict handler calls
// HandlerErrorFunc, whose ctx.Request still holds the detached context
// End cancelled.
func TestDetachGinStrictErrorHandlerContextRestored(t *testing.T) {
	runHandlerErrorModule(t, gentest.StrictGin, "gin", "example.com/reviewginnd", reviewGinNothingDone)
}

const reviewGinNothingDone = `package api

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/runtime/idem"
)

` + strictVoidNothingDone + `func TestErrorHandlerContext(t *testing.T) {
	for _, detach := range []time.Duration{0, time.Second} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, DetachHandler: detach})
		gin.SetMode(gin.ReleaseMode)
		r := gin.New()
		var inHandler error
		x.RegisterStrictHandlers(r, &service{}, nil, StrictGinServerOptions{HandlerErrorFunc: func(ctx *gin.Context, err error) {
			inHandler = ctx.Request.Context().Err() // e.g. reporting the error to a tracker with the request's context
			ctx.Status(502)
		}}, GinServerOptions{})
		req := httptest.NewRequest("POST", "/void", nil)
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		_ = x.Close()
		if w.Code != 502 {
			t.Fatalf("detach %v: %d %s", detach, w.Code, w.Body)
		}
		if inHandler != nil {
			t.Errorf("detach %v: HandlerErrorFunc sees the request context ended (%v), client still connected", detach, inHandler)
		}
	}
}
`

// strictVoidNothingDone is the strict service of the gin and echo error
// handler tests: Void fails with an error marked idem.HandlerNothingDone.
// Its importer needs "context", "errors" and idem.
const strictVoidNothingDone = `type service struct{}

func (s *service) Pay(context.Context, PayRequestObject) (PayResponseObject, error) {
	return nil, errors.New("unused")
}
func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) {
	return nil, errors.New("unused")
}
func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	return nil, idem.HandlerNothingDone(errors.New("provider refused the connection"))
}

`

// Echo strict, DetachHandler on, an operation error marked NothingDone:
// echo runs its HTTPErrorHandler after every middleware returned, so
// ctx.Request() must be the request's own again by then.
func TestDetachEchoStrictErrorHandlerContextRestored(t *testing.T) {
	runHandlerErrorModule(t, gentest.StrictEcho, "echo", "example.com/reviewechond", reviewEchoNothingDone)
}

const reviewEchoNothingDone = `package api

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

` + strictVoidNothingDone + `func TestErrorHandlerContext(t *testing.T) {
	for _, detach := range []time.Duration{0, time.Second} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, DetachHandler: detach})
		e := echo.New()
		var inHandler error
		e.HTTPErrorHandler = func(err error, ctx echo.Context) {
			inHandler = ctx.Request().Context().Err()
			_ = ctx.NoContent(502)
		}
		x.RegisterStrictHandlers(e, &service{}, nil)
		req := httptest.NewRequest("POST", "/void", nil)
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		_ = x.Close()
		if w.Code != 502 {
			t.Fatalf("detach %v: %d %s", detach, w.Code, w.Body)
		}
		if inHandler != nil {
			t.Errorf("detach %v: HTTPErrorHandler sees the request context ended (%v), client still connected", detach, inHandler)
		}
	}
}
`

// std-http strict, DetachHandler on: a strict middleware inside
// StrictMiddleware (before it in the list) gets the r whose context is the
// ctx it gets, not the request's (which ends with the client).
func TestDetachStdHTTPStrictInnerRequestContext(t *testing.T) {
	runHandlerErrorModule(t, gentest.StrictStdHTTP, "", "example.com/stdinnerctx", stdInnerCtx)
}

const stdInnerCtx = `package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{}

func (s *service) Pay(context.Context, PayRequestObject) (PayResponseObject, error) {
	n := 1
	return Pay201JSONResponse{Run: &n}, nil
}
func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) {
	return nil, errors.New("unused")
}
func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	return nil, errors.New("unused")
}

func TestInnerRequestContext(t *testing.T) {
	for _, detach := range []time.Duration{0, time.Second} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, DetachHandler: detach})
		same := false
		inner := func(f StrictHandlerFunc, op string) StrictHandlerFunc {
			return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request interface{}) (interface{}, error) {
				same = r.Context() == ctx
				return f(ctx, w, r, request)
			}
		}
		h := HandlerWithOptions(NewStrictHandlerWithOptions(&service{}, []StrictMiddlewareFunc{inner, x.StrictMiddleware},
			StrictHTTPServerOptions{ResponseErrorHandlerFunc: x.ResponseErrorHandler(nil)}),
			StdHTTPServerOptions{Middlewares: []MiddlewareFunc{x.CaptureBody}})
		req := httptest.NewRequest("POST", "/pay", strings.NewReader("{\"amount\":1}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		_ = x.Close()
		if w.Code != 201 {
			t.Fatalf("detach %v: %d %s", detach, w.Code, w.Body)
		}
		if !same {
			t.Errorf("detach %v: the inner strict middleware's r.Context() is not its ctx", detach)
		}
	}
}
`
