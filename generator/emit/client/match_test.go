package client_test

import (
	"os"
	"path/filepath"
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
	files, err := gentest.Generate(gentest.Case{Spec: clientCase(t, "unicode-path"), Package: "api", Server: gentest.None, Client: true, Emit: []string{client.Name}})
	require.NoError(t, err)
	m := gentest.NewModule(t, "example.com/unicodepath")
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/match_test.go", []byte(`package api

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
		p, ok := idemgenClientMatch(req)
		switch {
		case tc.want == nil && ok:
			t.Errorf("%s matched", req.URL)
		case tc.want != nil && (!ok || !reflect.DeepEqual(p, *tc.want)):
			t.Errorf("%s: got %v, %v; want %v", req.URL, p, ok, *tc.want)
		}
	}
}
`))
	m.Go(t, "test", "./api")
}

// basePathSpec has an operation that is not idempotent, POST /orders, and
// an idempotent one whose template is the same after a leading parameter,
// POST /{tenant}/orders, and another under a static segment, POST
// /shops/{shop}/refunds, next to POST /refunds, not idempotent.
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
`

// TestMatchBasePath: the matcher takes the end of a request's path, since
// the server URL may add a base path. Under the base path /api, the request
// of POST /orders, which is not idempotent, is /api/orders, which POST
// /{tenant}/orders serves too (tenant "api"): it used to be matched to that
// idempotent route, so NewIdempotentDoer retried it, a key the server
// ignored on every attempt, and a 503 or a lost response ran the order up
// to four times. Such a request is now left alone (a call of the typed
// helper carries its own policy and is still retried); a longer route whose
// extra leading segments are not all parameters (POST /shops/{shop}/refunds
// next to POST /refunds) still wins.
func TestMatchBasePath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(basePathSpec), 0o644))
	files, err := gentest.Generate(gentest.Case{Spec: spec, Package: "api", Server: gentest.None, Client: true, Emit: []string{client.Name}})
	require.NoError(t, err)
	m := gentest.NewModule(t, "example.com/basepath")
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/match_test.go", []byte(`package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

type noSleep struct{}

func (noSleep) Now() time.Time                                  { return time.Now() }
func (noSleep) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func TestBasePath(t *testing.T) {
	var (
		mu   sync.Mutex
		sent = map[string]int{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent[r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		base string
		call func(c *ClientWithResponses) (*http.Response, error)
		path string
		want int
	}{
		// Not idempotent, under a base path: once.
		{"/api", func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateOrderWithResponse(context.Background()); return r.HTTPResponse, err }, "/api/orders", 1},
		{"", func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateOrderWithResponse(context.Background()); return r.HTTPResponse, err }, "/orders", 1},
		{"/v1", func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateRefundWithResponse(context.Background()); return r.HTTPResponse, err }, "/v1/refunds", 1},
		// Idempotent: retried (4 attempts) where no route that is not idempotent may be meant.
		{"/v1", func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateShopRefundWithResponse(context.Background(), "s1"); return r.HTTPResponse, err }, "/v1/shops/s1/refunds", 4},
		{"", func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateShopRefundWithResponse(context.Background(), "s1"); return r.HTTPResponse, err }, "/shops/s1/refunds", 4},
		// Ambiguous (tenant acme, or POST /orders under /acme): not retried without the helper...
		{"", func(c *ClientWithResponses) (*http.Response, error) { r, err := c.CreateTenantOrderWithResponse(context.Background(), "acme"); return r.HTTPResponse, err }, "/acme/orders", 1},
		// ... and retried by it, whose call carries its policy.
		{"/api", func(c *ClientWithResponses) (*http.Response, error) {
			r, _, err := (&IdempotentClient{c}).CreateTenantOrder(context.Background(), "acme")
			return r.HTTPResponse, err
		}, "/api/acme/orders", 4},
	} {
		c, err := NewClientWithResponses(srv.URL+tc.base, WithHTTPClient(NewIdempotentDoer(nil, idemclient.WithClock(noSleep{}))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tc.call(c)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		got := sent[tc.path]
		delete(sent, tc.path)
		mu.Unlock()
		if got != tc.want || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: sent %d times (status %d), want %d", tc.path, got, resp.StatusCode, tc.want)
		}
	}
}
`))
	m.Go(t, "test", "./api")
}
