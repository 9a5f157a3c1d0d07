package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/internal/gentest"
)

// TestStrictHandlerError pins what a strict handler's returned error does,
// as docs/server.md ("Handler errors and failures: replay") and the
// generated IDEMPOTENCY.md say. Under failures: replay, with
// ResponseErrorHandler around the strict server's error handler (which
// StrictHandler installs) and CaptureBody around the router, the error
// handler's answer (the default's generic 500 problem, the error logged, or the user's mapping) is
// recorded: the operation runs once and a retry gets that answer with
// Idempotent-Replayed: true. Without ResponseErrorHandler, when the error
// handler writes nothing, and for a request CaptureBody does not bound, the
// key is freed, a retry runs the operation again, and the engine warns
// once per operation. Under failures: retry the key is freed and nothing is
// said.
func TestStrictHandlerError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runHandlerErrorModule(t, gentest.StrictStdHTTP, "", "example.com/handlererror", handlerErrorTest)
}

// runHandlerErrorModule generates the handler-error case for srv (router:
// the server.router parameter of a strict gin or echo server, "" for
// std-http), writes it with the test source src into a module at path and
// runs its tests under -race.
func runHandlerErrorModule(t *testing.T, srv gentest.Server, router, path, src string) {
	t.Helper()
	var params map[string]string
	if router != "" {
		params = map[string]string{"server.router": router, "server.strict": "true"}
	}
	runCaseModule(t, srv, params, path, "handlererror_test.go", src, "-race")
}

// runCaseModule generates the handler-error case for srv with params,
// writes it with the test source src (as api/file) into a module at path
// and runs its tests (go test -count=1 flags ./...), which must pass.
func runCaseModule(t *testing.T, srv gentest.Server, params map[string]string, path, file, src string, flags ...string) {
	t.Helper()
	c := gentest.Case{Spec: compileCase(t, "handler-error"), Package: "api", Server: srv, Emit: []string{server.Name}, Params: params}
	files, err := gentest.Generate(c)
	require.NoError(t, err)
	m := gentest.NewModule(t, path)
	for n, d := range files {
		m.Write(t, "api/"+n, d)
	}
	m.Write(t, "api/"+file, []byte(src))
	out := m.Go(t, append(append([]string{"test"}, flags...), "-count=1", "./...")...)
	require.Contains(t, out, "ok  \t"+path+"/api", out)
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
	typed                bool // Pay answers its typed 500 instead of an error
	pays, charges, voids int
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

func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	s.voids++
	return nil, errAnswer
}

const warning = "under failures: replay, a handler that returns an error"

type counter struct{ executed int }

func (c *counter) Observe(_ context.Context, ev idem.Event) {
	if ev.Kind == idem.EventExecuted {
		c.executed++
	}
}

// setup serves s; wire builds the handler from x (nil: x.StrictHandler
// with strictOptions).
func setup(t *testing.T, s *service, strictOptions StrictHTTPServerOptions, wire func(x *Idempotency) http.Handler) (func(path, key string) *httptest.ResponseRecorder, *bytes.Buffer, *counter) {
	logs := &bytes.Buffer{}
	obs := &counter{}
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Observer: obs, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { _ = x.Close() })
	var h http.Handler
	if wire != nil {
		h = wire(x)
	} else {
		h = x.StrictHandler(s, nil, strictOptions, StdHTTPServerOptions{})
	}
	return func(path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, nil)
		if path != "/void" {
			r = httptest.NewRequest("POST", path, strings.NewReader("{\"amount\":1}"))
			r.Header.Set("Content-Type", "application/json")
		}
		r.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}, logs, obs
}

func TestReplayHandlerErrorIsReplayed(t *testing.T) {
	s := &service{}
	do, logs, obs := setup(t, s, StrictHTTPServerOptions{}, nil)
	first := do("/pay", "k1")
	// The default answer is a generic problem: the error's text (internal
	// details) is logged, never sent nor recorded.
	if first.Code != 500 || strings.Contains(first.Body.String(), errAnswer.Error()) || !strings.Contains(first.Body.String(), idem.CodeHandlerFailed) ||
		first.Header().Get("Content-Type") != "application/problem+json" || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %q %s: want the generic 500 problem", first.Code, first.Header(), first.Body)
	}
	if !strings.Contains(logs.String(), errAnswer.Error()) || !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("the error is not logged:\n%s", logs)
	}
	for i := range 2 {
		w := do("/pay", "k1")
		if w.Code != 500 || w.Body.String() != first.Body.String() || w.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %d: %d %q %s: want the first answer replayed", i, w.Code, w.Header(), w.Body)
		}
	}
	if s.pays != 1 || obs.executed != 1 {
		t.Fatalf("pay ran %d times (%d executed events), want 1", s.pays, obs.executed)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("a recorded answer is no unanswered end:\n%s", logs)
	}
}

