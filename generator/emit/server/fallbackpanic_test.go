package server_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// TestFallbackPanicAndOlderPatterns (from the review of the perfix merge):
// a gin operation protected by path whose handler panics is answered 500
// IDEMPOTENCY_HANDLER_PANICKED, as the by-operation wiring answers it,
// so that Go's client does not send the request again on a dropped
// connection (it ran twice); and the net/http fallback's route check
// accepts a trailing-slash route registered as oapi-codegen v2.7 does,
// without {$} (the operation ran unprotected).
func TestFallbackPanicAndOlderPatterns(t *testing.T) {
	root := gentest.RepoRoot(t)
	m := gentest.NewModule(t, "example.com/fallbackpanic")
	gen := func(pkg, spec string, srv gentest.Server, router string, edit func(name string, data []byte) []byte) {
		files, err := gentest.Generate(gentest.Case{Spec: filepath.Join(root, spec), Package: pkg, Output: filepath.Join(m.Dir, pkg), Server: srv,
			Emit: []string{server.Name}, Params: map[string]string{"server.router": router, "server.strict": "false"}})
		require.NoError(t, err)
		for n, d := range files {
			if edit != nil {
				d = edit(n, d)
			}
			m.Write(t, pkg+"/"+n, d)
		}
	}
	// oapi-codegen v2.7 registers a trailing-slash path without {$}.
	gen("slash27", "testdata/server/fallback-slash/openapi.yaml", gentest.StdHTTP, "std-http", func(n string, d []byte) []byte {
		if n == gentest.OapiFile {
			return []byte(strings.ReplaceAll(string(d), `/orders/{$}"`, `/orders/"`))
		}
		return d
	})
	m.Write(t, "slash27/slash_test.go", []byte(slashTest))
	gen("slash28", "testdata/server/fallback-slash/openapi.yaml", gentest.StdHTTP, "std-http", nil)
	m.Write(t, "slash28/slash_test.go", []byte(strings.ReplaceAll(slashTest, "package slash27", "package slash28")))
	gen("ginpanic", "testdata/server/untyped-path/openapi.yaml", gentest.Gin, "gin", nil)
	m.Write(t, "ginpanic/panic_test.go", []byte(ginPanicTest))
	out, err := m.TryGo("test", "-count=1", "./...")
	require.NoError(t, err, out)
}

const slashTest = `package slash27

import (
	"net/http"
	"net/http/httptest"
	"testing"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{ orders, refunds, boom int }

func (s *service) CreateOrder(w http.ResponseWriter, _ *http.Request, _ string, _ CreateOrderParams) {
	s.orders++
	w.WriteHeader(http.StatusCreated)
}
func (s *service) CreateRefund(w http.ResponseWriter, _ *http.Request, _ string, _ int, _ CreateRefundParams) {}
func (s *service) CreateTransfer(w http.ResponseWriter, _ *http.Request, _ openapi_types.UUID, _ CreateTransferParamsKind, _ CreateTransferParams) {
}
func (s *service) ListOrders(w http.ResponseWriter, _ *http.Request, _ string) {}

func TestTrailingSlashFallbackV27(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := x.Handler(s, StdHTTPServerOptions{})
	for i := range 2 {
		r := httptest.NewRequest("POST", "/accounts/a1/orders/", nil)
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated || (i == 1) != (w.Header().Get("Idempotent-Replayed") == "true") {
			t.Errorf("request %d: %d, Idempotent-Replayed %q", i, w.Code, w.Header().Get("Idempotent-Replayed"))
		}
	}
	if s.orders != 1 {
		t.Fatalf("createOrder ran %d times for one key", s.orders)
	}
}
`

const ginPanicTest = `package ginpanic

import (
	"bytes"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{ orders, refunds, boom int }

func (s *service) CreateOrder(ctx *gin.Context, _ string, _ CreateOrderParams) {
	if ctx.GetHeader("Boom") != "" {
		s.boom++
		panic("boom")
	}
	s.orders++
	ctx.Status(201)
}
func (s *service) CreateRefund(ctx *gin.Context, _ string, _ int, _ CreateRefundParams) { s.refunds++; panic("boom") }
func (s *service) CreateTransfer(ctx *gin.Context, _ openapi_types.UUID, _ CreateTransferParamsKind, _ CreateTransferParams) {
}
func (s *service) ListOrders(ctx *gin.Context, _ string) {}

func TestGinPanic(t *testing.T) {
	var logs bytes.Buffer
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer x.Close()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	x.RegisterHandlers(r, &service{}, GinServerOptions{})
	for _, path := range []string{"/accounts/a1/refunds/7", "/accounts/a1/orders"} {
		req := httptest.NewRequest("POST", path, nil)
		req.Header.Set("Idempotency-Key", "k-"+path)
		req.Header.Set("Boom", "1")
		w := httptest.NewRecorder()
		func() {
			defer func() { t.Logf("%s: panic goes on: %v", path, recover()) }()
			r.ServeHTTP(w, req)
		}()
		if w.Code != 500 || !strings.Contains(w.Body.String(), "IDEMPOTENCY_HANDLER_PANICKED") {
			t.Errorf("%s: client got %d %s, want 500 IDEMPOTENCY_HANDLER_PANICKED", path, w.Code, w.Body)
		}
	}
}

func TestGinFallbackDoubled(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(x.HTTPMiddleware)
	s := &service{}
	x.RegisterHandlers(r, s, GinServerOptions{})
	for i := range 2 {
		req := httptest.NewRequest("POST", "/accounts/a1/orders", nil)
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusCreated || (i == 1) != (w.Header().Get("Idempotent-Replayed") == "true") {
			t.Errorf("request %d: %d, Idempotent-Replayed %q: %s", i, w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
		}
	}
	if s.orders != 1 {
		t.Fatalf("ran %d times", s.orders)
	}
}

func TestGinFallbackPanicResent(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.DiscardHandler)})
	defer x.Close()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New() // no gin.Recovery
	s := &service{}
	x.RegisterHandlers(r, s, GinServerOptions{})
	srv := httptest.NewServer(r)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	defer srv.Close()
	c := srv.Client()
	for _, path := range []string{"/accounts/a1/refunds/7", "/accounts/a1/orders"} {
		warm, err := c.Get(srv.URL + "/accounts/a1/orders")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, warm.Body)
		warm.Body.Close()
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader([]byte("{}")))
		req.Header.Set("Idempotency-Key", "resent-"+path)
		req.Header.Set("Boom", "1")
		resp, err := c.Do(req)
		if err == nil {
			t.Logf("%s: %d", path, resp.StatusCode)
			resp.Body.Close()
		} else {
			t.Logf("%s: %v", path, err)
		}
	}
	t.Logf("createRefund (by operation) ran %d times, createOrder (fallback) ran %d times", s.refunds, s.boom)
	if s.boom != 1 || s.refunds != 1 {
		t.Errorf("createRefund (by operation) ran %d times, createOrder (by path) %d times, for one request each", s.refunds, s.boom)
	}
}
`
