package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

func fill(t *testing.T, s *Store, prefix string, n int, ttl time.Duration) {
	t.Helper()
	ctx := testCtx(t)
	for i := range n {
		_, err := s.Begin(ctx, &idem.BeginRequest{
			Key: fmt.Sprintf("%s%d", prefix, i), Fingerprint: fp(1), Token: idem.Token(i + 1), Lease: time.Minute, TTL: ttl})
		require.NoError(t, err)
	}
}

func count(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(testCtx(t), `SELECT count(*) FROM `+s.n.table).Scan(&n))
	return n
}

func TestReapBoundedBatches(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := testCtx(t)
	fill(t, s, "old", 10, 20*time.Millisecond)
	fill(t, s, "live", 5, time.Hour)
	time.Sleep(50 * time.Millisecond)

	var got []int
	for {
		n, err := s.Reap(ctx, 4)
		require.NoError(t, err)
		got = append(got, n)
		if n < 4 {
			break
		}
	}
	assert.Equal(t, []int{4, 4, 2}, got, "at most one batch per call")
	assert.Equal(t, 5, count(t, s), "live records stay")
	n, err := s.Reap(ctx, 100)
	require.NoError(t, err)
	assert.Zero(t, n)

	_, err = s.Reap(ctx, 0)
	assert.Error(t, err)
}

func TestReapSkipsLockedRows(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := testCtx(t)
	fill(t, s, "old", 3, 20*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `SELECT 1 FROM `+s.n.table+` WHERE key = 'old0' FOR UPDATE`)
	require.NoError(t, err)

	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n, err := s.Reap(rctx, 10)
	require.NoError(t, err, "a locked row does not block the reaper")
	assert.Equal(t, 2, n)
	require.NoError(t, tx.Rollback(ctx))
	n, err = s.Reap(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestBackgroundReaper(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{ReapInterval: 20 * time.Millisecond, ReapBatch: 3})
	fill(t, s, "old", 10, 10*time.Millisecond)
	fill(t, s, "live", 2, time.Hour)
	assert.Eventually(t, func() bool { return count(t, s) == 2 }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
	fill(t, s, "after", 3, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, 5, count(t, s), "a closed store's reaper is stopped")
}

// TestReapPlanUsesIndexBound: the reaper's statement (the very text Reap
// runs, s.q.reap) bounds its scan of the expires_at index by the time, so a
// tick that finds few expired rows reads only those, not every live row: an
// Index Cond on expires_at, no Filter, and the DELETE finds the rows by key.
// With clock_timestamp() (volatile) the planner cannot use the bound: the
// scan read the whole index, and the DELETE, expecting a third of the
// table, hashed all of it.
func TestReapPlanUsesIndexBound(t *testing.T) {
	t.Parallel()
	s := newTestStore(t, Options{})
	ctx := testCtx(t)
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.n.table+` (key, state, fingerprint, token, lease_expires_at, expires_at)
    SELECT 'k' || i, 2, '\x00'::bytea, i, now(), now() + CASE WHEN i <= 10 THEN interval '-1 hour' ELSE interval '1 hour' END
    FROM generate_series(1, 20000) AS i`)
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `ANALYZE `+s.n.table)
	require.NoError(t, err)

	rows, err := s.pool.Query(ctx, `EXPLAIN `+s.q.reap, 1000)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	assert.Regexp(t, `Index Cond: \(expires_at <= `, plan, "the scan is bounded by the time")
	assert.NotContains(t, plan, "Filter: (expires_at", "the time only filters the rows scanned")
	assert.NotContains(t, plan, "Seq Scan", "no scan of the whole table")

	n, err := s.Reap(ctx, 1000)
	require.NoError(t, err)
	assert.Equal(t, 10, n)
}

func TestReaperDefaults(t *testing.T) {
	t.Parallel()
	p := testPool(t)
	s, err := New(p, Options{Schema: uniqueSchema(t, p)})
	require.NoError(t, err)
	defer s.Close()
	assert.NotNil(t, s.reaper, "the reaper runs by default")
	assert.Equal(t, DefaultReapInterval, s.opts.ReapInterval)
	assert.Equal(t, DefaultReapBatch, s.opts.ReapBatch)
	assert.Equal(t, DefaultReapTimeout, s.opts.ReapTimeout)

	off, err := New(p, Options{Schema: uniqueSchema(t, p), ReapInterval: -1})
	require.NoError(t, err)
	assert.Nil(t, off.reaper, "a negative ReapInterval turns the reaper off")
	require.NoError(t, off.Close())

	for _, o := range []Options{{ReapBatch: -1}, {ReapTimeout: -1}} {
		_, err := New(p, o)
		assert.Error(t, err, "%+v", o)
	}
}

