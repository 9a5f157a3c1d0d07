package client_test

import (
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
