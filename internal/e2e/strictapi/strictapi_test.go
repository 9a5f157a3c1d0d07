package strictapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/oapi-codegen/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/strictapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// service implements the strict server over couponstest.Service.
type service struct{ s *couponstest.Service }

var _ api.StrictServerInterface = service{}

// newIdempotency returns the generated Idempotency over the in-memory
// store with opts, closed when the test ends.
func newIdempotency(t *testing.T, opts idem.Options) *api.Idempotency {
	t.Helper()
	x := api.NewIdempotency(nil, opts)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// send serves a request of method to target with body through h, with
// headers (name, value pairs; a pair with an empty value is left out),
// and returns what h answered.
func send(h http.Handler, method, target string, body io.Reader, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, body)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			r.Header.Set(headers[i], headers[i+1])
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func receipt(s *couponstest.Service, op string) api.Receipt {
	id, n := couponstest.Receipt(op, s.Exec(op))
	return api.Receipt{Id: id, Count: n}
}

func (h service) ListCoupons(context.Context, api.ListCouponsRequestObject) (api.ListCouponsResponseObject, error) {
	return api.ListCoupons200JSONResponse{receipt(h.s, "listCoupons")}, nil
}

func (h service) ClaimCoupon(_ context.Context, req api.ClaimCouponRequestObject) (api.ClaimCouponResponseObject, error) {
	r := receipt(h.s, "claimCoupon")
	if req.Body.UserId == couponstest.FailUser {
		return api.ClaimCoupon500JSONResponse{Message: "failed"}, nil
	}
	loc := fmt.Sprintf("/claims/%d", r.Count)
	return api.ClaimCoupon201JSONResponse{Body: r, Headers: api.ClaimCoupon201ResponseHeaders{Location: &loc}}, nil
}

func (h service) RecordEvent(context.Context, api.RecordEventRequestObject) (api.RecordEventResponseObject, error) {
	return api.RecordEvent202JSONResponse(receipt(h.s, "recordEvent")), nil
}

func (h service) TouchSpecialItem(context.Context, api.TouchSpecialItemRequestObject) (api.TouchSpecialItemResponseObject, error) {
	return api.TouchSpecialItem200JSONResponse(receipt(h.s, "touchSpecialItem")), nil
}

func (h service) TouchItem(context.Context, api.TouchItemRequestObject) (api.TouchItemResponseObject, error) {
	return api.TouchItem200JSONResponse(receipt(h.s, "touchItem")), nil
}

func (h service) CreateOrder(context.Context, api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	return api.CreateOrder201JSONResponse(receipt(h.s, "createOrder")), nil
}

func (h service) CreatePayment(context.Context, api.CreatePaymentRequestObject) (api.CreatePaymentResponseObject, error) {
	return api.CreatePayment201JSONResponse(receipt(h.s, "createPayment")), nil
}

func (h service) CreateTransfer(context.Context, api.CreateTransferRequestObject) (api.CreateTransferResponseObject, error) {
	return api.CreateTransfer201JSONResponse(receipt(h.s, "createTransfer")), nil
}

// newServer is the wiring docs/server.md shows for a strict std-http server.
func newServer(t *testing.T, env couponstest.Env) http.Handler {
	x := api.NewIdempotency(env.Store, env.Options)
	t.Cleanup(func() { assert.NoError(t, x.Close()) })
	return api.HandlerWithOptions(
		api.NewStrictHandlerWithOptions(service{env.Service}, []api.StrictMiddlewareFunc{x.StrictMiddleware},
			api.StrictHTTPServerOptions{RequestErrorHandlerFunc: x.ErrorHandler(nil)}),
		api.StdHTTPServerOptions{Middlewares: []api.MiddlewareFunc{x.CaptureBody}, ErrorHandlerFunc: x.ErrorHandler(nil)})
}

func TestScenarios(t *testing.T) { couponstest.Run(t, newServer) }

// The capture may also wrap the whole router instead of each route.
func TestScenariosCaptureAroundRouter(t *testing.T) {
	couponstest.Run(t, func(t *testing.T, env couponstest.Env) http.Handler {
		x := api.NewIdempotency(env.Store, env.Options)
		h := api.HandlerWithOptions(
			api.NewStrictHandler(service{env.Service}, []api.StrictMiddlewareFunc{x.StrictMiddleware}),
			api.StdHTTPServerOptions{ErrorHandlerFunc: x.ErrorHandler(nil)})
		return x.CaptureBody(h)
	})
}

func TestWithoutCaptureBody(t *testing.T) {
	svc := couponstest.NewService()
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous})
	h := api.Handler(api.NewStrictHandler(service{svc}, []api.StrictMiddlewareFunc{x.StrictMiddleware}))
	w := send(h, "POST", "/orders", strings.NewReader(`{"item":"book"}`), "Idempotency-Key", "k")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), idem.CodeRequestUnreadable)
	assert.Zero(t, svc.Count("createOrder"), "nothing ran unprotected")
}

