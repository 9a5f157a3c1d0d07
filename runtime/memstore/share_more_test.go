package memstore_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

func TestShareEngineSteadyState429(t *testing.T) {
	for _, share := range []float64{-1, 0} {
		t.Run(fmt.Sprint("share=", share), func(t *testing.T) { shareEngineSteady(t, share) })
	}
}

// shareEngineSteady: the steady-state refusal through
// Engine.Handler: three tenants, one new key every 10 s between them,
// a memstore of 1000 records (defaults otherwise: MinRetention 1 h), the
// policy's default 24 h window; a MinRetention's worth of records (360)
// fits in half the store, so no 429 (before the fix, once the store passed
// half, about 1 h 24 min in, every tenant got 429 with Retry-After 3600
// for every new key, though the store held hundreds of records older than
// MinRetention).
func shareEngineSteady(t *testing.T, share float64) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000, MaxPrincipalShare: share})
	eng := idem.New(s, idem.Options{
		Principal: func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil },
		Logger:    slog.New(slog.DiscardHandler),
	})
	h := eng.Handler(paymentsPolicy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":1}`))
	}))
	codes := map[int]int{}
	var ra string
	for i := range 4 * 3600 / 10 { // four hours, a request every 10 s: 1440 requests (360 an hour: MinRetention's worth fits in half the store)
		c.Add(10 * time.Second)
		r := httptest.NewRequest("POST", "/payments", bytes.NewReader([]byte(`{"amount":1}`)))
		r.Header.Set("X-User", []string{"acme", "globex", "initech"}[i%3])
		r.Header.Set("Idempotency-Key", fmt.Sprint("k-", i))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests {
			ra = w.Header().Get("Retry-After")
		}
	}
	st := s.Stats()
	t.Logf("codes %v, last Retry-After %q, stats %+v", codes, ra, st)
	if n := codes[http.StatusTooManyRequests]; n != 0 {
		t.Errorf("a normal load of three tenants (360 new keys an hour, a 1000-record store, MinRetention 1 h) got %d x 429 (Retry-After %s)", n, ra)
	}
}

// TestShareExpiredRecordsCountTowardShare: a principal's records expired a
// second ago, but the sweeper has not run (amortized expiry drops 4 per
// Begin): its next new key is admitted, as admit drops expired records
// before refusing (before the fix it was refused ErrPrincipalFull, with a
// store that would be 30% full once its expired records were dropped).
func TestShareExpiredRecordsCountTowardShare(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000})
	for i := range 300 {
		if i < 250 {
			if err := claimAs(t, s, "p", fmt.Sprint("k-", i), time.Minute, []byte("ok")); err != nil {
				t.Fatalf("claim %d: %v", i, err)
			}
		}
		if err := claimAs(t, s, "", fmt.Sprint("anon-", i), time.Hour, []byte("ok")); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	c.Add(time.Minute + time.Second) // p's 250 records expired; 300 others live
	err := claimAs(t, s, "p", "fresh", time.Hour, []byte("ok"))
	t.Logf("after expiry: %v; stats %+v", err, s.Stats())
	if err != nil {
		t.Errorf("refused although all of p's records have expired and the live ones fill 30%% of the store: %v", err)
	}
}
