package idem_test

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
	"github.com/idemgen/idemgen/runtime/storetest"
)

type txKey struct{}

// fakeTx is a Transactor over memstore: the "database" is a slice of rows
// that the handler appends to inside the transaction; commit makes them
// visible together with the record.
type fakeTx struct {
	*memstore.Store
	mu        sync.Mutex
	rows      []string
	commits   int
	rollbacks int
	commitErr error
	onCommit  func() // called inside commit, before the record is written
}

type tx struct {
	parent *fakeTx
	rows   []string
	done   bool
}

// Insert is what a handler does with the transaction from the context.
func Insert(ctx context.Context, row string) {
	ctx.Value(txKey{}).(*tx).rows = append(ctx.Value(txKey{}).(*tx).rows, row)
}

func (f *fakeTx) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	t := &tx{parent: f}
	commit := func(st idem.State, resp []byte) error {
		if t.done {
			return nil
		}
		t.done = true
		if f.onCommit != nil {
			f.onCommit()
		}
		if f.commitErr != nil {
			f.mu.Lock()
			f.rollbacks++
			f.mu.Unlock()
			return f.commitErr
		}
		if err := f.Finish(context.Background(), key, token, st, resp); err != nil {
			f.mu.Lock()
			f.rollbacks++
			f.mu.Unlock()
			return err
		}
		f.mu.Lock()
		f.rows = append(f.rows, t.rows...)
		f.commits++
		f.mu.Unlock()
		return nil
	}
	rollback := func() {
		if t.done {
			return
		}
		t.done = true
		f.mu.Lock()
		f.rollbacks++
		f.mu.Unlock()
	}
	return context.WithValue(ctx, txKey{}, t), commit, rollback, nil
}

func newTxFixture(t *testing.T) (*fixture, *fakeTx) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	ft := &fakeTx{Store: ms}
	return newFixtureStore(t, ms, ft, idem.Options{Transactional: true}), ft
}