func TestErrorHandler(t *testing.T) {
	var events []idem.Event
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous, Observer: idem.ObserverFunc(func(_ context.Context, e idem.Event) { events = append(events, e) })})
	var passed error
	h := x.ErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) { passed = err; w.WriteHeader(418) })
	tests := []struct {
		method, path string
		err          error
		status       int
		code         string
	}{
		{"POST", "/coupons/C1/claims", &api.InvalidParamFormatError{ParamName: "Idempotency-Key", Err: errors.New("bad uuid")}, 400, idem.CodeKeyInvalid},
		{"POST", "/orders", &api.RequiredHeaderError{ParamName: "Idempotency-Key"}, 400, idem.CodeKeyMissing},
		{"POST", "/payments", &api.RequiredParamError{ParamName: "request_id"}, 400, idem.CodeKeyMissing},
		{"POST", "/orders", &api.TooManyValuesForParamError{ParamName: "idempotency-key", Count: 2}, 400, idem.CodeKeyInvalid},
		{"POST", "/payments", fmt.Errorf("wrapped: %w", &api.InvalidParamFormatError{ParamName: "request_id", Err: errors.New("x")}), 400, idem.CodeKeyInvalid},
		{"POST", "/coupons/C1/claims", &api.InvalidParamFormatError{ParamName: "couponId", Err: errors.New("x")}, 418, ""},
		{"POST", "/orders", errors.New("can't decode JSON body"), 418, ""},
		// Each operation's own key only: request_id is /payments' key, not
		// /orders', and routes without contracts keep oapi-codegen's errors.
		{"POST", "/orders", &api.RequiredParamError{ParamName: "request_id"}, 418, ""},
		{"POST", "/payments", &api.RequiredHeaderError{ParamName: "Idempotency-Key"}, 418, ""},
		{"GET", "/coupons", &api.InvalidParamFormatError{ParamName: "request_id", Err: errors.New("x")}, 418, ""},
		{"GET", "/coupons", &api.InvalidParamFormatError{ParamName: "Idempotency-Key", Err: errors.New("x")}, 418, ""},
		{"POST", "/items/special", &api.InvalidParamFormatError{ParamName: "Idempotency-Key", Err: errors.New("x")}, 418, ""},
		{"POST", "/x", &api.RequiredHeaderError{ParamName: "Idempotency-Key"}, 418, ""},
	}
	for _, tt := range tests {
		passed, events = nil, nil
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest(tt.method, tt.path, nil), tt.err)
		assert.Equal(t, tt.status, w.Code, "%s %s: %v", tt.method, tt.path, tt.err)
		if tt.code != "" {
			assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			assert.Contains(t, w.Body.String(), `"code":"`+tt.code+`"`)
			// oapi-codegen's message (Go types, a parser's wording) is not the
			// client's: it goes to the Observer.
			assert.NotContains(t, w.Body.String(), tt.err.Error())
			var invalid *api.InvalidParamFormatError
			if errors.As(tt.err, &invalid) {
				assert.Contains(t, w.Body.String(), `"detail":"the `+invalid.ParamName+` `, "the detail names the key")
			}
			assert.Nil(t, passed)
			// The refusal is observed as a rejected request of the route's operation.
			if assert.Len(t, events, 1, "%s %s", tt.method, tt.path) {
				assert.Equal(t, idem.EventRejected, events[0].Kind)
				assert.Equal(t, tt.code, events[0].Code)
				assert.Equal(t, tt.err, events[0].Err)
				assert.Equal(t, http.StatusBadRequest, events[0].Status)
				assert.NotEmpty(t, events[0].Operation)
			}
		} else {
			assert.Equal(t, tt.err, passed)
			assert.Empty(t, events, "%s %s: not the engine's answer", tt.method, tt.path)
		}
	}
	// nil next: oapi-codegen's default answer.
	w := httptest.NewRecorder()
	x.ErrorHandler(nil)(w, httptest.NewRequest("POST", "/x", nil), errors.New("boom"))
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, "boom\n", w.Body.String())
}

