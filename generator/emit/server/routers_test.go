package server_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// routerTest runs inside each generated package of TestRouters: the
// one-line wiring (StrictHandler or Handler) with the router's options
// type, a replay, a problem for a key oapi-codegen rejects, a key carried
// in the JSON body (replayed, refused with another body, "" invalid), an
// operation that answers nothing (a strict handler's (nil, nil): the
// implicit empty 200, recorded and replayed), and a route left untouched.
// The service implements only the operations it serves (the embedded
// interface is nil).
const routerTest = `package PKG

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = context.Background // used by the strict variants
	_ = echo.New           // used by the echo variants
	_ = gin.New            // used by the gin variants
)

//STRICTSERVICE
type service struct {
	StrictServerInterface
	orders, special, items, claims, transfers, events int
}

func (s *service) ClaimCoupon(context.Context, ClaimCouponRequestObject) (ClaimCouponResponseObject, error) {
	s.claims++
	return ClaimCoupon201JSONResponse{Body: Receipt{Id: "claim", Count: s.claims}}, nil
}

func (s *service) TouchItem(context.Context, TouchItemRequestObject) (TouchItemResponseObject, error) {
	s.items++
	return TouchItem200JSONResponse{Id: "item", Count: s.items}, nil
}

func (s *service) CreateOrder(context.Context, CreateOrderRequestObject) (CreateOrderResponseObject, error) {
	s.orders++
	return CreateOrder201JSONResponse{Id: "order", Count: s.orders}, nil
}

func (s *service) TouchSpecialItem(context.Context, TouchSpecialItemRequestObject) (TouchSpecialItemResponseObject, error) {
	s.special++
	return TouchSpecialItem200JSONResponse{Id: "special", Count: s.special}, nil
}

func (s *service) CreateTransfer(context.Context, CreateTransferRequestObject) (CreateTransferResponseObject, error) {
	s.transfers++
	return CreateTransfer201JSONResponse{Id: "transfer", Count: s.transfers}, nil
}

// RecordEvent returns no response: the strict handler writes nothing, the
// implicit empty 200.
func (s *service) RecordEvent(context.Context, RecordEventRequestObject) (RecordEventResponseObject, error) {
	s.events++
	return nil, nil
}

//END
//STRICT
func handler(x *Idempotency, s *service) http.Handler {
	return x.StrictHandler(s, nil, StrictHTTPServerOptions{}, OPTIONS{})
}
//END
//PLAIN
type service struct {
	ServerInterface
	orders, special, items, claims, transfers, events int
}

func (s *service) ClaimCoupon(w http.ResponseWriter, r *http.Request, _ string, _ ClaimCouponParams) {
	var c Claim
	_ = json.NewDecoder(r.Body).Decode(&c)
	s.claims++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(Receipt{Id: "claim", Count: s.claims})
}

func (s *service) TouchItem(w http.ResponseWriter, r *http.Request, _ string) {
	s.items++
	_ = json.NewEncoder(w).Encode(Receipt{Id: "item", Count: s.items})
}

func (s *service) CreateOrder(w http.ResponseWriter, r *http.Request, _ CreateOrderParams) {
	s.orders++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(Receipt{Id: "order", Count: s.orders})
}

func (s *service) TouchSpecialItem(w http.ResponseWriter, r *http.Request) {
	s.special++
	_ = json.NewEncoder(w).Encode(Receipt{Id: "special", Count: s.special})
}

func (s *service) CreateTransfer(w http.ResponseWriter, r *http.Request) {
	var t Transfer
	_ = json.NewDecoder(r.Body).Decode(&t)
	s.transfers++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(Receipt{Id: "transfer", Count: s.transfers})
}

// RecordEvent writes nothing: the implicit empty 200.
func (s *service) RecordEvent(http.ResponseWriter, *http.Request, RecordEventParams) {
	s.events++
}

func handler(x *Idempotency, s *service) http.Handler {
	return x.Handler(s, OPTIONS{})
}
//END
//ECHOSTRICT
func handler(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	x.RegisterStrictHandlers(e, s, nil)
	return e
}
//END
//ECHOPLAIN
type service struct {
	ServerInterface
	orders, special, items, claims, transfers, events int
}

func (s *service) ClaimCoupon(ctx echo.Context, _ string, _ ClaimCouponParams) error {
	var c Claim
	if err := ctx.Bind(&c); err != nil {
		return err
	}
	s.claims++
	return ctx.JSON(http.StatusCreated, Receipt{Id: "claim", Count: s.claims})
}

func (s *service) TouchItem(ctx echo.Context, _ string) error {
	s.items++
	return ctx.JSON(http.StatusOK, Receipt{Id: "item", Count: s.items})
}

func (s *service) CreateOrder(ctx echo.Context, _ CreateOrderParams) error {
	s.orders++
	return ctx.JSON(http.StatusCreated, Receipt{Id: "order", Count: s.orders})
}

func (s *service) TouchSpecialItem(ctx echo.Context) error {
	s.special++
	return ctx.JSON(http.StatusOK, Receipt{Id: "special", Count: s.special})
}

func (s *service) CreateTransfer(ctx echo.Context) error {
	var t Transfer
	if err := ctx.Bind(&t); err != nil {
		return err
	}
	s.transfers++
	return ctx.JSON(http.StatusCreated, Receipt{Id: "transfer", Count: s.transfers})
}

// RecordEvent writes nothing: the implicit empty 200.
func (s *service) RecordEvent(echo.Context, RecordEventParams) error {
	s.events++
	return nil
}

func handler(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	x.RegisterHandlers(e, s)
	return e
}
//END
//GINSTRICT
func handler(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	x.RegisterStrictHandlers(r, s, nil, StrictGinServerOptions{}, GinServerOptions{})
	return r
}
//END
//GINPLAIN
type service struct {
	ServerInterface
	orders, special, items, claims, transfers, events int
}

func (s *service) ClaimCoupon(ctx *gin.Context, _ string, _ ClaimCouponParams) {
	var c Claim
	if err := ctx.ShouldBindJSON(&c); err != nil {
		ctx.JSON(http.StatusBadRequest, gin.H{"msg": err.Error()})
		return
	}
	s.claims++
	ctx.JSON(http.StatusCreated, Receipt{Id: "claim", Count: s.claims})
}

func (s *service) TouchItem(ctx *gin.Context, _ string) {
	s.items++
	ctx.JSON(http.StatusOK, Receipt{Id: "item", Count: s.items})
}

func (s *service) CreateOrder(ctx *gin.Context, _ CreateOrderParams) {
	s.orders++
	ctx.JSON(http.StatusCreated, Receipt{Id: "order", Count: s.orders})
}

func (s *service) TouchSpecialItem(ctx *gin.Context) {
	s.special++
	ctx.JSON(http.StatusOK, Receipt{Id: "special", Count: s.special})
}

func (s *service) CreateTransfer(ctx *gin.Context) {
	var t Transfer
	if err := ctx.ShouldBindJSON(&t); err != nil {
		ctx.JSON(http.StatusBadRequest, gin.H{"msg": err.Error()})
		return
	}
	s.transfers++
	ctx.JSON(http.StatusCreated, Receipt{Id: "transfer", Count: s.transfers})
}

// RecordEvent writes nothing: the implicit empty 200.
func (s *service) RecordEvent(*gin.Context, RecordEventParams) {
	s.events++
}

func handler(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	x.RegisterHandlers(r, s, GinServerOptions{})
	return r
}

// TestGroup: routes registered on a group with a BaseURL are matched under
// both; the same path outside them is not protected.
func TestGroup(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	outside := 0
	r.POST("/orders", func(ctx *gin.Context) { outside++; ctx.Status(http.StatusNoContent) })
	x.RegisterHandlers(r.Group("/v1/"), s, GinServerOptions{BaseURL: "/api"})
	do := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(` + "`" + `{"item":"book"}` + "`" + `))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w
	}
	for range 2 {
		if w := do("/v1/api/orders"); w.Code != 201 {
			t.Fatalf("/v1/api/orders: %d %s", w.Code, w.Body)
		}
		if w := do("/orders"); w.Code != 204 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("/orders: %d %q", w.Code, w.Header())
		}
	}
	if s.orders != 1 || outside != 2 {
		t.Fatalf("orders ran %d times, the route outside %d", s.orders, outside)
	}
}
//END

func TestOneLine(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := handler(x, s)
	do := func(method, path, key, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := do("POST", "/orders", "k1", ` + "`" + `{"item":"book"}` + "`" + `)
	again := do("POST", "/orders", "k1", ` + "`" + `{"item":"book"}` + "`" + `)
	if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() || s.orders != 1 {
		t.Fatalf("replay: %d %q / %d %q %q, executed %d", first.Code, first.Body, again.Code, again.Header(), again.Body, s.orders)
	}
	missing := do("POST", "/orders", "", ` + "`" + `{"item":"book"}` + "`" + `)
	if missing.Code != 400 || !strings.Contains(missing.Body.String(), idem.CodeKeyMissing) || missing.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("missing key: %d %s", missing.Code, missing.Body)
	}
	bad := do("POST", "/coupons/C1/claims", "not-a-uuid", ` + "`" + `{"user_id":"u"}` + "`" + `)
	if bad.Code != 400 || !strings.Contains(bad.Body.String(), idem.CodeKeyInvalid) ||
		!strings.Contains(bad.Body.String(), "UUID") || strings.Contains(bad.Body.String(), "unmarshaling") || strings.Contains(bad.Body.String(), "uuid.UUID") {
		// the engine's detail or the error handler's, never oapi-codegen's message
		t.Fatalf("malformed uuid key: %d %s", bad.Code, bad.Body)
	}
	// A strict operation with a uuid-typed key: a retry whose body differs
	// only in volatile members replays, another body is refused.
	const key = "5f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c"
	claim := do("POST", "/coupons/C1/claims", key, ` + "`" + `{"user_id":"u","trace_id":"a"}` + "`" + `)
	retry := do("POST", "/coupons/C1/claims", key, ` + "`" + `{"trace_id":"b", "user_id":"u"}` + "`" + `)
	if claim.Code != 201 || retry.Code != 201 || retry.Header().Get("Idempotent-Replayed") != "true" || claim.Body.String() != retry.Body.String() || s.claims != 1 {
		t.Fatalf("claim replay: %d %s / %d %q %s, executed %d", claim.Code, claim.Body, retry.Code, retry.Header(), retry.Body, s.claims)
	}
	mismatch := do("POST", "/coupons/C1/claims", key, ` + "`" + `{"user_id":"v"}` + "`" + `)
	if mismatch.Code != 422 || !strings.Contains(mismatch.Body.String(), idem.CodeKeyReused) || s.claims != 1 {
		t.Fatalf("another body with the key: %d %s, executed %d", mismatch.Code, mismatch.Body, s.claims)
	}
	// format: uuid is the canonical 8-4-4-4-12 text, in any case (an
	// upper-case key is the same key), in the strict server too, whose
	// parameter binding (uuid.Parse) also takes braced, urn:uuid: and
	// dashless forms: they are refused, never normalised to the key.
	if w := do("POST", "/coupons/C1/claims", strings.ToUpper(key), ` + "`" + `{"user_id":"u","trace_id":"c"}` + "`" + `); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || s.claims != 1 {
		t.Fatalf("the key in upper case: %d %q %s, executed %d", w.Code, w.Header(), w.Body, s.claims)
	}
	for _, k := range []string{"{" + key + "}", "urn:uuid:" + key, strings.ReplaceAll(key, "-", "")} {
		w := do("POST", "/coupons/C1/claims", k, ` + "`" + `{"user_id":"u","trace_id":"c"}` + "`" + `)
		if w.Code != 400 || !strings.Contains(w.Body.String(), idem.CodeKeyInvalid) || !strings.Contains(w.Body.String(), "8-4-4-4-12") || s.claims != 1 {
			t.Fatalf("the key %s: %d %q %s, executed %d", k, w.Code, w.Header(), w.Body, s.claims)
		}
	}
	// A key carried in the body (no key header): a retry replays, a
	// difference in a volatile member only too; another body under the same
	// key is refused; "" is an invalid key, absent or null a missing one,
	// neither runs the operation.
	transfer := do("POST", "/transfers", "", ` + "`" + `{"idempotency_key":"t1","amount":5,"sent_at":"2026-01-02T03:04:01Z"}` + "`" + `)
	for _, body := range []string{` + "`" + `{"idempotency_key":"t1","amount":5,"sent_at":"2026-01-02T03:04:01Z"}` + "`" + `, ` + "`" + `{"amount":5,"idempotency_key":"t1","sent_at":"2026-01-02T03:04:09Z"}` + "`" + `} {
		w := do("POST", "/transfers", "", body)
		if transfer.Code != 201 || w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "true" || transfer.Body.String() != w.Body.String() || s.transfers != 1 {
			t.Fatalf("body key replay %s: %d %s / %d %q %s, executed %d", body, transfer.Code, transfer.Body, w.Code, w.Header(), w.Body, s.transfers)
		}
	}
	if w := do("POST", "/transfers", "", ` + "`" + `{"idempotency_key":"t1","amount":6}` + "`" + `); w.Code != 422 || !strings.Contains(w.Body.String(), idem.CodeKeyReused) ||
		w.Header().Get("Content-Type") != "application/problem+json" || s.transfers != 1 {
		t.Fatalf("another body with the body key: %d %q %s, executed %d", w.Code, w.Header(), w.Body, s.transfers)
	}
	for body, code := range map[string]string{
		` + "`" + `{"idempotency_key":"","amount":5}` + "`" + `:   idem.CodeKeyInvalid,
		` + "`" + `{"idempotency_key":null,"amount":5}` + "`" + `: idem.CodeKeyMissing,
		` + "`" + `{"amount":5}` + "`" + `:                        idem.CodeKeyMissing,
	} {
		if w := do("POST", "/transfers", "", body); w.Code != 400 || !strings.Contains(w.Body.String(), code) ||
			w.Header().Get("Content-Type") != "application/problem+json" || s.transfers != 1 {
			t.Fatalf("body key %s: %d %q %s, executed %d", body, w.Code, w.Header(), w.Body, s.transfers)
		}
	}
	if w := do("POST", "/transfers", "", ` + "`" + `{"idempotency_key":"t2","amount":6}` + "`" + `); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" || s.transfers != 2 {
		t.Fatalf("another body key: %d %q %s, executed %d", w.Code, w.Header(), w.Body, s.transfers)
	}
	// RecordEvent answers nothing (a strict handler's (nil, nil), a plain
	// handler that writes nothing): the implicit empty 200 is recorded and
	// replayed, the operation not run again.
	for i := range 2 {
		w := do("POST", "/events", "e1", ` + "`" + `{"name":"opened"}` + "`" + `)
		if replayed := w.Header().Get("Idempotent-Replayed"); w.Code != 200 || w.Body.Len() != 0 || replayed != map[bool]string{false: "", true: "true"}[i == 1] || s.events != 1 {
			t.Fatalf("no response, attempt %d: %d %q %q, executed %d", i+1, w.Code, w.Header(), w.Body, s.events)
		}
	}
	// GET /coupons has no contract: its parameters named like other
	// operations' keys keep the router's own answers to their errors.
	for _, w := range []*httptest.ResponseRecorder{do("GET", "/coupons?request_id=abc", "", ""), do("GET", "/coupons", "not-a-uuid", "")} {
		if w.Code != 400 || strings.Contains(w.Body.String(), "IDEMPOTENCY_") || w.Header().Get("Content-Type") == "application/problem+json" {
			t.Fatalf("a route without a contract: %d %q %s", w.Code, w.Header(), w.Body)
		}
	}
	// request_id is the key of /payments, not of /orders. Given twice
	// (whether the values agree or not), it is refused as the engine
	// refuses a repeated query key, not as a malformed one.
	for _, q := range []string{"request_id=a&request_id=b", "request_id=a&request_id=a"} {
		w := do("POST", "/payments?"+q, "", ` + "`" + `{"amount":1}` + "`" + `)
		var p struct{ Code, Detail string }
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 || w.Header().Get("Content-Type") != "application/problem+json" ||
			p.Code != idem.CodeKeyInvalid || p.Detail != "the idempotency key is given more than once" {
			t.Fatalf("a repeated query key %s: %d %q %s", q, w.Code, w.Header(), w.Body)
		}
	}
	// /items/special: std-http, chi and gin serve it with the static route, not
	// idempotent; gorilla/mux with the first registered match, the
	// idempotent /items/{itemId} (declared first in the spec).
	for range 2 {
		if w := do("POST", "/items/special", "k1", ""); w.Code != 200 {
			t.Fatalf("/items/special: %d %q", w.Code, w.Header())
		}
	}
	if gorilla := GORILLA; gorilla && (s.items != 1 || s.special != 0) || !gorilla && (s.special != 2 || s.items != 0) {
		t.Fatalf("/items/special: items ran %d times, special %d", s.items, s.special)
	}
}
`