func TestTransactional(t *testing.T) {
	status := 201
	handler := func(f *fixture) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.calls.Add(1)
			Insert(r.Context(), "order")
			w.Header().Set("Location", "/orders/1")
			w.Header().Set("Set-Cookie", "live=only")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "done")
			http.NewResponseController(w).Flush() // buffered: nothing may leave before the commit
		})
	}
	t.Run("commit then respond", func(t *testing.T) {
		f, ft := newTxFixture(t)
		h := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
		status = 201
		w := httptest.NewRecorder()
		var seenAtCommit int
		var flushedAtCommit bool
		ft.onCommit = func() { seenAtCommit, flushedAtCommit = w.Body.Len(), w.Flushed }
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json") // as send sets it: the media type is part of the fingerprint
		r.Header.Set("Idempotency-Key", "k")
		r.Header.Set("Content-Type", "application/json") // as send sets it: the fingerprint covers the media type
		h.ServeHTTP(w, r)
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "done", w.Body.String())
		assert.Equal(t, "live=only", w.Header().Get("Set-Cookie"), "the live response has all headers")
		assert.Equal(t, 0, seenAtCommit, "nothing reached the client before the commit")
		assert.False(t, flushedAtCommit)
		assert.Equal(t, []string{"order"}, ft.rows)
		assert.Equal(t, 1, ft.commits)

		again := send(h, req{key: "k", body: `{}`})
		require.Equal(t, 201, again.Code)
		assert.Equal(t, "done", again.Body.String())
		assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, []string{"order"}, ft.rows, "no second insert")
	})
	t.Run("5xx rolls back and frees the key", func(t *testing.T) {
		f, ft := newTxFixture(t)
		h := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
		status = 500
		w := send(h, req{key: "k", body: `{}`})
		require.Equal(t, 500, w.Code)
		assert.Equal(t, "done", w.Body.String())
		assert.Empty(t, ft.rows)
		assert.Equal(t, 1, ft.rollbacks)
		status = 201
		require.Equal(t, 201, send(h, req{key: "k", body: `{}`}).Code)
		assert.Equal(t, []string{"order"}, ft.rows)
	})
	t.Run("panic rolls back", func(t *testing.T) {
		f, ft := newTxFixture(t)
		h := f.eng.Handler(mustCompile(t, strictSpec()), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			Insert(r.Context(), "half")
			panic("oops")
		}))
		func() {
			defer func() { _ = recover() }()
			send(h, req{key: "k", body: `{}`})
		}()
		assert.Empty(t, ft.rows)
		assert.Equal(t, 1, ft.rollbacks)
		status = 201
		h2 := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
		require.Equal(t, 201, send(h2, req{key: "k", body: `{}`}).Code, "the key was freed")
	})
	t.Run("commit fails", func(t *testing.T) {
		f, ft := newTxFixture(t)
		ft.commitErr = errBoom
		h := f.eng.Handler(mustCompile(t, strictSpec()), handler(f))
		status = 201
		w := send(h, req{key: "k", body: `{}`})
		requireProblem(t, w, 503, idem.CodeStoreUnavailable)
		assert.Empty(t, ft.rows)
		ft.commitErr = nil
		drain(t, f.eng) // the key is freed in the background
		require.Equal(t, 201, send(h, req{key: "k", body: `{}`}).Code, "the key was freed")
	})
	t.Run("fenced commit", func(t *testing.T) {
		f, ft := newTxFixture(t)
		p := mustCompile(t, strictSpec())
		status = 201
		h := f.eng.Handler(p, handler(f))
		_ = h
		c := f.eng.Begin(httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`)), p, idem.KeyFrom("k"))
		defer c.End()
		require.Equal(t, idem.Execute, c.Decision())
		cw := httptest.NewRecorder()
		w := c.Writer(cw)
		Insert(c.Context(), "late")
		w.WriteHeader(201)
		ft.commitErr = idem.ErrFenced
		assert.ErrorIs(t, c.Finish(), idem.ErrFenced)
		requireProblem(t, cw, 409, idem.CodeKeyInUse)
		assert.Empty(t, ft.rows)
		_, fenced := f.obs.find(idem.EventFenced)
		assert.True(t, fenced)
	})
}

func TestStrictWithoutCaptureBodyIsDetected(t *testing.T) {
	f := newFixture(t, idem.Options{})
	p := mustCompile(t, strictSpec())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		_ = json.NewDecoder(r.Body).Decode(&v) // what oapi-codegen does first
		c := f.eng.Begin(r, p, idem.KeyFrom("k"))
		defer c.End()
		c.Respond(w)
	})
	requireProblem(t, send(h, req{body: `{"item":"book"}`}), 400, idem.CodeRequestUnreadable)
}

func TestCaptureBody(t *testing.T) {
	f := newFixture(t, idem.Options{})
	spec := strictSpec()
	spec.Request.MaxBytes = 64
	p := mustCompile(t, spec)
	var got []byte
	strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dec := json.NewDecoder(r.Body)
		var v any
		_ = dec.Decode(&v)
		if r.URL.Path == "/plain" {
			rest, _ := io.ReadAll(dec.Buffered())
			more, _ := io.ReadAll(r.Body)
			got = append(rest, more...)
			w.WriteHeader(204)
			return
		}
		c := f.eng.Begin(r, p, idem.KeyFrom("k"))
		defer c.End()
		if c.Decision() != idem.Execute {
			c.Respond(w)
			return
		}
		_ = c.Complete(w, func(w http.ResponseWriter) error { w.WriteHeader(201); return nil })
	})
	h := idem.CaptureBody(128)(strict)
	require.Equal(t, 201, send(h, req{body: `{"item":"book"}  `}).Code)
	assert.Equal(t, "true", send(h, req{body: `{"item":"book"}  `}).Header().Get("Idempotent-Replayed"))
	requireProblem(t, send(h, req{body: `{"item":"` + strings.Repeat("x", 100) + `"}`}), 413, idem.CodeRequestTooLarge)
	// A route without a policy is not limited by the capture.
	big := `{"a":1}` + strings.Repeat(" ", 1000)
	require.Equal(t, 204, send(h, req{target: "/plain", body: big}).Code)
	assert.Len(t, got, 1000)
}

// The conformance suite's Transactor subtests, run against the fake.
func TestFakeTransactorConformance(t *testing.T) {
	storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		t.Cleanup(func() { _ = ms.Close() })
		return &fakeTx{Store: ms}
	})
}

// A middleware inside CaptureBody that replaces r.Body (gzip, a size limit):
// Engine.Handler reads the replacement, as without CaptureBody, and
// fingerprints the body the handler sees; Begin after a strict-server
// decoder fingerprints the bytes on the wire, all of them.
func TestCaptureBodyUnderReplacedBody(t *testing.T) {
	gz := func(level int, s string) []byte { return gzipped(t, level, 0, s) }
	t.Run("decompressed", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		h := idem.CaptureBody(1 << 20)(gunzip(f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())))
		w := postRaw(h, "k", gz(gzip.BestSpeed, `{"item":"book"}`))
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Contains(t, w.Body.String(), `"item":"book"`, "the handler read the decompressed body")
		// The same bytes again: a duplicate.
		w = postRaw(h, "k", gz(gzip.BestSpeed, `{"item":"book"}`))
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		// The fingerprint is of the decompressed body: another
		// compression of it is the same request; another body is not.
		w = postRaw(h, "k", gz(gzip.BestCompression, `{"item":"book"}`))
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		requireProblem(t, postRaw(h, "k", gz(gzip.BestSpeed, `{"item":"pen"}`)), 422, idem.CodeKeyReused)
		assert.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("large body through a lazy replacement", func(t *testing.T) {
		// More compressed bytes than gzip.NewReader buffers: the engine
		// reads the rest through it.
		f := newFixture(t, idem.Options{})
		var item strings.Builder
		for i := 0; item.Len() < 64<<10; i++ {
			fmt.Fprintf(&item, "%x", sha256.Sum256([]byte(strconv.Itoa(i))))
		}
		body := gz(gzip.BestSpeed, `{"item":"`+item.String()+`"}`)
		require.Greater(t, len(body), 16<<10)
		h := idem.CaptureBody(1 << 20)(gunzip(f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())))
		w := postRaw(h, "k", body)
		require.Equal(t, 201, w.Code, w.Body.String())
		assert.Contains(t, w.Body.String(), item.String(), "the handler read the whole decompressed body")
		w = postRaw(h, "k", body)
		require.Equal(t, 201, w.Code)
		assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
		assert.Equal(t, int32(1), f.calls.Load())
		// CaptureBody's limit bounds what it keeps; the policy's bounds
		// the body the engine reads.
		small := idem.CaptureBody(1024)(gunzip(f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())))
		require.Equal(t, 201, postRaw(small, "k2", body).Code)
		spec := strictSpec()
		spec.Request.MaxBytes = 1024
		limited := idem.CaptureBody(1 << 20)(gunzip(f.eng.Handler(mustCompile(t, spec), f.createOrder())))
		requireProblem(t, postRaw(limited, "k3", body), 413, idem.CodeRequestTooLarge)
		assert.Equal(t, int32(2), f.calls.Load())
	})
	t.Run("http.MaxBytesReader", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		limit := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Body = http.MaxBytesReader(w, r.Body, 16)
				next.ServeHTTP(w, r)
			})
		}
		h := idem.CaptureBody(1 << 20)(limit(f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())))
		// The engine reads through the replacement: its limit is a 413.
		requireProblem(t, send(h, req{key: "k1", body: `{"item":"a very long name"}`}), 413, idem.CodeRequestTooLarge)
		require.Equal(t, 201, send(h, req{key: "k2", body: `{"item":"a"}`}).Code)
		assert.Equal(t, "true", send(h, req{key: "k2", body: `{"item":"a"}`}).Header().Get("Idempotent-Replayed"))
		assert.Equal(t, int32(1), f.calls.Load())
		// So is the policy's.
		spec := strictSpec()
		spec.Request.MaxBytes = 8
		h = idem.CaptureBody(1 << 20)(limit(f.eng.Handler(mustCompile(t, spec), f.createOrder())))
		requireProblem(t, send(h, req{key: "k3", body: `{"item":"a"}`}), 413, idem.CodeRequestTooLarge)
		assert.Equal(t, int32(1), f.calls.Load())
	})
	t.Run("strict server reading through the replacement", func(t *testing.T) {
		f := newFixture(t, idem.Options{})
		p := mustCompile(t, strictSpec())
		var read []byte
		strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var v any
			if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			c := f.eng.Begin(r, p, idem.KeyFrom("k"))
			defer c.End()
			if c.Decision() != idem.Execute {
				c.Respond(w)
				return
			}
			f.calls.Add(1)
			read, _ = io.ReadAll(c.Request().Body)
			_ = c.Complete(w, func(w http.ResponseWriter) error { w.WriteHeader(201); return nil })
		})
		h := idem.CaptureBody(1 << 20)(gunzip(strict))
		require.Equal(t, 201, postRaw(h, "k", gz(gzip.BestSpeed, `{"item":"book"}`)).Code)
		assert.Empty(t, read, "the handler is not handed the compressed bytes")
		assert.Equal(t, "true", postRaw(h, "k", gz(gzip.BestSpeed, `{"item":"book"}`)).Header().Get("Idempotent-Replayed"))
		requireProblem(t, postRaw(h, "k", gz(gzip.BestSpeed, `{"item":"pen"}`)), 422, idem.CodeKeyReused)
		assert.Equal(t, int32(1), f.calls.Load())
	})
}

// A strict-server decoder that reads the body through a replacement
// (http.MaxBytesReader) stops at its read boundary: when the JSON value ends
// there, only the trailing newline is left in the replacement. The
// fingerprint is still of the whole body, so another body is another request.
func TestCaptureBodyDecoderLeavesTrailingBytes(t *testing.T) {
	// '}' ends exactly at byte 512 (json.Decoder's first read), then the
	// "\n" json.Encoder appends.
	mk := func(item string) string {
		s := `{"item":"` + item + `","pad":"`
		return s + strings.Repeat("x", 512-len(s)-2) + "\"}\n"
	}
	limit := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			next.ServeHTTP(w, r)
		})
	}
	for _, replaced := range []bool{true, false} {
		for _, sem := range []idem.Semantics{idem.Strict, idem.Window} {
			t.Run(fmt.Sprintf("%v/replaced=%v", sem, replaced), func(t *testing.T) {
				f := newFixture(t, idem.Options{})
				spec := strictSpec()
				spec.Semantics = sem
				p := mustCompile(t, spec)
				var got []string
				strict := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					var v struct{ Item string }
					if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
						http.Error(w, err.Error(), 400)
						return
					}
					k := idem.NoKey
					if v := r.Header.Get("Idempotency-Key"); v != "" {
						k = idem.KeyFrom(v)
					}
					c := f.eng.Begin(r, p, k)
					defer c.End()
					if c.Decision() != idem.Execute {
						c.Respond(w)
						return
					}
					got = append(got, v.Item)
					_ = c.Complete(w, func(w http.ResponseWriter) error { w.WriteHeader(201); return nil })
				})
				var h http.Handler = strict
				if replaced {
					h = limit(h)
				}
				h = idem.CaptureBody(1 << 20)(h)
				key := map[idem.Semantics]string{idem.Strict: "k1", idem.Window: ""}[sem]
				require.Len(t, mk("book"), 513)
				require.Equal(t, 201, send(h, req{key: key, body: mk("book")}).Code)
				w := send(h, req{key: key, body: mk("pen")})
				if sem == idem.Strict {
					requireProblem(t, w, 422, idem.CodeKeyReused)
					assert.Equal(t, []string{"book"}, got)
				} else {
					require.Equal(t, 201, w.Code)
					assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
					assert.Equal(t, []string{"book", "pen"}, got)
				}
				w = send(h, req{key: key, body: mk("book")})
				require.Equal(t, 201, w.Code)
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			})
		}
	}
}