func TestPolicies(t *testing.T) {
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous})
	var ops []string
	for _, p := range x.Policies() {
		ops = append(ops, p.Spec().Method+" "+p.Spec().Path+" "+p.Operation()+" "+p.Spec().Semantics.String())
	}
	assert.Equal(t, []string{
		"POST /coupons/{couponId}/claims claimCoupon strict",
		"POST /events recordEvent window",
		"POST /items/{itemId} touchItem strict",
		"POST /orders createOrder loose",
		"POST /payments createPayment strict",
		"POST /transfers createTransfer strict",
	}, ops)
	p := x.Policy("claimCoupon")
	require.NotNil(t, p)
	s := p.Spec()
	assert.Equal(t, idem.CarrierHeader, s.Key.Carrier)
	assert.Equal(t, idem.FormatUUID, s.Key.Format)
	assert.Equal(t, []string{"/client_time", "/retry_count", "/trace_id"}, s.Volatile)
	assert.Equal(t, []string{"Location"}, s.Response.Headers)
	assert.Equal(t, "10m0s", s.Window.String())
	assert.Nil(t, x.Policy("listCoupons"))
	assert.Nil(t, x.Policy("ClaimCoupon"), "operationIds, not Go names")
	x.Policies()[0] = nil
	assert.NotNil(t, x.Policies()[0], "Policies returns a copy")
}

// A route without a contract that declares parameters named like other
// operations' keys keeps oapi-codegen's own answers to their errors (400,
// text/plain), wired by hand or with StrictHandler, at the root or under a
// BaseURL; the operations whose key they are still get problems.
func TestErrorHandlerRoutesWithoutContract(t *testing.T) {
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous})
	svc := couponstest.NewService()
	handlers := map[string]struct {
		h    http.Handler
		base string
	}{
		"by hand":   {newServer(t, couponstest.Env{Service: svc}), ""},
		"one line":  {x.StrictHandler(service{svc}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{}), ""},
		"under /v1": {x.StrictHandler(service{svc}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{BaseURL: "/v1"}), "/v1"},
	}
	for name, c := range handlers {
		do := func(method, target, key string) *httptest.ResponseRecorder {
			return send(c.h, method, c.base+target, strings.NewReader(`{"amount":1}`), "Content-Type", "application/json", "Idempotency-Key", key)
		}
		for _, w := range []*httptest.ResponseRecorder{do("GET", "/coupons?request_id=abc", ""), do("GET", "/coupons", "not-a-uuid")} {
			assert.Equal(t, http.StatusBadRequest, w.Code, name)
			assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"), "%s: %s", name, w.Body)
			assert.NotContains(t, w.Body.String(), "IDEMPOTENCY_", name)
		}
		assert.Equal(t, http.StatusOK, do("GET", "/coupons?request_id=7", "5f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c").Code, name)
		w := do("POST", "/payments?request_id=a&request_id=b", "")
		assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"), "%s: %s", name, w.Body)
		assert.Contains(t, w.Body.String(), idem.CodeKeyInvalid, name)
		w = do("POST", "/coupons/C1/claims", "not-a-uuid")
		assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"), "%s: %s", name, w.Body)
		assert.Contains(t, w.Body.String(), idem.CodeKeyInvalid, name)
		assert.Contains(t, w.Body.String(), `"detail":"the Idempotency-Key header must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form"`, name)
	}
}

