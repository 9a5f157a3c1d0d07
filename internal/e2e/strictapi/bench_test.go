package strictapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/strictapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

const benchBody = `{"user_id":"u1","coupon_ids":["c1","c2","c3"],"client_time":"2026-01-02T03:04:05Z","retry_count":0,"trace_id":"t-1"}`

func benchServer(b *testing.B, protect bool) http.Handler {
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	b.Cleanup(func() { x.Close() })
	var mw []api.StrictMiddlewareFunc
	opts := api.StdHTTPServerOptions{}
	if protect {
		mw = []api.StrictMiddlewareFunc{x.StrictMiddleware}
		opts = api.StdHTTPServerOptions{Middlewares: []api.MiddlewareFunc{x.CaptureBody}, ErrorHandlerFunc: x.ErrorHandler(nil)}
	}
	return api.HandlerWithOptions(api.NewStrictHandler(service{couponstest.NewService()}, mw), opts)
}

func serve(b *testing.B, h http.Handler, path, key, body string, want int) {
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != want {
		b.Fatalf("status %d: %s", w.Code, w.Body)
	}
}

// BenchmarkStrictReplay is a replayed claim through the whole strict
// server (routing, parameter binding, JSON decoding, the generated
// middleware, the engine over the in-memory store), against the same
// request without the wrapper (Bare), which executes every time.
func BenchmarkStrictReplay(b *testing.B) {
	for _, protect := range []bool{false, true} {
		name := "Bare"
		if protect {
			name = "Replay"
		}
		b.Run(name, func(b *testing.B) {
			h := benchServer(b, protect)
			const key = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"
			serve(b, h, "/coupons/C1/claims", key, benchBody, http.StatusCreated)
			b.ReportAllocs()
			b.SetBytes(int64(len(benchBody)))
			for b.Loop() {
				serve(b, h, "/coupons/C1/claims", key, benchBody, http.StatusCreated)
			}
		})
	}
}

// BenchmarkUntouched is a route without a contract, with and without the
// wrapper: the strict middleware returns its handler as is.
func BenchmarkUntouched(b *testing.B) {
	for _, protect := range []bool{false, true} {
		name := "Bare"
		if protect {
			name = "Wrapped"
		}
		b.Run(name, func(b *testing.B) {
			h := benchServer(b, protect)
			b.ReportAllocs()
			for b.Loop() {
				serve(b, h, "/items/special", "k", "", http.StatusOK)
			}
		})
	}
}
