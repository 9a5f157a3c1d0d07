package pgstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// Benchmarks against the real server. A first request is Begin (new key) +
// Finish: 2 round trips; a replay is Get: 1 round trip. "raw-sql" sends the
// store's own statements straight through the pool (the store's overhead is
// the difference); "raw-minimal" is a floor with the least SQL that still
// claims a key: INSERT … ON CONFLICT DO NOTHING, UPDATE by key, SELECT by key
// (no takeover, fencing, expiry or read-back). "alt-single-statement" is the
// rejected Begin design: one INSERT … ON CONFLICT … RETURNING, UNION ALL a
// SELECT of the existing row.

var benchResponse = []byte(`{"id":"cpn_8f14e45f","status":"claimed","amount":1250,"currency":"EUR","created":"2025-01-01T00:00:00Z"}`)

func benchStore(b *testing.B) (*Store, *pgxpool.Pool) {
	b.Helper()
	p := poolWith(b, testenv.PostgresURL(b), func(c *pgxpool.Config) { c.MaxConns = 16 })
	s, err := New(p, Options{Schema: uniqueSchema(b, p)})
	require.NoError(b, err)
	require.NoError(b, s.Migrate(context.Background()))
	// Open every connection before timing.
	conns := make([]*pgxpool.Conn, 0, 16)
	for range 16 {
		c, err := p.Acquire(context.Background())
		require.NoError(b, err)
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	return s, p
}

// runBench runs op serially or from many goroutines. Besides wall time it
// reports the client process's CPU time per op (cpu-ns/op, user + system),
// which shows the store's own cost over the raw client far more steadily
// than latency does on a shared machine.
func runBench(b *testing.B, parallel bool, op func(i int64) error) {
	b.ReportAllocs()
	var n atomic.Int64
	var cpu0 time.Duration
	if !parallel {
		for b.Loop() {
			if cpu0 == 0 {
				cpu0 = cpuTime()
			}
			if err := op(n.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		return
	}
	b.SetParallelism(8) // requests in flight: 8 × GOMAXPROCS (the pool has 16 connections)
	b.ResetTimer()      // not the setup (b.Loop does this itself)
	cpu0 = cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func modes(b *testing.B, f func(b *testing.B, parallel bool)) {
	b.Run("serial", func(b *testing.B) { f(b, false) })
	b.Run("parallel", func(b *testing.B) { f(b, true) })
}

func BenchmarkFirstRequest(b *testing.B) {
	ctx := context.Background()
	f := fp(1)
	b.Run("store", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, _ := benchStore(b)
			runBench(b, parallel, func(i int64) error {
				key := "u1:op:" + strconv.FormatInt(i, 10)
				r, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: f, Token: idem.Token(i), Lease: 30 * time.Second, TTL: time.Hour})
				if err != nil || !r.Acquired {
					return err
				}
				return s.Finish(ctx, key, idem.Token(i), idem.StateCompleted, benchResponse)
			})
		})
	})
	b.Run("raw-sql", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, p := benchStore(b)
			runBench(b, parallel, func(i int64) error {
				key := "u1:op:" + strconv.FormatInt(i, 10)
				var batch pgx.Batch
				batch.Queue(s.q.claim, key, f[:], i, 30*time.Second, time.Hour, false)
				batch.Queue(s.q.read, key)
				if err := p.SendBatch(ctx, &batch).Close(); err != nil {
					return err
				}
				_, err := p.Exec(ctx, s.q.finish, key, i, int16(2), benchResponse)
				return err
			})
		})
	})
	b.Run("raw-minimal", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, p := benchStore(b)
			ins := `INSERT INTO ` + s.n.table + ` (key, state, fingerprint, token, lease_expires_at, expires_at)
VALUES ($1, 1, $2, $3, now(), now()) ON CONFLICT DO NOTHING`
			upd := `UPDATE ` + s.n.table + ` SET state = 2, response = $2 WHERE key = $1`
			runBench(b, parallel, func(i int64) error {
				key := "u1:op:" + strconv.FormatInt(i, 10)
				if _, err := p.Exec(ctx, ins, key, f[:], i); err != nil {
					return err
				}
				_, err := p.Exec(ctx, upd, key, benchResponse)
				return err
			})
		})
	})
	b.Run("alt-single-statement", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, p := benchStore(b)
			one := `WITH c AS (` + s.q.claim + `)
SELECT true, prior_state, NULL::smallint, NULL::bytea, NULL::bigint, NULL::timestamptz, NULL::timestamptz, NULL::bytea FROM c
UNION ALL
SELECT false, 0, state, fingerprint, token, lease_expires_at, expires_at, response FROM ` + s.n.table + `
WHERE key = $1 AND NOT EXISTS (SELECT FROM c)`
			runBench(b, parallel, func(i int64) error {
				key := "u1:op:" + strconv.FormatInt(i, 10)
				rows, err := p.Query(ctx, one, key, f[:], i, 30*time.Second, time.Hour, false)
				if err != nil {
					return err
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
				_, err = p.Exec(ctx, s.q.finish, key, i, int16(2), benchResponse)
				return err
			})
		})
	})
}

func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	const keys = 1000
	setup := func(b *testing.B) (*Store, *pgxpool.Pool) {
		s, p := benchStore(b)
		for i := range keys {
			key := "u1:op:" + strconv.Itoa(i)
			_, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: time.Hour})
			require.NoError(b, err)
			require.NoError(b, s.Finish(ctx, key, 1, idem.StateCompleted, benchResponse))
		}
		_, err := p.Exec(ctx, `ANALYZE `+s.n.table)
		require.NoError(b, err)
		b.SetBytes(int64(len(benchResponse)))
		return s, p
	}
	b.Run("store-Get", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, _ := setup(b)
			runBench(b, parallel, func(i int64) error {
				rec, found, err := s.Get(ctx, "u1:op:"+strconv.FormatInt(i%keys, 10))
				if err == nil && (!found || len(rec.Response) != len(benchResponse)) {
					b.Error("bad replay")
				}
				return err
			})
		})
	})
	b.Run("store-Begin", func(b *testing.B) { // a duplicate that arrives with Begin
		modes(b, func(b *testing.B, parallel bool) {
			s, _ := setup(b)
			runBench(b, parallel, func(i int64) error {
				r, err := s.Begin(ctx, &idem.BeginRequest{Key: "u1:op:" + strconv.FormatInt(i%keys, 10), Fingerprint: fp(1), Token: 2, Lease: time.Minute, TTL: time.Hour})
				if err == nil && r.Acquired {
					b.Error("acquired a completed key")
				}
				return err
			})
		})
	})
	b.Run("raw-sql-Get", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, p := setup(b)
			runBench(b, parallel, func(i int64) error {
				var (
					st                int16
					fpb, resp         []byte
					tok               int64
					lease, expiration time.Time
				)
				return p.QueryRow(ctx, s.q.get, "u1:op:"+strconv.FormatInt(i%keys, 10)).Scan(&st, &fpb, &tok, &lease, &expiration, &resp)
			})
		})
	})
	b.Run("raw-minimal-Get", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, p := setup(b)
			q := `SELECT response FROM ` + s.n.table + ` WHERE key = $1`
			runBench(b, parallel, func(i int64) error {
				var resp []byte
				return p.QueryRow(ctx, q, "u1:op:"+strconv.FormatInt(i%keys, 10)).Scan(&resp)
			})
		})
	})
}
