package client_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/client"
	"github.com/idemgen/idemgen/internal/gentest"
)

// The generated matcher compares a request's path with the templates like
// with like: each segment of the escaped path unescaped, against the
// templates' raw text. oapi-codegen's client sends /cafés as /caf%C3%A9s,
// which used to match no template, so the plain client's requests to
// operations with non-ASCII static text went out once, without a key.
func TestMatchUnescapedPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runClientTest(t, clientCase(t, "unicode-path"), "example.com/unicodepath", `package api

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		req  func() (*http.Request, error)
		want *idemclient.Policy
	}{
		{func() (*http.Request, error) { return NewCreateOrderRequest("http://h/base", "a b é", &CreateOrderParams{}) }, &idemgenClientPolicyCreateOrder},
		{func() (*http.Request, error) { return NewOrderSpecialRequest("http://h", "x%y", &OrderSpecialParams{}) }, &idemgenClientPolicyOrderSpecial},
		{func() (*http.Request, error) { return NewCreatePlainOrderRequest("http://h", "a") }, nil},
	} {
		req, err := tc.req()
		if err != nil {
			t.Fatal(err)
		}
		p, ok := idemgenClientRoutes.Match(req)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s matched", req.URL)
		case tc.want != nil && (!ok || !reflect.DeepEqual(p, *tc.want)):
			t.Errorf("%s: got %v, %v; want %v", req.URL, p, ok, *tc.want)
		}
	}
}
`)
}

// basePathSpec has an operation that is not idempotent, POST /orders, and
// idempotent ones whose templates end the same: POST /{tenant}/orders (a
// leading parameter) and POST /{tenant}/v1/orders (a parameter, then static
// text); an idempotent POST /shops/{shop}/refunds next to POST /refunds,
// not idempotent; and the other way round, an idempotent POST /payments
// next to a longer POST /{region}/payments, not idempotent; an idempotent
// POST /{tenant}/items whose key goes in the JSON body next to POST /items,
// not idempotent, whose optional JSON body allows no other member. KEYPARAM is
// replaced by the declaration of POST /{tenant}/orders's key parameter (a
// required uuid header, as idemgen spec adds it) or by nothing.
const basePathSpec = `openapi: 3.0.3
info: {title: Base path, version: 1.0.0}
paths:
  /orders:
    post:
      operationId: createOrder
      responses:
        '201': {description: created}
  /{tenant}/orders:
    post:
      operationId: createTenantOrder
      x-idempotency: {semantics: strict, key: {format: uuid}}
      parameters:
        - {name: tenant, in: path, required: true, schema: {type: string}}
KEYPARAM
      responses:
        '201': {description: created}
  /{tenant}/v1/orders:
    post:
      operationId: createTenantV1Order
      x-idempotency: {semantics: strict}
      parameters:
        - {name: tenant, in: path, required: true, schema: {type: string}}
      responses:
        '201': {description: created}
  /refunds:
    post:
      operationId: createRefund
      responses:
        '201': {description: created}
  /shops/{shop}/refunds:
    post:
      operationId: createShopRefund
      x-idempotency: {semantics: strict}
      parameters:
        - {name: shop, in: path, required: true, schema: {type: string}}
      responses:
        '201': {description: created}
  /items:
    post:
      operationId: createItem
      requestBody:
        content:
          application/json:
            schema: {type: object, additionalProperties: false, properties: {name: {type: string}}}
      responses:
        '201': {description: created}
  /{tenant}/items:
    post:
      operationId: createTenantItem
      x-idempotency: {semantics: strict, key: {body: /idempotency_key}}
      parameters:
        - {name: tenant, in: path, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {type: object, required: [idempotency_key], properties: {idempotency_key: {type: string}, name: {type: string}}}
      responses:
        '201': {description: created}
  /payments:
    post:
      operationId: createPayment
      x-idempotency: {semantics: strict}
      responses:
        '201': {description: created}
  /{region}/payments:
    post:
      operationId: createRegionPayment
      parameters:
        - {name: region, in: path, required: true, schema: {type: string}}
      responses:
        '201': {description: created}
`

