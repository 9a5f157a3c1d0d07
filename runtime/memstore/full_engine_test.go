package memstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestEngineOverFullStore: the security review's attack at small scale,
// with the per-principal share disabled (Options.MaxPrincipalShare
// negative; TestEngineFloodByOnePrincipal has the default). One
// caller sends large requests (echoed in the responses) under fresh keys
// until the store is full: its claims are refused with 503
// IDEMPOTENCY_STORE_UNAVAILABLE and Retry-After (until the shard can make
// room: nothing executed), and the
// victim's retry is still replayed, not executed again. With FailOpen the
// attacker's requests run unprotected instead, and the victim's retry is
// still replayed.
func TestEngineOverFullStore(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprint("FailOpen=", failOpen), func(t *testing.T) {
			s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: 64 << 10, MaxPrincipalShare: -1})
			eng := idem.New(s, idem.Options{
				Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
				FailOpen:  failOpen,
				Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			executed, post := paymentsServer(eng)
			victim := []byte(`{"amount":100,"description":"rent"}`)
			require.Equal(t, http.StatusCreated, post("victim", "v-1", victim).Code)
			big := []byte(`{"amount":1,"description":"` + string(bytes.Repeat([]byte("A"), 4<<10)) + `"}`)
			refused := 0
			for i := range 40 {
				w := post("attacker", fmt.Sprint("a-", i), big)
				if w.Code == http.StatusCreated {
					continue
				}
				refused++
				require.Equal(t, http.StatusServiceUnavailable, w.Code)
				// Until the victim's record is MinRetention (an hour) old:
				// the store's hint (idem.RetryHint), not UnavailableRetryAfter,
				// capped at what a client waits for (30s).
				assert.Equal(t, "30", w.Header().Get("Retry-After"))
				var p struct{ Code string }
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
				assert.Equal(t, idem.CodeStoreUnavailable, p.Code)
			}
			if failOpen {
				assert.Zero(t, refused)
				assert.Equal(t, 40, executed["attacker"], "FailOpen runs the refused claims unprotected")
			} else {
				assert.NotZero(t, refused)
				assert.Equal(t, 40-refused, executed["attacker"], "nothing executed for a refused claim")
			}
			assert.NotZero(t, s.Stats().Full)
			assert.Zero(t, s.Stats().Evicted)
			w := post("victim", "v-1", victim)
			assert.Equal(t, http.StatusCreated, w.Code)
			assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, 1, executed["victim"], "the victim's retry is replayed, not executed again")
		})
	}
}

