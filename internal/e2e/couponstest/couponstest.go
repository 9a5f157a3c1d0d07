// Package couponstest is the end-to-end scenario suite of the server
// emitter's "coupons" spec (testdata/server/coupons/openapi.yaml), shared by
// the generated packages built from it: internal/e2e/strictapi (strict
// server) and internal/e2e/plainapi (plain std-http server). Each package
// implements the operations over a Service (which counts executions and can
// hold one in flight), wires the generated Idempotency into its server, and
// calls Run, which drives the server over real HTTP.
package couponstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// Service is what the handlers of both packages do: count the executions
// of each operation, and block one when the test holds it.
type Service struct {
	mu     sync.Mutex
	counts map[string]int
	holds  map[string]*hold
}

type hold struct {
	entered chan struct{}
	release chan struct{}
}

// NewService returns a Service with nothing counted.
func NewService() *Service {
	return &Service{counts: map[string]int{}, holds: map[string]*hold{}}
}

// Exec records an execution of op and returns its number (1 for the
// first); when op is held, it signals that it entered and waits for the
// release.
func (s *Service) Exec(op string) int {
	s.mu.Lock()
	s.counts[op]++
	n := s.counts[op]
	h := s.holds[op]
	delete(s.holds, op)
	s.mu.Unlock()
	if h != nil {
		close(h.entered)
		<-h.release
	}
	return n
}

// Count returns how many times op executed.
func (s *Service) Count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

// Hold makes the next execution of op block until release is called;
// entered is closed when it starts.
func (s *Service) Hold(op string) (entered <-chan struct{}, release func()) {
	h := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	s.holds[op] = h
	s.mu.Unlock()
	var once sync.Once
	return h.entered, func() { once.Do(func() { close(h.release) }) }
}

// Receipt is what every operation answers (the spec's Receipt schema).
func Receipt(op string, n int) (id string, count int) { return fmt.Sprintf("%s-%d", op, n), n }

// FailUser is the user_id for which claimCoupon answers 500.
const FailUser = "fail"

// Clock is a settable clock for the engine and the store.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Env is what a package's server is built from.
type Env struct {
	Service *Service
	Store   idem.Store
	Options idem.Options // Now: the test clock; Principal: the X-User header
}

// NewServer builds a package's complete server (router, generated
// wrappers) over env.
type NewServer func(t *testing.T, env Env) http.Handler

// Response is an HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Problem decodes an application/problem+json body.
func (r Response) Problem(t *testing.T) (code string, status int) {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "a problem document; body %s", r.Body)
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
		Type   string `json:"type"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Body), &p), r.Body)
	assert.Equal(t, r.Status, p.Status)
	assert.Equal(t, idem.DefaultProblemTypeBase+p.Code, p.Type)
	return p.Code, p.Status
}

// Receipt decodes a Receipt body.
func (r Response) Receipt(t *testing.T) (id string, count int) {
	t.Helper()
	var rc struct {
		ID    string `json:"id"`
		Count int    `json:"count"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Body), &rc), r.Body)
	return rc.ID, rc.Count
}

type client struct {
	t   *testing.T
	url string
}

// do sends a request; headers are name, value pairs.
func (c client) do(method, path, body string, headers ...string) Response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	require.NoError(c.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-User", "alice")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: string(data)}
}

// Keys used by the scenarios (claimCoupon's key is a uuid).
const (
	key1 = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"
	key2 = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f71"
	key3 = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f72"
)

// canonical reports whether the runtime's fingerprint is canonical JSON
// (volatile members left out). Until the canonical implementation is merged
// (runtime/fingerprint is a placeholder that hashes raw bytes on some
// branches), the scenarios that depend on it skip, saying so.
func canonical() bool {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/v"}})
	if err != nil {
		return false
	}
	a := h.Sum(&fingerprint.Input{Method: "POST", ContentType: "application/json", Body: []byte(`{"a":1,"v":1}`)})
	b := h.Sum(&fingerprint.Input{Method: "POST", ContentType: "application/json", Body: []byte(`{"v":2, "a":1}`)})
	return a == b
}

