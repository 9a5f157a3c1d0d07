package idemclient_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

// policy returns a policy that tells which operation it is by its key
// name.
func policy(name string, carrier idemclient.KeyCarrier) *idemclient.Policy {
	return &idemclient.Policy{MaxAttempts: 4, KeyCarrier: carrier, KeyName: name}
}

// matchRequest is a request of a route table case: method, escaped path
// (and query), and an optional body of a content type.
type matchRequest struct {
	method, target string
	contentType    string // with a body when not ""
}

func (r matchRequest) new(t *testing.T) *http.Request {
	t.Helper()
	var req *http.Request
	if r.contentType == "" {
		req = httptest.NewRequest(r.method, "http://h"+r.target, nil)
	} else {
		req = httptest.NewRequest(r.method, "http://h"+r.target, strings.NewReader(`{"name":"x"}`))
		req.Header.Set("Content-Type", r.contentType)
	}
	require.Equal(t, r.target, req.URL.RequestURI(), "the test's target must be escaped as sent")
	return req
}

// describe tells what a matcher made of a request: "-" for no match, the
// policy's key name, and " ambiguous" for an ambiguous match (one attempt).
func describe(t *testing.T, p idemclient.Policy, ok bool) string {
	t.Helper()
	switch {
	case !ok:
		return "-"
	case p.Ambiguous:
		assert.Equal(t, 1, p.MaxAttempts, "an ambiguous request is sent once")
		return p.KeyName + " ambiguous"
	default:
		assert.Equal(t, 4, p.MaxAttempts)
		return p.KeyName
	}
}

