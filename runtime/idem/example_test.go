package idem_test

import (
	"context"
	"encoding/json"
	"expvar"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// The net/http integration: compile a policy per operation once, wrap the
// operation's handler with the engine's middleware.
func ExampleEngine_Middleware() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	eng := idem.New(store, idem.Options{
		// Records are per principal: take it from your authentication, and
		// refuse a request without a caller ("" is the anonymous callers'
		// shared key space, which the engine refuses from any Principal
		// but idem.Anonymous).
		Principal: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", &idem.Problem{Status: http.StatusUnauthorized, Code: "UNAUTHENTICATED", Detail: "sign in first"}
		},
	})
	createOrder := idem.MustCompile(idem.Spec{
		Operation: "createOrder", Method: "POST", Path: "/orders",
		Semantics: idem.Strict,
		Key:       idem.KeySpec{Format: idem.FormatUUID},
		Volatile:  []string{"/client_time"},
		Response:  idem.ResponseSpec{Headers: []string{"Location"}},
	})
	orders := 0
	mux := http.NewServeMux()
	mux.Handle("POST /orders", eng.Middleware(createOrder)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders++
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", orders))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, orders)
	})))

	post := func(key, body string) {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("X-User", "alice")
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Location"), w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	const key = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"
	post(key, `{"item":"book"}`) // executes
	post(key, `{"item":"book"}`) // a retry: replayed
	post(key, `{"item":"pen"}`)  // the key reused for another request
	post("not-a-uuid", `{}`)
	// Output:
	// 201 /orders/1  {"id":1}
	// 201 /orders/1 true {"id":1}
	// 422   {"type":"https://pkg.go.dev/github.com/idemgen/idemgen/runtime/idem#IDEMPOTENCY_KEY_REUSED","title":"Unprocessable Entity","status":422,"detail":"this idempotency key was already used for a different request","code":"IDEMPOTENCY_KEY_REUSED"}
	// 400   {"type":"https://pkg.go.dev/github.com/idemgen/idemgen/runtime/idem#IDEMPOTENCY_KEY_INVALID","title":"Bad Request","status":400,"detail":"the Idempotency-Key header must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form","code":"IDEMPOTENCY_KEY_INVALID"}
}

// What oapi-codegen generates for a strict server (abridged to one operation).
type (
	StrictHandlerFunc    func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error)
	StrictMiddlewareFunc func(f StrictHandlerFunc, operationID string) StrictHandlerFunc

	CreateOrderParams        struct{ IdempotencyKey *string }
	CreateOrderJSONBody      struct{ Item string }
	CreateOrderRequestObject struct {
		Params CreateOrderParams
		Body   *CreateOrderJSONBody
	}
	CreateOrderResponseObject interface {
		VisitCreateOrderResponse(http.ResponseWriter) error
	}
	CreateOrder201JSONResponse struct{ ID int }
)

func (resp CreateOrder201JSONResponse) VisitCreateOrderResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	return json.NewEncoder(w).Encode(resp)
}

// createOrderPolicy is what idemgen emits per operation.
var createOrderPolicy = idem.MustCompile(idem.Spec{Operation: "createOrder", Method: "POST", Path: "/orders", Semantics: idem.Strict})

// IdempotencyMiddleware is the shape of the strict middleware idemgen
// generates: Begin with the typed key, Respond to replays and refusals
// (returning nil, nil so the strict handler writes nothing more), run the
// operation, and Complete with the typed response's visitor.
func IdempotencyMiddleware(eng *idem.Engine) StrictMiddlewareFunc {
	return func(f StrictHandlerFunc, operationID string) StrictHandlerFunc {
		if operationID != "createOrder" {
			return f
		}
		return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			in := request.(CreateOrderRequestObject)
			if ctx != r.Context() {
				r = r.WithContext(ctx) // keep what earlier strict middleware put in ctx
			}
			c := eng.Begin(r, createOrderPolicy, idem.KeyFromPtr(in.Params.IdempotencyKey))
			defer c.End() // frees the key on a panic or an error
			if c.Decision() != idem.Execute {
				c.Respond(w)
				return nil, nil
			}
			resp, err := f(c.Context(), w, r, request)
			if err != nil || resp == nil {
				return resp, err // End frees the key; the strict handler reports err
			}
			return nil, c.Complete(w, resp.(CreateOrderResponseObject).VisitCreateOrderResponse)
		}
	}
}