// bodyBoundTest runs inside the strict packages of TestRouters: a body past
// its operation's request.max-bytes (1 MiB) is refused with 413 after at
// most that many bytes were read from the client, not after all of them (a
// security trial's finding: a 200 MiB chunked body was read whole, 585 MiB
// of heap, before the 413), under the one-line wiring at the root and under
// a base path; a route without a contract behind the same CaptureBody is
// not bounded.
const bodyBoundTest = `package PKG

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New // used by the echo variant
	_ = gin.New  // used by the gin variant
)

// upload reads its whole body and answers with how much it read.
func upload(r *http.Request) string {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		return err.Error()
	}
	return "read " + itoa(n)
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

//NETHTTP
func bounded(x *Idempotency, s *service, base string) http.Handler {
	api := x.StrictHandler(s, nil, StrictHTTPServerOptions{}, OPTIONS{BaseURL: base})
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.HandleFunc("POST "+base+"/upload", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, upload(r)) })
	return x.CaptureBodyWithBaseURL(base)(mux) // around the whole router too: it must not bound /upload
}
//END
//ECHO
func bounded(x *Idempotency, s *service, base string) http.Handler {
	e := echo.New()
	if base == "" {
		x.RegisterStrictHandlers(e, s, nil)
	} else { // RegisterStrictHandlers registers at the root: its wiring by hand
		e.Use(x.CaptureBodyWithBaseURL(base))
		e.HTTPErrorHandler = x.ErrorHandlerWithBaseURL(base, e.HTTPErrorHandler)
		RegisterHandlersWithBaseURL(e, NewStrictHandler(s, []StrictMiddlewareFunc{x.StrictMiddleware}), base)
	}
	e.POST(base+"/upload", func(ctx echo.Context) error { return ctx.String(http.StatusOK, upload(ctx.Request())) })
	return e
}
//END
//GIN
func bounded(x *Idempotency, s *service, base string) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	var r gin.IRouter = e
	if base != "" {
		r = e.Group(base)
	}
	x.RegisterStrictHandlers(r, s, nil, StrictGinServerOptions{}, GinServerOptions{})
	r.POST("/upload", func(ctx *gin.Context) { ctx.String(http.StatusOK, upload(ctx.Request)) })
	return e
}
//END

// flood is a JSON body of n bytes, {"user_id":"u","trace_id":"xxx..."},
// counting what was read of it.
type flood struct{ n, read int64 }

func (f *flood) Read(p []byte) (int, error) {
	const head, tail = ` + "`" + `{"user_id":"u","trace_id":"` + "`" + `, ` + "`" + `"}` + "`" + `
	if f.read >= f.n {
		return 0, io.EOF
	}
	i := 0
	for ; i < len(p) && f.read < f.n; i++ {
		switch {
		case f.read < int64(len(head)):
			p[i] = head[f.read]
		case f.read >= f.n-int64(len(tail)):
			p[i] = tail[f.read-(f.n-int64(len(tail)))]
		default:
			p[i] = 'x'
		}
		f.read++
	}
	return i, nil
}

func TestBodyBoundOnTheWire(t *testing.T) {
	for _, base := range []string{"", "/v1"} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
		defer x.Close()
		s := &service{}
		h := bounded(x, s, base)
		const max = 1 << 20
		body := &flood{n: 64 << 20}
		r := httptest.NewRequest("POST", base+"/coupons/C1/claims", body)
		r.ContentLength = -1 // chunked: nothing tells its length up front
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "5f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusRequestEntityTooLarge || w.Header().Get("Content-Type") != "application/problem+json" ||
			!strings.Contains(w.Body.String(), idem.CodeRequestTooLarge) || s.claims != 0 {
			t.Fatalf("base %q: a 64 MiB body: %d %q %s, executed %d", base, w.Code, w.Header(), w.Body, s.claims)
		}
		if body.read > max+64<<10 {
			t.Fatalf("base %q: a 64 MiB body against a 1 MiB contract: %d bytes read from the client before the 413", base, body.read)
		}
		// A body within the bound runs the operation.
		small := &flood{n: max - 1024}
		r = httptest.NewRequest("POST", base+"/coupons/C1/claims", small)
		r.ContentLength = -1
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "5f2b6c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6d")
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated || s.claims != 1 {
			t.Fatalf("base %q: a body within the bound: %d %s, executed %d", base, w.Code, w.Body, s.claims)
		}
		// A route without a contract behind the same CaptureBody: read whole.
		big := &flood{n: 3 << 20}
		r = httptest.NewRequest("POST", base+"/upload", big)
		r.ContentLength = -1
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || w.Body.String() != "read "+itoa(big.n) {
			t.Fatalf("base %q: /upload (no contract): %d %s", base, w.Code, w.Body)
		}
	}
}
`

