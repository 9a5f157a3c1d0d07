package clientapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// result is what a helper returned, whatever its operation.
type result struct {
	resp *http.Response
	body []byte
	key  string
	err  error
}

func res[R interface{ StatusCode() int }](resp R, hr func(R) *http.Response, body func(R) []byte, key string, err error) result {
	var zero R
	if any(resp) == any(zero) {
		return result{key: key, err: err}
	}
	return result{resp: hr(resp), body: body(resp), key: key, err: err}
}

// op is one typed helper, called with fixed arguments.
type op struct {
	name string
	call func(ctx context.Context, c *client, opts ...idemclient.CallOption) result
	// connection: the contract retries connection errors.
	connection bool
}

var receiptID = uuid.MustParse("0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d")

var ops = []op{
	{"claimCoupon", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"), opts...)
		return res(r, func(r *api.ClaimCouponResponse) *http.Response { return r.HTTPResponse }, func(r *api.ClaimCouponResponse) []byte { return r.Body }, k, err)
	}, true},
	{"createOrder", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.CreateOrder(ctx, nil, api.Order{Item: "book", Quantity: ptr(2)}, opts...)
		return res(r, func(r *api.CreateOrderResponse) *http.Response { return r.HTTPResponse }, func(r *api.CreateOrderResponse) []byte { return r.Body }, k, err)
	}, true},
	{"createTransfer", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.CreateTransfer(ctx, api.Transfer{Amount: 150, SentAt: ptr(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))}, opts...)
		return res(r, func(r *api.CreateTransferResponse) *http.Response { return r.HTTPResponse }, func(r *api.CreateTransferResponse) []byte { return r.Body }, k, err)
	}, true},
	{"createPayment", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.CreatePayment(ctx, nil, api.Payment{Amount: 70}, opts...)
		return res(r, func(r *api.CreatePaymentResponse) *http.Response { return r.HTTPResponse }, func(r *api.CreatePaymentResponse) []byte { return r.Body }, k, err)
	}, true},
	{"recordEvent", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.RecordEvent(ctx, api.Event{Name: "opened"}, opts...)
		return res(r, func(r *api.RecordEventResponse) *http.Response { return r.HTTPResponse }, func(r *api.RecordEventResponse) []byte { return r.Body }, k, err)
	}, true},
	{"touchItem", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.TouchItem(ctx, 42, opts...)
		return res(r, func(r *api.TouchItemResponse) *http.Response { return r.HTTPResponse }, func(r *api.TouchItemResponse) []byte { return r.Body }, k, err)
	}, false},
	{"uploadReceiptFile", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		// A reader without GetBody: the Doer buffers it once and re-sends the bytes.
		body := io.MultiReader(strings.NewReader("%PDF-1.7 "), strings.NewReader("receipt"))
		r, k, err := c.UploadReceiptFileWithBody(ctx, receiptID, nil, "application/octet-stream", body, opts...)
		return res(r, func(r *api.UploadReceiptFileResponse) *http.Response { return r.HTTPResponse }, func(r *api.UploadReceiptFileResponse) []byte { return r.Body }, k, err)
	}, true},
	{"subscribe", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		// A form body: oapi-codegen encodes it once (runtime.MarshalForm), the Doer re-sends the bytes.
		r, k, err := c.SubscribeWithFormdataBody(ctx, nil, api.SubscribeFormdataRequestBody{Email: "a@example.com", Plan: ptr("pro"), Seats: ptr(3)}, opts...)
		return res(r, func(r *api.SubscribeResponse) *http.Response { return r.HTTPResponse }, func(r *api.SubscribeResponse) []byte { return r.Body }, k, err)
	}, true},
	{"updateAccount", func(ctx context.Context, c *client, opts ...idemclient.CallOption) result {
		r, k, err := c.UpdateAccount(ctx, api.Business, receiptID, nil, api.AccountPatch{Nickname: ptr("shop")}, opts...)
		return res(r, func(r *api.UpdateAccountResponse) *http.Response { return r.HTTPResponse }, func(r *api.UpdateAccountResponse) []byte { return r.Body }, k, err)
	}, true},
}