// The strict-server integration. oapi-codegen decodes the body before any
// strict middleware runs, so the router is wrapped with idem.CaptureBody,
// which keeps the raw bytes for the fingerprint.
func Example_strictServer() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	eng := idem.New(store, idem.Options{
		// One caller here; a service with users takes the principal from
		// its authentication (see ExampleEngine_Middleware).
		Principal: idem.Anonymous,
	})

	created := 0
	operation := func(ctx context.Context, req CreateOrderRequestObject) (CreateOrderResponseObject, error) {
		created++
		return CreateOrder201JSONResponse{ID: created}, nil
	}
	// A stand-in for oapi-codegen's generated strict handler for this operation.
	strictHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var request CreateOrderRequestObject
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			request.Params.IdempotencyKey = &k
		}
		var body CreateOrderJSONBody
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		request.Body = &body
		handler := func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
			return operation(ctx, request.(CreateOrderRequestObject))
		}
		handler = IdempotencyMiddleware(eng)(handler, "createOrder")
		response, err := handler(r.Context(), w, r, request)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		} else if v, ok := response.(CreateOrderResponseObject); ok {
			_ = v.VisitCreateOrderResponse(w)
		}
	})
	server := idem.CaptureBody(1 << 20)(strictHandler)

	for _, body := range []string{`{"item":"book"}`, `{"item":"book"}`, `{"item":"pen"}`} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		r.Header.Set("Idempotency-Key", "order-2024-0001")
		w := httptest.NewRecorder()
		server.ServeHTTP(w, r)
		var p struct{ Code string }
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		fmt.Println(strings.TrimSpace(fmt.Sprint(w.Code, " ", w.Header().Get("Idempotent-Replayed"), " ", strings.TrimSpace(w.Body.String())[:8], " ", p.Code)))
	}
	fmt.Println("created:", created)
	// Output:
	// 201  {"ID":1}
	// 201 true {"ID":1}
	// 422  {"type": IDEMPOTENCY_KEY_REUSED
	// created: 1
}

// A router that checks a typed key parameter itself (oapi-codegen's
// wrappers do) refuses a malformed key before the engine runs:
// RefuseWithCause writes the engine's problem, with the policy's
// KeyFormatDetail, and reports it to the Observer with the router's error,
// which the client does not see.
func ExampleEngine_RefuseWithCause() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	eng := idem.New(store, idem.Options{
		Principal: idem.Anonymous, // one caller here: see ExampleEngine_Middleware
		Observer: idem.ObserverFunc(func(_ context.Context, e idem.Event) {
			fmt.Println(e.Kind, e.Operation, e.Status, e.Code, e.Err)
		}),
	})
	createOrder := idem.MustCompile(idem.Spec{Operation: "createOrder", Method: "POST", Path: "/orders",
		Semantics: idem.Strict, Key: idem.KeySpec{Format: idem.FormatUUID}})

	// The router's error handler, for a parameter error about the key of createOrder:
	errorHandler := func(w http.ResponseWriter, r *http.Request, err error) {
		eng.RefuseWithCause(w, r, createOrder, &idem.Problem{Status: http.StatusBadRequest,
			Code: idem.CodeKeyInvalid, Detail: createOrder.KeyFormatDetail()}, err)
	}
	w := httptest.NewRecorder()
	errorHandler(w, httptest.NewRequest("POST", "/orders", nil), fmt.Errorf("invalid UUID length: 3"))
	var p struct{ Detail string }
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Println(p.Detail)
	// Output:
	// rejected createOrder 400 IDEMPOTENCY_KEY_INVALID invalid UUID length: 3
	// 400 application/problem+json
	// the Idempotency-Key header must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form
}

// Metrics from the Observer without a metrics library: a counter per
// operation, event kind and status in an expvar.Map (safe for concurrent
// use, and cheap enough for Observe, which runs on the request's
// goroutine). Publish it with expvar.NewMap("idem_events") instead, and
// /debug/vars serves it; a Prometheus counter vector with the labels
// operation, kind and status maps the same way. Handler runs are executed
// plus fenced plus finish-abandoned: a holder whose completion was fenced
// ran its handler too, as did one whose record the store never took (its
// finish abandoned after a store outage).
func ExampleObserver() {
	events := new(expvar.Map).Init()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	eng := idem.New(store, idem.Options{
		Principal: idem.Anonymous, // one caller here: see ExampleEngine_Middleware
		Observer: idem.ObserverFunc(func(_ context.Context, e idem.Event) {
			events.Add(e.Operation+" "+e.Kind.String()+" "+strconv.Itoa(e.Status), 1)
		}),
	})
	h := eng.Middleware(idem.MustCompile(idem.Spec{Operation: "createOrder", Method: "POST", Path: "/orders", Semantics: idem.Strict}))(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
	for _, key := range []string{"a", "a", "b", ""} {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	events.Do(func(kv expvar.KeyValue) { fmt.Println(kv.Key, kv.Value) })
	// Output:
	// createOrder executed 201 2
	// createOrder rejected 400 1
	// createOrder replayed 201 1
}
