package pgstore

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// TestTxDuplicateOfLockedHolder: above READ COMMITTED a holder's transaction
// locks its row and its heartbeats leave the lease alone, so the lease runs
// out while the holder is alive. Duplicates arriving then are answered in
// flight at once (409 with Retry-After): not a store failure after the store
// timeout, which FailOpen would turn into a second run of the handler beside
// the live holder; and, not waiting on the lock, they hold no pool
// connection, so a request for another key is not starved (a pool of 4: the
// holder's transaction and three duplicates used to take all of it). Once
// the holder has committed, a retry replays. With the claim function and
// with the claim statement.
func TestTxDuplicateOfLockedHolder(t *testing.T) {
	t.Parallel()
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		for _, path := range claimPaths {
			t.Run(string(iso)+"/"+path.name, func(t *testing.T) {
				t.Parallel()
				testTxDuplicateOfLockedHolder(t, iso, path.way)
			})
		}
	}
}

func testTxDuplicateOfLockedHolder(t *testing.T, iso pgx.TxIsoLevel, way claimWay) {
	p := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) { c.MaxConns = 4 })
	f := newTxFixtureOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: iso}})
	useClaimFunc(f.s, way)
	// A duplicate that waited on the holder's lock would wait out the store
	// timeout, and hold its pool connection as long: 10s, so that half of
	// it bounds "at once" with room for a loaded machine (with 2s, a
	// duplicate answered in 1.08s failed the 1s bound, once in 160 runs
	// with -race on the shared 2-core machine).
	const storeTimeout = 10 * time.Second
	eng := idem.New(f.s, idem.Options{Principal: idem.Anonymous, Transactional: true, FailOpen: true, StoreTimeout: storeTimeout})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		// A heartbeat gets a third of the lease: one that times out counts
		// as the server unreachable (TxHoldsLock false), and heartbeats
		// that all do until the lease's end cancel the holder. 200ms
		// each, not 33ms: a loaded machine (-race, 2 shared cores) missed
		// 33ms for a whole lease of 100ms.
		InFlight: idem.InFlightSpec{Lease: 600 * time.Millisecond}})
	const slowKey = "slow-0000000000000000"
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == slowKey {
			if runs.Add(1) == 1 {
				close(started)
				<-release // a slow payment, alive, heartbeating
			}
		}
		w.WriteHeader(http.StatusCreated)
	}))
	serve := func(key string) (*httptest.ResponseRecorder, time.Duration) {
		req := httptest.NewRequest(http.MethodPost, "/x", nil)
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(rec, req)
		return rec, time.Since(t0)
	}

	var holder *httptest.ResponseRecorder
	done := make(chan struct{})
	go func() { defer close(done); holder, _ = serve(slowKey) }()
	<-started
	time.Sleep(700 * time.Millisecond) // past the lease; the holder is alive
	var lease time.Time
	require.NoError(t, f.s.pool.QueryRow(testCtx(t),
		`SELECT lease_expires_at FROM `+f.s.n.table+` WHERE key LIKE '%'||$1`, slowKey).Scan(&lease))

	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, d := serve(slowKey)
			assert.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
			assert.NotEmpty(t, rec.Header().Get("Retry-After"))
			assert.Less(t, d, storeTimeout/2, "the duplicate is answered at once")
		}()
	}
	rec, d := serve("other-000000000000000")
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Less(t, d, storeTimeout/2, "another key is not starved")
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load(), "the handler ran once")

	close(release)
	<-done
	assert.Equal(t, http.StatusCreated, holder.Code)
	rec, _ = serve(slowKey)
	assert.Equal(t, http.StatusCreated, rec.Code, "the retry replays")
	assert.Equal(t, int32(1), runs.Load())
}
