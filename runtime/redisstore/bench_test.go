package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Benchmarks against the real server. Each first request is Begin (new key)
// + Finish: 2 round trips; each replay is Get: 1 round trip. "raw-script"
// sends the same scripts straight through go-redis (the store's own overhead
// is the difference); "raw-commands" is the floor without Lua: SET NX PXAT to
// claim, SET XX KEEPTTL to finish, GET to replay (no takeover, fencing or
// server clock logic). ns/op is per request (2 or 1 round trips).

var benchResponse = []byte(`{"id":"cpn_8f14e45f","status":"claimed","amount":1250,"currency":"EUR","created":"2025-01-01T00:00:00Z"}`)

func benchStore(b *testing.B) (*Store, *redis.Client) {
	b.Helper()
	c := testClient(b, func(o *redis.Options) { o.PoolSize = 32 })
	s, err := New(c, Options{Prefix: uniquePrefix(b, c)})
	require.NoError(b, err)
	require.NoError(b, s.LoadScripts(context.Background()))
	return s, c
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
	b.SetParallelism(8) // requests in flight: 8 × GOMAXPROCS
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
	b.Run("store", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, _ := benchStore(b)
			runBench(b, parallel, func(i int64) error {
				key := "u1:op:" + strconv.FormatInt(i, 10)
				r, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: idem.Token(i), Lease: 30 * time.Second, TTL: time.Hour})
				if err != nil || !r.Acquired {
					return err
				}
				return s.Finish(ctx, key, idem.Token(i), idem.StateCompleted, benchResponse)
			})
		})
	})
	b.Run("raw-script", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, c := benchStore(b)
			f := fp(1)
			runBench(b, parallel, func(i int64) error {
				key := s.prefix + "{u1:op:" + strconv.FormatInt(i, 10) + "}"
				tok := tokenBytes(idem.Token(i))
				if err := c.EvalSha(ctx, beginScript.Hash(), []string{key}, tok, f[:], 30000, 3600000, "0", "1").Err(); err != nil {
					return err
				}
				return c.EvalSha(ctx, finishScript.Hash(), []string{key}, tok, []byte{2, 1}, benchResponse, "1").Err()
			})
		})
	})
	b.Run("raw-commands", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, c := benchStore(b)
			rec := idem.Record{State: idem.StatePending, Fingerprint: fp(1)}
			pending := encodeRecord(&rec)
			rec.State, rec.Response = idem.StateCompleted, benchResponse
			done := encodeRecord(&rec)
			runBench(b, parallel, func(i int64) error {
				key := s.prefix + "{u1:op:" + strconv.FormatInt(i, 10) + "}"
				exp := time.Now().Add(time.Hour)
				if err := c.SetArgs(ctx, key, pending, redis.SetArgs{Mode: "NX", ExpireAt: exp}).Err(); err != nil {
					return err
				}
				return c.SetArgs(ctx, key, done, redis.SetArgs{Mode: "XX", KeepTTL: true}).Err()
			})
		})
	})
}

func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	const keys = 1000
	setup := func(b *testing.B) (*Store, *redis.Client) {
		s, c := benchStore(b)
		for i := range keys {
			key := "u1:op:" + strconv.Itoa(i)
			_, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(1), Token: 1, Lease: time.Minute, TTL: time.Hour})
			require.NoError(b, err)
			require.NoError(b, s.Finish(ctx, key, 1, idem.StateCompleted, benchResponse))
		}
		b.SetBytes(int64(len(benchResponse)))
		return s, c
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
	b.Run("raw-GET", func(b *testing.B) {
		modes(b, func(b *testing.B, parallel bool) {
			s, c := setup(b)
			runBench(b, parallel, func(i int64) error {
				return c.Get(ctx, s.prefix+"{u1:op:"+strconv.FormatInt(i%keys, 10)+"}").Err()
			})
		})
	})
}

// BenchmarkLayout compares the chosen record layout (one string) with a HASH
// of fields holding the same record: server memory per record (MEMORY USAGE,
// reported as server-B/record) and the cost of reading it back for a replay.
func BenchmarkLayout(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{0, 100, 400, 4000} {
		resp := make([]byte, size)
		for i := range resp {
			resp[i] = 'a' + byte(i%26)
		}
		rec := idem.Record{State: idem.StateCompleted, Fingerprint: fp(3), Token: 1<<64 - 1,
			LeaseExpiresAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Response: resp}
		b.Run("string/resp="+strconv.Itoa(size), func(b *testing.B) {
			s, c := benchStore(b)
			key := s.key("k")
			require.NoError(b, c.Set(ctx, key, encodeRecord(&rec), time.Hour).Err())
			runBench(b, false, func(int64) error {
				v, err := c.Get(ctx, key).Result()
				if err != nil {
					return err
				}
				_, err = decodeRecord(v)
				return err
			})
			reportMemory(b, c, key)
		})
		b.Run("hash/resp="+strconv.Itoa(size), func(b *testing.B) {
			s, c := benchStore(b)
			key := s.key("k")
			require.NoError(b, c.HSet(ctx, key,
				"s", int(rec.State), "f", rec.Fingerprint[:], "t", strconv.FormatUint(uint64(rec.Token), 10),
				"l", rec.LeaseExpiresAt.UnixMilli(), "e", rec.ExpiresAt.UnixMilli(), "r", rec.Response).Err())
			require.NoError(b, c.Expire(ctx, key, time.Hour).Err())
			runBench(b, false, func(int64) error {
				m, err := c.HGetAll(ctx, key).Result()
				if err != nil {
					return err
				}
				st, _ := strconv.Atoi(m["s"])
				tok, _ := strconv.ParseUint(m["t"], 10, 64)
				l, _ := strconv.ParseInt(m["l"], 10, 64)
				e, _ := strconv.ParseInt(m["e"], 10, 64)
				out := idem.Record{State: idem.State(st), Token: idem.Token(tok),
					LeaseExpiresAt: time.UnixMilli(l), ExpiresAt: time.UnixMilli(e), Response: []byte(m["r"])}
				copy(out.Fingerprint[:], m["f"])
				return nil
			})
			reportMemory(b, c, key)
		})
	}
}

// reportMemory reports the server's memory for key (after the timed loop,
// which would reset the metric).
func reportMemory(b *testing.B, c *redis.Client, key string) {
	mem, err := c.MemoryUsage(context.Background(), key).Result()
	require.NoError(b, err)
	b.ReportMetric(float64(mem), "server-B/record")
}