// ginTxTest runs inside the ginstrict package of TestRouters: PostgreSQL's
// transactional mode under gin's strict server. The wrapper puts the store's
// transaction into ctx.Request's context, which the handler's ctx (the
// *gin.Context) answers only with ContextWithFallback; the handler's row and
// the record then commit together, and a failure rolls both back and frees
// the key.
const ginTxTest = `package ginstrict

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

type txService struct {
	StrictServerInterface
	table string
	ran   int
	sawTx bool
}

func (s *txService) ClaimCoupon(ctx context.Context, req ClaimCouponRequestObject) (ClaimCouponResponseObject, error) {
	s.ran++
	tx, ok := pgstore.Tx(ctx)
	s.sawTx = ok
	if !ok {
		return nil, errors.New("no transaction in the handler's context")
	}
	var id int
	if err := tx.QueryRow(ctx, "INSERT INTO "+s.table+" (user_id) VALUES ($1) RETURNING id", req.Body.UserId).Scan(&id); err != nil {
		return nil, err
	}
	if req.Body.UserId == "fail" {
		return nil, errors.New("failing after the insert")
	}
	return ClaimCoupon201JSONResponse{Body: Receipt{Id: fmt.Sprint("claim-", id), Count: s.ran}}, nil
}

func TestGinTransactional(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	suffix := fmt.Sprint(time.Now().UnixNano())
	claims, records := "gin_tx_claims_"+suffix, "gin_tx_records_"+suffix
	if _, err := pool.Exec(ctx, "CREATE TABLE "+claims+" (id serial PRIMARY KEY, user_id text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	defer pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+claims+", "+records)
	store, err := pgstore.New(pool, pgstore.Options{Table: records})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	x := NewIdempotency(store, idem.Options{Principal: idem.Anonymous, Transactional: true})
	defer x.Close()
	rows := func() (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+claims).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	serve := func(fallback bool) (*txService, func(key, user string) *httptest.ResponseRecorder) {
		s := &txService{table: claims}
		gin.SetMode(gin.ReleaseMode)
		r := gin.New()
		r.ContextWithFallback = fallback
		x.RegisterStrictHandlers(r, s, nil, StrictGinServerOptions{}, GinServerOptions{})
		return s, func(key, user string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/coupons/C1/claims", strings.NewReader(` + "`" + `{"user_id":"` + "`" + `+user+` + "`" + `"}` + "`" + `))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", key)
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			return w
		}
	}

	s, do := serve(true)
	const ok, bad = "0a5f7c1e-8a0d-4a8e-9b3c-2d7e1f0a4b6c", "1b6e8d2f-9b1e-4b9f-8c4d-3e8f2a1b5c7d"
	first, again := do(ok, "u"), do(ok, "u")
	if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() {
		t.Fatalf("replay: %d %s / %d %q %s", first.Code, first.Body, again.Code, again.Header(), again.Body)
	}
	if !s.sawTx || s.ran != 1 || rows() != 1 {
		t.Fatalf("after a claim and its replay: handler ran %d times (saw the transaction: %v), %d rows", s.ran, s.sawTx, rows())
	}
	// A handler that fails after its insert: the row is rolled back with the
	// transaction and the key is freed, so the retry runs again.
	for i := range 2 {
		if w := do(bad, "fail"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("failing claim, attempt %d: %d %q %s", i+1, w.Code, w.Header(), w.Body)
		}
	}
	if s.ran != 3 || rows() != 1 {
		t.Fatalf("after two failed attempts: handler ran %d times in all, %d rows (want 3 and 1)", s.ran, rows())
	}

	// Without ContextWithFallback the *gin.Context the strict handler gets
	// does not answer the request context's values: no transaction.
	s, do = serve(false)
	if w := do("2c7f9e3a-0c2f-4ca0-9d5e-4f9a3b2c6d8e", "v"); w.Code != 500 || s.sawTx || rows() != 1 {
		t.Fatalf("without ContextWithFallback: %d %s, saw the transaction %v, %d rows", w.Code, w.Body, s.sawTx, rows())
	}
}
`

