package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// The benchmarks measure the middleware's overhead over a realistic handler
// (decode a 1 KB JSON body, answer 201 with ~200 bytes), all in one process
// on memstore, with request and writer objects reused so that what is
// counted is the handler and the engine.

type benchBody struct {
	Customer string            `json:"customer"`
	Items    []benchItem       `json:"items"`
	Note     string            `json:"note"`
	Meta     map[string]string `json:"meta"`
}

type benchItem struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

var benchPayload = func() []byte {
	in := benchBody{Customer: "cus_8f2b", Meta: map[string]string{"channel": "web", "campaign": "spring"}}
	for i := 0; len(in.Items) < 12; i++ {
		in.Items = append(in.Items, benchItem{SKU: "sku-" + strconv.Itoa(1000+i), Qty: i + 1, Price: 9.99 + float64(i)})
	}
	b, _ := json.Marshal(in)
	in.Note = strings.Repeat("n", 1024-len(b)-len(`,"note":""`)+2)
	b, _ = json.Marshal(in)
	return b
}()

var benchResponse = []byte(`{"id":"ord_7d1f9c2a","status":"created","customer":"cus_8f2b","items":12,"total":217.88,"currency":"EUR","created_at":"2025-06-01T12:00:00Z","links":{"self":"/orders/ord_7d1f9c2a"}}` + "\n")

func benchHandler() http.Handler { return benchHandlerWith(nil) }

// benchHandlerWith is benchHandler, with more headers set by more (when not nil).
func benchHandlerWith(more func(http.Header)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in benchBody
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/orders/ord_7d1f9c2a")
		if more != nil {
			more(h)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(benchResponse)
	})
}

// resettable request body.
type benchReader struct{ bytes.Reader }

func (*benchReader) Close() error { return nil }

// discardWriter is a minimal ResponseWriter whose header map is reused.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

type benchClient struct {
	r    *http.Request
	body *benchReader
	w    *discardWriter
	key  []string
	data []byte // the body sent (benchPayload)
}

func newBenchClient() *benchClient {
	c := &benchClient{body: &benchReader{}, w: &discardWriter{h: http.Header{}}, key: []string{"0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"}, data: benchPayload}
	r, _ := http.NewRequest("POST", "http://api.example/orders", nil)
	r.Header.Set("Content-Type", "application/json")
	r.Header["Idempotency-Key"] = c.key
	r.ContentLength = int64(len(benchPayload))
	c.r = r
	return c
}

func (c *benchClient) do(b *testing.B, h http.Handler, want int) {
	c.body.Reset(c.data)
	c.r.Body = c.body
	clear(c.w.h)
	c.w.status = 0
	h.ServeHTTP(c.w, c.r)
	if c.w.status != want {
		b.Fatalf("status %d, want %d", c.w.status, want)
	}
}

func benchEngine(b *testing.B) (*idem.Engine, *idem.Policy) {
	// MinRetention of 1ns: the first-request benchmarks claim new keys past
	// what the default bounds hold within an hour, the oldest finished
	// records evicted.
	s := memstore.New(memstore.Options{SweepInterval: -1, MinRetention: time.Nanosecond})
	b.Cleanup(func() { _ = s.Close() })
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	// The declared media types, as generated code gives them: the
	// request's (application/json) is among them.
	return eng, idem.MustCompile(idem.Spec{Operation: "createOrder", Semantics: idem.Strict,
		Response: idem.ResponseSpec{Headers: []string{"Location"}},
		Request:  idem.RequestSpec{MediaTypes: []string{"application/json"}}})
}

// BenchmarkBare is the floor: the handler without the middleware.
func BenchmarkBare(b *testing.B) {
	c, h := newBenchClient(), benchHandler()
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		c.do(b, h, 201)
	}
}

// BenchmarkFirstRequest: every iteration a new key (claim, execute, record).
func BenchmarkFirstRequest(b *testing.B) {
	eng, p := benchEngine(b)
	b.SetBytes(int64(len(benchPayload)))
	benchFirstRequests(b, eng.Handler(p, benchHandler()))
}

// BenchmarkFirstRequestOtherHeaders is BenchmarkFirstRequest with a handler
// that also sets two headers the policy does not store (X-Request-Id,
// Cache-Control): recording the response then looks through the whole
// header map for an allowlisted name spelled in another case
// (appendRecordHead), which a response of allowlisted names only skips.
func BenchmarkFirstRequestOtherHeaders(b *testing.B) {
	eng, p := benchEngine(b)
	b.SetBytes(int64(len(benchPayload)))
	benchFirstRequests(b, eng.Handler(p, benchHandlerWith(func(h http.Header) {
		h.Set("X-Request-Id", "req_5c1e0a9b7f3d")
		h.Set("Cache-Control", "no-store")
	})))
}

// BenchmarkReplay: the same request again (claim refused, decode, replay).
func BenchmarkReplay(b *testing.B) {
	eng, p := benchEngine(b)
	c, h := newBenchClient(), eng.Handler(p, benchHandler())
	c.do(b, h, 201)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	for b.Loop() {
		c.do(b, h, 201)
	}
	if c.w.h.Get("Idempotent-Replayed") != "true" {
		b.Fatal("not a replay")
	}
}