// One fault on the first attempt of each operation's helper, injected in
// process (faultnet.Transport) and, for connection faults, on a real TCP
// connection (faultnet.Proxy): the operation runs exactly once, and the
// caller gets its first response (a replay, marked Idempotent-Replayed,
// when the server had handled the lost attempt), after waiting what the
// server asked.
func TestOneFault(t *testing.T) {
	faults := []struct {
		name      string
		fault     faultnet.Fault
		forwarded bool          // the server handled the faulty attempt
		wait      time.Duration // the wait before the retry (Retry-After; jitter draws are 0)
		proxy     bool          // also through the TCP proxy
		retried   func(op) bool // whether the operation's contract retries it
	}{
		{"response lost after the server handled the request", faultnet.DropFault, true, 0, true, func(o op) bool { return o.connection }},
		{"connection reset before the server saw the request", faultnet.ResetFault, false, 0, true, func(o op) bool { return o.connection }},
		{"response body cut", faultnet.TruncateFault, true, 0, true, func(o op) bool { return o.connection }},
		{"503 with Retry-After", faultnet.Fault{Kind: faultnet.Unavailable, RetryAfter: "3"}, false, 3 * time.Second, false, func(op) bool { return true }},
		{"409 in flight with Retry-After", faultnet.Fault{Kind: faultnet.InFlight, RetryAfter: "1"}, false, time.Second, false, func(op) bool { return true }},
	}
	for _, f := range faults {
		for _, via := range []string{"transport", "proxy"} {
			if via == "proxy" && !f.proxy {
				continue
			}
			for _, o := range ops {
				t.Run(f.name+"/"+via+"/"+o.name, func(t *testing.T) {
					e := newEnv(t)
					plan := faultnet.Script(f.fault)
					var c *client
					if via == "transport" {
						hc, _ := transportClient(e.srv, plan)
						c = newClient(t, e.srv.URL, hc)
					} else {
						url, _ := proxyURL(t, e.srv, plan)
						// No keep-alive: net/http would otherwise replay a request
						// carrying Idempotency-Key by itself after a reset on a
						// reused connection, and the attempts would not be counted here.
						c = newClient(t, url, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}})
					}
					var observed []string
					r := o.call(context.Background(), c, idemclient.WithKeyObserver(func(k string) { observed = append(observed, k) }))
					require.NotEmpty(t, r.key)
					assert.Equal(t, []string{r.key}, observed, "the key is reported once, before the first attempt")
					arrivals := sameBytes(t, e.rec, r.key)

					if !f.retried(o) {
						// Not retried (touchItem retries only 503): a clear error with
						// the key, and the call resumes with it.
						var ie *idemclient.Error
						require.ErrorAs(t, r.err, &ie)
						assert.ErrorIs(t, r.err, idemclient.ErrNotRetryable)
						assert.Equal(t, r.key, ie.Key)
						assert.Equal(t, 1, ie.Attempts)
						r2 := o.call(context.Background(), c, idemclient.WithKey(r.key))
						require.NoError(t, r2.err)
						assert.Equal(t, 1, e.shop.Executions(o.name, r.key))
						assert.Equal(t, string(e.rec.First(r.key)), string(r2.body))
						if f.forwarded {
							assert.Equal(t, "true", r2.resp.Header.Get("Idempotent-Replayed"))
						}
						return
					}

					require.NoError(t, r.err)
					assert.Less(t, r.resp.StatusCode, 300)
					assert.Equal(t, 1, e.shop.Executions(o.name, r.key), "exactly once")
					assert.Equal(t, string(e.rec.First(r.key)), string(r.body), "the first response")
					assert.Equal(t, r.key, *receiptOf(t, r.body).Key)
					if f.forwarded {
						assert.Equal(t, "true", r.resp.Header.Get("Idempotent-Replayed"))
						assert.Equal(t, 2, arrivals)
					} else {
						assert.Empty(t, r.resp.Header.Get("Idempotent-Replayed"))
						assert.Equal(t, 1, arrivals)
					}
					assert.Len(t, c.Attempts(r.key), 2)
					if f.wait > 0 {
						assert.Equal(t, []time.Duration{f.wait}, c.clock.Slept(), "Retry-After honoured")
					}
				})
			}
		}
	}
}