// The one-line wiring: StrictHandler adds the middleware, the capture and
// the error handlers to what the service passes.
func TestScenariosStrictHandler(t *testing.T) {
	couponstest.Run(t, func(t *testing.T, env couponstest.Env) http.Handler {
		x := api.NewIdempotency(env.Store, env.Options)
		return x.StrictHandler(service{env.Service}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	})
}

type principalKey struct{}

// StrictHandler puts StrictMiddleware after the service's own strict
// middlewares: one that authenticates and puts the caller into the context
// runs first, and Options.Principal sees it.
func TestStrictMiddlewareOrder(t *testing.T) {
	svc := couponstest.NewService()
	auth := func(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			user := r.Header.Get("X-Auth")
			if user == "" {
				w.WriteHeader(http.StatusUnauthorized)
				return nil, nil
			}
			return f(context.WithValue(ctx, principalKey{}, user), w, r, request)
		}
	}
	x := newIdempotency(t, idem.Options{Principal: func(r *http.Request) (string, error) {
		user, _ := r.Context().Value(principalKey{}).(string)
		if user == "" {
			return "", errors.New("no principal")
		}
		return user, nil
	}})
	var seen []string
	h := x.StrictHandler(service{svc}, []api.StrictMiddlewareFunc{auth}, api.StrictHTTPServerOptions{},
		api.StdHTTPServerOptions{ErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, err error) {
			seen = append(seen, err.Error())
			http.Error(w, "custom", http.StatusTeapot)
		}})
	order := func(user string) *httptest.ResponseRecorder {
		return send(h, "POST", "/orders", strings.NewReader(`{"item":"book"}`), "Content-Type", "application/json", "Idempotency-Key", "same", "X-Auth", user)
	}
	assert.Equal(t, http.StatusUnauthorized, order("").Code, "refused before the engine claims the key")
	assert.Equal(t, http.StatusCreated, order("alice").Code)
	assert.Equal(t, "true", order("alice").Header().Get("Idempotent-Replayed"))
	bob := order("bob")
	assert.Equal(t, http.StatusCreated, bob.Code)
	assert.Empty(t, bob.Header().Get("Idempotent-Replayed"), "another principal, another record")
	assert.Equal(t, 2, svc.Count("createOrder"))

	// Key errors oapi-codegen finds are answered as problems, not by the
	// service's own error handler (which keeps every other error).
	w := send(h, "POST", "/payments?request_id=a&request_id=b", strings.NewReader(`{"amount":1}`))
	assert.Equal(t, http.StatusBadRequest, w.Code, "a repeated key")
	assert.Contains(t, w.Body.String(), idem.CodeKeyInvalid)
	w = send(h, "POST", "/coupons/C1/claims", strings.NewReader(`{}`), "Idempotency-Key", "not-a-uuid")
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), idem.CodeKeyInvalid)
	assert.Empty(t, seen)
}

// A uuid-typed key parameter is parsed by oapi-codegen (google/uuid), which
// also accepts the braced, urn:uuid:, 32-digit spellings (and any
// 38-character wrapper): the strict middleware passes the engine the key
// as sent, not the UUID's canonical text, so that the strict server takes
// what format: uuid allows (the canonical text, in either case, bare or as
// an RFC 8941 quoted string), as the plain server does, and refuses the
// other spellings with 400 IDEMPOTENCY_KEY_INVALID instead of normalising
// them to the key.
func TestUUIDKeySpellings(t *testing.T) {
	svc := couponstest.NewService()
	h := newIdempotency(t, idem.Options{Principal: idem.Anonymous}).StrictHandler(service{svc}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	claim := func(key string) *httptest.ResponseRecorder {
		return send(h, "POST", "/coupons/C1/claims", strings.NewReader(`{"user_id":"u"}`), "Content-Type", "application/json", "Idempotency-Key", key)
	}
	const key = "5f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c"
	first := claim(key)
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	for _, spelling := range []string{`"` + key + `"`, strings.ToUpper(key)} {
		w := claim(spelling)
		assert.Equal(t, http.StatusCreated, w.Code, "%s: %s", spelling, w.Body)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), spelling)
		assert.Equal(t, first.Body.String(), w.Body.String(), spelling)
	}
	for _, spelling := range []string{"{" + key + "}", "urn:uuid:" + key, strings.ReplaceAll(key, "-", ""), "x" + key + "x"} {
		w := claim(spelling)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%s: %s", spelling, w.Body)
		assert.Contains(t, w.Body.String(), idem.CodeKeyInvalid, spelling)
		assert.Contains(t, w.Body.String(), "canonical 8-4-4-4-12", spelling)
	}
	assert.Equal(t, 1, svc.Count("claimCoupon"), "one UUID, one key")
	other := claim("6f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c")
	assert.Equal(t, http.StatusCreated, other.Code)
	assert.Empty(t, other.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, 2, svc.Count("claimCoupon"))
}