// The user's error handler gets the operation's own error; its answer
// (here a 409) is what is recorded and replayed.
func TestReplayHandlerErrorMappedIsReplayed(t *testing.T) {
	s := &service{}
	var got []error
	do, logs, _ := setup(t, s, StrictHTTPServerOptions{ResponseErrorHandlerFunc: func(w http.ResponseWriter, _ *http.Request, err error) {
		got = append(got, err)
		if errors.Is(err, errAnswer) {
			w.Header().Set("X-Mapped", "yes")
			http.Error(w, "conflict", http.StatusConflict)
			return
		}
		http.Error(w, err.Error(), 500)
	}}, nil)
	first, again := do("/pay", "k1"), do("/pay", "k1")
	if first.Code != 409 || again.Code != 409 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("%d %s / %d %q %s: want the user's 409, replayed", first.Code, first.Body, again.Code, again.Header(), again.Body)
	}
	if s.pays != 1 || len(got) != 1 || got[0] != errAnswer || strings.Contains(logs.String(), warning) {
		t.Fatalf("pay ran %d times (want 1), error handler got %v; logs:\n%s", s.pays, got, logs)
	}
}

// An error handler that writes nothing gives no answer to record: the key
// is freed (net/http's implicit 200 goes out) and the engine warns.
func TestReplayHandlerErrorUnansweredFreesKey(t *testing.T) {
	s := &service{}
	do, logs, _ := setup(t, s, StrictHTTPServerOptions{ResponseErrorHandlerFunc: func(http.ResponseWriter, *http.Request, error) {}}, nil)
	for i := range 2 {
		if w := do("/pay", "k1"); w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %q %s: want no replay", i, w.Code, w.Header(), w.Body)
		}
	}
	if s.pays != 2 || strings.Count(logs.String(), warning) != 1 {
		t.Fatalf("pay ran %d times (want 2); logs:\n%s", s.pays, logs)
	}
}

// Wired by hand without ResponseErrorHandler: CaptureBody ends the Call
// the strict wrapper left open once the strict server answered: the key is
// freed, a retry runs the operation again, the engine warns once (naming
// the generated error handler), and no Call is left behind or ended twice:
// each run reports its end (EventExecuted) once.
func TestReplayHandlerErrorWithoutAdapterFreesKey(t *testing.T) {
	s := &service{}
	do, logs, obs := setup(t, s, StrictHTTPServerOptions{}, func(x *Idempotency) http.Handler {
		return HandlerWithOptions(NewStrictHandlerWithOptions(s, []StrictMiddlewareFunc{x.StrictMiddleware}, StrictHTTPServerOptions{}),
			StdHTTPServerOptions{Middlewares: []MiddlewareFunc{x.CaptureBody}})
	})
	for i := range 3 {
		w := do("/pay", "k1")
		if w.Code != 500 || !strings.Contains(w.Body.String(), errAnswer.Error()) || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %q %s: want the strict server's 500, not a replay", i, w.Code, w.Header(), w.Body)
		}
	}
	do("/pay", "k2")
	if s.pays != 4 || obs.executed != 4 {
		t.Fatalf("pay ran %d times (%d executed events), want 4", s.pays, obs.executed)
	}
	if n := strings.Count(logs.String(), warning); n != 1 || !strings.Contains(logs.String(), "operation=pay") || !strings.Contains(logs.String(), "ResponseErrorHandler") {
		t.Fatalf("want one warning for pay naming the generated error handler, got %d:\n%s", n, logs)
	}
}

// A request without a body is bounded by CaptureBody too: its error's
// answer is replayed.
func TestReplayHandlerErrorBodilessIsReplayed(t *testing.T) {
	s := &service{}
	do, logs, _ := setup(t, s, StrictHTTPServerOptions{}, nil)
	first, again := do("/void", "k1"), do("/void", "k1")
	if first.Code != 500 || again.Code != 500 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != first.Body.String() || s.voids != 1 {
		t.Fatalf("%d %s / %d %q %s, ran %d", first.Code, first.Body, again.Code, again.Header(), again.Body, s.voids)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("%s", logs)
	}
}

func TestRetryHandlerErrorFreesKeyWithoutWarning(t *testing.T) {
	s := &service{}
	do, logs, _ := setup(t, s, StrictHTTPServerOptions{}, nil)
	for range 2 {
		if w := do("/charge", "k1"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%d %q %s", w.Code, w.Header(), w.Body)
		}
	}
	if s.charges != 2 || strings.Contains(logs.String(), warning) {
		t.Fatalf("charge ran %d times (want 2); logs:\n%s", s.charges, logs)
	}
}

