package idem_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// readAhead replaces r.Body with a pipe fed by a goroutine that reads the
// original body in the background from the start, as read-ahead
// decompressors do (klauspost's pgzip, zstd's stream decoder).
func readAhead(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pr, pw := io.Pipe()
		src := r.Body
		go func() {
			buf := make([]byte, 512)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					if _, werr := pw.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if err == io.EOF {
						err = nil
					}
					pw.CloseWithError(err)
					return
				}
			}
		}()
		r.Body = pr
		next.ServeHTTP(w, r)
	})
}

// chunked hands out at most 300 bytes a Read, yielding in between, so that
// reads of the body interleave.
type chunked struct{ r io.Reader }

func (s *chunked) Read(p []byte) (int, error) {
	if len(p) > 300 {
		p = p[:300]
	}
	runtime.Gosched()
	return s.r.Read(p)
}

func bigItem() string {
	var item strings.Builder
	for i := 0; item.Len() < 64<<10; i++ {
		fmt.Fprintf(&item, "%x", sha256.Sum256([]byte(strconv.Itoa(i))))
	}
	return item.String()
}

// A replacement that reads the capture from a goroutine of its own gets
// every byte, on both paths, and the reads do not race with the engine's.
func TestCaptureBodyReadAheadReplacement(t *testing.T) {
	body := `{"item":"` + bigItem() + `"}`
	post := func(h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/orders", &chunked{r: strings.NewReader(body)})
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	t.Run("Handler", func(t *testing.T) {
		for range 20 {
			f := newFixture(t, idem.Options{})
			var got []byte
			h := idem.CaptureBody(1 << 20)(readAhead(f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, _ = io.ReadAll(r.Body)
				w.WriteHeader(http.StatusCreated)
			}))))
			require.Equal(t, http.StatusCreated, post(h).Code)
			require.Equal(t, body, string(got))
		}
	})
	t.Run("Begin after a strict decoder", func(t *testing.T) {
		for range 20 {
			f := newFixture(t, idem.Options{})
			p := mustCompile(t, strictSpec())
			var item string
			strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var v struct{ Item string }
				if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				c := f.eng.Begin(r, p, idem.RequestKey)
				defer c.End()
				if c.Decision() != idem.Execute {
					c.Respond(w)
					return
				}
				item = v.Item
				c.Writer(w).WriteHeader(http.StatusCreated)
				require.NoError(t, c.Finish())
			})
			h := idem.CaptureBody(1 << 20)(readAhead(strict))
			require.Equal(t, http.StatusCreated, post(h).Code)
			require.Len(t, item, len(body)-len(`{"item":""}`))
			w := post(h)
			require.Equal(t, http.StatusCreated, w.Code)
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		}
	})
}

