package plainapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/plainapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// BenchmarkPassThrough is the cost of HTTPMiddleware on a request it does
// not protect (the compiled matcher finds no idempotent operation), and of
// Handler (which protects by operation: the call goes through its wrapper
// of the service untouched), against the bare router.
func BenchmarkPassThrough(b *testing.B) {
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	bare := api.Handler(service{couponstest.NewService()})
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
	}{
		{"Bare", bare, "/items/special"},
		{"Static", x.HTTPMiddleware(bare), "/items/special"},
		{"Get", x.HTTPMiddleware(bare), "/coupons"},
		{"Handler", x.Handler(service{couponstest.NewService()}, api.StdHTTPServerOptions{}), "/items/special"},
	} {
		b.Run(c.name, func(b *testing.B) {
			method := "POST"
			if c.path == "/coupons" {
				method = "GET"
			}
			r := httptest.NewRequest(method, c.path, nil)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatal(w.Code)
				}
			}
		})
	}
}