// TestMatchBasePath: the matcher takes the end of a request's path, since
// the server URL may add a base path, so that an idempotent route and one
// that is not idempotent may both serve a request, read under base paths
// of different lengths. Under the base path /api, the request of POST
// /orders, which is not idempotent, is /api/orders, which POST
// /{tenant}/orders serves too (tenant "api"): it used to be retried, and a
// 503 or a lost response ran the order up to four times; POST /orders
// under /api/v1 (/api/v1/orders) is POST /{tenant}/v1/orders too, and was
// still retried. A normal call of POST /{tenant}/orders (/acme/orders, no
// base path) then went out unmanaged: without a key when the spec declares
// no key parameter (the server answers 400), and with the nil UUID
// oapi-codegen sends for an unset uuid parameter when it does, so that
// every such call shared one key and a second order got the first one's
// replay. Such an ambiguous request is now managed (a key of its own: a
// new one, never the nil UUID) but sent once; so is the reverse (POST
// /payments, idempotent, under /eu is POST /{region}/payments), and POST
// /shops/s1/refunds (or POST /refunds under /shops/s1). A call of the typed
// helper carries its own policy and is retried. Run with the key parameter
// declared and without.
func TestMatchBasePath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	for _, declared := range []bool{false, true} {
		name, keyParam, params := "no key parameter", "", ""
		if declared {
			name = "uuid key parameter"
			keyParam = "        - {name: Idempotency-Key, in: header, required: true, schema: {type: string, format: uuid}}"
			params = "&CreateTenantOrderParams{}, "
		}
		t.Run(name, func(t *testing.T) {
			spec := writeSpec(t, strings.Replace(basePathSpec, "KEYPARAM\n", keyParam+"\n", 1))
			runClientTest(t, spec, "example.com/basepath", strings.ReplaceAll(basePathTest, "PARAMS", params))
		})
	}
}