// decompressTest runs inside the echostrict and ginstrict packages of
// TestRouters: a decompressing middleware inside CaptureBody, so the wire
// bytes CaptureBody keeps are gzip, not JSON. The body-carried key is taken
// from the body oapi-codegen decoded (idemgenBodyKey), not from those bytes.
const decompressTest = `package PKG

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New // used by the echo variant
	_ = gin.New  // used by the gin variant
)

//ECHO
// decompressing serves s with gunzip inside CaptureBody: echo runs e.Use's
// middlewares in the order they were added, whenever the routes were.
func decompressing(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	x.RegisterStrictHandlers(e, s, nil)
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ctx echo.Context) error {
			r, err := gunzip(ctx.Request())
			if err != nil {
				return echo.NewHTTPError(http.StatusBadRequest, err.Error())
			}
			ctx.SetRequest(r)
			return next(ctx)
		}
	})
	return e
}
//END
//GIN
// decompressing serves s with gunzip inside CaptureBody: the wiring
// RegisterStrictHandlers does, by hand, since gin's middlewares apply only to
// the routes registered after them.
func decompressing(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(x.CaptureBody, func(ctx *gin.Context) {
		r, err := gunzip(ctx.Request)
		if err != nil {
			ctx.AbortWithStatus(http.StatusBadRequest)
			return
		}
		ctx.Request = r
		ctx.Next()
	})
	RegisterHandlersWithOptions(e, NewStrictHandler(s, []StrictMiddlewareFunc{x.StrictMiddleware}), GinServerOptions{ErrorHandler: x.ErrorHandler(nil)})
	return e
}
//END

// gunzip returns r with its gzip body decompressed.
func gunzip(r *http.Request) (*http.Request, error) {
	if r.Header.Get("Content-Encoding") != "gzip" {
		return r, nil
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(zr)
	r.Header.Del("Content-Encoding")
	r.ContentLength = -1
	return r, nil
}

func TestBodyKeyUnderDecompression(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := decompressing(x, s)
	transfer := func(body string) *httptest.ResponseRecorder {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(body))
		_ = zw.Close()
		r := httptest.NewRequest("POST", "/transfers", &b)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Content-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := transfer(` + "`" + `{"idempotency_key":"k1","amount":5}` + "`" + `)
	again := transfer(` + "`" + `{"idempotency_key":"k1","amount":5}` + "`" + `)
	if first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() || s.transfers != 1 {
		t.Fatalf("replay: %d %s / %d %q %s, executed %d", first.Code, first.Body, again.Code, again.Header(), again.Body, s.transfers)
	}
	if w := transfer(` + "`" + `{"idempotency_key":"k2","amount":5}` + "`" + `); w.Code != 201 || w.Header().Get("Idempotent-Replayed") != "" || s.transfers != 2 {
		t.Fatalf("another key: %d %q %s, executed %d", w.Code, w.Header(), w.Body, s.transfers)
	}
	// "", null and absent all decode to ""; the gzip bytes cannot tell
	// them apart: a missing key.
	for _, body := range []string{` + "`" + `{"idempotency_key":"","amount":5}` + "`" + `, ` + "`" + `{"idempotency_key":null,"amount":5}` + "`" + `, ` + "`" + `{"amount":5}` + "`" + `} {
		if w := transfer(body); w.Code != 400 || !strings.Contains(w.Body.String(), idem.CodeKeyMissing) || s.transfers != 2 {
			t.Fatalf("%s: %d %s, executed %d", body, w.Code, w.Body, s.transfers)
		}
	}
}
`