// A typed 5xx response is stored and replayed under failures: replay.
func TestReplayTyped5xxIsReplayed(t *testing.T) {
	s := &service{typed: true}
	do, logs, _ := setup(t, s, StrictHTTPServerOptions{}, nil)
	first, again := do("/pay", "k1"), do("/pay", "k1")
	if first.Code != 500 || again.Code != 500 || again.Header().Get("Idempotent-Replayed") != "true" || first.Body.String() != again.Body.String() || s.pays != 1 {
		t.Fatalf("%d %s / %d %q %s, ran %d", first.Code, first.Body, again.Code, again.Header(), again.Body, s.pays)
	}
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("a typed 5xx is no unanswered end:\n%s", logs)
	}
}
`

// TestStrictHandlerErrorGin is TestStrictHandlerError for gin's strict
// server, whose HandlerErrorFunc the generated HandlerErrorFunc wraps
// (RegisterStrictHandlers installs it).
func TestStrictHandlerErrorGin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runHandlerErrorModule(t, gentest.StrictGin, "gin", "example.com/handlererrorgin", handlerErrorGinTest)
}

// failingService is the service of the gin and echo handler-error tests
// (their generated package's source): every operation fails with
// errAnswer, counting its runs.
const failingService = `type service struct{ pays, charges, voids int }

var errAnswer = errors.New("payment sent, writing the answer failed")

func (s *service) Pay(context.Context, PayRequestObject) (PayResponseObject, error) {
	s.pays++
	return nil, errAnswer
}

func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) {
	s.charges++
	return nil, errAnswer
}

func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	s.voids++
	return nil, errAnswer
}

const warning = "under failures: replay, a handler that returns an error"
`

const handlerErrorGinTest = `package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemgen/idemgen/runtime/idem"
)

` + failingService + `
func setup(t *testing.T, s *service, strictOptions StrictGinServerOptions, byHand bool) (func(path, key string) *httptest.ResponseRecorder, *bytes.Buffer) {
	logs := &bytes.Buffer{}
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { _ = x.Close() })
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	if byHand { // without HandlerErrorFunc
		r.Use(x.CaptureBody)
		RegisterHandlersWithOptions(r, NewStrictHandlerWithOptions(s, []StrictMiddlewareFunc{x.StrictMiddleware}, strictOptions), GinServerOptions{})
	} else {
		x.RegisterStrictHandlers(r, s, nil, strictOptions, GinServerOptions{})
	}
	return func(path, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, nil)
		if path != "/void" {
			req = httptest.NewRequest("POST", path, strings.NewReader("{\"amount\":1}"))
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w
	}, logs
}

func TestReplayHandlerErrorIsReplayed(t *testing.T) {
	for _, path := range []string{"/pay", "/void"} {
		s := &service{}
		do, logs := setup(t, s, StrictGinServerOptions{}, false)
		first := do(path, "k1")
		// The default answer is a generic problem: the error's text
		// (internal details) is logged, never sent nor recorded.
		if first.Code != 500 || strings.Contains(first.Body.String(), errAnswer.Error()) || !strings.Contains(first.Body.String(), idem.CodeHandlerFailed) ||
			first.Header().Get("Content-Type") != "application/problem+json" || first.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%s first: %d %q %s: want the generic 500 problem", path, first.Code, first.Header(), first.Body)
		}
		if !strings.Contains(logs.String(), errAnswer.Error()) {
			t.Fatalf("%s: the error is not logged:\n%s", path, logs)
		}
		again := do(path, "k1")
		if again.Code != 500 || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s retry: %d %q %s: want the first answer replayed", path, again.Code, again.Header(), again.Body)
		}
		if s.pays+s.voids != 1 || strings.Contains(logs.String(), warning) {
			t.Fatalf("%s ran %d times, want 1; logs:\n%s", path, s.pays+s.voids, logs)
		}
	}
}

func TestReplayHandlerErrorMappedIsReplayed(t *testing.T) {
	s := &service{}
	var got error
	do, _ := setup(t, s, StrictGinServerOptions{HandlerErrorFunc: func(ctx *gin.Context, err error) {
		got = err
		ctx.Status(http.StatusServiceUnavailable) // a status without a body
	}}, false)
	first, again := do("/pay", "k1"), do("/pay", "k1")
	if first.Code != 503 || again.Code != 503 || again.Header().Get("Idempotent-Replayed") != "true" || s.pays != 1 || got != errAnswer {
		t.Fatalf("%d / %d %q, ran %d, error handler got %v", first.Code, again.Code, again.Header(), s.pays, got)
	}
}

func TestReplayHandlerErrorWithoutAdapterFreesKey(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, StrictGinServerOptions{}, true)
	for i := range 3 {
		if w := do("/pay", "k1"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %q %s", i, w.Code, w.Header(), w.Body)
		}
	}
	if s.pays != 3 || strings.Count(logs.String(), warning) != 1 || !strings.Contains(logs.String(), "HandlerErrorFunc") {
		t.Fatalf("pay ran %d times (want 3); logs:\n%s", s.pays, logs)
	}
}