// gunzip is net/http middleware that decompresses a gzip request body, as
// a compression middleware inside CaptureBody does.
func gunzip(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = zr
			r.Header.Del("Content-Encoding")
			r.ContentLength = -1
		}
		next.ServeHTTP(w, r)
	})
}

func gzipped(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// A body-carried key is taken from the decoded request body, so a
// decompressing middleware inside CaptureBody does not hide it: the
// captured wire bytes are gzip, not JSON.
func TestBodyKeyUnderDecompression(t *testing.T) {
	svc := couponstest.NewService()
	h := newIdempotency(t, idem.Options{Principal: idem.Anonymous}).StrictHandler(service{svc}, nil, api.StrictHTTPServerOptions{},
		api.StdHTTPServerOptions{Middlewares: []api.MiddlewareFunc{gunzip}})
	transfer := func(body string) *httptest.ResponseRecorder {
		return send(h, "POST", "/transfers", bytes.NewReader(gzipped(t, body)), "Content-Type", "application/json", "Content-Encoding", "gzip")
	}
	first := transfer(`{"idempotency_key":"k1","amount":5}`)
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	again := transfer(`{"idempotency_key":"k1","amount":5}`)
	require.Equal(t, http.StatusCreated, again.Code, again.Body.String())
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, first.Body.String(), again.Body.String())
	assert.Equal(t, 1, svc.Count("createTransfer"))

	other := transfer(`{"idempotency_key":"k2","amount":5}`)
	require.Equal(t, http.StatusCreated, other.Code, other.Body.String())
	assert.Empty(t, other.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, 2, svc.Count("createTransfer"))

	// The required member left out, null or "" (oapi-codegen decodes them
	// all to ""; the gzip wire bytes cannot tell them apart) is a missing
	// key.
	for _, body := range []string{`{"amount":5}`, `{"idempotency_key":null,"amount":5}`, `{"idempotency_key":"","amount":5}`} {
		w := transfer(body)
		assert.Equal(t, http.StatusBadRequest, w.Code, body)
		assert.Contains(t, w.Body.String(), idem.CodeKeyMissing, body)
	}
	assert.Equal(t, 2, svc.Count("createTransfer"))
}

