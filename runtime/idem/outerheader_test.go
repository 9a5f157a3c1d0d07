package idem_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// gzipWriter compresses what passes through it (as gin-contrib/gzip and
// similar middleware do).
type gzipWriter struct {
	http.ResponseWriter
	z *gzip.Writer
}

func (g *gzipWriter) Write(p []byte) (int, error) { return g.z.Write(p) }

// gzipFront is a compressor in front of the engine: it sets
// Content-Encoding before calling next, as such middleware does.
func gzipFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
		z := gzip.NewWriter(w)
		defer func() { _ = z.Close() }()
		next.ServeHTTP(&gzipWriter{w, z}, r)
	})
}

type outerResp struct {
	code     int
	ce, ct   string
	replayed string
	body     string // decoded
}

// postOuter posts a keyed request without the transport's own gzip handling
// and decodes a gzip body itself.
func postOuter(t *testing.T, srv *httptest.Server, key string, gz bool) outerResp {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{}`))
	require.NoError(t, err)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	if gz {
		r.Header.Set("Accept-Encoding", "gzip")
	}
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(r)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := outerResp{code: resp.StatusCode, ce: resp.Header.Get("Content-Encoding"), ct: resp.Header.Get("Content-Type"),
		replayed: resp.Header.Get("Idempotent-Replayed"), body: string(b)}
	if out.ce == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		require.NoError(t, err, "labelled gzip, not gzip")
		b, err = io.ReadAll(zr)
		require.NoError(t, err)
		out.body = string(b)
	}
	return out
}

// A compressor in front of the engine sets Content-Encoding on the
// client's header map before the handler runs and compresses what the
// recorder passes on: the record holds the plain body, so it must not hold
// that Content-Encoding. A replay through the same middleware is
// compressed, or not, as that request asks.
func TestOuterContentEncodingNotRecorded(t *testing.T) {
	for _, handlerCT := range []bool{true, false} {
		name := map[bool]string{true: "handler sets Content-Type", false: "sniffed Content-Type"}[handlerCT]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			body := `{"id":1,"pad":"` + strings.Repeat("x", 600) + `"}`
			h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				if handlerCT {
					w.Header().Set("Content-Type", "application/json")
				}
				w.Header().Set("Location", "/orders/1")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, body)
			}))
			srv := httptest.NewServer(gzipFront(h))
			defer srv.Close()
			wantCT := "application/json"
			if !handlerCT {
				wantCT = http.DetectContentType([]byte(body))
			}
			for _, tc := range []struct {
				key         string
				first, then bool // Accept-Encoding: gzip
			}{{"k1", true, false}, {"k2", false, true}, {"k3", true, true}} {
				first := postOuter(t, srv, tc.key, tc.first)
				require.Equal(t, http.StatusCreated, first.code)
				require.Equal(t, body, first.body)
				dup := postOuter(t, srv, tc.key, tc.then)
				require.Equal(t, http.StatusCreated, dup.code, tc.key)
				assert.Equal(t, "true", dup.replayed, tc.key)
				assert.Equal(t, map[bool]string{true: "gzip"}[tc.then], dup.ce, tc.key)
				assert.Equal(t, body, dup.body, tc.key)
				if !tc.then {
					assert.Equal(t, wantCT, dup.ct, tc.key)
				}
			}
			assert.Equal(t, int32(3), f.calls.Load())
		})
	}
}

// A representation header a middleware in front of the engine set is left
// out of the record only while the handler leaves it as it was: one the
// handler sets (even to the same value) or adds to is its own, and recorded.
func TestOuterRepresentationHeaderChangedByHandler(t *testing.T) {
	cases := []struct {
		name    string
		handler func(h http.Header)
		want    []string // the replay's Content-Encoding with no middleware in front
	}{
		{"left", func(http.Header) {}, nil},
		{"set again", func(h http.Header) { h.Set("Content-Encoding", "x-outer") }, []string{"x-outer"}},
		{"set", func(h http.Header) { h.Set("Content-Encoding", "x-mine") }, []string{"x-mine"}},
		{"added", func(h http.Header) { h.Add("Content-Encoding", "x-mine") }, []string{"x-outer", "x-mine"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				tc.handler(w.Header())
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, `{}`)
			}))
			outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "x-outer")
				h.ServeHTTP(w, r)
			})
			first := send(outer, req{key: "k", body: `{}`})
			require.Equal(t, http.StatusCreated, first.Code)
			dup := send(h, req{key: "k", body: `{}`}) // no middleware: the record alone
			require.Equal(t, http.StatusCreated, dup.Code)
			assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, tc.want, dup.Header().Values("Content-Encoding"))
			assert.Equal(t, "application/json", dup.Header().Get("Content-Type"))
			assert.Equal(t, int32(1), f.calls.Load())
		})
	}
}

// A Content-Type a middleware in front of the engine set, and the handler
// left, is not recorded: the replay through the same middleware gets it
// from the middleware, unsniffed.
func TestOuterContentTypeNotRecorded(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `<html></html>`)
	}))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-outer")
		h.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(outer)
	defer srv.Close()
	first := postOuter(t, srv, "k", false)
	require.Equal(t, "application/x-outer", first.ct)
	dup := postOuter(t, srv, "k", false)
	assert.Equal(t, "true", dup.replayed)
	assert.Equal(t, "application/x-outer", dup.ct)
	bare := send(h, req{key: "k", body: `{}`}) // no middleware: the record alone
	assert.Equal(t, "true", bare.Header().Get("Idempotent-Replayed"))
	assert.Empty(t, bare.Header().Values("Content-Type"), "not recorded")
	assert.Equal(t, int32(1), f.calls.Load())
}

// A Begin/Complete caller that runs code behind the engine before Complete
// calls Writer(w) first: a header that code sets on w is then recorded and
// replayed (Complete's own Writer(w) would take it for a front middleware's).
func TestStrictWriterBeforeInnerCode(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := f.eng.Begin(r, p, idem.RequestKey)
		defer c.End()
		if c.Decision() != idem.Execute {
			c.Respond(w)
			return
		}
		c.Writer(w)
		w.Header().Set("Content-Encoding", "x-inner") // behind the engine
		_ = c.Complete(w, func(w http.ResponseWriter) error {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusCreated)
			_, err := io.WriteString(w, "compressed-bytes")
			return err
		})
	})
	first := send(h, req{key: "k", body: `{}`})
	require.Equal(t, "x-inner", first.Header().Get("Content-Encoding"))
	dup := send(h, req{key: "k", body: `{}`})
	assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, "x-inner", dup.Header().Get("Content-Encoding"))
	assert.Equal(t, "compressed-bytes", dup.Body.String())
}

// A handler that changes the front middleware's value in place (the same
// slice element, another string) has set it: the record keeps the
// handler's value, and the replay is what the client got.
func TestOuterValueChangedInPlace(t *testing.T) {
	for name, change := range map[string]func(h http.Header){
		"index":  func(h http.Header) { h["Content-Type"][0] = "text/csv" },
		"append": func(h http.Header) { h["Content-Type"] = append(h["Content-Type"][:0], "text/csv") },
		"trim": func(h http.Header) {
			v := h["Content-Type"][0]
			h["Content-Type"][0] = v[:strings.IndexByte(v, ';')]
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				change(w.Header())
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "a,b\n")
			}))
			outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/csv; charset=utf-8")
				if name != "trim" {
					w.Header().Set("Content-Type", "application/json")
				}
				h.ServeHTTP(w, r)
			})
			first := send(outer, req{key: "k", body: `{}`})
			require.Equal(t, "text/csv", first.Header().Get("Content-Type"))
			dup := send(h, req{key: "k", body: `{}`}) // not through outer: the record alone
			assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, "text/csv", dup.Header().Get("Content-Type"), "the replay's Content-Type")
		})
	}
}

// A representation header set in front of the engine under another
// spelling (h["content-encoding"]) is not recorded either; one the handler
// sets so is.
func TestOuterNonCanonicalNotRecorded(t *testing.T) {
	for _, byHandler := range []bool{false, true} {
		f := newFixture(t, idem.Options{})
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if byHandler {
				w.Header()["content-encoding"] = []string{"x-inner"}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{}`)
		}))
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["content-encoding"] = []string{"x-outer"}
			w.Header().Set("X-Request-Id", "1")
			h.ServeHTTP(w, r)
		})
		require.Equal(t, http.StatusCreated, send(outer, req{key: "k", body: `{}`}).Code)
		dup := send(h, req{key: "k", body: `{}`}) // not through outer: the record alone
		assert.Equal(t, "true", dup.Header().Get("Idempotent-Replayed"))
		if byHandler {
			assert.Equal(t, []string{"x-inner"}, dup.Header().Values("Content-Encoding"), "the handler's")
		} else {
			assert.Empty(t, dup.Header().Values("Content-Encoding"), "the front middleware's")
		}
	}
}

// A header that response.headers lists is recorded as the response
// carries it, whoever set it: one a middleware in front of the engine sets
// for each request is recorded with the first request's value, and the
// replay carries that value in place of the one the middleware set for the
// retry (docs/runtime.md, "Headers": list only headers the handler sets).
// Content-Type and Content-Encoding set in front are not recorded
// (TestOuterContentEncodingNotRecorded).
func TestOuterListedHeaderRecorded(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	spec := strictSpec()
	spec.Response.Headers = []string{"Location", "X-Token"}
	h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header().Set("Location", "/orders/1")
		w.WriteHeader(http.StatusCreated)
	}))
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Token", "token-of-"+r.Header.Get("X-Caller"))
		h.ServeHTTP(w, r)
	})
	do := func(caller string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k1")
		r.Header.Set("X-Caller", caller)
		w := httptest.NewRecorder()
		front.ServeHTTP(w, r)
		return w
	}
	first, again := do("alice"), do("bob")
	require.Equal(t, http.StatusCreated, first.Code)
	require.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, []string{"token-of-alice"}, again.Header().Values("X-Token"), "the recorded value replaces the front middleware's")
	assert.Equal(t, int32(1), f.calls.Load())
}