func TestRetryHandlerErrorFreesKey(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, StrictGinServerOptions{}, false)
	for range 2 {
		if w := do("/charge", "k1"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%d %q %s", w.Code, w.Header(), w.Body)
		}
	}
	if s.charges != 2 || strings.Contains(logs.String(), warning) {
		t.Fatalf("charge ran %d times (want 2); logs:\n%s", s.charges, logs)
	}
}
`

// TestStrictHandlerErrorEcho is TestStrictHandlerError for echo's strict
// server, whose returned error echo answers with its HTTPErrorHandler: the
// generated CaptureBody has echo answer it while the request is bounded,
// and ErrorHandler around e.HTTPErrorHandler records it
// (RegisterStrictHandlers installs both).
func TestStrictHandlerErrorEcho(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runHandlerErrorModule(t, gentest.StrictEcho, "echo", "example.com/handlererrorecho", handlerErrorEchoTest)
}

const handlerErrorEchoTest = `package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemgen/idemgen/runtime/idem"
)

` + failingService + `
// setup serves s; mapped: the user's HTTPErrorHandler (nil: echo's
// default); byHand: CaptureBody and StrictMiddleware without ErrorHandler.
func setup(t *testing.T, s *service, mapped echo.HTTPErrorHandler, byHand bool) (func(path, key string) *httptest.ResponseRecorder, *bytes.Buffer) {
	logs := &bytes.Buffer{}
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(func() { _ = x.Close() })
	e := echo.New()
	if mapped != nil {
		e.HTTPErrorHandler = mapped
	}
	if byHand {
		e.Use(x.CaptureBody)
		RegisterHandlers(e, NewStrictHandler(s, []StrictMiddlewareFunc{x.StrictMiddleware}))
	} else {
		x.RegisterStrictHandlers(e, s, nil)
	}
	return func(path, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, nil)
		if path != "/void" {
			req = httptest.NewRequest("POST", path, strings.NewReader("{\"amount\":1}"))
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		return w
	}, logs
}

func TestReplayHandlerErrorIsReplayed(t *testing.T) {
	for _, path := range []string{"/pay", "/void"} {
		s := &service{}
		do, logs := setup(t, s, nil, false)
		first := do(path, "k1")
		// echo's DefaultHTTPErrorHandler sends no error text (outside Debug).
		if first.Code != 500 || strings.Contains(first.Body.String(), errAnswer.Error()) || first.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%s first: %d %q %s: want echo's 500", path, first.Code, first.Header(), first.Body)
		}
		again := do(path, "k1")
		if again.Code != 500 || again.Body.String() != first.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s retry: %d %q %s: want the first answer replayed", path, again.Code, again.Header(), again.Body)
		}
		if s.pays+s.voids != 1 || strings.Contains(logs.String(), warning) {
			t.Fatalf("%s ran %d times, want 1; logs:\n%s", path, s.pays+s.voids, logs)
		}
	}
}

func TestReplayHandlerErrorMappedIsReplayed(t *testing.T) {
	s := &service{}
	var got error
	do, _ := setup(t, s, func(err error, ctx echo.Context) {
		got = err
		_ = ctx.String(http.StatusConflict, "conflict")
	}, false)
	first, again := do("/pay", "k1"), do("/pay", "k1")
	if first.Code != 409 || again.Code != 409 || again.Header().Get("Idempotent-Replayed") != "true" || again.Body.String() != "conflict" || s.pays != 1 || got != errAnswer {
		t.Fatalf("%d / %d %q %s, ran %d, error handler got %v", first.Code, again.Code, again.Header(), again.Body, s.pays, got)
	}
}

func TestReplayHandlerErrorWithoutAdapterFreesKey(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, nil, true)
	for i := range 3 {
		if w := do("/pay", "k1"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %q %s", i, w.Code, w.Header(), w.Body)
		}
	}
	if s.pays != 3 || strings.Count(logs.String(), warning) != 1 || !strings.Contains(logs.String(), "ErrorHandler") {
		t.Fatalf("pay ran %d times (want 3); logs:\n%s", s.pays, logs)
	}
}

func TestRetryHandlerErrorFreesKey(t *testing.T) {
	s := &service{}
	do, logs := setup(t, s, nil, false)
	for range 2 {
		if w := do("/charge", "k1"); w.Code != 500 || w.Header().Get("Idempotent-Replayed") != "" {
			t.Fatalf("%d %q %s", w.Code, w.Header(), w.Body)
		}
	}
	if s.charges != 2 || strings.Contains(logs.String(), warning) {
		t.Fatalf("charge ran %d times (want 2); logs:\n%s", s.charges, logs)
	}
}
`
