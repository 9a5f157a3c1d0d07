package idemclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

func TestFixKey(t *testing.T) {
	// WithKey wins over the carried key; a second FixKey keeps the first key.
	_, call := idemclient.Start(context.Background(), idemclient.WithKey("given"))
	k, err := call.FixKey("carried")
	require.NoError(t, err)
	assert.Equal(t, "given", k)
	k, _ = call.FixKey("")
	assert.Equal(t, "given", k)

	_, call = idemclient.Start(context.Background())
	k, _ = call.FixKey("carried")
	assert.Equal(t, "carried", k)

	// A new key in the policy's format.
	for format, version := range map[idemclient.KeyFormat]uuid.Version{
		idemclient.FormatUUIDv4: 4, idemclient.FormatUUIDv7: 7, idemclient.FormatUUID: 7, idemclient.FormatToken: 7, "": 7,
	} {
		_, call := idemclient.Policy{KeyFormat: format}.Start(context.Background())
		k, err := call.FixKey("")
		require.NoError(t, err)
		u, err := uuid.Parse(k)
		require.NoError(t, err, format)
		assert.Equal(t, version, u.Version(), "format %q", format)
		again, _ := call.FixKey("")
		assert.Equal(t, k, again)
	}
}

// A helper that fixed the key and wrote it into the request: the Doer keeps
// it, reports it once, and refuses a request carrying another.
func TestFixKeyThroughDoer(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	doer := idemclient.NewDoer(srv.Client(), idemclient.Policy{})

	var observed []string
	ctx, call := idemclient.Start(context.Background(), idemclient.WithKeyObserver(func(k string) { observed = append(observed, k) }))
	key, err := call.FixKey("")
	require.NoError(t, err)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	req.Header.Set("Idempotency-Key", key) // as oapi-codegen does from <Op>Params
	resp, err := doer.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{key}, got)
	assert.Equal(t, []string{key}, observed)
	assert.Equal(t, key, call.Key())

	ctx, call = idemclient.Start(context.Background(), idemclient.WithKey("mine"))
	_, _ = call.FixKey("")
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	req.Header.Set("Idempotency-Key", "other")
	_, err = doer.Do(req)
	assert.ErrorIs(t, err, idemclient.ErrKeyConflict)
	assert.Len(t, got, 1, "not sent")
}

func TestCheck(t *testing.T) {
	answers := map[string]func(w http.ResponseWriter){
		"/reused": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"title":"Idempotency key reused","status":422,"code":"IDEMPOTENCY_KEY_REUSED","detail":"the key was used with another request"}`)
		},
		"/api-error": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"code":"OUT_OF_COUPONS"}`)
		},
		"/created": func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated) },
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answers[r.URL.Path](w) }))
	defer srv.Close()
	doer := idemclient.NewDoer(srv.Client(), idemclient.Policy{MaxAttempts: 1})
	do := func(path string, d idemclient.HTTPDoer) (*idemclient.Call, *http.Response, []byte) {
		ctx, call := idemclient.Start(context.Background(), idemclient.WithKey("k1"))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, bytes.NewReader([]byte(`{}`)))
		resp, err := d.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return call, resp, body
	}

	call, resp, body := do("/reused", doer)
	err := call.Check(resp, body)
	var pe *idemclient.ProblemError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, idemclient.ProblemError{Status: 422, Code: idemclient.CodeKeyReused, Title: "Idempotency key reused",
		Detail: "the key was used with another request", Key: "k1", Attempts: 1}, *pe)
	assert.Equal(t, "idemclient: IDEMPOTENCY_KEY_REUSED (422 Unprocessable Entity) key=k1 attempts=1: the key was used with another request", err.Error())

	call, resp, body = do("/api-error", doer)
	assert.NoError(t, call.Check(resp, body), "the API's own errors are the caller's to read")
	call, resp, body = do("/created", doer)
	assert.NoError(t, call.Check(resp, body))

	// The same request without a Doer: nothing managed it.
	call, resp, body = do("/created", srv.Client())
	assert.ErrorIs(t, call.Check(resp, body), idemclient.ErrNotManaged)
}

func TestParseProblem(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	pe := idemclient.ParseProblem(409, h("Content-Type", "application/problem+json; charset=utf-8", "Retry-After", "2"),
		[]byte(`{"code":"IDEMPOTENCY_KEY_IN_USE","title":"In use"}`))
	require.NotNil(t, pe)
	assert.Equal(t, 2*time.Second, pe.RetryAfter)
	assert.Equal(t, "idemclient: IDEMPOTENCY_KEY_IN_USE (409 Conflict) retry-after=2s: In use", pe.Error())

	for name, c := range map[string]struct {
		status int
		h      http.Header
		body   string
	}{
		"success":       {201, h("Content-Type", "application/json"), `{"code":"IDEMPOTENCY_KEY_REUSED"}`},
		"text":          {422, h("Content-Type", "text/plain"), `{"code":"IDEMPOTENCY_KEY_REUSED"}`},
		"other code":    {422, h("Content-Type", "application/json"), `{"code":"INVALID_AMOUNT"}`},
		"not JSON":      {503, h("Content-Type", "application/problem+json"), `<html>`},
		"code not text": {409, h("Content-Type", "application/problem+json"), `{"code":7}`},
	} {
		assert.Nil(t, idemclient.ParseProblem(c.status, c.h, []byte(c.body)), name)
	}
	assert.False(t, errors.Is(error(pe), idemclient.ErrNotManaged))
}

func FuzzParseProblem(f *testing.F) {
	for _, c := range []struct {
		status       int
		ct, ra, body string
	}{
		{422, "application/problem+json", "", `{"code":"IDEMPOTENCY_KEY_REUSED","title":"t","detail":"d"}`},
		{409, "application/problem+json; charset=utf-8", "2", `{"code":"IDEMPOTENCY_KEY_IN_USE"}`},
		{503, "application/json", "Sat, 01 Mar 2025 12:00:30 GMT", `{"code":"IDEMPOTENCY_STORE_UNAVAILABLE"}`},
		{500, "application/json", "", `{"code":"OTHER"}`},
		{201, "application/json", "", `{"code":"IDEMPOTENCY_KEY_REUSED"}`},
		{400, "text/plain", "", `bad`},
		{400, "application/problem+json", "", `{"code":["IDEMPOTENCY_"]}`},
	} {
		f.Add(c.status, c.ct, c.ra, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, status int, ct, ra string, body []byte) {
		h := http.Header{"Content-Type": {ct}, "Retry-After": {ra}}
		pe := idemclient.ParseProblem(status, h, body)
		if pe == nil {
			return
		}
		if pe.Status != status || status < 400 || !strings.HasPrefix(pe.Code, "IDEMPOTENCY_") || pe.RetryAfter < 0 {
			t.Fatalf("%d %q %q %q: %+v", status, ct, ra, body, pe)
		}
		if !strings.Contains(pe.Error(), pe.Code) {
			t.Fatalf("message %q lacks the code", pe.Error())
		}
	})
}