// BenchmarkReplayParallel: replays of one key from all Ps (one shard lock).
func BenchmarkReplayParallel(b *testing.B) {
	eng, p := benchEngine(b)
	h := eng.Handler(p, benchHandler())
	newBenchClient().do(b, h, 201)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	b.RunParallel(func(pb *testing.PB) {
		c := newBenchClient()
		for pb.Next() {
			c.do(b, h, 201)
		}
	})
}

// benchPayloads returns n bodies of benchPayload's length, each another
// (the note's first bytes are the index).
func benchPayloads(n int) [][]byte {
	at := bytes.Index(benchPayload, []byte(`"note":"`)) + len(`"note":"`)
	out := make([][]byte, n)
	for i := range out {
		b := bytes.Clone(benchPayload)
		copy(b[at:], strconv.Itoa(100000+i))
		out[i] = b
	}
	return out
}

// BenchmarkReplayRotating: replays of 8192 finished requests in turn, each
// of its own key and body, so that a replay's fingerprint is (almost)
// never in the engine's cache (1024 slots): the retry that comes after
// many other requests.
func BenchmarkReplayRotating(b *testing.B) {
	const n = 8192
	eng, p := benchEngine(b)
	c, h := newBenchClient(), eng.Handler(p, benchHandler())
	bodies, keys := benchPayloads(n), make([]string, n)
	for i := range keys {
		keys[i] = "0190b2a4-6c2e-7d3a-9f11-" + strconv.Itoa(100000000000+i)
		c.key[0], c.data = keys[i], bodies[i]
		c.do(b, h, 201)
	}
	clear(c.w.h)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPayload)))
	i := 0
	for b.Loop() {
		c.key[0], c.data = keys[i], bodies[i]
		i = (i + 1) % n
		c.do(b, h, 201)
	}
	if c.w.h.Get("Idempotent-Replayed") != "true" {
		b.Fatal("not a replay")
	}
}

// BenchmarkFirstRequestRotating: first requests, each of a new key and
// one of 4096 bodies in turn, so that the fingerprint is (almost) never in
// the engine's cache.
func BenchmarkFirstRequestRotating(b *testing.B) {
	eng, p := benchEngine(b)
	b.SetBytes(int64(len(benchPayload)))
	benchFirstRequests(b, eng.Handler(p, benchHandler()), benchPayloads(4096)...)
}

// benchFirstRequests sends h first requests: each of a new key (made
// outside the timed loop, 65536 at a time), and, when bodies are given,
// one of them in turn.
func benchFirstRequests(b *testing.B, h http.Handler, bodies ...[]byte) {
	c := newBenchClient()
	keys := make([]string, 1<<16)
	round := 0
	b.ReportAllocs()
	i := len(keys)
	for b.Loop() {
		if i == len(keys) {
			b.StopTimer()
			round++
			for j := range keys {
				keys[j] = "0190b2a4-6c2e-7d3a-" + strconv.Itoa(1000+round%9000) + "-" + strconv.Itoa(100000000000+j)
			}
			i = 0
			b.StartTimer()
		}
		c.key[0] = keys[i]
		if len(bodies) > 0 {
			c.data = bodies[i%len(bodies)]
		}
		i++
		c.do(b, h, 201)
	}
}

// netStore is memstore as the engine sees a store over a pooled network
// client (redisstore, pgstore): not ContextBound, ReadFirst, and each call
// consults its context as go-redis does a command's (a non-blocking look at
// Done before taking a connection, Deadline for the write and the read).
type netStore struct{ ms *memstore.Store }

func netLook(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	_, _ = ctx.Deadline()
	_, _ = ctx.Deadline()
	return nil
}

func (s netStore) Begin(ctx context.Context, r *idem.BeginRequest) (idem.BeginResult, error) {
	if err := netLook(ctx); err != nil {
		return idem.BeginResult{}, err
	}
	return s.ms.Begin(ctx, r)
}

func (s netStore) Finish(ctx context.Context, key string, token idem.Token, st idem.State, resp []byte) error {
	if err := netLook(ctx); err != nil {
		return err
	}
	return s.ms.Finish(ctx, key, token, st, resp)
}

func (s netStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := netLook(ctx); err != nil {
		return idem.Record{}, false, err
	}
	return s.ms.Get(ctx, key)
}

func (netStore) ReadFirst() {}

// BenchmarkReplayNetworkStore: replays of one key over netStore, read
// first (Get), serial and from all Ps: what the engine and the context of
// its store call cost a replay over Redis or PostgreSQL, without the round
// trip.
func BenchmarkReplayNetworkStore(b *testing.B) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	b.Cleanup(func() { _ = s.Close() })
	eng := idem.New(netStore{s}, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	h := eng.Handler(idem.MustCompile(idem.Spec{Operation: "createOrder", Semantics: idem.Strict,
		Response: idem.ResponseSpec{Headers: []string{"Location"}}}), benchHandler())
	newBenchClient().do(b, h, 201)
	newBenchClient().do(b, h, 201) // the engine saw the key final: reads first from now on
	b.Run("serial", func(b *testing.B) {
		c := newBenchClient()
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPayload)))
		for b.Loop() {
			c.do(b, h, 201)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchPayload)))
		b.RunParallel(func(pb *testing.PB) {
			c := newBenchClient()
			for pb.Next() {
				c.do(b, h, 201)
			}
		})
	})
}