// basePathTest is TestMatchBasePath's test in the generated package; PARAMS
// is the params argument of CreateTenantOrder's methods (with its comma).
const basePathTest = `package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

type noSleep struct{}

func (noSleep) Now() time.Time                                  { return time.Now() }
func (noSleep) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

type call func(c *ClientWithResponses) (*http.Response, error)

var (
	order        call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateOrderWithResponse(context.Background()); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	tenantOrder  call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateTenantOrderWithResponse(context.Background(), "acme", PARAMS); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	refund       call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateRefundWithResponse(context.Background()); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	shopRefund   call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateShopRefundWithResponse(context.Background(), "s1"); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	payment      call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreatePaymentWithResponse(context.Background()); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	regionPay    call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateRegionPaymentWithResponse(context.Background(), "eu"); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	item         call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateItemWithBodyWithResponse(context.Background(), "application/json", nil); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	itemJSON     call = func(c *ClientWithResponses) (*http.Response, error) {
		name := "x"
		r, err := c.CreateItemWithResponse(context.Background(), CreateItemJSONRequestBody{Name: &name})
		if err != nil { return nil, err }; return r.HTTPResponse, nil
	}
	tenantItem   call = func(c *ClientWithResponses) (*http.Response, error) {
		r, err := c.CreateTenantItemWithResponse(context.Background(), "acme", CreateTenantItemJSONRequestBody{})
		if err != nil { return nil, err }; return r.HTTPResponse, nil
	}
	tenantHelper call = func(c *ClientWithResponses) (*http.Response, error) {
		r, _, err := (&IdempotentClient{ClientWithResponses: c}).CreateTenantOrder(context.Background(), "acme", PARAMS)
		if err != nil { return nil, err }; return r.HTTPResponse, nil
	}
)

func TestBasePath(t *testing.T) {
	var (
		mu   sync.Mutex
		keys = map[string][]string{} // by path, the key of each send
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		k := r.Header.Get("Idempotency-Key")
		var body struct {
			Key string ` + "`" + `json:"idempotency_key"` + "`" + `
		}
		raw, _ := io.ReadAll(r.Body)
		if json.Unmarshal(raw, &body) == nil && body.Key != "" {
			k = body.Key
		}
		if r.URL.Path == "/api/items" && len(raw) > 0 && string(raw) != ` + "`" + `{"name":"x"}` + "`" + ` {
			k = "body changed: " + string(raw) // POST /items allows no other member
		}
		keys[r.URL.Path] = append(keys[r.URL.Path], k)
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	const (
		none = iota // no key
		key         // one key, a UUID that is not the nil UUID, on every send
	)
	seen := map[string]string{} // keys sent, and by which case
	for _, tc := range []struct {
		name  string
		base  string
		call  call
		path  string
		sends int
		key   int
	}{
		{"not idempotent, no other route", "", order, "/orders", 1, none},
		{"not idempotent, no other route", "/v1", refund, "/v1/refunds", 1, none},
		{"ambiguous: the region eu, or POST /payments under /eu", "", regionPay, "/eu/payments", 1, key},
		{"ambiguous: POST /orders under /api, or the tenant api", "/api", order, "/api/orders", 1, key},
		{"ambiguous: POST /orders under /api/v1, or the tenant api's v1", "/api/v1", order, "/api/v1/orders", 1, key},
		{"ambiguous: the tenant acme, or POST /orders under /acme", "", tenantOrder, "/acme/orders", 1, key},
		{"ambiguous, twice: a key of its own", "", tenantOrder, "/acme/orders", 1, key},
		{"ambiguous: a shop, or POST /refunds under /shops/s1", "", shopRefund, "/shops/s1/refunds", 1, key},
		{"ambiguous: a shop under /v1", "/v1", shopRefund, "/v1/shops/s1/refunds", 1, key},
		{"ambiguous the other way: POST /payments under /eu, or the region eu", "/eu", payment, "/eu/payments", 1, key},
		{"ambiguous, the key in the body: a JSON body", "", tenantItem, "/acme/items", 1, key},
		{"ambiguous, the key in the body: no body, not the idempotent operation", "/api", item, "/api/items", 1, none},
		{"ambiguous, the key in the body: a JSON body without the member is sent as is", "/api", itemJSON, "/api/items", 1, none},
		{"idempotent, no other route", "", payment, "/payments", 4, key},
		{"the typed helper carries its policy", "/api", tenantHelper, "/api/acme/orders", 4, key},
	} {
		c, err := NewClientWithResponses(srv.URL+tc.base, WithHTTPClient(NewIdempotentDoer(nil, idemclient.WithClock(noSleep{}))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tc.call(c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		got, all := keys[tc.path], len(keys)
		clear(keys)
		mu.Unlock()
		if len(got) != tc.sends || all != 1 || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %s sent %d times (%d paths, status %d), want %d", tc.name, tc.path, len(got), all, resp.StatusCode, tc.sends)
			continue
		}
		for _, k := range got {
			switch u, err := uuid.Parse(k); {
			case tc.key == none && k != "":
				t.Errorf("%s: %s sent with the key %q, want none", tc.name, tc.path, k)
			case tc.key == key && (err != nil || u == uuid.Nil || k != got[0]):
				t.Errorf("%s: %s sent with the keys %q, want one UUID other than the nil UUID", tc.name, tc.path, got)
			}
		}
		if k := got[0]; k != "" {
			if other, ok := seen[k]; ok {
				t.Errorf("%s: %s sent with the key %s of %q", tc.name, tc.path, k, other)
			}
			seen[k] = tc.name
		}
	}

	// NewIdempotentClient's exact matcher, a request editor adding a gateway
	// prefix: no route serves /gw/acme/orders whole under the base path, so
	// it is read as NewIdempotentDoer reads it (ambiguous: sent once, a key
	// of its own), not sent unmanaged with a key every call would share.
	ic, err := NewIdempotentClient(srv.URL, WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.URL.Path = "/gw" + req.URL.Path
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := tenantOrder(ic.ClientWithResponses); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	got := keys["/gw/acme/orders"]
	mu.Unlock()
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("editor-prefixed calls sent with the keys %q, want two different keys, once each", got)
	}
	for _, k := range got {
		if u, err := uuid.Parse(k); err != nil || u == uuid.Nil {
			t.Errorf("editor-prefixed call sent with the key %q, want a UUID other than the nil UUID", k)
		}
	}
}
`

