package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// TestStrictHandlerError pins what a strict handler's returned error does,
// as docs/server.md ("Handler errors and failures: replay") and the
// generated IDEMPOTENCY.md say: the strict server answers it (its
// ResponseErrorHandlerFunc, the default's 500 text or the user's mapping)
// after the generated wrapper returned, so the answer is not recorded and
// the key is freed, under failures: replay too: the retry runs the
// operation again, and the engine warns once per operation, naming
// failures: replay and the way out (a typed 5xx response, which is stored
// and replayed). Under failures: retry nothing is said.
func TestStrictHandlerError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	files, err := gentest.Generate(gentest.Case{Spec: compileCase(t, "handler-error"), Package: "api", Server: gentest.StrictStdHTTP, Emit: []string{server.Name}})
	require.NoError(t, err)
	m := gentest.NewModule(t, "example.com/handlererror")
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/handlererror_test.go", []byte(handlerErrorTest))
	out := m.Go(t, "test", "-count=1", "./...")
	require.Contains(t, out, "ok  \texample.com/handlererror/api", out)
}

const handlerErrorTest = `package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct {
	typed      bool // Pay answers its typed 500 instead of an error
	pays, charges int
}

var errAnswer = errors.New("payment sent, writing the answer failed")

func (s *service) Pay(context.Context, PayRequestObject) (PayResponseObject, error) {
	s.pays++
	if s.typed {
		n := s.pays
		return Pay500JSONResponse{Run: &n}, nil
	}
	return nil, errAnswer
}

func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) {
	s.charges++
	return nil, errAnswer
}

const warning = "under failures: replay, a handler that returns an error"

func setup(t *testing.T, s *service, strictOptions StrictHTTPServerOptions) (func(path, key string) *httptest.ResponseRecorder, *bytes.Buffer) {
	logs := &bytes.Buffer{}
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { _ = x.Close() })
	h := x.StrictHandler(s, nil, strictOptions, StdHTTPServerOptions{})
	return func(path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, strings.NewReader(` + "`" + `{"amount":1}` + "`" + `))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}, logs
}

func TestReplayHandlerErrorFreesKeyAndWarnsOnce(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, StrictHTTPServerOptions{})
	for i := range 3 {
		w := do("/pay", "k1")
		if w.Code != 500 || !strings.Contains(w.Body.String(), errAnswer.Error()) || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %q %s: want the strict server's 500, not a replay", i, w.Code, w.Header(), w.Body)
		}
	}
	if s.pays != 3 {
		t.Fatalf("pay ran %d times, want 3: the error's answer is not recorded, the key is freed", s.pays)
	}
	do("/pay", "k2")
	if n := strings.Count(logs.String(), warning); n != 1 || !strings.Contains(logs.String(), "operation=pay") || !strings.Contains(logs.String(), "return a typed 5xx response") {
		t.Fatalf("want one warning for pay, got %d:\n%s", n, logs)
	}
}

func TestReplayHandlerErrorMappedIsNotRecorded(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, StrictHTTPServerOptions{ResponseErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, err error) {
		if errors.Is(err, errAnswer) {
			http.Error(w, "conflict", http.StatusConflict)
			return
		}
		http.Error(w, err.Error(), 500)
	}})
	for range 2 {
		if w := do("/pay", "k1"); w.Code != 409 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%d %q %s: want the user's 409, not a replay", w.Code, w.Header(), w.Body)
		}
	}
	if s.pays != 2 || strings.Count(logs.String(), warning) != 1 {
		t.Fatalf("pay ran %d times (want 2); logs:\n%s", s.pays, logs)
	}
}

func TestRetryHandlerErrorFreesKeyWithoutWarning(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, StrictHTTPServerOptions{})
	for range 2 {
		if w := do("/charge", "k1"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%d %q %s", w.Code, w.Header(), w.Body)
		}
	}
	if s.charges != 2 || strings.Contains(logs.String(), warning) {
		t.Fatalf("charge ran %d times (want 2); logs:\n%s", s.charges, logs)
	}
}

// The way out the warning names: a typed 5xx response is stored and
// replayed under failures: replay.
func TestReplayTyped5xxIsReplayed(t *testing.T) {
	s := &service{typed: true}
	do, logs := setup(t, s, StrictHTTPServerOptions{})
	first, again := do("/pay", "k1"), do("/pay", "k1")
	if first.Code != 500 || again.Code != 500 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() || s.pays != 1 {
		t.Fatalf("%d %s / %d %q %s, ran %d", first.Code, first.Body, again.Code, again.Header(), again.Body, s.pays)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("a typed 5xx is no unanswered end:\n%s", logs)
	}
}
`
