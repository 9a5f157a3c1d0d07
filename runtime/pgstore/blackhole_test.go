package pgstore

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// blackholeProxy forwards TCP to upstream until blackholed: from then on
// every byte either way is read and dropped (the peer sees no error, no
// answer), and new connections are accepted but never forwarded (a dial
// connects, its startup is never answered). heal closes every connection
// (a partition that ends with the server having dropped them). Set refuse,
// it closes each new connection at once instead.
type blackholeProxy struct {
	ln     net.Listener
	hole   atomic.Bool
	refuse atomic.Bool // new connections are closed at once (a dial fails)
	mu     sync.Mutex
	conns  []net.Conn
}

func newBlackholeProxy(t *testing.T, upstream string) *blackholeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &blackholeProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refuse.Load() {
				_ = c.Close()
				continue
			}
			p.track(c)
			if p.hole.Load() {
				go func() { _, _ = io.Copy(io.Discard, c) }()
				continue
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.track(u)
			go p.pipe(c, u)
			go p.pipe(u, c)
		}
	}()
	return p
}

func (p *blackholeProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *blackholeProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.hole.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

func (p *blackholeProxy) heal() {
	p.hole.Store(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestTxBlackholedCutAtLeaseEnd: the store becomes unreachable (a
// partition: packets dropped, nothing closed) while a transactional handler
// runs, and the handler's next statement in its transaction hangs. Its
// heartbeats fail (a dial never answered, or a query on a connection they
// got never answered): the server is unreachable, not the pool starved, so
// under every isolation the engine cancels the transaction as the lease
// ends (idem.ErrLeaseLost) and the request ends then with 503, instead of
// hanging until its client's deadline (4s here; with none, until TCP gives
// up). Above READ COMMITTED it hung until the client's deadline before
// TxHoldsLock told a starved pool from an unreachable server (the
// review's TestReviewBlackholedTxNotCutAtLeaseEnd).
func TestTxBlackholedCutAtLeaseEnd(t *testing.T) {
	t.Parallel()
	const lease = 600 * time.Millisecond // the first heartbeat at 200ms, well after the partition begins
	const clientDeadline = 4 * time.Second
	for _, tc := range []struct {
		name string
		iso  pgx.TxIsoLevel
		// beat: the partition begins after a heartbeat got through (the
		// rollback then writes nothing: it would hang on the partition)
		beat bool
	}{
		{"ReadCommitted", pgx.ReadCommitted, false},
		{"RepeatableRead", pgx.RepeatableRead, false},
		{"RepeatableRead/AfterHeartbeat", pgx.RepeatableRead, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(testenv.PostgresURL(t))
			require.NoError(t, err)
			px := newBlackholeProxy(t, u.Host)
			u.Host = px.ln.Addr().String()
			p := poolWith(t, u.String(), func(c *pgxpool.Config) { c.MaxConns = 4 })
			f := newTxFixtureOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: tc.iso}})
			t.Cleanup(px.heal) // runs before the schema's DROP on p
			eng := idem.New(f.s, idem.Options{Principal: idem.Anonymous, Transactional: true,
				StoreTimeout: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
				InFlight: idem.InFlightSpec{Lease: lease}})
			var cause atomic.Value
			h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := Tx(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO `+f.side+` VALUES ($1, 'x')`, r.Header.Get("Idempotency-Key")); err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
				if tc.beat {
					beaten := func() bool {
						f.s.locked.mu.Lock()
						defer f.s.locked.mu.Unlock()
						for _, r := range f.s.locked.n {
							return !r.leaseEnd.IsZero() // the one transaction
						}
						return false
					}
					for !beaten() {
						time.Sleep(5 * time.Millisecond) // the heartbeat at a third of the lease
					}
				}
				px.hole.Store(true) // the partition begins
				_, err := tx.Exec(r.Context(), `SELECT 1`)
				if c := context.Cause(r.Context()); c != nil {
					cause.Store(c)
				} else if err != nil {
					cause.Store(err)
				}
				http.Error(w, "failed", 500)
			}))
			ctx, cancel := context.WithTimeout(context.Background(), clientDeadline)
			defer cancel()
			req := httptest.NewRequest(http.MethodPost, "/x", nil).WithContext(ctx)
			req.Header.Set("Idempotency-Key", "0193a8f0-0000-7000-8000-0000000000b1")
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, req)
			took := time.Since(start)
			c, _ := cause.Load().(error)
			t.Logf("request ended after %v with %d, cause %v", took.Round(10*time.Millisecond), rec.Code, c)
			require.ErrorIs(t, c, idem.ErrLeaseLost, "cut at the lease's end")
			assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
			assert.Less(t, took, clientDeadline/2, "not held until the client's deadline")
			f.s.locked.mu.Lock()
			assert.Empty(t, f.s.locked.n, "the transaction ended")
			f.s.locked.mu.Unlock()
			px.heal() // the partition ends: the key's release in the background gets through
			dctx, dcancel := context.WithTimeout(f.ctx, 10*time.Second)
			defer dcancel()
			assert.NoError(t, eng.Drain(dctx))
		})
	}
}

// TestTxHoldsLockHeartbeatFailure: how a failed heartbeat of a transaction
// that locks the record's row (above READ COMMITTED) moves TxHoldsLock. A
// heartbeat that gets no connection from a starved pool (every connection
// in use) leaves it true: the lock still holds. One whose dial fails, whose
// dial is never answered, or whose query on a connection it got is never
// answered turns it false (the server is unreachable, and the
// transaction's connection with it), until a heartbeat gets through.
func TestTxHoldsLockHeartbeatFailure(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testenv.PostgresURL(t))
	require.NoError(t, err)
	px := newBlackholeProxy(t, u.Host)
	u.Host = px.ln.Addr().String()
	const maxConns = 3
	p := poolWith(t, u.String(), func(c *pgxpool.Config) { c.MaxConns = maxConns })
	f := newTxFixtureOn(t, p, Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	t.Cleanup(px.heal) // runs before the schema's DROP on p
	f.claim(t, "k", 1, time.Minute)
	_, _, rollback := f.beginTx(t, "k", 1)
	defer rollback()
	heartbeat := func() error {
		ctx, cancel := context.WithTimeout(f.ctx, 200*time.Millisecond)
		defer cancel()
		return f.s.ExtendLease(ctx, "k", 1, time.Minute)
	}
	holds := func() bool { return f.s.TxHoldsLock("k", 1) }
	starve := func() (release func()) { // takes every connection the transaction does not hold
		var taken []*pgxpool.Conn
		for range maxConns - 1 {
			c, err := p.Acquire(f.ctx)
			require.NoError(t, err)
			taken = append(taken, c)
		}
		return func() {
			for _, c := range taken {
				c.Release()
			}
		}
	}
	require.NoError(t, heartbeat())
	require.True(t, holds())

	// Starved: every other connection taken.
	release := starve()
	require.Error(t, heartbeat())
	assert.True(t, holds(), "a starved pool says nothing about the server: the lock holds")
	release()

	// A dial that fails.
	p.Reset() // the idle connections closed: the next heartbeat dials
	px.refuse.Store(true)
	require.Error(t, heartbeat())
	assert.False(t, holds(), "a dial that failed")
	px.refuse.Store(false)
	// A starved pool then says nothing either way: still false.
	release = starve()
	require.Error(t, heartbeat())
	assert.False(t, holds(), "a starved pool after an unreachable server")
	release()
	require.NoError(t, heartbeat())
	require.True(t, holds(), "a heartbeat got through")

	// A query never answered, on an idle connection the pool keeps.
	px.hole.Store(true)
	require.Error(t, heartbeat())
	assert.False(t, holds(), "a query that timed out on a connection it got")
	px.hole.Store(false)
	require.NoError(t, heartbeat())
	require.True(t, holds(), "a heartbeat got through")

	// A dial never answered.
	p.Reset()
	px.hole.Store(true)
	require.Error(t, heartbeat())
	assert.False(t, holds(), "a dial never answered")
	px.hole.Store(false) // the transaction's connection carried nothing meanwhile: its rollback goes through
}

// TestTxLockGoneFenced: above READ COMMITTED, a transactional handler whose
// backend is terminated (its row lock gone with it) while it waits, making
// no statement (so pgx does not yet know its connection closed, and
// TxHoldsLock may still say true), is cut by its next heartbeat, which
// reaches the server and finds the lock gone: idem.ErrFenced, well before
// the lease's end, and the request is answered 409, nothing committed.
func TestTxLockGoneFenced(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	f := newTxFixtureOn(t, testPool(t), Options{TxOptions: pgx.TxOptions{IsoLevel: pgx.RepeatableRead}})
	eng := idem.New(f.s, idem.Options{Principal: idem.Anonymous, Transactional: true, Logger: slog.New(slog.DiscardHandler)})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: lease}})
	var cause atomic.Value
	var terminated time.Time
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := Tx(r.Context())
		if _, err := tx.Exec(r.Context(), `INSERT INTO `+f.side+` VALUES ($1, 'x')`, r.Header.Get("Idempotency-Key")); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		var pid int32
		if err := tx.QueryRow(r.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if _, err := testPool(t).Exec(f.ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		terminated = time.Now()
		select {
		case <-r.Context().Done():
			cause.Store(context.Cause(r.Context()))
		case <-time.After(2 * lease):
		}
		http.Error(w, "failed", 500)
	}))
	const key = "0193a8f0-0000-7000-8000-0000000000b2"
	req := httptest.NewRequest(http.MethodPost, "/x", nil)
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	c, _ := cause.Load().(error)
	require.ErrorIs(t, c, idem.ErrFenced, "the heartbeat found the lock gone")
	assert.Less(t, time.Since(terminated), lease, "cut by the next heartbeat (a third of the lease), not at the lease's end")
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.False(t, f.sideWritten(t, key), "nothing committed")
}