func needCanonical(t *testing.T) {
	if !canonical() {
		t.Skip("runtime/fingerprint is not canonical in this build (placeholder): volatile members and key order still count")
	}
}

// Run runs every scenario, each on a fresh server.
func Run(t *testing.T, newServer NewServer) {
	start := func(t *testing.T) (client, *Service, *Clock) {
		clock := &Clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
		store := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
		t.Cleanup(func() { store.Close() })
		svc := NewService()
		h := newServer(t, Env{Service: svc, Store: store, Options: idem.Options{
			Now:       clock.Now,
			Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		}})
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return client{t: t, url: srv.URL}, svc, clock
	}
	claim := func(user string, extra string) string {
		return `{"user_id":"` + user + `","coupon_ids":["c1","c2","c3"],"client_time":"2026-01-02T03:04:05Z","retry_count":0,"trace_id":"t-1"` + extra + `}`
	}

	t.Run("strict replay", func(t *testing.T) {
		c, svc, _ := start(t)
		first := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1)
		require.Equal(t, http.StatusCreated, first.Status, first.Body)
		assert.Equal(t, "/claims/1", first.Header.Get("Location"))
		assert.Empty(t, first.Header.Get("Idempotent-Replayed"))
		id, n := first.Receipt(t)
		assert.Equal(t, "claimCoupon-1", id)
		assert.Equal(t, 1, n)

		again := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1)
		assert.Equal(t, http.StatusCreated, again.Status)
		assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, "/claims/1", again.Header.Get("Location"), "allowlisted header replayed")
		assert.Equal(t, "application/json", again.Header.Get("Content-Type"))
		assert.Equal(t, first.Body, again.Body)
		assert.Equal(t, 1, svc.Count("claimCoupon"))

		// The key in upper case: the same key.
		upper := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", strings.ToUpper(key1))
		assert.Equal(t, "true", upper.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, 1, svc.Count("claimCoupon"))
	})

	t.Run("strict mismatch", func(t *testing.T) {
		c, svc, _ := start(t)
		require.Equal(t, http.StatusCreated, c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1).Status)
		other := c.do("POST", "/coupons/C1/claims", claim("u2", ""), "Idempotency-Key", key1)
		assert.Equal(t, http.StatusUnprocessableEntity, other.Status)
		code, _ := other.Problem(t)
		assert.Equal(t, idem.CodeKeyReused, code)
		// The same key and body for another coupon is another request (the
		// path is part of the fingerprint): never coupon C1's answer.
		otherPath := c.do("POST", "/coupons/C2/claims", claim("u1", ""), "Idempotency-Key", key1)
		assert.Equal(t, http.StatusUnprocessableEntity, otherPath.Status)
		code, _ = otherPath.Problem(t)
		assert.Equal(t, idem.CodeKeyReused, code)
		assert.Empty(t, otherPath.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, 1, svc.Count("claimCoupon"))
	})

	t.Run("volatile members changed: replay", func(t *testing.T) {
		needCanonical(t)
		c, svc, _ := start(t)
		first := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1)
		require.Equal(t, http.StatusCreated, first.Status)
		retry := c.do("POST", "/coupons/C1/claims",
			`{"trace_id":"t-2","retry_count":3,"client_time":"2026-01-02T03:09:00Z","user_id":"u1","coupon_ids":["c1","c2","c3"]}`,
			"Idempotency-Key", key1)
		assert.Equal(t, http.StatusCreated, retry.Status)
		assert.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body, retry.Body)
		assert.Equal(t, 1, svc.Count("claimCoupon"))
	})

	t.Run("unordered array reordered: replay", func(t *testing.T) {
		needCanonical(t)
		c, svc, _ := start(t)
		require.Equal(t, http.StatusCreated, c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1).Status)
		retry := c.do("POST", "/coupons/C1/claims", `{"user_id":"u1","coupon_ids":["c3","c1","c2"],"client_time":"2026-01-02T03:05:00Z","retry_count":1,"trace_id":"t-9"}`, "Idempotency-Key", key1)
		assert.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, 1, svc.Count("claimCoupon"))
	})

	t.Run("undeclared members are fingerprinted (raw bytes)", func(t *testing.T) {
		c, svc, _ := start(t)
		require.Equal(t, http.StatusCreated, c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1).Status)
		// Decoding into the typed Claim drops "note"; the raw bytes keep it.
		retry := c.do("POST", "/coupons/C1/claims", claim("u1", `,"note":"hi"`), "Idempotency-Key", key1)
		assert.Equal(t, http.StatusUnprocessableEntity, retry.Status)
		code, _ := retry.Problem(t)
		assert.Equal(t, idem.CodeKeyReused, code)
		assert.Equal(t, 1, svc.Count("claimCoupon"))
	})

	// The security trial's attack: claimCoupon declares only
	// application/json, and its handler decodes JSON whatever the
	// Content-Type. A JSON body labelled as a form was compared as form
	// fields, which ignore the order of the '&'-separated parts and
	// percent-escapes: the retry, which the handler reads as another user's
	// claim, was replayed the first response. The generated policy declares
	// the operation's media types, so such a body is compared byte for
	// byte.
	t.Run("undeclared media type: compared byte for byte", func(t *testing.T) {
		const form = "application/x-www-form-urlencoded"
		for _, tt := range []struct{ name, first, retry string }{
			// The last user_id, the one encoding/json keeps, goes from u1 to u2.
			{"parts reordered", `{"trace_id":"&","user_id":"u2","trace_id":"&","user_id":"u1","trace_id":"&"}`,
				`{"trace_id":"&","user_id":"u1","trace_id":"&","user_id":"u2","trace_id":"&"}`},
			{"percent-escaped", claim("u1", ""), claim("%75%31", "")},
		} {
			t.Run(tt.name, func(t *testing.T) {
				c, svc, _ := start(t)
				first := c.do("POST", "/coupons/C1/claims", tt.first, "Idempotency-Key", key1, "Content-Type", form)
				require.Less(t, first.Status, 500, first.Body) // recorded (a framework may bind the form and refuse it)
				retry := c.do("POST", "/coupons/C1/claims", tt.retry, "Idempotency-Key", key1, "Content-Type", form)
				assert.Empty(t, retry.Header.Get("Idempotent-Replayed"))
				require.Equal(t, http.StatusUnprocessableEntity, retry.Status, retry.Body)
				code, _ := retry.Problem(t)
				assert.Equal(t, idem.CodeKeyReused, code)
				assert.LessOrEqual(t, svc.Count("claimCoupon"), 1)
			})
		}
	})

	t.Run("missing and malformed keys", func(t *testing.T) {
		c, svc, _ := start(t)
		for _, tt := range []struct {
			name, key, code string
		}{
			{"missing", "", idem.CodeKeyMissing},
			{"not a uuid", "not-a-uuid", idem.CodeKeyInvalid},
		} {
			r := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", tt.key)
			assert.Equal(t, http.StatusBadRequest, r.Status, tt.name)
			code, _ := r.Problem(t)
			assert.Equal(t, tt.code, code, tt.name)
		}
		r := c.do("POST", "/orders", `{"item":"book"}`) // a required string header
		assert.Equal(t, http.StatusBadRequest, r.Status)
		code, _ := r.Problem(t)
		assert.Equal(t, idem.CodeKeyMissing, code)
		r = c.do("POST", "/items/I1", "") // a key the spec does not declare: the engine's own check
		assert.Equal(t, http.StatusBadRequest, r.Status)
		code, _ = r.Problem(t)
		assert.Equal(t, idem.CodeKeyMissing, code)
		assert.Zero(t, svc.Count("claimCoupon")+svc.Count("createOrder")+svc.Count("touchItem"))
	})

	t.Run("loose: another body is replayed", func(t *testing.T) {
		c, svc, _ := start(t)
		first := c.do("POST", "/orders", `{"item":"book"}`, "Idempotency-Key", "order-1")
		require.Equal(t, http.StatusCreated, first.Status, first.Body)
		other := c.do("POST", "/orders", `{"item":"pen","quantity":2}`, "Idempotency-Key", "order-1")
		assert.Equal(t, http.StatusCreated, other.Status)
		assert.Equal(t, "true", other.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body, other.Body)
		assert.Equal(t, 1, svc.Count("createOrder"))
	})

	t.Run("window: replay inside, new request after", func(t *testing.T) {
		needCanonical(t)
		c, svc, clock := start(t)
		body := func(sec string) string { return `{"name":"login","sent_at":"2026-01-02T03:04:` + sec + `Z"}` }
		first := c.do("POST", "/events", body("01"))
		require.Equal(t, http.StatusAccepted, first.Status, first.Body)
		clock.Advance(30 * time.Second)
		dup := c.do("POST", "/events", body("02")) // no key: principal + fingerprint; sent_at is volatile
		assert.Equal(t, http.StatusAccepted, dup.Status)
		assert.Equal(t, "true", dup.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body, dup.Body)
		assert.Equal(t, 1, svc.Count("recordEvent"))

		clock.Advance(31 * time.Second) // past the 1m window
		late := c.do("POST", "/events", body("03"))
		assert.Equal(t, http.StatusAccepted, late.Status)
		assert.Empty(t, late.Header.Get("Idempotent-Replayed"))
		id, _ := late.Receipt(t)
		assert.Equal(t, "recordEvent-2", id)

		keyed := c.do("POST", "/events", body("04"), "Idempotency-Key", "ev-1")
		keyedDup := c.do("POST", "/events", `{"name":"other"}`, "Idempotency-Key", "ev-1")
		assert.Equal(t, keyed.Body, keyedDup.Body, "window: another body with the key is replayed")
		assert.Equal(t, 3, svc.Count("recordEvent"))
	})

	t.Run("in flight", func(t *testing.T) {
		c, svc, _ := start(t)
		entered, release := svc.Hold("claimCoupon")
		defer release()
		firstDone := make(chan Response, 1)
		go func() {
			firstDone <- c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1)
		}()
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the first request never reached the handler")
		}
		dup := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1)
		assert.Equal(t, http.StatusConflict, dup.Status)
		assert.Equal(t, "2", dup.Header.Get("Retry-After"))
		code, _ := dup.Problem(t)
		assert.Equal(t, idem.CodeKeyInUse, code)
		release()
		first := <-firstDone
		assert.Equal(t, http.StatusCreated, first.Status)
		after := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key1)
		assert.Equal(t, "true", after.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body, after.Body)
		assert.Equal(t, 1, svc.Count("claimCoupon"))
	})

	t.Run("key in the body", func(t *testing.T) {
		needCanonical(t)
		c, svc, _ := start(t)
		first := c.do("POST", "/transfers", `{"idempotency_key":"tr-1","amount":100,"sent_at":"2026-01-02T03:04:01Z"}`)
		require.Equal(t, http.StatusCreated, first.Status, first.Body)
		dup := c.do("POST", "/transfers", `{"amount":100,"sent_at":"2026-01-02T03:04:09Z","idempotency_key":"tr-1"}`)
		assert.Equal(t, "true", dup.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body, dup.Body)
		other := c.do("POST", "/transfers", `{"idempotency_key":"tr-1","amount":200}`)
		assert.Equal(t, http.StatusUnprocessableEntity, other.Status)
		next := c.do("POST", "/transfers", `{"idempotency_key":"tr-2","amount":200}`)
		assert.Equal(t, http.StatusCreated, next.Status)
		assert.Empty(t, next.Header.Get("Idempotent-Replayed"))
		missing := c.do("POST", "/transfers", `{"amount":100}`)
		assert.Equal(t, http.StatusBadRequest, missing.Status)
		code, _ := missing.Problem(t)
		assert.Equal(t, idem.CodeKeyMissing, code)
		assert.Equal(t, 2, svc.Count("createTransfer"))
	})

	t.Run("key in the query", func(t *testing.T) {
		c, svc, _ := start(t)
		first := c.do("POST", "/payments?request_id=pay-1", `{"amount":5}`)
		require.Equal(t, http.StatusCreated, first.Status, first.Body)
		dup := c.do("POST", "/payments?request_id=pay-1", `{"amount":5}`)
		assert.Equal(t, "true", dup.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.Body, dup.Body)
		other := c.do("POST", "/payments?request_id=pay-1", `{"amount":6}`)
		assert.Equal(t, http.StatusUnprocessableEntity, other.Status)
		missing := c.do("POST", "/payments", `{"amount":5}`)
		assert.Equal(t, http.StatusBadRequest, missing.Status)
		code, _ := missing.Problem(t)
		assert.Equal(t, idem.CodeKeyMissing, code)
		assert.Equal(t, 1, svc.Count("createPayment"))
	})

	t.Run("other routes untouched", func(t *testing.T) {
		c, svc, _ := start(t)
		for range 2 {
			r := c.do("GET", "/coupons", "", "Idempotency-Key", key1)
			assert.Equal(t, http.StatusOK, r.Status)
			assert.Empty(t, r.Header.Get("Idempotent-Replayed"))
		}
		assert.Equal(t, 2, svc.Count("listCoupons"))
		// /items/special is static: it wins over the idempotent /items/{itemId}.
		for i := range 2 {
			r := c.do("POST", "/items/special", "", "Idempotency-Key", "same")
			assert.Equal(t, http.StatusOK, r.Status)
			assert.Empty(t, r.Header.Get("Idempotent-Replayed"))
			id, _ := r.Receipt(t)
			assert.Equal(t, fmt.Sprintf("touchSpecialItem-%d", i+1), id)
		}
		// ... while any other item is idempotent.
		for range 2 {
			r := c.do("POST", "/items/regular", "", "Idempotency-Key", "same")
			assert.Equal(t, http.StatusOK, r.Status)
		}
		assert.Equal(t, 1, svc.Count("touchItem"))
		nested := c.do("POST", "/items/a/b", "", "Idempotency-Key", "same")
		assert.Equal(t, http.StatusNotFound, nested.Status, "not a route: the router answers")
		assert.Empty(t, nested.Header.Get("Idempotent-Replayed"))
	})

	t.Run("a failure frees the key", func(t *testing.T) {
		c, svc, _ := start(t)
		for range 2 {
			r := c.do("POST", "/coupons/C1/claims", claim(FailUser, ""), "Idempotency-Key", key2)
			assert.Equal(t, http.StatusInternalServerError, r.Status)
		}
		assert.Equal(t, 2, svc.Count("claimCoupon"))
	})

	t.Run("records are per principal", func(t *testing.T) {
		c, svc, _ := start(t)
		a := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key3)
		b := c.do("POST", "/coupons/C1/claims", claim("u1", ""), "Idempotency-Key", key3, "X-User", "bob")
		assert.Equal(t, http.StatusCreated, a.Status)
		assert.Equal(t, http.StatusCreated, b.Status)
		assert.Empty(t, b.Header.Get("Idempotent-Replayed"))
		assert.NotEqual(t, a.Body, b.Body)
		assert.Equal(t, 2, svc.Count("claimCoupon"))
	})
}
