package server_test

// wiringTest runs inside the plain packages of TestRouters: a doubled
// wiring (a hand-added HTTPMiddleware left beside the one-line wiring)
// records each request once, not the inner run's 409
// IDEMPOTENCY_KEY_IN_USE (review of the perop merge, MEDIUM 1); and the
// one-line wiring's engine runs after the router's middlewares (an
// authentication middleware's 401 is not recorded, Options.Principal sees
// what it put in the request's context).
const wiringTest = `package PKG

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New // used by the echo variant
	_ = gin.New  // used by the gin variant
)

type userKey struct{}

// principal is the Options.Principal of the test: the user authenticate
// put in the request's context.
func principal(r *http.Request) (string, error) {
	if u, ok := r.Context().Value(userKey{}).(string); ok {
		return u, nil
	}
	return "", errors.New("no user in the context: the engine ran before the authentication")
}

//NETHTTP
func doubled(x *Idempotency, s *service) http.Handler {
	return x.HTTPMiddleware(x.Handler(s, OPTIONS{}))
}

func authenticated(x *Idempotency, s *service) http.Handler {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := r.Header.Get("Authorization")
			if u == "" {
				http.Error(w, "log in", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
		})
	}
	return x.Handler(s, OPTIONS{Middlewares: []MiddlewareFunc{auth}})
}
//END
//ECHO
func doubled(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	e.Use(x.HTTPMiddleware)
	x.RegisterHandlers(e, s)
	return e
}

func authenticated(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ctx echo.Context) error {
			u := ctx.Request().Header.Get("Authorization")
			if u == "" {
				return ctx.String(http.StatusUnauthorized, "log in")
			}
			ctx.SetRequest(ctx.Request().WithContext(context.WithValue(ctx.Request().Context(), userKey{}, u)))
			return next(ctx)
		}
	})
	x.RegisterHandlers(e, s)
	return e
}
//END
//GIN
func doubled(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(x.HTTPMiddleware)
	x.RegisterHandlers(r, s, GinServerOptions{})
	return r
}

func authenticated(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	auth := func(ctx *gin.Context) {
		u := ctx.Request.Header.Get("Authorization")
		if u == "" {
			ctx.String(http.StatusUnauthorized, "log in")
			ctx.Abort()
			return
		}
		ctx.Request = ctx.Request.WithContext(context.WithValue(ctx.Request.Context(), userKey{}, u))
	}
	x.RegisterHandlers(r, s, GinServerOptions{Middlewares: []MiddlewareFunc{auth}})
	return r
}
//END

func post(h http.Handler, path, key, user string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, strings.NewReader(` + "`" + `{"item":"book"}` + "`" + `))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	if user != "" {
		r.Header.Set("Authorization", user)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestDoubledWiring(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := doubled(x, s)
	for _, key := range []string{"k1", "k2"} {
		first, again := post(h, "/orders", key, ""), post(h, "/orders", key, "")
		if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() {
			t.Fatalf("key %s: %d %s, then %d %q %s", key, first.Code, first.Body, again.Code, again.Header(), again.Body)
		}
	}
	if s.orders != 2 {
		t.Fatalf("createOrder ran %d times for two keys", s.orders)
	}
}

func TestEngineAfterMiddlewares(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: principal})
	defer x.Close()
	s := &service{}
	h := authenticated(x, s)
	if w := post(h, "/orders", "k1", ""); w.Code != 401 {
		t.Fatalf("without a user: %d %s", w.Code, w.Body)
	}
	first, again := post(h, "/orders", "k1", "alice"), post(h, "/orders", "k1", "alice")
	if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || s.orders != 1 {
		t.Fatalf("after logging in: %d %s, then %d %q %s; ran %d times", first.Code, first.Body, again.Code, again.Header(), again.Body, s.orders)
	}
	// Another user's key is another key (the principal is the middleware's).
	if w := post(h, "/orders", "k1", "bob"); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" || s.orders != 2 {
		t.Fatalf("another user: %d %q; ran %d times", w.Code, w.Header(), s.orders)
	}
}
`