// A body member that oapi-codegen decodes as "" is told apart from the
// wire bytes, as the plain middleware does: "" is an invalid key (the
// operation does not run), absent or null a missing one.
func TestEmptyBodyKeyIsInvalid(t *testing.T) {
	svc := couponstest.NewService()
	h := newIdempotency(t, idem.Options{Principal: idem.Anonymous}).StrictHandler(service{svc}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	transfer := func(body string) *httptest.ResponseRecorder {
		return send(h, "POST", "/transfers", strings.NewReader(body), "Content-Type", "application/json")
	}
	for body, want := range map[string]string{
		`{"idempotency_key":"","amount":5}`:   idem.CodeKeyInvalid,
		`{"amount":5}`:                        idem.CodeKeyMissing,
		`{"idempotency_key":null,"amount":5}`: idem.CodeKeyMissing,
	} {
		w := transfer(body)
		assert.Equal(t, http.StatusBadRequest, w.Code, body)
		assert.Contains(t, w.Body.String(), want, body)
		if want == idem.CodeKeyInvalid {
			assert.Contains(t, w.Body.String(), "the idempotency key is empty", body)
		}
	}
	assert.Equal(t, 0, svc.Count("createTransfer"))
}

// silentOrders is a service whose CreateOrder does its work and returns
// no response (nil, nil): the strict handler writes nothing, net/http's
// implicit empty 200.
type silentOrders struct{ service }

func (h silentOrders) CreateOrder(context.Context, api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	h.s.Exec("createOrder")
	return nil, nil
}

// An operation that returns (nil, nil) has answered (the implicit empty
// 200), as a plain handler that writes nothing: it is recorded and
// replayed, never run again on a retry.
func TestNilResponseIsRecorded(t *testing.T) {
	svc := couponstest.NewService()
	h := newIdempotency(t, idem.Options{Principal: idem.Anonymous}).StrictHandler(silentOrders{service{svc}}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	order := func() *httptest.ResponseRecorder {
		return send(h, "POST", "/orders", strings.NewReader(`{"item":"book"}`), "Content-Type", "application/json", "Idempotency-Key", "same")
	}
	first := order()
	assert.Equal(t, http.StatusOK, first.Code)
	assert.Empty(t, first.Body.String())
	again := order()
	assert.Equal(t, http.StatusOK, again.Code)
	assert.Empty(t, again.Body.String())
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, 1, svc.Count("createOrder"), "the retry must not run the operation again")
}

// A query key given more than once is answered as the engine answers it
// (the idempotency key is given more than once), not as a malformed key,
// whichever of oapi-codegen's runtime binders refused it: exploded (the
// default, form style) or not, from decoded values or the raw query. The
// errors are the runtime's own, wrapped as the std-http wrappers wrap them.
func TestRepeatedQueryKeyDetail(t *testing.T) {
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous})
	values := url.Values{"request_id": {"a", "b"}}
	var dest string
	str := runtime.BindQueryParameterOptions{Type: "string"} // as the wrappers bind a string key
	binders := map[string]error{
		"exploded":         runtime.BindQueryParameterWithOptions("form", true, true, "request_id", values, &dest, str),
		"not exploded":     runtime.BindQueryParameterWithOptions("form", false, true, "request_id", values, &dest, str),
		"raw exploded":     runtime.BindRawQueryParameter("form", true, true, "request_id", values.Encode(), &dest),
		"raw not exploded": runtime.BindRawQueryParameter("form", false, true, "request_id", values.Encode(), &dest),
	}
	for name, err := range binders {
		require.Error(t, err, name)
		w := httptest.NewRecorder()
		x.ErrorHandler(nil)(w, httptest.NewRequest("POST", "/payments?"+values.Encode(), nil), &api.InvalidParamFormatError{ParamName: "request_id", Err: err})
		var p struct{ Code, Detail string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "%s: %s", name, w.Body)
		assert.Equal(t, http.StatusBadRequest, w.Code, name)
		assert.Equal(t, idem.CodeKeyInvalid, p.Code, name)
		assert.Equal(t, "the idempotency key is given more than once", p.Detail, "%s: %v", name, err)
	}
	// Another parameter given twice is not about the key: oapi-codegen's answer.
	w := httptest.NewRecorder()
	err := runtime.BindQueryParameterWithOptions("form", true, true, "other", url.Values{"other": {"a", "b"}}, &dest, str)
	x.ErrorHandler(nil)(w, httptest.NewRequest("POST", "/payments?request_id=k", nil), &api.InvalidParamFormatError{ParamName: "other", Err: err})
	assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"), w.Body.String())
}

// A representation header a strict middleware behind StrictMiddleware sets
// on w (here Content-Encoding, as a compressor would) is the operation's
// response: it is recorded and replayed, not taken for one the middleware
// in front of the engine set.
func TestStrictInnerHeaderRecorded(t *testing.T) {
	svc := couponstest.NewService()
	inner := func(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			w.Header().Set("Content-Encoding", "x-inner")
			return f(ctx, w, r, request)
		}
	}
	x := newIdempotency(t, idem.Options{Principal: idem.Anonymous})
	// oapi-codegen wraps in list order: the last is outermost, so inner
	// runs behind StrictMiddleware.
	h := api.HandlerWithOptions(api.NewStrictHandler(service{svc}, []api.StrictMiddlewareFunc{inner, x.StrictMiddleware}),
		api.StdHTTPServerOptions{Middlewares: []api.MiddlewareFunc{x.CaptureBody}})
	order := func() *httptest.ResponseRecorder {
		return send(h, "POST", "/orders", strings.NewReader(`{"item":"book"}`), "Content-Type", "application/json", "Idempotency-Key", "k1")
	}
	first := order()
	require.Equal(t, http.StatusCreated, first.Code)
	require.Equal(t, "x-inner", first.Header().Get("Content-Encoding"))
	dup := order()
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "x-inner", dup.Header().Get("Content-Encoding"), "the replay keeps the inner middleware's Content-Encoding")
	assert.Equal(t, 1, svc.Count("createOrder"))
}
