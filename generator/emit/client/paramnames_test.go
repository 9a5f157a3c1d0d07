package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/client"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// Path parameters named as the variables the client helpers and the server
// wrappers declare themselves (key, opts, p, call, resp; x, f, visit, next,
// in, ok, v) keep their values: a path argument named key used to be
// overwritten by the idempotency key (the request went to the wrong URL),
// and opts, p, call and resp did not compile. The helpers' arguments get
// another name instead (keyArg; then keyArgArg for a parameter named
// keyArg). The test builds the generated server and client together and
// sends each operation twice with one key: both reach the right URL, the
// second is the replay of the first.
func TestPathParamsNamedAsLocals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	files, err := gentest.Generate(gentest.Case{Spec: clientCase(t, "param-names"), Package: "api", Server: gentest.StrictStdHTTP, Client: true, Emit: []string{client.Name, server.Name}})
	require.NoError(t, err)
	m := gentest.NewModule(t, "example.com/paramnames")
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/names_test.go", []byte(`package api

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

type service struct{ runs int }

func (s *service) ByKey(_ context.Context, req ByKeyRequestObject) (ByKeyResponseObject, error) {
	s.runs++
	path := strings.Join([]string{req.Key, req.Opts, req.P, req.Call, req.Resp}, "/")
	return ByKey200JSONResponse{Path: &path, N: req.Body.N}, nil
}

func (s *service) NoParams(_ context.Context, req NoParamsRequestObject) (NoParamsResponseObject, error) {
	s.runs++
	path := strings.Join([]string{req.Key, req.KeyArg, req.X, req.F, req.Visit, req.Next, req.In, req.Ok, req.V}, "/")
	return NoParams200JSONResponse{Path: &path}, nil
}

func TestNames(t *testing.T) {
	s := &service{}
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	srv := httptest.NewServer(x.StrictHandler(s, nil, StrictHTTPServerOptions{}, StdHTTPServerOptions{}))
	defer srv.Close()
	c, err := NewIdempotentClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 7
	check := func(what string, path *string, replayed string, err error, want string, wantReplayed string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if path == nil || *path != want {
			t.Errorf("%s: the server got %v, want %s", what, path, want)
		}
		if replayed != wantReplayed {
			t.Errorf("%s: Idempotent-Replayed %q, want %q", what, replayed, wantReplayed)
		}
	}
	const key = "0190b7a4-3c2e-7d3f-8a1b-2c3d4e5f6a7b"
	for i, want := range []string{"", "true"} {
		r, k, err := c.ByKey(ctx, "k", "o", "p", "c", "r", nil, ByKeyJSONRequestBody{N: &n}, idemclient.WithKey(key))
		if err == nil && k != key {
			t.Errorf("ByKey: key %s, want %s", k, key)
		}
		var path *string
		if r != nil && r.JSON200 != nil {
			path = r.JSON200.Path
		}
		check("ByKey", path, r.HTTPResponse.Header.Get("Idempotent-Replayed"), err, "k/o/p/c/r", want)
		if i == 0 {
			continue
		}
		r, _, err = c.ByKeyWithBody(ctx, "k", "o", "p", "c", "r", nil, "application/json", bytes.NewReader([]byte(`+"`"+`{"n":7}`+"`"+`)), idemclient.WithKey(key))
		check("ByKeyWithBody", r.JSON200.Path, r.HTTPResponse.Header.Get("Idempotent-Replayed"), err, "k/o/p/c/r", "true")
	}
	for _, want := range []string{"", "true"} {
		r, _, err := c.NoParams(ctx, "k", "ka", "x", "f", "vi", "ne", "in", "ok", "v", idemclient.WithKey(key))
		var path *string
		if r != nil && r.JSON200 != nil {
			path = r.JSON200.Path
		}
		check("NoParams", path, r.HTTPResponse.Header.Get("Idempotent-Replayed"), err, "k/ka/x/f/vi/ne/in/ok/v", want)
	}
	if s.runs != 2 {
		t.Errorf("%d executions, want 2 (one per operation)", s.runs)
	}
}
`))
	m.Go(t, "test", "./api")
}