// validatorTest runs inside the echo and gin packages of TestRouters: a
// stand-in for oapi-codegen's OapiRequestValidator (kin-openapi's
// openapi3filter) in front of the routes, which rejects a request without
// its required key parameter before the wrappers see it, with the errors
// echo-middleware and gin-middleware make of an openapi3filter.RequestError.
// In the documented wiring (docs/server.md, "Request validators") they reach
// ErrorHandler, which answers those about the key with the engine's problem.
const validatorTest = `package PKG

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New // used by the echo variant
	_ = gin.New  // used by the gin variant
	_ = errors.New
)

// requestError is the first line of the openapi3filter.RequestError a
// validator finds in r, "" for none.
func requestError(r *http.Request) string {
	switch {
	case r.URL.Path == "/payments" && !r.URL.Query().Has("request_id"):
		return ` + "`" + `parameter "request_id" in query has an error: value is required but missing` + "`" + `
	case !strings.HasPrefix(r.URL.Path, "/coupons/"):
	case r.Header.Get("Idempotency-Key") == "":
		return ` + "`" + `parameter "Idempotency-Key" in header has an error: value is required but missing` + "`" + `
	case r.Header.Get("Idempotency-Key") == "not-a-uuid":
		return ` + "`" + `parameter "Idempotency-Key" in header has an error: string doesn't match the format "uuid"` + "`" + `
	case r.URL.Path == "/coupons/bad/claims":
		return ` + "`" + `parameter "couponId" in path has an error: value bad: an invalid coupon` + "`" + `
	}
	return ""
}

//ECHO
// validator is echo-middleware's validator, which returns its errors to
// echo (no Options.ErrorHandler): echo's HTTPErrorHandler, which
// RegisterHandlers wrapped with ErrorHandler, gets them.
func validator(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ctx echo.Context) error {
		if msg := requestError(ctx.Request()); msg != "" {
			return &echo.HTTPError{Code: http.StatusBadRequest, Message: msg, Internal: errors.New(msg + "\nSchema: ...")}
		}
		return next(ctx)
	}
}
//END
//ECHOSTRICT
func validated(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	e.Use(validator)
	x.RegisterStrictHandlers(e, s, nil)
	return e
}
//END
//ECHOPLAIN
func validated(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	e.Use(validator)
	x.RegisterHandlers(e, s)
	return e
}
//END
//GIN
// validator is gin-middleware's validator, whose Options.ErrorHandler
// (onError) hands its errors to ErrorHandler and aborts.
func validator(x *Idempotency) gin.HandlerFunc {
	eh := x.ErrorHandler(nil)
	onError := func(ctx *gin.Context, message string, statusCode int) { // ginmiddleware.ErrorHandler
		eh(ctx, errors.New(message), statusCode)
		ctx.Abort()
	}
	return func(ctx *gin.Context) {
		if msg := requestError(ctx.Request); msg != "" {
			onError(ctx, "error in openapi3filter.RequestError: "+msg, http.StatusBadRequest)
		}
		ctx.Next() // as gin-middleware does: the abort stops the chain
	}
}
//END
//GINSTRICT
func validated(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(validator(x))
	x.RegisterStrictHandlers(r, s, nil, StrictGinServerOptions{}, GinServerOptions{})
	return r
}
//END
//GINPLAIN
func validated(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(validator(x))
	x.RegisterHandlers(r, s, GinServerOptions{})
	return r
}
//END

func TestRequestValidator(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := validated(x, s)
	do := func(target, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", target, strings.NewReader(` + "`" + `{"user_id":"u","amount":5}` + "`" + `))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct{ target, key, code string }{
		{"/coupons/C1/claims", "", idem.CodeKeyMissing},
		{"/coupons/C1/claims", "not-a-uuid", idem.CodeKeyInvalid},
		{"/payments", "", idem.CodeKeyMissing},
	} {
		w := do(tc.target, tc.key)
		if w.Code != 400 || w.Header().Get("Content-Type") != "application/problem+json" || !strings.Contains(w.Body.String(), tc.code) {
			t.Errorf("%s %q: %d %q %s", tc.target, tc.key, w.Code, w.Header(), w.Body)
		}
	}
	// An error about another parameter is the validator's own.
	if w := do("/coupons/bad/claims", "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d"); w.Code != 400 || w.Header().Get("Content-Type") == "application/problem+json" || !strings.Contains(w.Body.String(), "couponId") {
		t.Errorf("another parameter: %d %q %s", w.Code, w.Header(), w.Body)
	}
	if s.claims != 0 {
		t.Errorf("claims ran %d times", s.claims)
	}
}
`

// agreeTest runs inside each plain package of TestRouters: a table of
// spellings of request paths (escaped letters, escaped slashes, dot
// segments, doubled and trailing slashes), each sent through the router
// alone and through the router wired with the generated middleware (the
// plain middleware around the router: x.HTTPMiddleware for std-http, chi
// and gorilla, as docs/server.md shows for any router; x.RegisterHandlers
// for echo and gin). The idempotent operation the router runs (none for a
// 404, a redirect or a route without a contract) must be the one the
// middleware claims the request for (its Observer's events; a request the
// router routes but whose parameter oapi-codegen's wrapper refuses with 400,
// running nothing, may be either): a request the
// router does not serve but the matcher claims has its 404 recorded and
// replayed, and the key burned; one the router serves but the matcher does
// not claim runs unprotected.
const agreeTest = `package PKG

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New // used by the echo variant
	_ = gin.New  // used by the gin variant
)

//NETHTTP
func routers(x *Idempotency, s *service) (bare, wrapped http.Handler) {
	return HandlerWithOptions(s, OPTIONS{}), x.HTTPMiddleware(HandlerWithOptions(s, OPTIONS{}))
}
//END
//ECHO
func routers(x *Idempotency, s *service) (bare, wrapped http.Handler) {
	e, w := echo.New(), echo.New()
	RegisterHandlers(e, s)
	x.RegisterHandlers(w, s)
	return e, w
}
//END
//GIN
func routers(x *Idempotency, s *service) (bare, wrapped http.Handler) {
	gin.SetMode(gin.ReleaseMode)
	e, w := gin.New(), gin.New()
	RegisterHandlers(e, s)
	x.RegisterHandlers(w, s, GinServerOptions{})
	return e, w
}
//END

// claims records the operation of the first event of each request.
type claims struct {
	mu sync.Mutex
	op string
}

func (c *claims) Observe(_ context.Context, ev idem.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.op == "" {
		c.op = ev.Operation
	}
}

// ran is the idempotent operation s ran since before ("" for none, or
// for touchSpecialItem, which has no contract).
func ran(before, s service) string {
	switch {
	case s.orders != before.orders:
		return "createOrder"
	case s.items != before.items:
		return "touchItem"
	case s.claims != before.claims:
		return "claimCoupon"
	case s.transfers != before.transfers:
		return "createTransfer"
	case s.events != before.events:
		return "recordEvent"
	}
	return ""
}

func TestMatcherAgreesWithRouter(t *testing.T) {
	obs := &claims{}
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Observer: obs})
	defer x.Close()
	s := &service{}
	bare, wrapped := routers(x, s)
	n := 0
	serve := func(h http.Handler, path string) (code int) {
		n++
		r := httptest.NewRequest("POST", path, strings.NewReader(fmt.Sprintf(` + "`" + `{"user_id":"u","item":"b","amount":5,"name":"e","idempotency_key":"t%d"}` + "`" + `, n)))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", fmt.Sprintf("00000000-0000-4000-8000-%012d", n))
		w := httptest.NewRecorder()
		defer func() {
			if recover() != nil { // an operation the service does not implement
				code = -1
			}
		}()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, path := range []string{
		"/orders", "/ord%65rs", "/%6Frders", "/orders/", "//orders", "/./orders", "/x/../orders", "/orders/.", "/ORDERS", "/orders%2F",
		"/coupons/C1/claims", "/coupons/C%31/claims", "/c%6Fupons/C1/claims", "/coupons/C1/claim%73", "/coupons/a%2Fb/claims",
		"/coupons/a%2fb/claims", "/coupons/./claims", "/coupons/../coupons/C1/claims", "/coupons//claims", "/coupons/%2E/claims",
		"/coupons/%2e%2e/claims", "/coupons/C1/claims/", "/coupons/C1//claims", "/coupons/C1/./claims", "/coupons/a%3Fb/claims",
		"/items/special", "/items/speci%61l", "/items/%73pecial", "/items/x", "/items/a%20b", "/items/caf%C3%A9", "/items/.", "/items/..",
		"/items/%2E", "/items/a%2Fb", "/items/a%252Fb", "/items//", "/items/x/",
		"/transfers", "/tr%61nsfers", "/events", "/ev%65nts", "/events/", "/events%2F",
	} {
		before := *s
		code := serve(bare, path)
		routed := ran(before, *s)
		obs.op = ""
		before = *s
		serve(wrapped, path)
		if routed == "" && code == http.StatusBadRequest {
			continue // routed, and a parameter refused (an empty one): claimed or not, no operation runs
		}
		if obs.op != routed {
			t.Errorf("POST %s: the router runs %q (%d), the middleware claims it for %q", path, routed, code, obs.op)
		}
	}
}
`