// exactSpec has, for IdempotentMatcher, an idempotent route whose extra
// leading segment is static, POST /api/orders, next to POST /orders, not
// idempotent; one whose extra leading segment is a parameter, POST
// /{tenant}/refunds, next to POST /refunds; and one with non-ASCII static
// text, POST /cafés/{id}. Retries are quick: 3 attempts, 1ms apart.
const exactSpec = `openapi: 3.0.3
info: {title: Exact base path, version: 1.0.0}
x-fast: &fast
  semantics: strict
  retry: {max-attempts: 3, backoff: {initial: 1ms, max: 1ms, multiplier: 1, jitter: none}, on: [503]}
paths:
  /orders:
    post:
      operationId: createOrder
      responses:
        '201': {description: created}
  /api/orders:
    post:
      operationId: createApiOrder
      x-idempotency: *fast
      responses:
        '201': {description: created}
  /refunds:
    post:
      operationId: createRefund
      responses:
        '201': {description: created}
  /{tenant}/refunds:
    post:
      operationId: createTenantRefund
      x-idempotency: *fast
      parameters:
        - {name: tenant, in: path, required: true, schema: {type: string}}
      responses:
        '201': {description: created}
  /cafés/{id}:
    post:
      operationId: createCafe
      x-idempotency: *fast
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses:
        '201': {description: created}
`

// TestMatchExactBasePath: NewIdempotentClient knows the server URL, so its
// Doer matches a request by its whole path under the server's base path
// (IdempotentMatcher). The end of the path was ambiguous: under the base
// path /api, POST /orders (not idempotent) is sent to /api/orders, which
// the matcher on the end of the path took for the idempotent POST
// /api/orders, so a 503 ran the order 3 times. Exact matching sends it
// once, retries the real POST /api/orders (sent to /api/api/orders), and
// also retries POST /{tenant}/refunds, which the end of the path had to
// leave alone (it could be POST /refunds under a base path); with or
// without a trailing slash, with escaped (%2F) and non-ASCII text in the
// base path or the parameters, without a base path, and under WithBaseURL.
// A request outside the base path is not matched; NewIdempotentDoer alone
// still matches on the end of the path, as its documentation says.
func TestMatchExactBasePath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runClientTest(t, writeSpec(t, exactSpec), "example.com/exactbase", `package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

type call func(c *ClientWithResponses) (*http.Response, error)

var (
	order     call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateOrderWithResponse(context.Background()); return r.HTTPResponse, err }
	apiOrder  call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateApiOrderWithResponse(context.Background()); return r.HTTPResponse, err }
	refund    call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateRefundWithResponse(context.Background()); return r.HTTPResponse, err }
	tenant         = func(t string) call {
		return func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateTenantRefundWithResponse(context.Background(), t); return r.HTTPResponse, err }
	}
	cafe = func(id string) call {
		return func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateCafeWithResponse(context.Background(), id); return r.HTTPResponse, err }
	}
)

func TestExactBasePath(t *testing.T) {
	var (
		mu   sync.Mutex
		sent = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent[r.URL.EscapedPath()]++
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	newClient := func(base string) *ClientWithResponses {
		c, err := NewIdempotentClient(srv.URL + base)
		if err != nil {
			t.Fatal(err)
		}
		return c.ClientWithResponses
	}
	withBaseURL := func(string) *ClientWithResponses {
		c, err := NewIdempotentClient("http://unused.invalid/x", WithBaseURL(srv.URL+"/api"))
		if err != nil {
			t.Fatal(err)
		}
		return c.ClientWithResponses
	}
	// A Doer whose exact matcher is for /api, on a client of another base path.
	outside := func(base string) *ClientWithResponses {
		m, err := IdempotentMatcher(srv.URL + "/api")
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewClientWithResponses(srv.URL+base, WithHTTPClient(NewIdempotentDoer(nil, idemclient.WithMatcher(m))))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// NewIdempotentDoer alone: the end of the path.
	suffix := func(base string) *ClientWithResponses {
		c, err := NewClientWithResponses(srv.URL+base, WithHTTPClient(NewIdempotentDoer(nil)))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		client func(base string) *ClientWithResponses
		base   string
		call   call
		path   string
		want   int
	}{
		{"static base, not idempotent", newClient, "/api", order, "/api/orders", 1},
		{"static base, idempotent", newClient, "/api", apiOrder, "/api/api/orders", 3},
		{"trailing slash, not idempotent", newClient, "/api/", order, "/api/orders", 1},
		{"trailing slash, idempotent", newClient, "/api/", apiOrder, "/api/api/orders", 3},
		{"deeper base", newClient, "/v1/api", order, "/v1/api/orders", 1},
		{"parameter route, not idempotent", newClient, "/api", refund, "/api/refunds", 1},
		{"parameter route, idempotent", newClient, "/api", tenant("acme"), "/api/acme/refunds", 3},
		{"no base, not idempotent", newClient, "", order, "/orders", 1},
		{"no base, idempotent", newClient, "", apiOrder, "/api/orders", 3},
		{"no base, parameter route", newClient, "", tenant("acme"), "/acme/refunds", 3},
		{"no base, parameter route, not idempotent", newClient, "", refund, "/refunds", 1},
		{"escaped slash in base", newClient, "/a%2Fb", apiOrder, "/a%2Fb/api/orders", 3},
		{"escaped slash in base, not idempotent", newClient, "/a%2Fb", order, "/a%2Fb/orders", 1},
		{"unicode base", newClient, "/café", apiOrder, "/caf%C3%A9/api/orders", 3},
		{"unicode base, not idempotent", newClient, "/café", order, "/caf%C3%A9/orders", 1},
		{"escaped unicode base", newClient, "/caf%C3%A9", order, "/caf%C3%A9/orders", 1},
		{"escaped slash in a parameter", newClient, "/api", tenant("a/b"), "/api/a%2Fb/refunds", 3},
		{"unicode template and parameter", newClient, "/api", cafe("é x"), "/api/caf%C3%A9s/%C3%A9%20x", 3},
		{"WithBaseURL", withBaseURL, "", order, "/api/orders", 1},
		{"WithBaseURL, idempotent", withBaseURL, "", apiOrder, "/api/api/orders", 3},
		{"outside the base path", outside, "/other", apiOrder, "/other/api/orders", 1},
		{"outside the base path, a prefix of it", outside, "/ap", apiOrder, "/ap/api/orders", 1},
		{"inside the base path", outside, "/api", apiOrder, "/api/api/orders", 3},
		{"suffix matching: ambiguous, sent once", suffix, "/api", order, "/api/orders", 1},
		{"suffix matching: the parameter route is ambiguous, sent once", suffix, "/api", tenant("acme"), "/api/acme/refunds", 1},
	} {
		resp, err := tc.call(tc.client(tc.base))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		got, all := sent[tc.path], len(sent)
		clear(sent)
		mu.Unlock()
		if got != tc.want || all != 1 || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %s sent %d times (%d paths, status %d), want %d", tc.name, tc.path, got, all, resp.StatusCode, tc.want)
		}
	}
	for _, bad := range []string{"http://h/%zz", "http://[::1"} {
		if _, err := IdempotentMatcher(bad); err == nil {
			t.Errorf("IdempotentMatcher(%q): no error", bad)
		}
		if _, err := NewIdempotentClient(bad); err == nil {
			t.Errorf("NewIdempotentClient(%q): no error", bad)
		}
	}
}
`)
}

