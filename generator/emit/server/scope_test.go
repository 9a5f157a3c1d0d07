package server_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// scope: [] shares an operation's keys among all callers, as the generated
// IDEMPOTENCY.md and the scope-without-principal warning say: the wrapper's
// policy says idem.ScopeShared, so alice and bob sending one key get one
// execution (bob gets alice's response); under the default scope each gets
// their own. The scope used to be dropped: records were always per
// principal.
func TestSharedScopeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	files, err := gentest.Generate(gentest.Case{Spec: compileCase(t, "shared-scope"), Package: "api", Server: gentest.StrictStdHTTP, Emit: []string{server.Name}})
	require.NoError(t, err)
	assert.Contains(t, string(files[server.DefaultFile]), "Scope:              idem.ScopeShared,")
	assert.Contains(t, string(files[server.DefaultFile]), "Scope:              idem.ScopePrincipal,")
	m := gentest.NewModule(t, "example.com/sharedscope")
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/scope_test.go", []byte(`package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct{ runs map[string]int }

func (s *service) Shared(ctx context.Context, _ SharedRequestObject) (SharedResponseObject, error) {
	s.runs["shared"]++
	by := ctx.Value(userKey{}).(string)
	return Shared201JSONResponse{By: &by}, nil
}

func (s *service) Own(ctx context.Context, _ OwnRequestObject) (OwnResponseObject, error) {
	s.runs["own"]++
	by := ctx.Value(userKey{}).(string)
	return Own201JSONResponse{By: &by}, nil
}

type userKey struct{}

func TestScope(t *testing.T) {
	s := &service{runs: map[string]int{}}
	x := NewIdempotency(nil, idem.Options{Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil }})
	defer x.Close()
	h := x.StrictHandler(s, nil, StrictHTTPServerOptions{}, StdHTTPServerOptions{})
	withUser := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, r.Header.Get("X-User"))))
	})
	send := func(path, user string) (by, replayed string) {
		r := httptest.NewRequest("POST", path, strings.NewReader(""))
		r.Header.Set("Idempotency-Key", "0190b7a4-3c2e-7d3f-8a1b-2c3d4e5f6a7b")
		r.Header.Set("X-User", user)
		w := httptest.NewRecorder()
		withUser.ServeHTTP(w, r)
		if w.Code != 201 {
			t.Fatalf("%s by %s: %d %s", path, user, w.Code, w.Body)
		}
		var body struct{ By string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		return body.By, w.Header().Get("Idempotent-Replayed")
	}
	for _, tc := range []struct {
		path, bobGets, replayed string
		runs                    int
	}{
		{"/shared", "alice", "true", 1},
		{"/own", "bob", "", 2},
	} {
		if by, replayed := send(tc.path, "alice"); by != "alice" || replayed != "" {
			t.Errorf("%s, alice: %s, replayed %q", tc.path, by, replayed)
		}
		if by, replayed := send(tc.path, "bob"); by != tc.bobGets || replayed != tc.replayed {
			t.Errorf("%s, bob: %s's response, replayed %q; want %s's, replayed %q", tc.path, by, replayed, tc.bobGets, tc.replayed)
		}
		if n := s.runs[strings.TrimPrefix(tc.path, "/")]; n != tc.runs {
			t.Errorf("%s: %d executions, want %d", tc.path, n, tc.runs)
		}
	}
}

// TestNoPrincipalRefused: NewIdempotency without Options.Principal logs one
// ERROR, at once, naming the operation whose keys are per principal (not
// the shared one); that operation's requests are refused (500
// IDEMPOTENCY_PRINCIPAL_UNAVAILABLE, nothing runs) while the shared one is
// served; with idem.Anonymous it logs nothing.
func TestNoPrincipalRefused(t *testing.T) {
	var logs strings.Builder
	x := NewIdempotency(nil, idem.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer x.Close()
	if got := logs.String(); strings.Count(got, "level=ERROR") != 1 || !strings.Contains(got, "no Options.Principal") || !strings.Contains(got, "operations=") {
		t.Fatalf("logs: %q", got)
	} else if ops := got[strings.Index(got, "operations="):]; !strings.Contains(ops, "own") || strings.Contains(ops, "shared") {
		t.Fatalf("operations named: %q", ops)
	}
	s := &service{runs: map[string]int{}}
	h := x.StrictHandler(s, nil, StrictHTTPServerOptions{}, StdHTTPServerOptions{})
	for _, tc := range []struct {
		path string
		code int
	}{{"/own", 500}, {"/shared", 201}} {
		r := httptest.NewRequest("POST", tc.path, strings.NewReader(""))
		r.Header.Set("Idempotency-Key", "0190b7a4-3c2e-7d3f-8a1b-2c3d4e5f6a7c")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, "alice")))
		if w.Code != tc.code {
			t.Fatalf("%s: %d %s, want %d", tc.path, w.Code, w.Body, tc.code)
		}
		if tc.code == 500 && !strings.Contains(w.Body.String(), idem.CodePrincipalUnavailable) {
			t.Fatalf("%s: %s", tc.path, w.Body)
		}
	}
	if s.runs["own"] != 0 || s.runs["shared"] != 1 {
		t.Fatalf("runs: %v", s.runs)
	}
	if n := strings.Count(logs.String(), "level="); n != 1 {
		t.Fatalf("logged per request: %q", logs.String())
	}
	logs.Reset()
	y := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer y.Close()
	if logs.Len() != 0 {
		t.Fatalf("with idem.Anonymous: %q", logs.String())
	}
}
`))
	m.Go(t, "test", "./api")
}