// Engine.Handler under a decompressing replacement sees the decompressed
// body: a key carried in it is found, and volatile members and member
// order do not matter.
func TestCaptureBodyDecompressedBodyKeyAndVolatile(t *testing.T) {
	spec := strictSpec()
	spec.Key = idem.KeySpec{Carrier: idem.CarrierBody, Name: "/key", Format: idem.FormatToken}
	spec.Volatile = []string{"/sentAt"}
	f := newFixture(t, idem.Options{})
	h := idem.CaptureBody(1 << 20)(gunzip(f.eng.Handler(mustCompile(t, spec), f.createOrder())))
	post := func(body string) *httptest.ResponseRecorder {
		return postRaw(h, "", gzipped(t, gzip.DefaultCompression, 0, body))
	}
	w := post(`{"key":"k1","item":"book","sentAt":"10:00:00"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	w = post(`{"sentAt":"10:00:05", "item":"book","key":"k1"}`)
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, int32(1), f.calls.Load())
}

// An empty body read through a replacement is an empty body: a gzip stream
// of nothing, compressed again with another header (its modification time),
// is the same request.
func TestCaptureBodyEmptyDecompressedBody(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := idem.CaptureBody(1 << 20)(gunzip(f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))))
	for i, mtime := range []int64{1, 2} {
		w := postRaw(h, "k", gzipped(t, gzip.DefaultCompression, mtime, ""))
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		assert.Equal(t, i == 1, w.Header().Get("Idempotent-Replayed") == "true")
	}
	assert.Equal(t, int32(1), f.calls.Load())
}

// gzipped is s compressed at level, with mtime as the header's
// modification time.
func gzipped(t *testing.T, level int, mtime int64, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, level)
	require.NoError(t, err)
	zw.ModTime = time.Unix(mtime, 0)
	_, _ = io.WriteString(zw, s)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// gunzip is a middleware that replaces r.Body with its decompression; making
// the reader reads the gzip header (and up to 4 KiB) from the body at once.
func gunzip(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body, r.ContentLength = zr, -1
		r.Header.Del("Content-Encoding")
		next.ServeHTTP(w, r)
	})
}

// postRaw POSTs body to /orders as JSON, with the Idempotency-Key key unless
// it is empty.
func postRaw(h http.Handler, key string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A decompressing middleware in front of the engine (no CaptureBody) that
// replaces r.Body but leaves ContentLength at the compressed length, and
// Content-Encoding as sent (echo's Decompress does, as many hand-written
// ones): the decompressed body, longer or shorter than ContentLength, is
// read and fingerprinted as any body, and the policy's limit applies to it,
// not to the compressed length.
func TestDecompressingMiddlewareLeavesContentLength(t *testing.T) {
	large := `{"items":[` + strings.Repeat(`{"sku":"abc","qty":1},`, 20) + `{"sku":"x","qty":2}]}`
	for _, tc := range []struct {
		name     string
		body     string
		maxBytes int64
		status   int
	}{
		{"decompressed longer", large, 0, http.StatusCreated},
		{"decompressed shorter", `{"a":1}`, 0, http.StatusCreated},
		{"compressed length above the limit", `{"a":1}`, 16, http.StatusCreated},
		{"decompressed above the limit", large, 64, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			spec := strictSpec()
			spec.Request.MaxBytes = tc.maxBytes
			var got []byte
			h := f.eng.Handler(mustCompile(t, spec), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				got, _ = io.ReadAll(r.Body)
				w.WriteHeader(http.StatusCreated)
			}))
			decompress := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				zr, err := gzip.NewReader(r.Body)
				require.NoError(t, err)
				r.Body = zr // ContentLength and Content-Encoding left as sent
				h.ServeHTTP(w, r)
			})
			wire := gzipped(t, gzip.DefaultCompression, 1, tc.body)
			require.NotEqual(t, len(tc.body), len(wire))
			for i := range 2 {
				r := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(wire))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Content-Encoding", "gzip")
				r.Header.Set("Idempotency-Key", "k")
				w := httptest.NewRecorder()
				decompress.ServeHTTP(w, r)
				if tc.status != http.StatusCreated {
					requireProblem(t, w, tc.status, idem.CodeRequestTooLarge)
					continue
				}
				require.Equal(t, tc.status, w.Code, w.Body.String())
				assert.Equal(t, i == 1, w.Header().Get("Idempotent-Replayed") == "true")
				assert.Equal(t, tc.body, string(got))
			}
			assert.Equal(t, int32(map[bool]int{true: 1}[tc.status == http.StatusCreated]), f.calls.Load())
		})
	}
}

// Without a Content-Encoding, ContentLength is the body's: a body shorter
// than it was read before the engine (a middleware consumed it), and is
// refused rather than fingerprinted as empty; a longer one is a body a
// middleware replaced, and is read as any.
func TestBodyShorterThanContentLength(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	for _, tc := range []struct {
		name    string
		replace func(r *http.Request)
		status  int
	}{
		{"consumed", func(r *http.Request) { _, _ = io.ReadAll(r.Body) }, http.StatusBadRequest},
		{"partly consumed", func(r *http.Request) { _, _ = r.Body.Read(make([]byte, 3)) }, http.StatusBadRequest},
		{"replaced by a longer one", func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"item":"book","note":"added by a middleware"}`))
		}, http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"item":"book"}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", strings.ReplaceAll(tc.name, " ", "-"))
			tc.replace(r)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if tc.status == http.StatusBadRequest {
				requireProblem(t, w, tc.status, idem.CodeRequestUnreadable)
				return
			}
			require.Equal(t, tc.status, w.Code, w.Body.String())
		})
	}
}
