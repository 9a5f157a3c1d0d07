package pgstore

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/storebench"
)

// Benchmarks against the real server. A first request is Begin (new key) +
// Finish: 2 round trips; a replay is Get: 1 round trip. "raw-sql" sends the
// store's own statements straight through the pool (the store's overhead is
// the difference); "raw-minimal" is a floor with the least SQL that still
// claims a key: INSERT … ON CONFLICT DO NOTHING, UPDATE by key, SELECT by key
// (no takeover, fencing, expiry or read-back). "alt-upsert-batch" is the
// previous Begin design: a batch of the claiming upsert and a read.
//
// With PGSTORE_BENCH_CLAIM=cte in the environment, the stores (and raw-sql)
// claim with the claim statement, Begin's fallback where the function is missing,
// instead of the claim function: run the benchmarks both ways, interleaved,
// to compare the two.

func benchStore(b *testing.B) (*Store, *pgxpool.Pool) {
	b.Helper()
	p := poolWith(b, testenv.PostgresURL(b), func(c *pgxpool.Config) { c.MaxConns = 16 })
	s := newStoreOn(b, p, Options{})
	if os.Getenv("PGSTORE_BENCH_CLAIM") == "cte" {
		useClaimFunc(s, wayCTE)
	}
	// Open every connection before timing.
	conns := make([]*pgxpool.Conn, 0, 16)
	for range 16 {
		c, err := p.Acquire(testCtx(b))
		require.NoError(b, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	return s, p
}

func BenchmarkFirstRequest(b *testing.B) {
	ctx := testCtx(b)
	f := fp(1)
	storebench.RunFirstRequest(b, func(b *testing.B) idem.Store { s, _ := benchStore(b); return s })
	b.Run("raw-sql", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, p := benchStore(b)
			storebench.Run(b, parallel, func(i int64) error {
				key := storebench.Key(i)
				rows, err := p.Query(ctx, claimSQL(s, currentWay(s)), key, f[:], i, 30*time.Second, time.Hour, false)
				if err != nil {
					return err
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
				_, err = p.Exec(ctx, s.q.finish, key, i, int16(2), storebench.Response)
				return err
			})
		})
	})
	b.Run("raw-minimal", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, p := benchStore(b)
			ins := `INSERT INTO ` + s.n.table + ` (key, state, fingerprint, token, lease_expires_at, expires_at)
VALUES ($1, 1, $2, $3, now(), now()) ON CONFLICT DO NOTHING`
			upd := `UPDATE ` + s.n.table + ` SET state = 2, response = $2 WHERE key = $1`
			storebench.Run(b, parallel, func(i int64) error {
				key := storebench.Key(i)
				if _, err := p.Exec(ctx, ins, key, f[:], i); err != nil {
					return err
				}
				_, err := p.Exec(ctx, upd, key, storebench.Response)
				return err
			})
		})
	})
	b.Run("alt-upsert-batch", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, p := benchStore(b)
			claim, read := altUpsertBatch(s.n.table)
			storebench.Run(b, parallel, func(i int64) error {
				key := storebench.Key(i)
				var batch pgx.Batch
				batch.Queue(claim, key, f[:], i, 30*time.Second, time.Hour, false)
				batch.Queue(read, key)
				if err := p.SendBatch(ctx, &batch).Close(); err != nil {
					return err
				}
				_, err := p.Exec(ctx, s.q.finish, key, i, int16(2), storebench.Response)
				return err
			})
		})
	})
}

// altUpsertBatch is the previous Begin: a batch of an upsert that claims
// (ON CONFLICT DO UPDATE … WHERE claimable, which locks the existing row even
// when it does not update it, so concurrent replays of a key queue on that
// lock) and a read of the row.
func altUpsertBatch(t string) (claim, read string) {
	return `INSERT INTO ` + t + ` AS r
    (key, state, fingerprint, token, lease_expires_at, expires_at, prior_state, response)
VALUES ($1, 1, $2, $3, clock_timestamp() + $4::interval, clock_timestamp() + $5::interval, 0, NULL)
ON CONFLICT (key) DO UPDATE SET
    state = 1,
    fingerprint = excluded.fingerprint,
    token = excluded.token,
    lease_expires_at = excluded.lease_expires_at,
    expires_at = excluded.expires_at,
    prior_state = CASE WHEN r.expires_at <= clock_timestamp() THEN 0 ELSE r.state END,
    response = NULL
WHERE r.expires_at <= clock_timestamp()
   OR (r.state = 1 AND r.lease_expires_at <= clock_timestamp())
   OR (r.state = 3 AND r.response IS NULL AND (NOT $6::boolean OR r.fingerprint = excluded.fingerprint))
RETURNING prior_state`,
		`SELECT state, fingerprint, token, lease_expires_at, expires_at, response FROM ` + t + ` WHERE key = $1`
}