// TestRouters generates the coupons spec for oapi-codegen's chi, gorilla,
// echo and gin servers (strict and plain) and runs the one-line wiring of each
// in a temporary module (the routers are fetched through GOPROXY; they
// are not dependencies of idemgen).
func TestRouters(t *testing.T) {
	if testing.Short() {
		t.Skip("fetches the routers and builds a module; run without -short")
	}
	root := gentest.RepoRoot(t)
	// A module path under idemgen's, so nothing stops it from importing idemgen's internal packages later.
	m := gentest.NewModule(t, "github.com/idemgen/idemgen/internal/e2e/routers")
	m.Write(t, "deps.go", []byte("package routers\n\nimport (\n\t_ \"github.com/gin-gonic/gin\"\n\t_ \"github.com/go-chi/chi/v5\"\n\t_ \"github.com/gorilla/mux\"\n\t_ \"github.com/labstack/echo/v4\"\n)\n"))
	gomod := "\nrequire (\n\tgithub.com/gin-gonic/gin v1.12.0\n\tgithub.com/go-chi/chi/v5 v5.2.3\n\tgithub.com/gorilla/mux v1.8.1\n\tgithub.com/labstack/echo/v4 v4.13.4\n)\n"
	m.Append(t, "go.mod", []byte(gomod))
	cases := []struct {
		pkg     string
		server  gentest.Server
		router  string
		options string
		strict  bool
	}{
		{"stdhttpstrict", gentest.StrictStdHTTP, "std-http", "StdHTTPServerOptions", true},
		{"stdhttpplain", gentest.StdHTTP, "std-http", "StdHTTPServerOptions", false},
		{"chistrict", gentest.StrictChi, "chi", "ChiServerOptions", true},
		{"chiplain", gentest.Chi, "chi", "ChiServerOptions", false},
		{"gorillastrict", gentest.StrictGorilla, "gorilla", "GorillaServerOptions", true},
		{"gorillaplain", gentest.Gorilla, "gorilla", "GorillaServerOptions", false},
		{"echostrict", gentest.StrictEcho, "echo", "", true},
		{"echoplain", gentest.Echo, "echo", "", false},
		{"ginstrict", gentest.StrictGin, "gin", "", true},
		{"ginplain", gentest.Gin, "gin", "", false},
	}
	for _, c := range cases {
		params := map[string]string{"server.router": c.router, "server.strict": "false"}
		if c.strict {
			params["server.strict"] = "true"
		}
		files, err := gentest.Generate(gentest.Case{
			Spec: filepath.Join(root, "testdata", "server", "coupons", "openapi.yaml"), Package: c.pkg,
			Output: filepath.Join(m.Dir, c.pkg), Server: c.server, Emit: []string{server.Name}, Params: params,
		})
		require.NoError(t, err, c.pkg)
		for name, data := range files {
			m.Write(t, c.pkg+"/"+name, data)
		}
		src := strings.ReplaceAll(routerTest, "PKG", c.pkg)
		src = strings.ReplaceAll(src, "OPTIONS", c.options)
		src = strings.ReplaceAll(src, "GORILLA", fmt.Sprint(c.router == "gorilla"))
		keep := "PLAIN"
		if c.strict {
			keep = "STRICT"
		}
		if c.router == "echo" || c.router == "gin" {
			keep = strings.ToUpper(c.router) + keep
		}
		sections := []string{keep}
		if c.strict {
			sections = append(sections, "STRICTSERVICE") // the service of both strict variants
		}
		src = variant(src, sections...)
		m.Write(t, c.pkg+"/router_test.go", []byte(src))
		if c.pkg == "ginstrict" {
			m.Write(t, c.pkg+"/tx_test.go", []byte(ginTxTest))
		}
		if c.pkg == "chiplain" {
			m.Write(t, c.pkg+"/mount_test.go", []byte(chiMountTest))
		}
		if c.pkg == "echoplain" {
			m.Write(t, c.pkg+"/base_test.go", []byte(echoBaseTest))
		}
		if !c.strict && c.router != "std-http" {
			src := variant(strings.ReplaceAll(prefixTest, "PKG", c.pkg), strings.ToUpper(c.router))
			m.Write(t, c.pkg+"/prefix_test.go", []byte(src))
		}
		if c.strict && (c.router == "echo" || c.router == "gin") {
			src := variant(strings.ReplaceAll(decompressTest, "PKG", c.pkg), strings.ToUpper(c.router))
			m.Write(t, c.pkg+"/decompress_test.go", []byte(src))
		}
		if c.router == "echo" || c.router == "gin" {
			src := variant(strings.ReplaceAll(validatorTest, "PKG", c.pkg), strings.ToUpper(c.router), keep)
			m.Write(t, c.pkg+"/validator_test.go", []byte(src))
		}
		if c.strict {
			section := "NETHTTP"
			if c.router == "echo" || c.router == "gin" {
				section = strings.ToUpper(c.router)
			}
			src := variant(strings.ReplaceAll(strings.ReplaceAll(strictWiringTest, "PKG", c.pkg), "OPTIONS", c.options), section)
			m.Write(t, c.pkg+"/wiring_test.go", []byte(src))
			src = strings.ReplaceAll(strings.ReplaceAll(bodyBoundTest, "PKG", c.pkg), "OPTIONS", c.options)
			src = variant(src, section)
			m.Write(t, c.pkg+"/bound_test.go", []byte(src))
		}
		if !c.strict {
			section := "NETHTTP"
			if c.router == "echo" || c.router == "gin" {
				section = strings.ToUpper(c.router)
			}
			src := variant(strings.ReplaceAll(strings.ReplaceAll(agreeTest, "PKG", c.pkg), "OPTIONS", c.options), section)
			m.Write(t, c.pkg+"/agree_test.go", []byte(src))
			src = variant(strings.ReplaceAll(strings.ReplaceAll(wiringTest, "PKG", c.pkg), "OPTIONS", c.options), section)
			m.Write(t, c.pkg+"/wiring_test.go", []byte(src))
		}
	}
	// The plain wiring of a spec with an operation whose signature idemgen
	// cannot write: it is protected by path, the others by operation.
	// The ftl packages: oapi-codegen applies options.Middlewares first to
	// last (its compatibility.apply-chi-middleware-first-to-last, for
	// std-http and chi, or apply-gorilla-middleware-first-to-last), and
	// idemgen knows (server.middleware-first-to-last).
	var fallbacks []string
	for _, c := range cases {
		if c.strict {
			continue
		}
		for _, ftl := range []bool{false, true} {
			if ftl && (c.router == "echo" || c.router == "gin") {
				continue
			}
			pkg := strings.TrimSuffix(c.pkg, "plain") + "fallback"
			params := map[string]string{"server.router": c.router, "server.strict": "false"}
			if ftl {
				pkg = strings.TrimSuffix(c.pkg, "plain") + "ftl"
				params[server.FirstToLastOption.String()] = "true"
			}
			fallbacks = append(fallbacks, pkg)
			files, err := gentest.Generate(gentest.Case{
				Spec: filepath.Join(root, "testdata", "server", "untyped-path", "openapi.yaml"), Package: pkg,
				Output: filepath.Join(m.Dir, pkg), Server: c.server, Emit: []string{server.Name},
				Params: params, MiddlewareFirstToLast: ftl,
			})
			require.NoError(t, err, pkg)
			require.Contains(t, string(files[server.DefaultFile]), "func "+px+"ByPath(", pkg)
			for name, data := range files {
				m.Write(t, pkg+"/"+name, data)
			}
			section := "NETHTTP"
			if c.router == "echo" || c.router == "gin" {
				section = strings.ToUpper(c.router)
			}
			src := variant(strings.ReplaceAll(strings.ReplaceAll(fallbackTest, "PKG", pkg), "OPTIONS", c.options), section)
			m.Write(t, pkg+"/fallback_test.go", []byte(src))
			sections := []string{section}
			if c.router != "gin" {
				sections = append(sections, "NOPREFIX")
			}
			src = variant(strings.ReplaceAll(strings.ReplaceAll(fallbackOrderTest, "PKG", pkg), "OPTIONS", c.options), sections...)
			m.Write(t, pkg+"/order_test.go", []byte(src))
		}
	}
	// A fallback operation whose template matches another route's path
	// under a prefix.
	for _, c := range cases {
		if c.strict || c.router == "echo" || c.router == "gin" {
			continue
		}
		pkg := strings.TrimSuffix(c.pkg, "plain") + "prefixfb"
		fallbacks = append(fallbacks, pkg)
		files, err := gentest.Generate(gentest.Case{
			Spec: filepath.Join(root, "testdata", "server", "fallback-prefix", "openapi.yaml"), Package: pkg,
			Output: filepath.Join(m.Dir, pkg), Server: c.server, Emit: []string{server.Name},
			Params: map[string]string{"server.router": c.router, "server.strict": "false"},
		})
		require.NoError(t, err, pkg)
		for name, data := range files {
			m.Write(t, pkg+"/"+name, data)
		}
		src := variant(strings.ReplaceAll(strings.ReplaceAll(prefixFallbackTest, "PKG", pkg), "OPTIONS", c.options), strings.ToUpper(c.router))
		m.Write(t, pkg+"/prefix_test.go", []byte(src))
	}
	out := m.Go(t, "test", "-count=1", "./...")
	for _, c := range cases {
		require.Contains(t, out, "ok  \tgithub.com/idemgen/idemgen/internal/e2e/routers/"+c.pkg, out)
	}
	for _, pkg := range fallbacks {
		require.Contains(t, out, "ok  \tgithub.com/idemgen/idemgen/internal/e2e/routers/"+pkg, out)
	}
}

