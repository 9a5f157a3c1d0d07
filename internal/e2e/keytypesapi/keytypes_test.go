package keytypesapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/keytypesapi"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// server implements the strict server: each operation counts its runs by
// the key its handler finds in its typed parameters.
type server struct {
	mu    sync.Mutex
	execs map[string]int // "op key" -> executions
}

var _ api.StrictServerInterface = (*server)(nil)

func (s *server) exec(op, key string) api.Receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execs[op+" "+key]++
	return api.Receipt{Id: fmt.Sprintf("%s-%d", op, len(s.execs)), Key: &key, Count: s.execs[op+" "+key]}
}

func (s *server) CreateNote(_ context.Context, req api.CreateNoteRequestObject) (api.CreateNoteResponseObject, error) {
	return api.CreateNote201JSONResponse(s.exec("createNote", string(req.Params.IdempotencyKey))), nil
}

func (s *server) OpenTicket(_ context.Context, req api.OpenTicketRequestObject) (api.OpenTicketResponseObject, error) {
	key := ""
	if req.Params.RequestId != nil {
		key = string(*req.Params.RequestId)
	}
	return api.OpenTicket201JSONResponse(s.exec("openTicket", key)), nil
}

func (s *server) CastVote(_ context.Context, req api.CastVoteRequestObject) (api.CastVoteResponseObject, error) {
	return api.CastVote201JSONResponse(s.exec("castVote", string(req.Params.XVoteKey))), nil
}

func (s *server) MakePayment(_ context.Context, req api.MakePaymentRequestObject) (api.MakePaymentResponseObject, error) {
	return api.MakePayment201JSONResponse(s.exec("makePayment", req.Params.IdempotencyKey.String())), nil
}

func (s *server) MakeRefund(_ context.Context, req api.MakeRefundRequestObject) (api.MakeRefundResponseObject, error) {
	key := ""
	if req.Params.RefundKey != nil {
		key = req.Params.RefundKey.String()
	}
	return api.MakeRefund201JSONResponse(s.exec("makeRefund", key)), nil
}

// newServer returns the strict server and the Idempotency (over the
// in-memory store) that wraps it.
func newServer(t *testing.T) (*server, *api.Idempotency) {
	t.Helper()
	s := &server{execs: map[string]int{}}
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	t.Cleanup(func() { assert.NoError(t, x.Close()) })
	return s, x
}

// wire records the key each request carried on the wire (the header or the
// query parameter the contract names).
type wire struct {
	mu   sync.Mutex
	keys []string
}

func (w *wire) Keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.keys...)
}

