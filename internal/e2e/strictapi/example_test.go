package strictapi_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/idemgen/idemgen/internal/e2e/couponstest"
	api "github.com/idemgen/idemgen/internal/e2e/strictapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// The wiring of a strict std-http server: StrictHandler replaces
// HandlerWithOptions(NewStrictHandlerWithOptions(...)) and adds the
// generated StrictMiddleware, CaptureBody and ErrorHandler to the
// middlewares and options the service already passes.
func ExampleNewIdempotency() {
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous}) // in-memory store; one caller here (a service with users takes Principal from its authentication)
	defer x.Close()
	svc := couponstest.NewService()
	h := x.StrictHandler(service{svc}, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})

	order := func(key, body string) {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	order("order-1", `{"item":"book"}`)
	order("order-1", `{"item":"book"}`) // a retry: replayed
	order("", `{"item":"book"}`)        // oapi-codegen's own check, answered as problem+json
	fmt.Println("executed:", svc.Count("createOrder"))

	p := x.Policy("createOrder").Spec()
	fmt.Println(p.Semantics, p.Window, p.Key.Carrier, p.Key.Name)
	// Output:
	// 201  {"count":1,"id":"createOrder-1"}
	// 201 true {"count":1,"id":"createOrder-1"}
	// 400  {"type":"https://pkg.go.dev/github.com/idemgen/idemgen/runtime/idem#IDEMPOTENCY_KEY_MISSING","title":"Bad Request","status":400,"detail":"this operation requires an idempotency key","code":"IDEMPOTENCY_KEY_MISSING"}
	// executed: 1
	// loose 24h0m0s header Idempotency-Key
}
