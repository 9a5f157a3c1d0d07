package clientapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// shop implements the generated strict server. Every operation is a side
// effect counted by (operation, idempotency key): the key is the one the
// recorder found in the request as it arrived at the server.
type shop struct {
	mu    sync.Mutex
	execs map[string]int // "op key" -> executions
	total int
	hold  map[string]*hold // op -> the next execution blocks
}

type hold struct{ entered, release chan struct{} }

var _ api.StrictServerInterface = (*shop)(nil)

func newShop() *shop { return &shop{execs: map[string]int{}, hold: map[string]*hold{}} }

func (s *shop) exec(ctx context.Context, op string) api.Receipt {
	key, _ := ctx.Value(keyCtx{}).(string)
	s.mu.Lock()
	s.execs[op+" "+key]++
	s.total++
	n, count := s.total, s.execs[op+" "+key]
	h := s.hold[op]
	delete(s.hold, op)
	s.mu.Unlock()
	if h != nil {
		close(h.entered)
		<-h.release
	}
	return api.Receipt{Id: fmt.Sprintf("%s-%d", op, n), Key: &key, Count: count}
}

// Executions returns how many times op ran with key.
func (s *shop) Executions(op, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs[op+" "+key]
}

// Total returns how many times any operation ran.
func (s *shop) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Hold makes the next execution of op block until release is closed.
func (s *shop) Hold(op string) *hold {
	h := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.hold[op] = h
	s.mu.Unlock()
	return h
}

func (s *shop) UpdateAccount(ctx context.Context, _ api.UpdateAccountRequestObject) (api.UpdateAccountResponseObject, error) {
	return api.UpdateAccount200JSONResponse(s.exec(ctx, "updateAccount")), nil
}

func (s *shop) ListCoupons(ctx context.Context, _ api.ListCouponsRequestObject) (api.ListCouponsResponseObject, error) {
	return api.ListCoupons200JSONResponse{s.exec(ctx, "listCoupons")}, nil
}

func (s *shop) ClaimCoupon(ctx context.Context, req api.ClaimCouponRequestObject) (api.ClaimCouponResponseObject, error) {
	r := s.exec(ctx, "claimCoupon")
	loc := "/claims/" + r.Id
	return api.ClaimCoupon201JSONResponse{Body: r, Headers: api.ClaimCoupon201ResponseHeaders{Location: &loc}}, nil
}

func (s *shop) RecordEvent(ctx context.Context, _ api.RecordEventRequestObject) (api.RecordEventResponseObject, error) {
	return api.RecordEvent202JSONResponse(s.exec(ctx, "recordEvent")), nil
}

func (s *shop) TouchSpecialItem(ctx context.Context, _ api.TouchSpecialItemRequestObject) (api.TouchSpecialItemResponseObject, error) {
	return api.TouchSpecialItem200JSONResponse(s.exec(ctx, "touchSpecialItem")), nil
}

func (s *shop) TouchItem(ctx context.Context, _ api.TouchItemRequestObject) (api.TouchItemResponseObject, error) {
	return api.TouchItem200JSONResponse(s.exec(ctx, "touchItem")), nil
}

func (s *shop) CreateOrder(ctx context.Context, _ api.CreateOrderRequestObject) (api.CreateOrderResponseObject, error) {
	return api.CreateOrder201JSONResponse(s.exec(ctx, "createOrder")), nil
}

func (s *shop) CreatePayment(ctx context.Context, _ api.CreatePaymentRequestObject) (api.CreatePaymentResponseObject, error) {
	return api.CreatePayment201JSONResponse(s.exec(ctx, "createPayment")), nil
}

func (s *shop) UploadReceiptFile(ctx context.Context, req api.UploadReceiptFileRequestObject) (api.UploadReceiptFileResponseObject, error) {
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return nil, err
	}
	return api.UploadReceiptFile201JSONResponse(s.exec(ctx, "uploadReceiptFile")), nil
}