// TestReaperStatementTimeout: a reaping statement that cannot finish (here
// it waits for a table lock; a connection gone silent is the same to the
// reaper) runs out after ReapTimeout and is logged, instead of holding the
// reaper until Close; the next tick reaps.
func TestReaperStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	logs := &syncBuffer{}
	s := newTestStore(t, Options{ReapInterval: 20 * time.Millisecond, ReapTimeout: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `LOCK TABLE `+s.n.table+` IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	// (Ticks before Migrate created the table may have logged its absence.)
	assert.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "background reap failed") && strings.Contains(logs.String(), "context deadline exceeded")
	}, 5*time.Second, 20*time.Millisecond, "the statement waiting for the lock runs out")
	require.NoError(t, tx.Rollback(ctx))

	fill(t, s, "old", 3, 10*time.Millisecond)
	assert.Eventually(t, func() bool { return count(t, s) == 0 }, 5*time.Second, 10*time.Millisecond,
		"the reaper goes on")
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// stopped reports whether the background reaper r has returned.
func stopped(r *reaper) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// TestReaperStopsWithPool: the reaper of a Store nobody closed stops once
// its pool is closed, instead of logging the closed pool at every tick.
func TestReaperStopsWithPool(t *testing.T) {
	t.Parallel()
	p := poolWith(t, testenv.PostgresURL(t), nil)
	logs := &syncBuffer{}
	s, err := New(p, Options{Schema: uniqueSchema(t, testPool(t)), ReapInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	r := s.reaper
	p.Close()
	assert.Eventually(t, func() bool { return stopped(r) }, 5*time.Second, 10*time.Millisecond)
	assert.NotContains(t, logs.String(), "level=ERROR")
	require.NoError(t, s.Close())
}

// TestReaperStopsWhenStoreCollected: the reaper of a Store that became
// unreachable without Close stops once the garbage collector collects the
// Store.
func TestReaperStopsWhenStoreCollected(t *testing.T) {
	t.Parallel()
	p := testPool(t)
	// Only the reaper leaves the closure: the Store is unreachable.
	r := func() *reaper {
		s, err := New(p, Options{Schema: uniqueSchema(t, p), ReapInterval: 10 * time.Millisecond})
		require.NoError(t, err)
		return s.reaper
	}()
	assert.Eventually(t, func() bool {
		runtime.GC()
		return stopped(r)
	}, 5*time.Second, 10*time.Millisecond)
}

// TestReaperPersistentErrorBacksOff: a reaper that cannot work in its setup
// (a role without DELETE; no table) logs that once, at WARN, with what to
// change, and tries again less often, not an ERROR every tick; once the
// setup is fixed it logs the recovery and reaps.
func TestReaperPersistentErrorBacksOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	admin := testPool(t)

	t.Run("NoDelete", func(t *testing.T) {
		t.Parallel()
		owner := newStoreOn(t, admin, Options{})
		var role string // quoted
		app, _ := storeAsRole(t, admin, owner.n.schema, func(r string) []string {
			role = r
			return []string{`GRANT SELECT, INSERT, UPDATE ON ` + owner.n.table + ` TO ` + role}
		})
		logs := &syncBuffer{}
		s, err := New(app.pool, Options{Schema: owner.n.schema, ReapInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)
		defer s.Close()
		assert.Eventually(t, func() bool { return strings.Contains(logs.String(), "level=WARN") }, 5*time.Second, 10*time.Millisecond)
		time.Sleep(500 * time.Millisecond) // 50 ticks without the back-off
		out := logs.String()
		assert.Equal(t, 1, strings.Count(out, "\n"), out)
		assert.Contains(t, out, "SQLSTATE 42501")
		assert.Contains(t, out, "grant the role DELETE")
		assert.Contains(t, out, "ReapInterval negative")

		fill(t, owner, "old", 3, 10*time.Millisecond)
		_, err = admin.Exec(ctx, `GRANT DELETE ON `+owner.n.table+` TO `+role)
		require.NoError(t, err)
		assert.Eventually(t, func() bool { return count(t, owner) == 0 }, 10*time.Second, 20*time.Millisecond)
		assert.Contains(t, logs.String(), "background reap works again")
		assert.NotContains(t, logs.String(), "level=ERROR")
	})

	t.Run("NoTable", func(t *testing.T) {
		t.Parallel()
		logs := &syncBuffer{}
		s, err := New(admin, Options{Schema: uniqueSchema(t, admin), ReapInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		require.NoError(t, err)
		defer s.Close()
		assert.Eventually(t, func() bool { return strings.Contains(logs.String(), "level=WARN") }, 5*time.Second, 10*time.Millisecond)
		time.Sleep(500 * time.Millisecond)
		out := logs.String()
		assert.Equal(t, 1, strings.Count(out, "\n"), out)
		assert.Contains(t, out, "Migrate")
	})
}

// TestPersistentReapError: which errors back the reaper off.
func TestPersistentReapError(t *testing.T) {
	for code, want := range map[string]bool{"42501": true, "42P01": true, "3F000": true, "25006": true,
		"57014": false, "40001": false, "08006": false} {
		got, _ := persistentReapError(fmt.Errorf("pgstore: reap: %w", &pgconn.PgError{Code: code}))
		assert.Equal(t, want, got != "", code)
	}
	got, _ := persistentReapError(context.DeadlineExceeded)
	assert.Empty(t, got)
}

// TestReaperTransientBetweenPersistent: an error that goes away by itself
// (a statement timeout) between persistent ones (no DELETE privilege) is
// logged at ERROR and changes nothing else: the persistent error is not
// warned of again, its backoff goes on doubling, and the recovery after a
// transient error is still logged at INFO.
func TestReaperTransientBetweenPersistent(t *testing.T) {
	logs := &syncBuffer{}
	r := &reaper{table: "t", interval: 10 * time.Millisecond, ctx: context.Background(),
		log: slog.New(slog.NewTextHandler(logs, nil))}
	persistent := fmt.Errorf("pgstore: reap: %w", &pgconn.PgError{Code: "42501"})
	transient := fmt.Errorf("pgstore: reap: %w", context.DeadlineExceeded)
	wait, warned := r.interval, ""
	for i, c := range []struct {
		err   error
		wait  time.Duration
		level string // of the line logged, "" for none
	}{
		{persistent, 20 * time.Millisecond, "WARN"},
		{transient, 20 * time.Millisecond, "ERROR"},
		{persistent, 40 * time.Millisecond, ""},
		{transient, 40 * time.Millisecond, "ERROR"},
		{nil, 10 * time.Millisecond, "INFO"},
		{transient, 10 * time.Millisecond, "ERROR"},
		{nil, 10 * time.Millisecond, ""},
	} {
		before := len(logs.String())
		wait, warned = r.next(c.err, wait, warned)
		assert.Equal(t, c.wait, wait, "tick %d", i)
		line := logs.String()[before:]
		if c.level == "" {
			assert.Empty(t, line, "tick %d", i)
			continue
		}
		assert.Equal(t, 1, strings.Count(line, "\n"), "tick %d: %s", i, line)
		assert.Contains(t, line, "level="+c.level, "tick %d", i)
	}
	assert.Contains(t, logs.String(), "background reap works again")
}

// TestReapBackoff: the backoff doubles the wait up to its limit and never
// beyond it, also where doubling overflows (an Options.ReapInterval near
// math.MaxInt64 is the limit: a negative wait would make the timer fire at
// once, a busy loop).
func TestReapBackoff(t *testing.T) {
	for _, c := range []struct{ wait, limit, want time.Duration }{
		{time.Second, time.Hour, 2 * time.Second},
		{20 * time.Minute, time.Hour, 40 * time.Minute},
		{30 * time.Minute, time.Hour, time.Hour},
		{40 * time.Minute, time.Hour, time.Hour},
		{time.Hour, time.Hour, time.Hour},
		{math.MaxInt64, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64/2 + 1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 / 2, math.MaxInt64, math.MaxInt64 - 1},
	} {
		assert.Equal(t, c.want, reapBackoff(c.wait, c.limit), "%v up to %v", c.wait, c.limit)
	}
	r := &reaper{table: "t", interval: math.MaxInt64, ctx: context.Background(),
		log: slog.New(slog.DiscardHandler)}
	wait, _ := r.next(&pgconn.PgError{Code: "42501"}, r.interval, "")
	assert.Equal(t, time.Duration(math.MaxInt64), wait)
}
