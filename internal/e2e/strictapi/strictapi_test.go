package strictapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/strictapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// service implements the strict server over couponstest.Service.
type service struct{ s *couponstest.Service }

var _ api.StrictServerInterface = service{}

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
	x := api.NewIdempotency(nil, idem.Options{})
	defer x.Close()
	h := api.Handler(api.NewStrictHandler(service{svc}, []api.StrictMiddlewareFunc{x.StrictMiddleware}))
	r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"item":"book"}`))
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), idem.CodeRequestUnreadable)
	assert.Zero(t, svc.Count("createOrder"), "nothing ran unprotected")
}

func TestErrorHandler(t *testing.T) {
	x := api.NewIdempotency(nil, idem.Options{})
	defer x.Close()
	var passed error
	h := x.ErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) { passed = err; w.WriteHeader(418) })
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{&api.InvalidParamFormatError{ParamName: "Idempotency-Key", Err: errors.New("bad uuid")}, 400, idem.CodeKeyInvalid},
		{&api.RequiredHeaderError{ParamName: "Idempotency-Key"}, 400, idem.CodeKeyMissing},
		{&api.RequiredParamError{ParamName: "request_id"}, 400, idem.CodeKeyMissing},
		{&api.TooManyValuesForParamError{ParamName: "idempotency-key", Count: 2}, 400, idem.CodeKeyInvalid},
		{fmt.Errorf("wrapped: %w", &api.InvalidParamFormatError{ParamName: "request_id", Err: errors.New("x")}), 400, idem.CodeKeyInvalid},
		{&api.InvalidParamFormatError{ParamName: "couponId", Err: errors.New("x")}, 418, ""},
		{errors.New("can't decode JSON body"), 418, ""},
	}
	for _, tt := range tests {
		passed = nil
		w := httptest.NewRecorder()
		h(w, httptest.NewRequest("POST", "/x", nil), tt.err)
		assert.Equal(t, tt.status, w.Code, "%v", tt.err)
		if tt.code != "" {
			assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
			assert.Contains(t, w.Body.String(), `"code":"`+tt.code+`"`)
			assert.Nil(t, passed)
		} else {
			assert.Equal(t, tt.err, passed)
		}
	}
	// nil next: oapi-codegen's default answer.
	w := httptest.NewRecorder()
	x.ErrorHandler(nil)(w, httptest.NewRequest("POST", "/x", nil), errors.New("boom"))
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, "boom\n", w.Body.String())
}

func TestPolicies(t *testing.T) {
	x := api.NewIdempotency(nil, idem.Options{})
	defer x.Close()
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