// suffixRoutes are routes whose templates end the same: an operation that
// is not idempotent, POST /orders, and idempotent ones that a request of it
// under a base path looks like, and the other way round; a key in the body;
// static segments next to parameters; a parameter with literal text around
// it; non-ASCII static text.
var suffixRoutes = []idemclient.Route{
	{Method: "POST", Path: "/orders"},
	{Method: "POST", Path: "/{tenant}/orders", Policy: policy("tenantOrder", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/{tenant}/v1/orders", Policy: policy("tenantV1Order", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/refunds"},
	{Method: "POST", Path: "/shops/{shop}/refunds", Policy: policy("shopRefund", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/items"},
	{Method: "POST", Path: "/{tenant}/items", Policy: policy("tenantItem", idemclient.CarrierBody)},
	{Method: "POST", Path: "/items/special"},
	{Method: "POST", Path: "/items/{id}", Policy: policy("item", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/payments", Policy: policy("payment", idemclient.CarrierQuery)},
	{Method: "POST", Path: "/{region}/payments"},
	{Method: "POST", Path: "/cafés/{id}", Policy: policy("cafe", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/files/{name}"},
	{Method: "POST", Path: "/files/{name}.json", Policy: policy("jsonFile", idemclient.CarrierHeader)},
	{Method: "GET", Path: "/orders/{id}"},
}

// suffixCases are Match's answers without base paths: the end of the path.
var suffixCases = []struct {
	req  matchRequest
	want string
}{
	{matchRequest{"POST", "/orders", ""}, "-"},
	{matchRequest{"PUT", "/acme/orders", ""}, "-"},
	{matchRequest{"GET", "/orders/1", ""}, "-"},
	// POST /orders under /api, or tenant api's POST /{tenant}/orders.
	{matchRequest{"POST", "/api/orders", ""}, "tenantOrder ambiguous"},
	{matchRequest{"POST", "/acme/orders?x=1", ""}, "tenantOrder ambiguous"},
	// The longest idempotent route gives the policy.
	{matchRequest{"POST", "/api/v1/orders", ""}, "tenantV1Order ambiguous"},
	{matchRequest{"POST", "/shops/s1/refunds", ""}, "shopRefund ambiguous"},
	{matchRequest{"POST", "/v1/shops/s1/refunds", ""}, "shopRefund ambiguous"},
	{matchRequest{"POST", "/refunds", ""}, "-"},
	// Idempotent, and no other route ends so.
	{matchRequest{"POST", "/payments", ""}, "payment"},
	// The other way round: POST /payments under /eu, or the region eu.
	{matchRequest{"POST", "/eu/payments", ""}, "payment ambiguous"},
	// A key in the body: an ambiguous request without a JSON body is the
	// other operation's.
	{matchRequest{"POST", "/acme/items", "application/json"}, "tenantItem ambiguous"},
	{matchRequest{"POST", "/acme/items", "application/merge-patch+json; charset=utf-8"}, "tenantItem ambiguous"},
	{matchRequest{"POST", "/api/items", ""}, "-"},
	{matchRequest{"POST", "/api/items", "text/plain"}, "-"},
	{matchRequest{"POST", "/api/items", "application/json; bad"}, "-"},
	// Static segments before parameters, as a router: one route per length.
	{matchRequest{"POST", "/items/special", ""}, "-"},
	{matchRequest{"POST", "/items/x", ""}, "item"},
	{matchRequest{"POST", "/items/a%2Fb", ""}, "item"}, // an escaped slash stays in its segment
	{matchRequest{"POST", "/items/a/b", ""}, "-"},
	{matchRequest{"POST", "/files/a.json", ""}, "jsonFile"},
	{matchRequest{"POST", "/files/a", ""}, "-"},
	{matchRequest{"POST", "/files/.json", ""}, "-"}, // a parameter is never empty
	// Segments are unescaped before they are compared with the templates.
	{matchRequest{"POST", "/caf%C3%A9s/%C3%A9%20x", ""}, "cafe"},
	{matchRequest{"POST", "/base/caf%C3%A9s/1", ""}, "cafe"},
	{matchRequest{"POST", "/cafes/1", ""}, "-"},
}

func TestRouteTableMatch(t *testing.T) {
	table := idemclient.NewRouteTable(nil, suffixRoutes)
	for _, tc := range suffixCases {
		p, ok := table.Match(tc.req.new(t))
		assert.Equal(t, tc.want, describe(t, p, ok), "%s %s (%s)", tc.req.method, tc.req.target, tc.req.contentType)
	}
}

// TestRouteTableMatchPolicy: a match is the route's policy, whole; an
// ambiguous one with one attempt and Ambiguous set, and nothing else
// changed.
func TestRouteTableMatchPolicy(t *testing.T) {
	table := idemclient.NewRouteTable(nil, suffixRoutes)
	p, ok := table.Match(httptest.NewRequest("POST", "http://h/payments", nil))
	require.True(t, ok)
	assert.Equal(t, *suffixRoutes[9].Policy, p)
	p, ok = table.Match(httptest.NewRequest("POST", "http://h/eu/payments", nil))
	require.True(t, ok)
	want := *suffixRoutes[9].Policy
	want.MaxAttempts, want.Ambiguous = 1, true
	assert.Equal(t, want, p)
}

// TestRouteTableOrder: the table sorts the routes itself, so that the
// order they are given in changes nothing, and the most specific route of
// a length serves a request.
func TestRouteTableOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	routes := slices.Clone(suffixRoutes)
	for range 20 {
		rng.Shuffle(len(routes), func(i, j int) { routes[i], routes[j] = routes[j], routes[i] })
		table := idemclient.NewRouteTable(nil, routes)
		for _, tc := range suffixCases {
			p, ok := table.Match(tc.req.new(t))
			require.Equal(t, tc.want, describe(t, p, ok), "%s %s with the routes in the order %v", tc.req.method, tc.req.target, routes)
		}
	}
	// At the first segment where two templates differ in kind: a static
	// segment, then a parameter with literal text, then a bare parameter.
	for _, order := range [][]string{{"/{a}/{b}", "/x{a}/{b}", "/x/{b}"}, {"/x/{b}", "/x{a}/{b}", "/{a}/{b}"}} {
		var routes []idemclient.Route
		for _, path := range order {
			routes = append(routes, idemclient.Route{Method: "POST", Path: path, Policy: policy(path, idemclient.CarrierHeader)})
		}
		table := idemclient.NewRouteTable(nil, routes)
		for target, want := range map[string]string{"/x/1": "/x/{b}", "/xy/1": "/x{a}/{b}", "/y/1": "/{a}/{b}", "/z/x/1": "/x/{b}"} {
			p, ok := table.Match(httptest.NewRequest("POST", "http://h"+target, nil))
			assert.Equal(t, want, describe(t, p, ok), "%s with the routes %v", target, order)
		}
	}
}

// TestRouteTableCopiesPolicies: a policy changed after NewRouteTable does
// not change the table.
func TestRouteTableCopiesPolicies(t *testing.T) {
	p := policy("orders", idemclient.CarrierHeader)
	table := idemclient.NewRouteTable(nil, []idemclient.Route{{Method: "POST", Path: "/orders", Policy: p}})
	p.KeyName = "changed"
	got, ok := table.Match(httptest.NewRequest("POST", "http://h/orders", nil))
	require.True(t, ok)
	assert.Equal(t, "orders", got.KeyName)
}

// serverRoutes are POST /orders, not idempotent, next to POST
// /{tenant}/orders and POST /{tenant}/v1/orders, idempotent.
var serverRoutes = []idemclient.Route{
	{Method: "POST", Path: "/orders"},
	{Method: "POST", Path: "/{tenant}/orders", Policy: policy("tenantOrder", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/{tenant}/v1/orders", Policy: policy("tenantV1Order", idemclient.CarrierHeader)},
}

// TestRouteTableBases: Match reads a request under the declared base paths
// first: a route that serves the rest of the path whole decides, one that
// is not idempotent too (no key, no retry). A request no route serves
// whole under them falls back to the end of the path; so does one that two
// base paths read differently (ambiguous). Base paths are read as a server
// URL's path is (a slash added, dot segments resolved, escaped); the root,
// and a base path that does not parse, are no base path.
func TestRouteTableBases(t *testing.T) {
	declared := map[string]string{
		"/api/v1/orders":           "-",
		"/api/v1/acme/v1/orders":   "tenantV1Order",
		"/acme/v1/orders":          "tenantV1Order ambiguous", // an undeclared base path
		"/api/v1/x/acme/v1/orders": "tenantV1Order ambiguous", // no route serves the rest whole
		"/orders":                  "-",
		"/acme/orders":             "tenantOrder ambiguous",
	}
	undeclared := map[string]string{
		"/api/v1/orders":           "tenantV1Order ambiguous",
		"/api/v1/acme/v1/orders":   "tenantV1Order ambiguous",
		"/acme/v1/orders":          "tenantV1Order ambiguous",
		"/api/v1/x/acme/v1/orders": "tenantV1Order ambiguous",
		"/orders":                  "-",
		"/acme/orders":             "tenantOrder ambiguous",
	}
	for _, tc := range []struct {
		name  string
		bases []string
		want  map[string]string
	}{
		{"no base paths", nil, undeclared},
		{"a base path", []string{"/api/v1"}, declared},
		{"a trailing slash", []string{"/api/v1/"}, declared},
		{"dot segments", []string{"/api/./x/../v1"}, declared},
		{"repeated, with the root", []string{"/", "/api/v1", "/api/v1/"}, declared},
		{"the root is no base path", []string{"/"}, undeclared},
		{"a path that resolves to the root", []string{"/a/.."}, undeclared},
		{"an empty path", []string{""}, undeclared},
		{"a path that does not parse", []string{"/%zz"}, undeclared},
		{"two base paths that disagree", []string{"/api/v1", "/api"}, map[string]string{
			"/api/v1/orders":         "tenantOrder ambiguous", // POST /orders under /api/v1, tenant v1's under /api
			"/api/v1/acme/v1/orders": "tenantV1Order",
			"/api/acme/orders":       "tenantOrder",
			"/api/orders":            "-",
		}},
	} {
		table := idemclient.NewRouteTable(tc.bases, serverRoutes)
		for target, want := range tc.want {
			p, ok := table.Match(httptest.NewRequest("POST", "http://h"+target, nil))
			assert.Equal(t, want, describe(t, p, ok), "%s: %s", tc.name, target)
		}
	}
	// Escaped and non-ASCII base paths compare with the escaped path.
	for _, base := range []string{"/caf%C3%A9", "/café", "/a%2Fb"} {
		table := idemclient.NewRouteTable([]string{base}, serverRoutes)
		escaped := strings.ReplaceAll(base, "é", "%C3%A9")
		p, ok := table.Match(httptest.NewRequest("POST", "http://h"+escaped+"/orders", nil))
		assert.Equal(t, "-", describe(t, p, ok), "under %s", base)
	}
}

// exactRoutes are an idempotent route whose extra leading segment is
// static, POST /api/orders, next to POST /orders, not idempotent; one whose
// extra leading segment is a parameter, POST /{tenant}/refunds, next to
// POST /refunds; and one with non-ASCII static text, POST /cafés/{id}.
var exactRoutes = []idemclient.Route{
	{Method: "POST", Path: "/orders"},
	{Method: "POST", Path: "/api/orders", Policy: policy("apiOrder", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/refunds"},
	{Method: "POST", Path: "/{tenant}/refunds", Policy: policy("tenantRefund", idemclient.CarrierHeader)},
	{Method: "POST", Path: "/cafés/{id}", Policy: policy("cafe", idemclient.CarrierHeader)},
}

// TestRouteTableMatcher: the matcher of a server URL matches a request by
// its whole path under the URL's base path, which settles what the end of
// the path cannot (POST /orders under /api is not POST /api/orders); a
// request no route serves whole under it (outside the base path, a
// gateway prefix) is read as Match reads it.
func TestRouteTableMatcher(t *testing.T) {
	table := idemclient.NewRouteTable(nil, exactRoutes)
	for _, tc := range []struct {
		server, target, want string
	}{
		{"http://h/api", "/api/orders", "-"},
		{"http://h/api", "/api/api/orders", "apiOrder"},
		{"http://h/api/", "/api/orders", "-"},
		{"http://h/api/", "/api/api/orders", "apiOrder"},
		{"http://h/v1/api", "/v1/api/orders", "-"},
		{"http://h/api", "/api/refunds", "-"},
		{"http://h/api", "/api/acme/refunds", "tenantRefund"},
		{"http://h/api", "/api/a%2Fb/refunds", "tenantRefund"},
		{"http://h/api", "/api/caf%C3%A9s/%C3%A9%20x", "cafe"},
		{"http://h", "/orders", "-"},
		{"http://h", "/api/orders", "apiOrder"},
		{"http://h", "/acme/refunds", "tenantRefund"},
		{"http://h", "/refunds", "-"},
		{"http://h/a%2Fb", "/a%2Fb/api/orders", "apiOrder"},
		{"http://h/a%2Fb", "/a%2Fb/orders", "-"},
		{"http://h/café", "/caf%C3%A9/api/orders", "apiOrder"},
		{"http://h/café", "/caf%C3%A9/orders", "-"},
		{"http://h/caf%C3%A9", "/caf%C3%A9/orders", "-"},
		{"/api", "/api/orders", "-"},
		// Outside the base path, or a prefix of it: the end of the path.
		{"http://h/api", "/other/api/orders", "apiOrder ambiguous"},
		{"http://h/api", "/ap/api/orders", "apiOrder ambiguous"},
		// A gateway prefix a request editor added: no route serves the path
		// whole under the base path.
		{"http://h", "/gw/acme/refunds", "tenantRefund ambiguous"},
	} {
		m, err := table.Matcher(tc.server)
		require.NoError(t, err)
		p, ok := m(httptest.NewRequest("POST", "http://h"+tc.target, nil))
		assert.Equal(t, tc.want, describe(t, p, ok), "%s under %s", tc.target, tc.server)
	}
	for _, bad := range []string{"http://h/%zz", "http://[::1"} {
		_, err := table.Matcher(bad)
		assert.Error(t, err, bad)
	}
}

// TestRouteTableMatcherFallsBackToBases: outside the server URL's base
// path, the table's declared base paths are read first, as Match does.
func TestRouteTableMatcherFallsBackToBases(t *testing.T) {
	table := idemclient.NewRouteTable([]string{"/api/v1"}, serverRoutes)
	m, err := table.Matcher("http://h/other")
	require.NoError(t, err)
	for target, want := range map[string]string{
		"/api/v1/orders":         "-",
		"/api/v1/acme/v1/orders": "tenantV1Order",
		"/other/orders":          "-",
		"/other/acme/orders":     "tenantOrder",
	} {
		p, ok := m(httptest.NewRequest("POST", "http://h"+target, nil))
		assert.Equal(t, want, describe(t, p, ok), target)
	}
}

// ExampleRouteTable matches requests that no typed helper marked to the
// idempotent operations of an API: POST /shops/{shopId}/orders, next to
// POST /orders and POST /shops/{shopId}/orders/export, which are not.
func ExampleRouteTable() {
	createOrder := idemclient.DefaultPolicy()
	routes := idemclient.NewRouteTable(nil, []idemclient.Route{
		{Method: "POST", Path: "/orders"}, // not idempotent
		{Method: "POST", Path: "/shops/{shopId}/orders", Policy: &createOrder},
		{Method: "POST", Path: "/shops/{shopId}/orders/export"}, // not idempotent
	})
	// Knowing the server URL, the path is read under its base path.
	exact, err := routes.Matcher("https://api.example.com/v2")
	if err != nil {
		panic(err)
	}
	for _, target := range []string{"/v2/shops/7/orders", "/v2/orders", "/v2/shops/7/orders/export"} {
		req, _ := http.NewRequest("POST", "https://api.example.com"+target, nil)
		// Without the server URL, the end of the path: /v2/shops/7/orders
		// could be POST /orders under the base path /v2/shops/7, so it is
		// managed (a key) but sent once.
		p, ok := routes.Match(req)
		fmt.Printf("%s: Match %v, %d attempts", target, ok, p.MaxAttempts)
		p, ok = exact(req)
		fmt.Printf("; Matcher %v, %d attempts\n", ok, p.MaxAttempts)
	}
	// A Doer for any client of the API.
	_ = idemclient.NewDoer(http.DefaultClient, idemclient.Policy{}, idemclient.WithMatcher(exact))
	// Output:
	// /v2/shops/7/orders: Match true, 1 attempts; Matcher true, 4 attempts
	// /v2/orders: Match false, 0 attempts; Matcher false, 0 attempts
	// /v2/shops/7/orders/export: Match false, 0 attempts; Matcher false, 0 attempts
}

// NewRouteTable copies the policies' retry statuses: a later change to the
// caller's slice does not reach the table, nor does an append to the
// policy Match returns.
func TestRouteTablePolicyStatusesCopied(t *testing.T) {
	pol := idemclient.Policy{MaxAttempts: 3, On: idemclient.RetryOn{Statuses: make([]int, 1, 4)}}
	pol.On.Statuses[0] = 503
	tab := idemclient.NewRouteTable(nil, []idemclient.Route{{Method: "POST", Path: "/orders", Policy: &pol}})
	pol.On.Statuses[0] = 500
	_ = append(pol.On.Statuses, 418)
	p, ok := tab.Match(httptest.NewRequest("POST", "/orders", nil))
	if !ok || !slices.Equal(p.On.Statuses, []int{503}) {
		t.Fatalf("the table's statuses changed with the caller's: %v", p.On.Statuses)
	}
	_ = append(p.On.Statuses, 418)
	q, _ := tab.Match(httptest.NewRequest("POST", "/orders", nil))
	if cap(q.On.Statuses) != len(q.On.Statuses) || !slices.Equal(q.On.Statuses, []int{503}) {
		t.Errorf("an append to a returned policy can reach the table: %v (cap %d)", q.On.Statuses, cap(q.On.Statuses))
	}
}