// px is the prefix of the generated unexported identifiers.
const px = "idemgen"

// fallbackTest runs inside the packages of the untyped-path spec: createOrder,
// whose path parameter's Go type idemgen cannot tell, is protected by path
// (as HTTPMiddleware matches it; echo: a route middleware), createRefund by
// operation, and listOrders (no contract) is untouched.
const fallbackTest = `package PKG

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v4"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/idemgen/idemgen/runtime/idem"
)

var (
	_ = echo.New
	_ = gin.New
)

//NETHTTP
type service struct{ orders, refunds, transfers, lists int }

func (s *service) CreateOrder(w http.ResponseWriter, _ *http.Request, _ string, _ CreateOrderParams) {
	s.orders++
	w.WriteHeader(http.StatusCreated)
}

func (s *service) CreateRefund(w http.ResponseWriter, _ *http.Request, _ string, _ int, _ CreateRefundParams) {
	s.refunds++
	w.WriteHeader(http.StatusCreated)
}

func (s *service) CreateTransfer(w http.ResponseWriter, _ *http.Request, _ openapi_types.UUID, _ CreateTransferParamsKind, _ CreateTransferParams) {
	s.transfers++
	w.WriteHeader(http.StatusCreated)
}

func (s *service) ListOrders(w http.ResponseWriter, _ *http.Request, _ string) {
	s.lists++
	w.WriteHeader(http.StatusOK)
}

func handler(x *Idempotency, s *service) http.Handler { return x.Handler(s, OPTIONS{}) }
//END
//ECHO
type service struct{ orders, refunds, transfers, lists int }

func (s *service) CreateOrder(ctx echo.Context, _ string, _ CreateOrderParams) error {
	s.orders++
	return ctx.NoContent(http.StatusCreated)
}

func (s *service) CreateRefund(ctx echo.Context, _ string, _ int, _ CreateRefundParams) error {
	s.refunds++
	return ctx.NoContent(http.StatusCreated)
}

func (s *service) CreateTransfer(ctx echo.Context, _ openapi_types.UUID, _ CreateTransferParamsKind, _ CreateTransferParams) error {
	s.transfers++
	return ctx.NoContent(http.StatusCreated)
}

func (s *service) ListOrders(ctx echo.Context, _ string) error {
	s.lists++
	return ctx.NoContent(http.StatusOK)
}

func handler(x *Idempotency, s *service) http.Handler {
	e := echo.New()
	x.RegisterHandlers(e, s)
	return e
}
//END
//GIN
type service struct{ orders, refunds, transfers, lists int }

func (s *service) CreateOrder(ctx *gin.Context, _ string, _ CreateOrderParams) {
	s.orders++
	ctx.Status(http.StatusCreated)
}

func (s *service) CreateRefund(ctx *gin.Context, _ string, _ int, _ CreateRefundParams) {
	s.refunds++
	ctx.Status(http.StatusCreated)
}

func (s *service) CreateTransfer(ctx *gin.Context, _ openapi_types.UUID, _ CreateTransferParamsKind, _ CreateTransferParams) {
	s.transfers++
	ctx.Status(http.StatusCreated)
}

func (s *service) ListOrders(ctx *gin.Context, _ string) {
	s.lists++
	ctx.Status(http.StatusOK)
}

func handler(x *Idempotency, s *service) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	x.RegisterHandlers(r, s, GinServerOptions{})
	return r
}
//END

func TestFallback(t *testing.T) {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	s := &service{}
	h := handler(x, s)
	do := func(method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("Idempotency-Key", "k1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for _, tc := range []struct {
		path string
		ran  *int
	}{{"/accounts/a1/orders", &s.orders}, {"/accounts/a1/refunds/7", &s.refunds}, {"/transfers/0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d/wire?note=n", &s.transfers}} {
		first, again := do("POST", tc.path), do("POST", tc.path)
		if *tc.ran != 1 || first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Errorf("%s ran %d times for one key (%d, then %d %q)", tc.path, *tc.ran, first.Code, again.Code, again.Header())
		}
	}
	for range 2 {
		if w := do("GET", "/accounts/a1/orders"); w.Code != 200 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Errorf("GET /accounts/a1/orders: %d %q", w.Code, w.Header())
		}
	}
	if s.lists != 2 {
		t.Errorf("listOrders ran %d times, want 2", s.lists)
	}
}
`

// variant keeps the //NAME ... //END sections of src named in keep,
// without their markers, and drops the others.
func variant(src string, keep ...string) string {
	var b strings.Builder
	skip := false
	for line := range strings.SplitAfterSeq(src, "\n") {
		switch t := strings.TrimSpace(line); {
		case len(t) > 2 && slices.Contains(keep, t[2:]):
			continue
		case t == "//END":
			skip = false
			continue
		case len(t) > 2 && t[:2] == "//" && strings.ToUpper(t) == t && !strings.Contains(t, " "):
			skip = true
			continue
		}
		if !skip {
			b.WriteString(line)
		}
	}
	return b.String()
}

