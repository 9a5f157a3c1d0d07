package idem_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// sniffCases are handlers whose responses net/http gives a Content-Type
// (http.DetectContentType) or not, depending on what they write and when
// they flush; the request body is echoed in some, as a handler that
// reflects input would.
var sniffCases = []struct {
	name   string
	method string // POST unless set
	h      func(w http.ResponseWriter, body []byte)
}{
	{"flush whitespace, then echo", "", func(w http.ResponseWriter, body []byte) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "   ")
		_ = http.NewResponseController(w).Flush()
		_, _ = w.Write(body)
	}},
	{"flush text, then binary", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, "hello ")
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte{0, 1, 2, 3})
	}},
	{"flush before any write", "", func(w http.ResponseWriter, body []byte) {
		w.WriteHeader(http.StatusCreated)
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"flush without WriteHeader or write", "", func(w http.ResponseWriter, body []byte) {
		_ = http.NewResponseController(w).Flush()
		_, _ = w.Write(body)
	}},
	{"two flushes", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, "  ")
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"flush after 600 bytes", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, strings.Repeat(" ", 600))
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"flush after 500 bytes", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, strings.Repeat(" ", 500))
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"one write", "", func(w http.ResponseWriter, body []byte) {
		_, _ = w.Write(append([]byte("   "), body...))
	}},
	{"small writes", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, "   ")
		_, _ = w.Write(body)
		_, _ = io.WriteString(w, " ")
	}},
	{"small writes past the buffer", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, "   ")
		_, _ = w.Write(body)
		for range 300 {
			_, _ = io.WriteString(w, "0123456789")
		}
	}},
	{"io.Copy", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.Copy(w, io.MultiReader(strings.NewReader("   "), bytes.NewReader(body), strings.NewReader(strings.Repeat("-", 3000))))
	}},
	{"one write past the buffer", "", func(w http.ResponseWriter, body []byte) {
		_, _ = w.Write(append(body, bytes.Repeat([]byte("x"), 5000)...))
	}},
	{"text past the sniffed 512 bytes, then HTML", "", func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, strings.Repeat("a", 700))
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"empty body", "", func(w http.ResponseWriter, body []byte) {}},
	{"empty body, flushed", "", func(w http.ResponseWriter, body []byte) {
		w.WriteHeader(http.StatusAccepted)
		w.(http.Flusher).Flush()
	}},
	{"204 flushed", "", func(w http.ResponseWriter, body []byte) {
		w.WriteHeader(http.StatusNoContent)
		w.(http.Flusher).Flush()
		_, _ = w.Write(body) // refused: http.ErrBodyNotAllowed
	}},
	{"304", "", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotModified)
	}},
	{"Content-Encoding, flushed", "", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Encoding", "x-test")
		_, _ = io.WriteString(w, " ")
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"blank Content-Encoding, flushed", "", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Encoding", "")
		_, _ = io.WriteString(w, " ")
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"Content-Encoding in lower case", "", func(w http.ResponseWriter, body []byte) {
		w.Header()["content-encoding"] = []string{"x-test"} // net/http does not see it, and sniffs
		_, _ = w.Write(body)
	}},
	{"Content-Type in lower case", "", func(w http.ResponseWriter, body []byte) {
		w.Header()["content-type"] = []string{"text/plain"} // net/http sniffs a second one
		_, _ = w.Write(body)
	}},
	{"nil Content-Type in lower case", "", func(w http.ResponseWriter, body []byte) {
		w.Header()["content-type"] = nil // net/http sniffs one, and sends only that
		_, _ = w.Write(body)
	}},
	{"Content-Type in lower case, flushed", "", func(w http.ResponseWriter, body []byte) {
		w.Header()["content-type"] = []string{"text/plain"}
		_, _ = io.WriteString(w, "  ")
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"Transfer-Encoding set", "", func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Transfer-Encoding", "chunked") // HTTP/1 does not sniff then
		_, _ = w.Write(body)
	}},
	{"nil Content-Type, flushed", "", func(w http.ResponseWriter, body []byte) {
		w.Header()["Content-Type"] = nil
		_, _ = io.WriteString(w, " ")
		w.(http.Flusher).Flush()
		_, _ = w.Write(body)
	}},
	{"HEAD, flush whitespace", http.MethodHead, func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, "   ")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "<script>alert(1)</script>")
	}},
	{"HEAD, one write", http.MethodHead, func(w http.ResponseWriter, body []byte) {
		_, _ = io.WriteString(w, "   <script>alert(1)</script>")
	}},
}