// Retry-After as an HTTP date and Retry-After-Ms are honoured too: the
// wait is the server's ask (the backoff, drawn at 0, is shorter).
func TestRetryAfterForms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(now time.Time) (string, string)
		want   time.Duration
	}{
		{"seconds", func(time.Time) (string, string) { return "Retry-After", "2" }, 2 * time.Second},
		{"HTTP date", func(now time.Time) (string, string) {
			return "Retry-After", now.Add(5 * time.Second).UTC().Format(http.TimeFormat)
		}, 5 * time.Second},
		{"milliseconds", func(time.Time) (string, string) { return "Retry-After-Ms", "2500" }, 2500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newVClock()
			var answered atomic.Bool
			unavailable := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !answered.Swap(true) {
						k, v := tc.header(clock.Now())
						w.Header().Set(k, v)
						w.Header().Set("Content-Type", "application/problem+json")
						w.WriteHeader(http.StatusServiceUnavailable)
						_, _ = io.WriteString(w, `{"status":503,"code":"IDEMPOTENCY_STORE_UNAVAILABLE"}`)
						return
					}
					next.ServeHTTP(w, r)
				})
			}
			e := newEnv(t, unavailable)
			c := newClientOn(t, clock, e.srv.URL, e.srv.Client())
			_, key, err := c.ClaimCoupon(context.Background(), "c1", nil, claim("u1"))
			require.NoError(t, err)
			assert.Equal(t, []time.Duration{tc.want}, c.clock.Slept())
			assert.Equal(t, 1, e.shop.Executions("claimCoupon", key))
			at := c.Attempts(key)
			require.Len(t, at, 2)
			assert.Equal(t, tc.want, at[0].RetryAfter)
		})
	}
}

// A call whose attempts all fail ends with a clear error naming its key;
// resumed later with that key (after the caller's own crash: the key was
// persisted before the first attempt), it gets the first response instead
// of running again.
func TestResumeAfterExhaustedAttempts(t *testing.T) {
	e := newEnv(t)
	hc, ft := transportClient(e.srv, faultnet.Script(faultnet.DropFault, faultnet.DropFault, faultnet.DropFault, faultnet.DropFault))
	c := newClient(t, e.srv.URL, hc)
	var saved string
	resp, key, err := c.ClaimCoupon(context.Background(), "c1", nil, claim("u1"), idemclient.WithKeyObserver(func(k string) { saved = k }))
	assert.Nil(t, resp)
	var ie *idemclient.Error
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, idemclient.ErrAttemptsExhausted)
	assert.Equal(t, 4, ie.Attempts)
	assert.Equal(t, saved, key)
	assert.Equal(t, key, ie.Key)
	assert.Equal(t, 4, ft.Stats().Count(faultnet.Drop))
	assert.Equal(t, 1, e.shop.Executions("claimCoupon", key), "the first attempt ran; the next three were replays whose answers were lost")

	// A new client (the process restarted), the same arguments and the saved key.
	c2 := newClient(t, e.srv.URL, e.srv.Client())
	resp, key2, err := c2.ClaimCoupon(context.Background(), "c1", nil, claim("u1"), idemclient.WithKey(saved))
	require.NoError(t, err)
	assert.Equal(t, saved, key2)
	assert.Equal(t, http.StatusCreated, resp.StatusCode())
	assert.Equal(t, "true", resp.HTTPResponse.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, string(e.rec.First(saved)), string(resp.Body))
	require.NotNil(t, resp.JSON201)
	assert.Equal(t, 1, resp.JSON201.Count)
	assert.Equal(t, 1, e.shop.Executions("claimCoupon", saved))
	assert.Equal(t, 5, sameBytes(t, e.rec, saved), "five requests, one fingerprint")
}

// The generic wiring: oapi-codegen's own methods, through NewIdempotentDoer,
// are retried with a key per request (the nil UUID of an unset uuid-typed
// key parameter is replaced), under a base path too; other routes pass
// through untouched. The same holds with the exact matcher of the server
// URL, IdempotentMatcher, which NewIdempotentClient installs when it wraps
// an HTTP client itself.
func TestDoerForAnyClient(t *testing.T) {
	t.Run("suffix", func(t *testing.T) { testDoerForAnyClient(t, false) })
	t.Run("exact", func(t *testing.T) { testDoerForAnyClient(t, true) })
}