// serversSpec declares a server whose URL has the base path /api/v1
// (SERVERS is replaced by the servers: block, or by nothing), next to POST
// /orders, not idempotent, and POST /{tenant}/v1/orders, idempotent, whose
// templates end the same.
const serversSpec = `openapi: 3.0.3
info: {title: Servers, version: 1.0.0}
SERVERS
paths:
  /orders:
    post:
      operationId: createOrder
      responses:
        '201': {description: created}
  /{tenant}/v1/orders:
    post:
      operationId: createTenantV1Order
      x-idempotency: {semantics: strict}
      parameters:
        - {name: tenant, in: path, required: true, schema: {type: string}}
      responses:
        '201': {description: created}
`

// TestMatchDeclaredServers: NewIdempotentDoer, without the server URL,
// matched on the end of the path alone, so that under the base path
// /api/v1 the request of POST /orders (/api/v1/orders) was also POST
// /{tenant}/v1/orders (tenant "api"): ambiguous, it got a key, and the
// idempotent POST /{tenant}/v1/orders under /api/v1 was sent once. When the
// spec's servers declare /api/v1, the Doer reads a request under it first,
// as IdempotentMatcher would: POST /orders is sent once without a key,
// POST /{tenant}/v1/orders is retried under one key. A request under a
// base path the spec does not declare, or that no route serves whole
// under the declared one, falls back to the end of the path and its
// ambiguity rule; a root server URL is no base path, and a spec without
// servers behaves as before. The cases of the servers' URLs (relative, a
// variable, the root) are compile's TestBasePaths, those of the matching
// idemclient's TestRouteTableBases; these run them end to end.
func TestMatchDeclaredServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	for _, tc := range []struct {
		name, servers string
		declared      bool // /api/v1 settles the requests under it
	}{
		{"absolute, and a root server URL: no evidence", "servers: [{url: 'https://h/api/v1'}, {url: 'https://h'}]", true},
		{"no servers", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := writeSpec(t, strings.Replace(serversSpec, "SERVERS\n", tc.servers+"\n", 1))
			runClientTest(t, spec, "example.com/servers", strings.ReplaceAll(serversTest, "DECLARED", strconv.FormatBool(tc.declared)))
		})
	}
}