// chiMountTest: a chi router mounted inside another (Mount, Route) or
// behind chi's path middlewares routes on the routing context's RoutePath,
// not on the URL's path; the plain wrapper's matcher reads it too, or the
// operation ran unprotected (found by the review of the security merges:
// createOrder ran twice for one key in each case below).
const chiMountTest = `package chiplain

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestRewrittenRoutePath(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		handler    func(x *Idempotency, s *service) http.Handler
	}{
		{"mount", "/api/orders", func(x *Idempotency, s *service) http.Handler {
			r := chi.NewRouter()
			r.Mount("/api", x.Handler(s, ChiServerOptions{}))
			return r
		}},
		{"route", "/v1/orders", func(x *Idempotency, s *service) http.Handler {
			r := chi.NewRouter()
			r.Route("/v1", func(r chi.Router) { x.Handler(s, ChiServerOptions{BaseRouter: r}) })
			return r
		}},
		{"strip-slashes", "/orders/", func(x *Idempotency, s *service) http.Handler {
			r := chi.NewRouter()
			r.Use(middleware.StripSlashes)
			return x.Handler(s, ChiServerOptions{BaseRouter: r})
		}},
		{"url-format", "/orders.json", func(x *Idempotency, s *service) http.Handler {
			r := chi.NewRouter()
			r.Use(middleware.URLFormat)
			return x.Handler(s, ChiServerOptions{BaseRouter: r})
		}},
		{"mounted-outer-middleware", "/api/orders", func(x *Idempotency, s *service) http.Handler {
			r := chi.NewRouter()
			r.Mount("/api", x.HTTPMiddleware(HandlerWithOptions(s, ChiServerOptions{})))
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
			defer x.Close()
			s := &service{}
			h := tc.handler(x, s)
			var codes []int
			for range 2 {
				r := httptest.NewRequest("POST", tc.path, strings.NewReader("{\"item\":\"book\"}"))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "k1")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				codes = append(codes, w.Code)
			}
			if s.orders != 1 || codes[0] != 201 || codes[1] != 201 {
				t.Fatalf("%s: createOrder ran %d times for one key (statuses %v)", tc.path, s.orders, codes)
			}
		})
	}
}
`

// echoBaseTest: HTTPMiddlewareWithBaseURL takes the base with or without a
// trailing slash, as before the matcher read echo's route (found by the
// review of the security merges: "/v1/" matched nothing, createOrder ran
// twice for one key).
const echoBaseTest = `package echoplain

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestBaseURLTrailingSlash(t *testing.T) {
	for _, base := range []string{"/v1", "/v1/"} {
		x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
		s := &service{}
		e := echo.New()
		e.Use(x.HTTPMiddlewareWithBaseURL(base))
		RegisterHandlersWithBaseURL(e, s, "/v1")
		var codes []int
		for range 2 {
			r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader("{\"item\":\"book\"}"))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", "k1")
			w := httptest.NewRecorder()
			e.ServeHTTP(w, r)
			codes = append(codes, w.Code)
		}
		x.Close()
		if s.orders != 1 || codes[0] != 201 || codes[1] != 201 {
			t.Errorf("HTTPMiddlewareWithBaseURL(%q): createOrder ran %d times for one key (statuses %v)", base, s.orders, codes)
		}
	}
}
`

// prefixTest runs inside the chi, gorilla, echo and gin plain packages of
// TestRouters: the one-line wiring on a router that routes under a prefix
// it does not give the wiring (a gorilla subrouter as BaseRouter, an echo
// group, a chi router mounted or routed under a prefix, a gin group). The
// wiring protects by operation, so a request sent twice with one key runs
// createOrder once and the second answer is a replay; the non-idempotent
// touchSpecialItem (gorilla: listCoupons, since gorilla serves
// /items/special with touchItem) runs each time, untouched. Before the
// wiring protected by operation, the gorilla subrouter ran createOrder
// twice (the matcher saw /v1/orders), and echo's RegisterHandlers took no
// group.
const prefixTest = `package PKG

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
//GORILLA
	"github.com/gorilla/mux"
//END
//CHI
	"github.com/go-chi/chi/v5"
//END
//ECHO
	"github.com/labstack/echo/v4"
//END
//GIN
	"github.com/gin-gonic/gin"
//END
)

//GORILLA
// listing serves listCoupons, which has no contract.
type listing struct {
	*service
	lists int
}

func (l *listing) ListCoupons(w http.ResponseWriter, _ *http.Request, _ ListCouponsParams) {
	l.lists++
	w.WriteHeader(http.StatusNoContent)
}

func prefixed() map[string]func(x *Idempotency, s *service) (h http.Handler, other string, others func() int) {
	return map[string]func(x *Idempotency, s *service) (http.Handler, string, func() int){
		"subrouter": func(x *Idempotency, s *service) (http.Handler, string, func() int) {
			r := mux.NewRouter()
			l := &listing{service: s}
			x.Handler(l, GorillaServerOptions{BaseRouter: r.PathPrefix("/v1").Subrouter()})
			return r, "GET /v1/coupons", func() int { return l.lists }
		},
	}
}
//END
//CHI
func prefixed() map[string]func(x *Idempotency, s *service) (h http.Handler, other string, others func() int) {
	special := func(s *service) func() int { return func() int { return s.special } }
	return map[string]func(x *Idempotency, s *service) (http.Handler, string, func() int){
		"mount": func(x *Idempotency, s *service) (http.Handler, string, func() int) {
			r := chi.NewRouter()
			r.Mount("/v1", x.Handler(s, ChiServerOptions{}))
			return r, "POST /v1/items/special", special(s)
		},
		"route": func(x *Idempotency, s *service) (http.Handler, string, func() int) {
			r := chi.NewRouter()
			r.Route("/v1", func(r chi.Router) { x.Handler(s, ChiServerOptions{BaseRouter: r}) })
			return r, "POST /v1/items/special", special(s)
		},
		"mount-under-base-url": func(x *Idempotency, s *service) (http.Handler, string, func() int) {
			r := chi.NewRouter()
			r.Mount("/v1", x.Handler(s, ChiServerOptions{BaseURL: "/api"}))
			return r, "POST /v1/api/items/special", special(s)
		},
	}
}
//END
//ECHO
func prefixed() map[string]func(x *Idempotency, s *service) (h http.Handler, other string, others func() int) {
	return map[string]func(x *Idempotency, s *service) (http.Handler, string, func() int){
		"group": func(x *Idempotency, s *service) (http.Handler, string, func() int) {
			e := echo.New()
			x.RegisterHandlers(e.Group("/v1"), s)
			return e, "POST /v1/items/special", func() int { return s.special }
		},
	}
}
//END
//GIN
func prefixed() map[string]func(x *Idempotency, s *service) (h http.Handler, other string, others func() int) {
	return map[string]func(x *Idempotency, s *service) (http.Handler, string, func() int){
		"group": func(x *Idempotency, s *service) (http.Handler, string, func() int) {
			gin.SetMode(gin.ReleaseMode)
			r := gin.New()
			x.RegisterHandlers(r.Group("/v1"), s, GinServerOptions{})
			return r, "POST /v1/items/special", func() int { return s.special }
		},
	}
}
//END

func TestPrefixedRouter(t *testing.T) {
	for name, build := range prefixed() {
		t.Run(name, func(t *testing.T) {
			x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
			defer x.Close()
			s := &service{}
			h, other, others := build(x, s)
			do := func(method, path, key string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(method, path, strings.NewReader("{\"item\":\"book\"}"))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", key)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			path := "/v1/orders"
			if name == "mount-under-base-url" {
				path = "/v1/api/orders"
			}
			first, again := do("POST", path, "k1"), do("POST", path, "k1")
			if s.orders != 1 || first.Code != 201 || again.Code != 201 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() {
				t.Fatalf("%s: createOrder ran %d times for one key (%d, then %d %q %s)", path, s.orders, first.Code, again.Code, again.Header(), again.Body)
			}
			method, target, _ := strings.Cut(other, " ")
			for range 2 {
				if w := do(method, target, "00000000-0000-4000-8000-000000000001"); w.Code/100 != 2 || w.Header().Get("Idempotent-Replayed") != "" {
					t.Fatalf("%s: %d %q %s", other, w.Code, w.Header(), w.Body)
				}
			}
			if others() != 2 || s.items != 0 {
				t.Fatalf("%s ran %d times (want 2, untouched), touchItem %d", other, others(), s.items)
			}
		})
	}
}
`