// sniffServer starts srv over HTTP/1 or, with TLS, HTTP/2.
func sniffServer(t *testing.T, h http.Handler, h2 bool) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// waitExecuted waits for the record of the first request: the client may
// have its response before (over HTTP/2, a HEAD response ends at its first
// flush).
func waitExecuted(t *testing.T, f *fixture) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, ok := f.obs.find(idem.EventExecuted)
		return ok
	}, 5*time.Second, time.Millisecond)
}

type sniffResponse struct {
	status      int
	contentType []string // as the client got it: nil for none
	body        string
	replayed    string
}

func sniffRequest(t *testing.T, srv *httptest.Server, method, key string) sniffResponse {
	t.Helper()
	r, err := http.NewRequest(method, srv.URL+"/orders", strings.NewReader(`<script>alert(1)</script>`))
	require.NoError(t, err)
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	resp, err := srv.Client().Do(r)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return sniffResponse{resp.StatusCode, resp.Header["Content-Type"], string(body), resp.Header.Get("Idempotent-Replayed")}
}

// A replay is served with the Content-Type the client got the first time,
// which is the one the handler alone gets from net/http: what it sniffed
// from the first piece of the body it sent, whatever the handler's
// flushes; none when it sniffed none. So through the middleware and
// through Complete (the strict servers' Visit).
func TestReplaySniffsAsTheOriginal(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, strict := range []bool{false, true} {
			for _, tc := range sniffCases {
				t.Run(fmt.Sprintf("h2=%v/strict=%v/%s", h2, strict, tc.name), func(t *testing.T) {
					testReplaySniff(t, tc.method, tc.h, h2, strict)
				})
			}
		}
	}
}

// testReplaySniff compares what a bare handler, its first run under the
// engine and its replay send (over HTTP/2 with h2; through Complete with
// strict).
func testReplaySniff(t *testing.T, method string, write func(http.ResponseWriter, []byte), h2, strict bool) {
	if method == "" {
		method = http.MethodPost
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		write(w, body)
	})
	f := newFixture(t, idem.Options{})
	bare := sniffRequest(t, sniffServer(t, handler, h2), method, "")
	p := mustCompile(t, strictSpec())
	h := f.eng.Handler(p, handler)
	if strict {
		h = strictFlow(f, p, func(w http.ResponseWriter) error {
			write(w, []byte(`<script>alert(1)</script>`)) // the request's body, as a typed response would hold it
			return nil
		})
	}
	srv := sniffServer(t, h, h2)
	first := sniffRequest(t, srv, method, "k")
	waitExecuted(t, f)
	dup := sniffRequest(t, srv, method, "k")
	require.Equal(t, "true", dup.replayed)
	assert.Equal(t, bare.contentType, first.contentType, "the response differs from the handler's alone")
	assert.Equal(t, first.contentType, dup.contentType, "the replay's Content-Type")
	assert.Equal(t, first.status, dup.status)
	assert.Equal(t, first.body, dup.body)
	assert.Equal(t, bare.body, first.body)
}

// In transactional mode the response is written at once after the commit,
// flushes or not: the replay gets its Content-Type too.
func TestReplaySniffsAsTheOriginalTransactional(t *testing.T) {
	for _, tc := range sniffCases {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			f, _ := newTxFixture(t)
			srv := sniffServer(t, f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				tc.h(w, body)
			})), false)
			first := sniffRequest(t, srv, method, "k")
			waitExecuted(t, f)
			dup := sniffRequest(t, srv, method, "k")
			require.Equal(t, "true", dup.replayed)
			assert.Equal(t, first.contentType, dup.contentType, "the replay's Content-Type")
			assert.Equal(t, first.status, dup.status)
			assert.Equal(t, first.body, dup.body)
		})
	}
}