func (s *shop) Subscribe(ctx context.Context, req api.SubscribeRequestObject) (api.SubscribeResponseObject, error) {
	if req.Body == nil || req.Body.Email == "" {
		return nil, errors.New("subscribe: the form has no email")
	}
	return api.Subscribe201JSONResponse(s.exec(ctx, "subscribe")), nil
}

func (s *shop) CreateTransfer(ctx context.Context, _ api.CreateTransferRequestObject) (api.CreateTransferResponseObject, error) {
	return api.CreateTransfer201JSONResponse(s.exec(ctx, "createTransfer")), nil
}

type keyCtx struct{}

// keyOf finds the idempotency key of a request where the shop's contracts
// put it: the X-Request-Key or Idempotency-Key header, the request_id query
// parameter, or the body member idempotency_key.
func keyOf(r *http.Request, body []byte) string {
	if k := r.Header.Get("X-Request-Key"); k != "" {
		return k
	}
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		return k
	}
	if k := r.URL.Query().Get("request_id"); k != "" {
		return k
	}
	var m struct {
		Key string `json:"idempotency_key"`
	}
	if json.Unmarshal(body, &m) == nil {
		return m.Key
	}
	return ""
}

// arrival is a request as the server received it.
type arrival struct {
	Method, Path, RawQuery string
	Body                   string
}

// recorder sits in front of the generated server: it records every request
// by key (the raw bytes, which decide the fingerprint), puts the key into
// the context for the shop, and keeps the body of the first response of
// each key (an execution, not a replay).
type recorder struct {
	next http.Handler

	mu       sync.Mutex
	arrivals map[string][]arrival
	first    map[string][]byte
}

func newRecorder(next http.Handler) *recorder {
	return &recorder{next: next, arrivals: map[string][]arrival{}, first: map[string][]byte{}}
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := keyOf(r, body)
	rec.mu.Lock()
	rec.arrivals[key] = append(rec.arrivals[key], arrival{r.Method, r.URL.Path, r.URL.RawQuery, string(body)})
	rec.mu.Unlock()
	cw := &captureWriter{ResponseWriter: w, status: http.StatusOK}
	rec.next.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), keyCtx{}, key)))
	if cw.status < 300 && cw.Header().Get("Idempotent-Replayed") == "" && key != "" {
		rec.mu.Lock()
		if _, ok := rec.first[key]; !ok {
			rec.first[key] = cw.buf.Bytes()
		}
		rec.mu.Unlock()
	}
}

// Arrivals returns the requests that reached the server with key.
func (rec *recorder) Arrivals(key string) []arrival {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]arrival(nil), rec.arrivals[key]...)
}

// First returns the body of the response the operation gave when it ran with key.
func (rec *recorder) First(key string) []byte {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.first[key]
}

type captureWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *captureWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// env is a generated server (strict std-http, wired with the generated
// Idempotency over the in-memory store) behind a recorder, on a real
// listener.
type env struct {
	shop *shop
	rec  *recorder
	srv  *httptest.Server
}

// newEnv starts the server; wrap, when given, wraps the recorder (for
// answers the generated server would not give).
func newEnv(t testing.TB, wrap ...func(http.Handler) http.Handler) *env {
	t.Helper()
	e := &env{shop: newShop()}
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	t.Cleanup(func() { assert.NoError(t, x.Close()) })
	e.rec = newRecorder(x.StrictHandler(e.shop, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{}))
	var h http.Handler = e.rec
	for _, w := range wrap {
		h = w(h)
	}
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

// vclock is the client's virtual clock: Sleep moves it forward at once and
// records the wait; onSleep, when set, runs first (to let the server make
// progress while the client "waits").
type vclock struct {
	mu      sync.Mutex
	now     time.Time
	slept   []time.Duration
	onSleep func(time.Duration)
}

// newVClock starts at a whole second an hour from now: the contexts whose
// deadlines tests set on this clock never expire in real time during a test.
func newVClock() *vclock { return &vclock{now: time.Now().Add(time.Hour).Truncate(time.Second)} }

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *vclock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep(d)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.slept = append(c.slept, d)
	return nil
}

func (c *vclock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}

func (c *vclock) Total() time.Duration {
	var sum time.Duration
	for _, d := range c.Slept() {
		sum += d
	}
	return sum
}