func BenchmarkReplay(b *testing.B) {
	ctx := testCtx(b)
	const keys = 1000
	setup := func(b *testing.B) (*Store, *pgxpool.Pool) {
		s, p := benchStore(b)
		storebench.Fill(b, s, keys)
		_, err := p.Exec(ctx, `ANALYZE `+s.n.table)
		require.NoError(b, err)
		return s, p
	}
	storebench.RunReplays(b, keys, func(b *testing.B) idem.Store { s, _ := setup(b); return s })
	b.Run("raw-sql-Get", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, p := setup(b)
			storebench.Run(b, parallel, func(i int64) error {
				var (
					st                int16
					fpb, resp         []byte
					tok               int64
					lease, expiration time.Time
				)
				return p.QueryRow(ctx, s.q.get, storebench.Key(i%keys)).Scan(&st, &fpb, &tok, &lease, &expiration, &resp)
			})
		})
	})
	b.Run("raw-minimal-Get", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, p := setup(b)
			q := `SELECT response FROM ` + s.n.table + ` WHERE key = $1`
			storebench.Run(b, parallel, func(i int64) error {
				var resp []byte
				return p.QueryRow(ctx, q, storebench.Key(i%keys)).Scan(&resp)
			})
		})
	})
}

// BenchmarkTx is a transactional first request: Begin (new key), BeginTx,
// one heartbeat (ExtendLease) while the transaction is open, and the commit.
// Under READ COMMITTED the transaction does not touch the record before the
// commit; under REPEATABLE READ it locks the row first and the heartbeat
// only checks the lock (see Store.BeginTx).
func BenchmarkTx(b *testing.B) {
	ctx := testCtx(b)
	f := fp(1)
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead} {
		b.Run(strings.ReplaceAll(strings.ToLower(string(iso)), " ", "-"), func(b *testing.B) {
			storebench.Modes(b, func(b *testing.B, parallel bool) {
				s, _ := benchStore(b)
				s.opts.TxOptions.IsoLevel = iso
				storebench.Run(b, parallel, func(i int64) error {
					key, tok := storebench.Key(i), idem.Token(i)
					r, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: f, Token: tok, Lease: 30 * time.Second, TTL: time.Hour})
					if err != nil {
						return err
					}
					if !r.Acquired {
						return errors.New("not acquired")
					}
					_, commit, rollback, err := s.BeginTx(ctx, key, tok)
					if err != nil {
						return err
					}
					defer rollback()
					if err := s.ExtendLease(ctx, key, tok, 30*time.Second); err != nil {
						return err
					}
					return commit(idem.StateCompleted, storebench.Response)
				})
			})
		})
	}
}

// BenchmarkExtendLease is a heartbeat of a held record outside a transaction
// (or under READ COMMITTED): one UPDATE.
func BenchmarkExtendLease(b *testing.B) {
	ctx := testCtx(b)
	s, _ := benchStore(b)
	r, err := s.Begin(ctx, &idem.BeginRequest{Key: "hb", Fingerprint: fp(1), Token: 1000, Lease: time.Minute, TTL: time.Hour})
	require.NoError(b, err)
	require.True(b, r.Acquired)
	storebench.Run(b, false, func(int64) error { return s.ExtendLease(ctx, "hb", 1000, time.Minute) })
}

// BenchmarkExtendLeaseLocked is a heartbeat of a record whose row a
// transaction of BeginTx above READ COMMITTED locks (extendLocked): one
// SELECT that checks the lock, nothing written.
func BenchmarkExtendLeaseLocked(b *testing.B) {
	ctx := testCtx(b)
	s, _ := benchStore(b)
	s.opts.TxOptions.IsoLevel = pgx.RepeatableRead
	r, err := s.Begin(ctx, &idem.BeginRequest{Key: "hb", Fingerprint: fp(1), Token: 1000, Lease: time.Minute, TTL: time.Hour})
	require.NoError(b, err)
	require.True(b, r.Acquired)
	_, _, rollback, err := s.BeginTx(ctx, "hb", 1000)
	require.NoError(b, err)
	defer rollback()
	require.True(b, s.locked.has(holdKey{"hb", 1000}))
	storebench.Run(b, false, func(int64) error { return s.ExtendLease(ctx, "hb", 1000, time.Minute) })
}