// setup starts the generated server (the wrapper over the in-memory store)
// and returns the generated client over a transport that loses the first
// response after the server handled the request: the helper retries, and
// the retry must carry the same key.
func setup(t *testing.T) (*server, *wire, *api.IdempotentClient) {
	t.Helper()
	s, x := newServer(t)
	h := x.StrictHandler(s, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	w := &wire{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("Idempotency-Key") + r.Header.Get("X-Vote-Key") + r.URL.Query().Get("request_id") + r.URL.Query().Get("refund_key")
		w.mu.Lock()
		w.keys = append(w.keys, k)
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	ft := faultnet.NewTransport(srv.Client().Transport, faultnet.Script(faultnet.DropFault))
	hc := &http.Client{Transport: ft}
	c, err := api.NewIdempotentClient(srv.URL, api.WithHTTPClient(api.NewIdempotentDoer(hc, idemclient.WithRandom(func() float64 { return 0 }))))
	require.NoError(t, err)
	return s, w, c
}

// check asserts one logical call: two attempts (the first response lost),
// both carrying key on the wire, one run of the handler, which found key
// in its typed parameters, and the second answer a replay of the first.
func check(t *testing.T, s *server, w *wire, op, key string, hr *http.Response, r *api.Receipt) {
	t.Helper()
	require.NotEmpty(t, key)
	assert.Equal(t, []string{key, key}, w.Keys(), "the key on the wire, on the first attempt and the retry")
	require.NotNil(t, r)
	require.NotNil(t, r.Key)
	assert.Equal(t, key, *r.Key, "the handler reads the key from its typed parameters")
	assert.Equal(t, 1, r.Count)
	s.mu.Lock()
	assert.Equal(t, 1, s.execs[op+" "+key], "the operation ran once")
	s.mu.Unlock()
	assert.Equal(t, "true", hr.Header.Get("Idempotent-Replayed"))
}

func TestNamedStringHeader(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.CreateNote(t.Context(), nil, api.Note{Text: "hi"})
	require.NoError(t, err)
	require.NoError(t, uuid.Validate(key), "a new key in the contract's format: %q", key)
	check(t, s, w, "createNote", key, resp.HTTPResponse, resp.JSON201)
}

func TestNamedStringHeaderGiven(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.CreateNote(t.Context(), &api.CreateNoteParams{IdempotencyKey: "note-key-1"}, api.Note{Text: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "note-key-1", key, "the key the caller put in params")
	check(t, s, w, "createNote", key, resp.HTTPResponse, resp.JSON201)
}

func TestNamedStringHeaderWithKey(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.CreateNote(t.Context(), nil, api.Note{Text: "hi"}, idemclient.WithKey("resumed-1"))
	require.NoError(t, err)
	assert.Equal(t, "resumed-1", key)
	check(t, s, w, "createNote", key, resp.HTTPResponse, resp.JSON201)
}

// Two calls with different keys are two operations, even when the key's
// type prints every key the same (NoteKey.String): the server takes the
// key's text from the typed parameter, not what String prints.
func TestNamedStringKeyIsItsText(t *testing.T) {
	s, _, c := setup(t)
	_, _, err := c.CreateNote(t.Context(), &api.CreateNoteParams{IdempotencyKey: "note-a"}, api.Note{Text: "hi"})
	require.NoError(t, err)
	resp, key, err := c.CreateNote(t.Context(), &api.CreateNoteParams{IdempotencyKey: "note-b"}, api.Note{Text: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "note-b", key)
	require.NotNil(t, resp.JSON201)
	assert.Equal(t, "note-b", *resp.JSON201.Key, "note-b ran, not a replay of note-a")
	assert.Empty(t, resp.HTTPResponse.Header.Get("Idempotent-Replayed"))
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Equal(t, map[string]int{"createNote note-a": 1, "createNote note-b": 1}, s.execs)
}

func TestNamedStringOptionalQuery(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.OpenTicket(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, uuid.Validate(key))
	check(t, s, w, "openTicket", key, resp.HTTPResponse, resp.JSON201)

	s, w, c = setup(t)
	given := api.TicketKey("ticket-key-1")
	resp, key, err = c.OpenTicket(t.Context(), &api.OpenTicketParams{RequestId: &given})
	require.NoError(t, err)
	assert.Equal(t, "ticket-key-1", key)
	check(t, s, w, "openTicket", key, resp.HTTPResponse, resp.JSON201)
}

func TestEnumHeader(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.CastVote(t.Context(), nil)
	require.NoError(t, err)
	check(t, s, w, "castVote", key, resp.HTTPResponse, resp.JSON201)

	s, w, c = setup(t)
	resp, key, err = c.CastVote(t.Context(), &api.CastVoteParams{XVoteKey: api.CastVoteParamsXVoteKey("first")})
	require.NoError(t, err)
	assert.Equal(t, "first", key)
	check(t, s, w, "castVote", key, resp.HTTPResponse, resp.JSON201)
}

func TestComponentUUIDHeader(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.MakePayment(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, uuid.Validate(key))
	check(t, s, w, "makePayment", key, resp.HTTPResponse, resp.JSON201)

	s, w, c = setup(t)
	given := uuid.MustParse("3b241101-e2bb-4255-8caf-4136c566a962")
	resp, key, err = c.MakePayment(t.Context(), &api.MakePaymentParams{IdempotencyKey: given})
	require.NoError(t, err)
	assert.Equal(t, given.String(), key)
	check(t, s, w, "makePayment", key, resp.HTTPResponse, resp.JSON201)
}

func TestOptionalUUIDQuery(t *testing.T) {
	s, w, c := setup(t)
	resp, key, err := c.MakeRefund(t.Context(), nil)
	require.NoError(t, err)
	require.NoError(t, uuid.Validate(key))
	check(t, s, w, "makeRefund", key, resp.HTTPResponse, resp.JSON201)

	s, w, c = setup(t)
	given := uuid.MustParse("9f0c1c7e-6a57-4d3e-8c1b-2f6f4f3a1d20")
	resp, key, err = c.MakeRefund(t.Context(), &api.MakeRefundParams{RefundKey: &given})
	require.NoError(t, err)
	assert.Equal(t, given.String(), key)
	check(t, s, w, "makeRefund", key, resp.HTTPResponse, resp.JSON201)
}

// oapi-codegen checks typed parameters before any middleware runs, so a
// key it rejects never reaches the engine: the generated ErrorHandler
// answers it with the engine's 400 problem+json, and the operation does not
// run. Every operation's key parameter is checked, wired by StrictHandler
// and by hand (as StrictHandler's documentation shows).
func TestTypedKeyRejected(t *testing.T) {
	const bad = "not-a-uuid"
	cases := []struct {
		name   string
		path   string
		header http.Header
		code   string
		detail string
	}{
		{"makePayment malformed uuid header", "/payments", http.Header{"Idempotency-Key": {bad}},
			idem.CodeKeyInvalid, "the Idempotency-Key header must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form"},
		{"makePayment missing header", "/payments", nil,
			idem.CodeKeyMissing, "this operation requires an idempotency key"},
		{"makePayment header given twice", "/payments", http.Header{"Idempotency-Key": {"3b241101-e2bb-4255-8caf-4136c566a962", "3b241101-e2bb-4255-8caf-4136c566a962"}},
			idem.CodeKeyInvalid, "the idempotency key is given more than once"},
		{"makeRefund malformed uuid query", "/refunds?refund_key=" + bad, nil,
			idem.CodeKeyInvalid, "the refund_key query parameter must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form"},
		{"createNote missing header", "/notes", nil,
			idem.CodeKeyMissing, "this operation requires an idempotency key"},
		{"openTicket query given twice", "/tickets?request_id=a&request_id=b", nil,
			idem.CodeKeyInvalid, "the idempotency key is given more than once"},
		{"makeRefund uuid query given twice", "/refunds?refund_key=3b241101-e2bb-4255-8caf-4136c566a962&refund_key=3b241101-e2bb-4255-8caf-4136c566a962", nil,
			idem.CodeKeyInvalid, "the idempotency key is given more than once"},
		{"castVote header given twice", "/votes", http.Header{"X-Vote-Key": {"first", "second"}},
			idem.CodeKeyInvalid, "the idempotency key is given more than once"},
	}
	wirings := map[string]func(*server, *api.Idempotency) http.Handler{
		"StrictHandler": func(s *server, x *api.Idempotency) http.Handler {
			return x.StrictHandler(s, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
		},
		"by hand": func(s *server, x *api.Idempotency) http.Handler {
			return api.HandlerWithOptions(
				api.NewStrictHandlerWithOptions(s, []api.StrictMiddlewareFunc{x.StrictMiddleware},
					api.StrictHTTPServerOptions{RequestErrorHandlerFunc: x.ErrorHandler(nil)}),
				api.StdHTTPServerOptions{Middlewares: []api.MiddlewareFunc{x.CaptureBody}, ErrorHandlerFunc: x.ErrorHandler(nil)})
		},
	}
	for wn, mk := range wirings {
		for _, tc := range cases {
			t.Run(wn+"/"+tc.name, func(t *testing.T) {
				s, x := newServer(t)
				h := mk(s, x)
				req := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(`{"text":"hi"}`))
				req.Header.Set("Content-Type", "application/json")
				for k, vs := range tc.header {
					for _, v := range vs {
						req.Header.Add(k, v)
					}
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				assert.Equal(t, http.StatusBadRequest, rec.Code)
				assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
				var prob struct {
					Code   string `json:"code"`
					Status int    `json:"status"`
					Detail string `json:"detail"`
				}
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &prob), "body: %s", rec.Body)
				assert.Equal(t, tc.code, prob.Code)
				assert.Equal(t, http.StatusBadRequest, prob.Status)
				assert.Equal(t, tc.detail, prob.Detail)
				assert.NotContains(t, rec.Body.String(), bad, "the detail says what the key must be, not oapi-codegen's message")
				s.mu.Lock()
				defer s.mu.Unlock()
				assert.Empty(t, s.execs, "the operation did not run")
			})
		}
	}
}

// A request error that is not about the key (here a body that is not
// JSON) goes to the next error handler, oapi-codegen's default when none
// is given: 400, the error as text, not a problem of the engine.
func TestNonKeyErrorPassesThrough(t *testing.T) {
	s, x := newServer(t)
	h := x.StrictHandler(s, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
	req := httptest.NewRequest(http.MethodPost, "/notes", strings.NewReader(`{not json`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "note-key-1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusBadRequest, rec.Code)
	assert.NotEqual(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.NotContains(t, rec.Body.String(), "IDEMPOTENCY_")
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, s.execs, "the operation did not run")
}

// A key given with WithKey that the typed uuid parameter cannot hold (not
// a UUID in canonical form) fails the call before anything is sent, with
// an error wrapping ErrInvalidKey (FixKey checks the key under the
// policy's EnforceKeyFormat before the parameter is filled): the optional (pointer) parameter of
// makeRefund and the required one of makePayment. (An upper-case UUID is
// lower-cased: TestWithKeyUpperCaseUUID.)
func TestWithKeyNotUUID(t *testing.T) {
	for _, key := range []string{"x", "{3b241101-e2bb-4255-8caf-4136c566a962}"} {
		s, w, c := setup(t)
		resp, got, err := c.MakeRefund(t.Context(), nil, idemclient.WithKey(key))
		assert.ErrorIs(t, err, idemclient.ErrInvalidKey, "makeRefund, key %q", key)
		assert.Nil(t, resp)
		assert.Equal(t, key, got, "the key the call was given")

		resp2, got, err := c.MakePayment(t.Context(), nil, idemclient.WithKey(key))
		assert.ErrorIs(t, err, idemclient.ErrInvalidKey, "makePayment, key %q", key)
		assert.Nil(t, resp2)
		assert.Equal(t, key, got)

		assert.Empty(t, w.Keys(), "no request was sent")
		s.mu.Lock()
		assert.Empty(t, s.execs)
		s.mu.Unlock()
	}
}
