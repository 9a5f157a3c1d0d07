package server_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/gentest"
)

// A plain echo handler returns errors: one marked idem.HandlerNothingDone
// under failures: replay is answered by echo's HTTPErrorHandler without
// being recorded, its key freed, so a retry runs the operation again; an
// unmarked one is recorded and replayed. (Before, serveEcho recorded the
// marked error's answer too.)
func TestEchoPlainHandlerNothingDone(t *testing.T) {
	runPlainModule(t, gentest.Echo, "echo", "example.com/echoplainnd", echoPlainNothingDone)
}

const echoPlainNothingDone = `package api

import (
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{ pay, void atomic.Int32 }

func (s *service) Pay(c echo.Context, _ PayParams) error {
	s.pay.Add(1)
	return echo.NewHTTPError(502, "provider timed out")
}
func (s *service) Charge(c echo.Context, _ ChargeParams) error { return c.NoContent(500) }
func (s *service) Void(c echo.Context, _ VoidParams) error {
	s.void.Add(1)
	return idem.HandlerNothingDone(echo.NewHTTPError(503, "provider refused the connection"))
}

func TestNothingDone(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			_ = c.String(he.Code, "failed")
			return
		}
		_ = c.NoContent(500)
	}
	e.Use(x.HTTPMiddleware)
	s := &service{}
	RegisterHandlers(e, s)
	do := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, nil)
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		return w
	}
	for i := 0; i < 2; i++ {
		w := do("/void")
		if w.Code != 503 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("void %d: %d %q %s", i, w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
		}
	}
	if n := s.void.Load(); n != 2 {
		t.Errorf("a HandlerNothingDone error frees the key: the retry runs again (%d runs)", n)
	}
	do("/pay")
	if w := do("/pay"); w.Code != 502 || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("an unmarked error is replayed: %d %q", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
	if n := s.pay.Load(); n != 1 {
		t.Errorf("pay ran %d times", n)
	}
}
`
