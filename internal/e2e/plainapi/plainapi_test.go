package plainapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/plainapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// service implements the plain std-http server over couponstest.Service.
type service struct{ s *couponstest.Service }

var _ api.ServerInterface = service{}

func (h service) write(w http.ResponseWriter, op string, status int) {
	id, n := couponstest.Receipt(op, h.s.Exec(op))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.Receipt{Id: id, Count: n})
}

func (h service) ListCoupons(w http.ResponseWriter, r *http.Request, _ api.ListCouponsParams) {
	id, n := couponstest.Receipt("listCoupons", h.s.Exec("listCoupons"))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode([]api.Receipt{{Id: id, Count: n}})
}

func (h service) ClaimCoupon(w http.ResponseWriter, r *http.Request, couponID string, params api.ClaimCouponParams) {
	var body api.ClaimCouponJSONRequestBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id, n := couponstest.Receipt("claimCoupon", h.s.Exec("claimCoupon"))
	w.Header().Set("Content-Type", "application/json")
	if body.UserId == couponstest.FailUser {
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(api.Error{Message: "failed"})
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/claims/%d", n))
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(api.Receipt{Id: id, Count: n})
}

func (h service) RecordEvent(w http.ResponseWriter, r *http.Request, _ api.RecordEventParams) {
	h.write(w, "recordEvent", http.StatusAccepted)
}

func (h service) TouchSpecialItem(w http.ResponseWriter, r *http.Request) {
	h.write(w, "touchSpecialItem", http.StatusOK)
}

func (h service) TouchItem(w http.ResponseWriter, r *http.Request, _ string) {
	h.write(w, "touchItem", http.StatusOK)
}

func (h service) CreateOrder(w http.ResponseWriter, r *http.Request, _ api.CreateOrderParams) {
	h.write(w, "createOrder", http.StatusCreated)
}

func (h service) CreatePayment(w http.ResponseWriter, r *http.Request, _ api.CreatePaymentParams) {
	h.write(w, "createPayment", http.StatusCreated)
}

func (h service) CreateTransfer(w http.ResponseWriter, r *http.Request) {
	h.write(w, "createTransfer", http.StatusCreated)
}

// newServer is the wiring docs/server.md shows for a plain std-http server.
func newServer(t *testing.T, env couponstest.Env) http.Handler {
	x := api.NewIdempotency(env.Store, env.Options)
	t.Cleanup(func() { assert.NoError(t, x.Close()) })
	return x.HTTPMiddleware(api.HandlerWithOptions(service{env.Service}, api.StdHTTPServerOptions{ErrorHandlerFunc: x.ErrorHandler(nil)}))
}

func TestScenarios(t *testing.T) { couponstest.Run(t, newServer) }

func TestBaseURL(t *testing.T) {
	svc := couponstest.NewService()
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	h := x.HTTPMiddlewareWithBaseURL("/v1/")(api.HandlerWithOptions(service{svc}, api.StdHTTPServerOptions{BaseURL: "/v1"}))
	post := func(path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, nil)
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	assert.Equal(t, 200, post("/v1/items/a", "k").Code)
	again := post("/v1/items/a", "k")
	assert.Equal(t, 200, again.Code)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, 1, svc.Count("touchItem"))
	assert.Equal(t, 400, post("/v1/items/a", "").Code, "key required")
	assert.Equal(t, 200, post("/v1/items/special", "").Code, "static route: not idempotent")
	assert.Equal(t, 404, post("/items/a", "").Code, "outside the base URL: untouched (the router answers)")
	assert.Equal(t, 404, post("/v1x/items/a", "").Code)
}

// The one-line wiring of a plain server: Handler puts the protection
// among the routes' middlewares, under the base URL of the options.
func TestScenariosHandler(t *testing.T) {
	couponstest.Run(t, func(t *testing.T, env couponstest.Env) http.Handler {
		x := api.NewIdempotency(env.Store, env.Options)
		return x.Handler(service{env.Service}, api.StdHTTPServerOptions{})
	})
}

func TestHandlerBaseURL(t *testing.T) {
	svc := couponstest.NewService()
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	h := x.Handler(service{svc}, api.StdHTTPServerOptions{BaseURL: "/v1"})
	for range 2 {
		r := httptest.NewRequest("POST", "/v1/items/a", nil)
		r.Header.Set("Idempotency-Key", "k")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	assert.Equal(t, 1, svc.Count("touchItem"))
}

// The plain middleware reads the key header itself: the engine takes the
// canonical form (any case) and the RFC 8941 quoted form as one key, and
// refuses the other spellings google/uuid would accept, so one UUID is
// never two keys.
func TestUUIDKeySpellings(t *testing.T) {
	svc := couponstest.NewService()
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	h := x.Handler(service{svc}, api.StdHTTPServerOptions{})
	claim := func(key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/coupons/C1/claims", strings.NewReader(`{"user_id":"u"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	const key = "5f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c"
	require.Equal(t, http.StatusCreated, claim(key).Code)
	for _, spelling := range []string{`"` + key + `"`, strings.ToUpper(key)} {
		w := claim(spelling)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "%s: %d %s", spelling, w.Code, w.Body)
	}
	for _, spelling := range []string{"{" + key + "}", "urn:uuid:" + key, strings.ReplaceAll(key, "-", "")} {
		w := claim(spelling)
		assert.Equal(t, http.StatusBadRequest, w.Code, spelling)
		assert.Contains(t, w.Body.String(), idem.CodeKeyInvalid, spelling)
	}
	assert.Equal(t, 1, svc.Count("claimCoupon"))
}