// client is the generated client over an HTTP client, with the virtual
// clock and jitter draws of 0 (full jitter waits nothing, so every wait is
// the server's Retry-After), and a hook that records every attempt.
type client struct {
	*api.IdempotentClient
	clock *vclock

	mu       sync.Mutex
	attempts []idemclient.Attempt
}

func newClient(t testing.TB, url string, hc *http.Client, opts ...idemclient.Option) *client {
	t.Helper()
	return newClientOn(t, newVClock(), url, hc, opts...)
}

// newClientOn is newClient on a given clock.
func newClientOn(t testing.TB, clock *vclock, url string, hc *http.Client, opts ...idemclient.Option) *client {
	t.Helper()
	c := &client{clock: clock}
	opts = append([]idemclient.Option{
		idemclient.WithClock(c.clock),
		idemclient.WithRandom(func() float64 { return 0 }),
		idemclient.WithAttemptHook(func(_ context.Context, a idemclient.Attempt) {
			c.mu.Lock()
			c.attempts = append(c.attempts, a)
			c.mu.Unlock()
		}),
	}, opts...)
	ic, err := api.NewIdempotentClient(url, api.WithHTTPClient(api.NewIdempotentDoer(hc, opts...)))
	require.NoError(t, err)
	c.IdempotentClient = ic
	return c
}

// AttemptCount returns how many attempts the client made.
func (c *client) AttemptCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.attempts)
}

// Attempts returns the attempts made with key.
func (c *client) Attempts(key string) []idemclient.Attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []idemclient.Attempt
	for _, a := range c.attempts {
		if a.Key == key {
			out = append(out, a)
		}
	}
	return out
}

// transportClient is an HTTP client whose transport injects plan's faults
// in process, between the client and the server.
func transportClient(srv *httptest.Server, plan faultnet.Plan) (*http.Client, *faultnet.Transport) {
	ft := faultnet.NewTransport(srv.Client().Transport, plan)
	return &http.Client{Transport: ft}, ft
}

// proxyURL serves a faultnet.Proxy in front of srv on a real listener: its
// connection faults are TCP resets.
func proxyURL(t testing.TB, srv *httptest.Server, plan faultnet.Plan) (string, *faultnet.Proxy) {
	t.Helper()
	p, err := faultnet.NewProxy(srv.URL, plan)
	require.NoError(t, err)
	ps := httptest.NewServer(p)
	t.Cleanup(ps.Close)
	return ps.URL, p
}

// testKey returns a deterministic UUID of version v for name, so fault
// plans drawn per key are the same on every run.
func testKey(name string, v byte) string {
	h := sha256.Sum256([]byte(name))
	var u uuid.UUID
	copy(u[:], h[:16])
	u[6] = u[6]&0x0f | v<<4
	u[8] = u[8]&0x3f | 0x80
	return u.String()
}

// requestKey reads a request's key on the client side, for fault plans:
// from the headers or query, else from a copy of the body.
func requestKey(r *http.Request) string {
	var body []byte
	if r.GetBody != nil {
		if rc, err := r.GetBody(); err == nil && rc != nil {
			body, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	return keyOf(r, body)
}

// sameBytes asserts that every request of one call reached the server with
// the same bytes (and so the same fingerprint), and returns how many did.
func sameBytes(t testing.TB, rec *recorder, key string) int {
	t.Helper()
	arr := rec.Arrivals(key)
	for i := 1; i < len(arr); i++ {
		a := arr[i]
		assert.Equal(t, arr[0], a, "attempts of one call differ on the wire")
	}
	return len(arr)
}

func ptr[T any](v T) *T { return &v }

func claim(user string) api.Claim {
	return api.Claim{UserId: user, CouponIds: &[]string{"c2", "c1"}, ClientTime: ptr(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)), TraceId: ptr("t-" + user)}
}

func receiptOf(t testing.TB, body []byte) api.Receipt {
	t.Helper()
	var r api.Receipt
	require.NoError(t, json.Unmarshal(body, &r), "%s", body)
	return r
}