// fallbackOrderTest runs inside the packages of the untyped-path spec
// (after fallbackTest, whose service it uses): createOrder, protected by
// path, is protected after the router's middlewares as the operations
// protected by operation are: with oapi-codegen's
// compatibility.apply-*-middleware-first-to-last too (the FTL packages,
// server.middleware-first-to-last), and on gin (whose wrapper calls
// options.Middlewares one after the other before the operation: the
// engine begins in the last of them). An authentication middleware's 401
// is not recorded, and Options.Principal sees what it put in the context.
const fallbackOrderTest = `package PKG

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New
	_ = gin.New
)

type userKey struct{}

func principal(r *http.Request) (string, error) {
	if u, ok := r.Context().Value(userKey{}).(string); ok {
		return u, nil
	}
	return "", errors.New("no user in the context: the engine ran before the authentication")
}

//NETHTTP
func authenticated(x *Idempotency, s *service) http.Handler {
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u := r.Header.Get("Authorization")
			if u == "" {
				http.Error(w, "log in", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
		})
	}
	// Two middlewares: the fallback's must be inside both, whichever
	// order oapi-codegen applies them in.
	pass := func(next http.Handler) http.Handler { return next }
	return x.Handler(s, OPTIONS{Middlewares: []MiddlewareFunc{pass, auth, pass}})
}
//END
//ECHO
func authenticated(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ctx echo.Context) error {
			u := ctx.Request().Header.Get("Authorization")
			if u == "" {
				return ctx.String(http.StatusUnauthorized, "log in")
			}
			ctx.SetRequest(ctx.Request().WithContext(context.WithValue(ctx.Request().Context(), userKey{}, u)))
			return next(ctx)
		}
	})
	x.RegisterHandlers(e, s)
	return e
}
//END
//GIN
func authenticated(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	auth := func(ctx *gin.Context) {
		u := ctx.Request.Header.Get("Authorization")
		if u == "" {
			ctx.String(http.StatusUnauthorized, "log in")
			ctx.Abort()
			return
		}
		ctx.Request = ctx.Request.WithContext(context.WithValue(ctx.Request.Context(), userKey{}, u))
	}
	pass := func(*gin.Context) {}
	// Under a group with a BaseURL: the routes are marked whatever the
	// prefix.
	x.RegisterHandlers(r.Group("/v1"), s, GinServerOptions{BaseURL: "/api", Middlewares: []MiddlewareFunc{pass, auth, pass}})
	return r
}

const prefix = "/v1/api"
//END
//NOPREFIX
const prefix = ""
//END

func TestFallbackAfterMiddlewares(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: principal})
	defer x.Close()
	s := &service{}
	h := authenticated(x, s)
	post := func(path, user string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, nil)
		r.Header.Set("Idempotency-Key", "k1")
		if user != "" {
			r.Header.Set("Authorization", user)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct {
		path string
		ran  *int
	}{{prefix + "/accounts/a1/orders", &s.orders}, {prefix + "/accounts/a1/refunds/7", &s.refunds}} {
		if w := post(tc.path, ""); w.Code != 401 {
			t.Fatalf("%s without a user: %d %s", tc.path, w.Code, w.Body)
		}
		first, again := post(tc.path, "alice"), post(tc.path, "alice")
		if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || *tc.ran != 1 {
			t.Errorf("%s after logging in: %d %s, then %d %q %s; ran %d times", tc.path, first.Code, first.Body, again.Code, again.Header(), again.Body, *tc.ran)
		}
	}
}
`

// strictWiringTest runs inside the strict packages of TestRouters: a
// hand-added HTTPMiddleware left beside the strict one-line wiring records
// each request once.
const strictWiringTest = `package PKG

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New
	_ = gin.New
)

//NETHTTP
func doubled(x *Idempotency, s *service) http.Handler {
	return x.HTTPMiddleware(x.StrictHandler(s, nil, StrictHTTPServerOptions{}, OPTIONS{}))
}
//END
//ECHO
func doubled(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	e.Use(x.HTTPMiddleware)
	x.RegisterStrictHandlers(e, s, nil)
	return e
}
//END
//GIN
func doubled(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(x.HTTPMiddleware)
	x.RegisterStrictHandlers(r, s, nil, StrictGinServerOptions{}, GinServerOptions{})
	return r
}
//END

func TestDoubledStrictWiring(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := doubled(x, s)
	post := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(` + "`" + `{"item":"book"}` + "`" + `))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, key := range []string{"k1", "k2"} {
		first, again := post(key), post(key)
		if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() {
			t.Fatalf("key %s: %d %s, then %d %q %s", key, first.Code, first.Body, again.Code, again.Header(), again.Body)
		}
	}
	if s.orders != 2 {
		t.Fatalf("createOrder ran %d times for two keys", s.orders)
	}
}
`

// prefixFallbackTest runs inside the packages of the fallback-prefix spec
// (review of the perop merge, LOW 4): createTenantOrder (POST
// /{tenant}/orders) is protected by path; importOrders (POST /orders) has
// no contract. Under a gorilla subrouter /v1, the path /v1/orders of
// importOrders matches createTenantOrder's template: the wiring checks the
// route the router chose, so importOrders is not refused for want of a key.
// At the root, createTenantOrder is protected.
const prefixFallbackTest = `package PKG

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/mux"

	"github.com/idemgen/idemgen/runtime/idem"
)

var _ = mux.NewRouter

type service struct{ tenant, imports int }

func (s *service) CreateTenantOrder(w http.ResponseWriter, _ *http.Request, _ string, _ CreateTenantOrderParams) {
	s.tenant++
	w.WriteHeader(http.StatusCreated)
}

func (s *service) ImportOrders(w http.ResponseWriter, _ *http.Request) {
	s.imports++
	w.WriteHeader(http.StatusOK)
}

func post(h http.Handler, path, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, nil)
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestFallbackAtRoot(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := x.Handler(s, OPTIONS{})
	if w := post(h, "/orders", ""); w.Code != 200 || s.imports != 1 {
		t.Fatalf("POST /orders: %d %s", w.Code, w.Body)
	}
	first, again := post(h, "/acme/orders", "k1"), post(h, "/acme/orders", "k1")
	if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || s.tenant != 1 {
		t.Fatalf("POST /acme/orders: %d, then %d %q; ran %d times", first.Code, again.Code, again.Header(), s.tenant)
	}
}

//GORILLA
func TestFallbackUnderSubrouter(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	r := mux.NewRouter()
	x.Handler(s, GorillaServerOptions{BaseRouter: r.PathPrefix("/v1").Subrouter()})
	for range 2 {
		if w := post(r, "/v1/orders", ""); w.Code != 200 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("POST /v1/orders (importOrders, no contract): %d %s", w.Code, w.Body)
		}
	}
	if s.imports != 2 {
		t.Fatalf("importOrders ran %d times, want 2", s.imports)
	}
}
//END
`