// serversTest is TestMatchDeclaredServers's test in the generated package.
const serversTest = `package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

type noSleep struct{}

func (noSleep) Now() time.Time                                  { return time.Now() }
func (noSleep) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

type call func(c *ClientWithResponses) (*http.Response, error)

var (
	order  call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateOrderWithResponse(context.Background()); if err != nil { return nil, err }; return r.HTTPResponse, nil }
	tenant call = func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateTenantV1OrderWithResponse(context.Background(), "acme"); if err != nil { return nil, err }; return r.HTTPResponse, nil }
)

func TestServers(t *testing.T) {
	const declared = DECLARED
	var (
		mu   sync.Mutex
		keys = map[string][]string{} // by path, the key of each send
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys[r.URL.Path] = append(keys[r.URL.Path], r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	// sends, and whether each carries one key: ambiguous requests are sent
	// once with a key, idempotent ones 4 times under one key.
	type want struct {
		sends int
		key   bool
	}
	ambiguous, retried, plain := want{1, true}, want{4, true}, want{1, false}
	pick := func(settled, fallback want) want {
		if declared {
			return settled
		}
		return fallback
	}
	underAPI := pick(retried, ambiguous)
	orderUnderAPI := pick(plain, ambiguous)
	for _, tc := range []struct {
		name string
		base string
		call call
		path string
		want want
	}{
		{"POST /orders under the declared base path", "/api/v1", order, "/api/v1/orders", orderUnderAPI},
		{"the idempotent operation under the declared base path", "/api/v1", tenant, "/api/v1/acme/v1/orders", underAPI},
		{"under a base path the spec does not declare: ambiguous", "/acme/v1", order, "/acme/v1/orders", ambiguous},
		{"under the declared base path, no route serves the rest whole: ambiguous", "/api/v1/x/acme/v1", order, "/api/v1/x/acme/v1/orders", ambiguous},
		{"no base path", "", order, "/orders", plain},
	} {
		c, err := NewClientWithResponses(srv.URL+tc.base, WithHTTPClient(NewIdempotentDoer(nil, idemclient.WithClock(noSleep{}))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tc.call(c)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		mu.Lock()
		got, all := keys[tc.path], len(keys)
		clear(keys)
		mu.Unlock()
		if len(got) != tc.want.sends || all != 1 || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %s sent %d times (%d paths, status %d), want %d", tc.name, tc.path, len(got), all, resp.StatusCode, tc.want.sends)
			continue
		}
		for _, k := range got {
			switch u, err := uuid.Parse(k); {
			case !tc.want.key && k != "":
				t.Errorf("%s: %s sent with the key %q, want none", tc.name, tc.path, k)
			case tc.want.key && (err != nil || u == uuid.Nil || k != got[0]):
				t.Errorf("%s: %s sent with the keys %q, want one UUID other than the nil UUID", tc.name, tc.path, got)
			}
		}
	}
}
`

// writeSpec writes the spec text to openapi.yaml in a new temporary
// directory and returns its path.
func writeSpec(t *testing.T, text string) string {
	t.Helper()
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(text), 0o644))
	return spec
}

// runClientTest generates the client of spec into package api of a new
// module, adds test (the source of a test file of package api) and runs
// go test on the package.
func runClientTest(t *testing.T, spec, module, test string) {
	t.Helper()
	files, err := gentest.Generate(gentest.Case{Spec: spec, Package: "api", Server: gentest.None, Client: true, Emit: []string{client.Name}})
	require.NoError(t, err)
	m := gentest.NewModule(t, module)
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/generated_test.go", []byte(test))
	m.Go(t, "test", "./api")
}