// TestEngineFloodByOnePrincipal: the security trial's flood (HIGH 2), at
// small scale, with the store's defaults but its size: one principal sends
// large requests (echoed in the responses) under fresh keys. Once the
// store is under pressure its claims are refused, 429
// IDEMPOTENCY_QUOTA_EXCEEDED with Retry-After, reported as EventRejected
// and logged once; nothing ran for them, FailOpen or not; and the other
// principals' new keys are still admitted and executed (before
// MaxPrincipalShare, everyone was refused 503 for up to an hour, and
// FailOpen ran everything unprotected).
func TestEngineFloodByOnePrincipal(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprint("FailOpen=", failOpen), func(t *testing.T) {
			s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: 64 << 10})
			var logs bytes.Buffer
			var mu sync.Mutex
			var rejected []idem.Event
			eng := idem.New(s, idem.Options{
				Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
				FailOpen:  failOpen,
				Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
				Observer: idem.ObserverFunc(func(_ context.Context, e idem.Event) {
					if e.Kind == idem.EventRejected {
						mu.Lock()
						rejected = append(rejected, e)
						mu.Unlock()
					}
				}),
			})
			executed, post := paymentsServer(eng)
			big := []byte(`{"amount":1,"description":"` + string(bytes.Repeat([]byte("A"), 4<<10)) + `"}`)
			refused := 0
			for i := range 40 {
				w := post("mallory", fmt.Sprint("m-", i), big)
				if w.Code == http.StatusCreated {
					continue
				}
				refused++
				require.Equal(t, http.StatusTooManyRequests, w.Code, "mallory's claim %d: %s", i, w.Body)
				assert.NotEmpty(t, w.Header().Get("Retry-After"))
				var p struct{ Code string }
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
				assert.Equal(t, "IDEMPOTENCY_QUOTA_EXCEEDED", p.Code)
			}
			require.NotZero(t, refused, "the flood was never refused")
			assert.Equal(t, 40-refused, executed["mallory"], "nothing ran for a refused claim, FailOpen or not")
			// The others are admitted, by new keys, many of them.
			for i := range 10 {
				w := post(fmt.Sprint("user", i), "k-1", []byte(`{"amount":100,"description":"rent"}`))
				assert.Equal(t, http.StatusCreated, w.Code, "user%d after the flood: %s", i, w.Body)
				assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
			}
			mu.Lock()
			assert.Len(t, rejected, refused, "an EventRejected per refusal")
			for _, e := range rejected {
				assert.Equal(t, "IDEMPOTENCY_QUOTA_EXCEEDED", e.Code)
				assert.Equal(t, http.StatusTooManyRequests, e.Status)
				assert.Equal(t, "mallory", e.Principal)
			}
			mu.Unlock()
			assert.Equal(t, 1, strings.Count(logs.String(), "claims refused"), "logged once, not per refusal:\n%s", logs.String())
			assert.NotContains(t, logs.String(), "fail_open=true", "no unprotected run")
			assert.NotContains(t, logs.String(), "store failed")
		})
	}
}

// TestEngineAnonymousFloodNotLimited: callers without a principal
// (idem.Anonymous) are never refused for a share: their flood fills the
// store and gets 503 IDEMPOTENCY_STORE_UNAVAILABLE (ErrFull), as before
// MaxPrincipalShare, never 429.
func TestEngineAnonymousFloodNotLimited(t *testing.T) {
	s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: 64 << 10})
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.DiscardHandler)})
	h := eng.Handler(paymentsPolicy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	}))
	big := []byte(`{"amount":1,"description":"` + string(bytes.Repeat([]byte("A"), 4<<10)) + `"}`)
	codes := map[int]int{}
	for i := range 40 {
		r := httptest.NewRequest("POST", "/payments", bytes.NewReader(big))
		r.Header.Set("Idempotency-Key", fmt.Sprint("a-", i))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes[w.Code]++
	}
	assert.Zero(t, codes[http.StatusTooManyRequests], "%v", codes)
	assert.NotZero(t, codes[http.StatusServiceUnavailable], "%v", codes)
	assert.Zero(t, s.Stats().PrincipalFull)
	assert.NotZero(t, s.Stats().Full)
}

// paymentsPolicy is the payments operation of the engine-level tests.
var paymentsPolicy = idem.MustCompile(idem.Spec{
	Operation: "createPayment", Method: "POST", Path: "/payments", Semantics: idem.Strict,
	Key: idem.KeySpec{Carrier: idem.CarrierHeader, Name: "Idempotency-Key", Required: idem.Required},
})

// paymentsServer serves paymentsPolicy through eng with a handler that
// echoes the request body in a 201 (a large request makes a large record)
// and counts its runs per caller (X-User, which the tests' Principal
// reads); post sends one request as user with key.
func paymentsServer(eng *idem.Engine) (executed map[string]int, post func(user, key string, body []byte) *httptest.ResponseRecorder) {
	executed = map[string]int{}
	h := eng.Handler(paymentsPolicy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		executed[r.Header.Get("X-User")]++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(b)
	}))
	return executed, func(user, key string, body []byte) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/payments", bytes.NewReader(body))
		r.Header.Set("X-User", user)
		r.Header.Set("Idempotency-Key", key)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
}
