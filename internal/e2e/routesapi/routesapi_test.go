package routesapi_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	api "github.com/idemgen/idemgen/internal/e2e/routesapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// routes counts the executions of each operation.
type routes struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *routes) run(w http.ResponseWriter, op string) {
	h.mu.Lock()
	h.n[op]++
	h.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(op))
}

func (h *routes) PostRoot(w http.ResponseWriter, _ *http.Request)          { h.run(w, "postRoot") }
func (h *routes) PostAB(w http.ResponseWriter, _ *http.Request)            { h.run(w, "postAB") }
func (h *routes) GetABC(w http.ResponseWriter, _ *http.Request)            { h.run(w, "getABC") }
func (h *routes) PatchAX(w http.ResponseWriter, _ *http.Request, _ string) { h.run(w, "patchAX") }
func (h *routes) PostAX(w http.ResponseWriter, _ *http.Request, _ string)  { h.run(w, "postAX") }
func (h *routes) PostAXC(w http.ResponseWriter, _ *http.Request, _ string) { h.run(w, "postAXC") }
func (h *routes) PostCafeOrders(w http.ResponseWriter, _ *http.Request, _ string) {
	h.run(w, "postCafeOrders")
}
func (h *routes) PostCafeBOrders(w http.ResponseWriter, _ *http.Request) { h.run(w, "postCafeBOrders") }

// TestPrecedence sends each request twice with one key: an idempotent
// operation runs once and replays, any other route runs twice; without a
// key an idempotent operation is refused (400) before the router runs.
func TestPrecedence(t *testing.T) {
	tests := []struct {
		method, path string
		op           string // the operation the router serves it with ("" for 404/405)
		idempotent   bool
	}{
		{"POST", "/", "postRoot", true},
		{"POST", "/a/z", "postAX", true},
		{"POST", "/a/b", "postAB", false},   // static, not idempotent: wins over /a/{x}
		{"PATCH", "/a/b", "patchAX", true},  // no PATCH /a/b: /a/{x} serves it
		{"POST", "/a/b/c", "postAXC", true}, // GET /a/b/c does not shadow POST
		{"GET", "/a/b/c", "getABC", false},
		{"POST", "/a/z/c", "postAXC", true},
		{"POST", "/a/z/", "", false}, // not a route
		{"POST", "/a", "", false},
		{"PUT", "/a/z", "", false},
		{"POST", "/a/z/c/d", "", false},
		// Non-ASCII static text arrives escaped; the router matches it
		// unescaped, segment by segment, and so does the wrapper.
		{"POST", "/caf%C3%A9s/z/orders", "postCafeOrders", true},
		{"POST", "/caf%C3%A9s/%C3%A9t%C3%A9/orders", "postCafeOrders", true},
		{"POST", "/caf%c3%a9s/z/orders", "postCafeOrders", true},
		{"POST", "/caf%C3%A9s/b/orders", "postCafeBOrders", false}, // static, not idempotent
		{"POST", "/caf%C3%A9s/z", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			h := &routes{n: map[string]int{}}
			x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
			defer x.Close()
			srv := x.HTTPMiddleware(api.Handler(h))
			do := func(key string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(tt.method, tt.path, nil)
				if key != "" {
					r.Header.Set("Idempotency-Key", key)
				}
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				return w
			}
			first, second, none := do("k1"), do("k1"), do("")
			if tt.op == "" {
				assert.Contains(t, []int{404, 405}, first.Code)
				assert.Empty(t, second.Header().Get("Idempotent-Replayed"))
				assert.Contains(t, []int{404, 405}, none.Code)
				return
			}
			assert.Equal(t, 200, first.Code)
			assert.Equal(t, tt.op, first.Body.String())
			assert.Equal(t, tt.op, second.Body.String())
			if tt.idempotent {
				assert.Equal(t, "true", second.Header().Get("Idempotent-Replayed"))
				assert.Equal(t, 400, none.Code)
				assert.Contains(t, none.Body.String(), idem.CodeKeyMissing)
				assert.Equal(t, 1, h.n[tt.op])
			} else {
				assert.Empty(t, second.Header().Get("Idempotent-Replayed"))
				assert.Equal(t, 200, none.Code)
				assert.Equal(t, 3, h.n[tt.op])
			}
		})
	}
}