func testDoerForAnyClient(t *testing.T, exact bool) {
	e := newEnv(t, func(h http.Handler) http.Handler { return http.StripPrefix("/v1", h) })
	var mu sync.Mutex
	seen := map[string]bool{}
	dropFirst := faultnet.PlanFunc(func(r *http.Request) faultnet.Fault { // the first POST of each path loses its response
		mu.Lock()
		defer mu.Unlock()
		if seen[r.URL.Path] || r.Method != http.MethodPost {
			return faultnet.PassFault
		}
		seen[r.URL.Path] = true
		return faultnet.DropFault
	})
	hc, ft := transportClient(e.srv, dropFirst)
	var opts []idemclient.Option
	if exact {
		m, err := api.IdempotentMatcher(e.srv.URL + "/v1")
		require.NoError(t, err)
		opts = append(opts, idemclient.WithMatcher(m))
	}
	c := newClient(t, e.srv.URL+"/v1", hc, opts...)

	// ClaimCouponWithResponse with no key: the params hold the nil UUID.
	resp, err := c.ClaimCouponWithResponse(context.Background(), "c1", &api.ClaimCouponParams{}, claim("u1"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resp.StatusCode())
	key := *resp.JSON201.Key
	assert.NotEqual(t, uuid.Nil.String(), key)
	assert.Equal(t, 7, int(uuid.MustParse(key).Version()), "the contract's format: uuid, made as v7")
	assert.Equal(t, "true", resp.HTTPResponse.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, 1, e.shop.Executions("claimCoupon", key))
	assert.Len(t, c.Attempts(key), 2)

	// A route that is not idempotent is not retried: its lost response is an error.
	_, err = c.TouchSpecialItemWithResponse(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, faultnet.ErrInjected)
	assert.Equal(t, 1, e.shop.Executions("touchSpecialItem", ""))
	assert.Equal(t, 3, ft.Stats().Requests)

	// A GET passes through untouched, without a key.
	list, err := c.ListCouponsWithResponse(context.Background())
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, list.StatusCode())
	assert.Equal(t, 1, e.shop.Executions("listCoupons", ""))

	// The typed helpers work under the base path too (touchItem's contract
	// does not retry connection errors: the caller resumes with the key).
	_, key, err = c.CreateOrder(context.Background(), nil, api.Order{Item: "a"})
	require.NoError(t, err)
	assert.Equal(t, 1, e.shop.Executions("createOrder", key))
	assert.Len(t, c.Attempts(key), 2)
}

// A client whose HTTP doer is not an idemclient.Doer is wrapped by
// NewIdempotentClient; one built by hand around a plain client is caught
// by the helper, which reports ErrNotManaged instead of pretending.
func TestWrapping(t *testing.T) {
	e := newEnv(t)
	c, err := api.NewIdempotentClient(e.srv.URL, api.WithHTTPClient(e.srv.Client()))
	require.NoError(t, err)
	resp, key, err := c.CreateOrder(context.Background(), nil, api.Order{Item: "a"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode())
	assert.Equal(t, 1, e.shop.Executions("createOrder", key))

	plain, err := api.NewClientWithResponses(e.srv.URL, api.WithHTTPClient(e.srv.Client()))
	require.NoError(t, err)
	byHand := &api.IdempotentClient{ClientWithResponses: plain}
	_, _, err = byHand.CreateOrder(context.Background(), nil, api.Order{Item: "a"})
	assert.True(t, errors.Is(err, idemclient.ErrNotManaged), "%v", err)
}

// A form body (SubscribeWithFormdataBody): the response to the first
// attempt is lost, and the retry sends the same key and the same encoded
// form; the server runs the operation once and replays it.
func TestFormBodyRetried(t *testing.T) {
	e := newEnv(t)
	hc, _ := transportClient(e.srv, faultnet.Script(faultnet.DropFault))
	c := newClient(t, e.srv.URL, hc)
	resp, key, err := c.SubscribeWithFormdataBody(context.Background(), nil,
		api.SubscribeFormdataRequestBody{Email: "a@example.com", Plan: ptr("pro"), Seats: ptr(3)})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode())
	assert.Equal(t, "true", resp.HTTPResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 2, sameBytes(t, e.rec, key), "two attempts, the same bytes")
	assert.Equal(t, "email=a%40example.com&plan=pro&seats=3", e.rec.Arrivals(key)[0].Body)
	assert.Equal(t, 1, e.shop.Executions("subscribe", key))
}
