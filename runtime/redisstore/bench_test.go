package redisstore

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/storebench"
)

// Benchmarks against the real server. Each first request is Begin (new key)
// + Finish: 2 round trips; each replay is Get: 1 round trip. "raw-script"
// sends the same scripts straight through go-redis (the store's own overhead
// is the difference); "raw-commands" is the floor without Lua: SET NX PXAT to
// claim, SET XX KEEPTTL to finish, GET to replay (no takeover, fencing or
// server clock logic). ns/op is per request (2 or 1 round trips).

func benchStore(b *testing.B) (*Store, *redis.Client) {
	b.Helper()
	c := testClient(b, func(o *redis.Options) { o.PoolSize = 32 })
	s := newStoreOn(b, c, Options{})
	require.NoError(b, s.LoadScripts(context.Background()))
	return s, c
}

func BenchmarkFirstRequest(b *testing.B) {
	ctx := context.Background()
	storebench.RunFirstRequest(b, func(b *testing.B) idem.Store { s, _ := benchStore(b); return s })
	b.Run("raw-script", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, c := benchStore(b)
			f := fp(1)
			storebench.Run(b, parallel, func(i int64) error {
				key := s.prefix + "{" + storebench.Key(i) + "}"
				tok := binary.BigEndian.AppendUint64(nil, uint64(i))
				arg := append(append(tok, f[:]...), 0, 0, 0, 0, 0, 0, 0x75, 0x30, 0, 0, 0, 0, 0, 0x36, 0xee, 0x80, 0, 1)
				if err := c.EvalSha(ctx, beginScript.Hash(), []string{key}, arg).Err(); err != nil {
					return err
				}
				return c.EvalSha(ctx, finishScript.Hash(), []string{key}, append(tok, 2, 1, 1), storebench.Response).Err()
			})
		})
	})
	b.Run("raw-commands", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, c := benchStore(b)
			rec := idem.Record{State: idem.StatePending, Fingerprint: fp(1)}
			pending := encodeRecord(&rec)
			rec.State, rec.Response = idem.StateCompleted, storebench.Response
			done := encodeRecord(&rec)
			storebench.Run(b, parallel, func(i int64) error {
				key := s.prefix + "{" + storebench.Key(i) + "}"
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
		storebench.Fill(b, s, keys)
		return s, c
	}
	storebench.RunReplays(b, keys, func(b *testing.B) idem.Store { s, _ := setup(b); return s })
	b.Run("raw-GET", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, c := setup(b)
			storebench.Run(b, parallel, func(i int64) error {
				return c.Get(ctx, s.prefix+"{"+storebench.Key(i%keys)+"}").Err()
			})
		})
	})
	// raw-script-GET is the smallest script that replays: EVALSHA of a
	// script that only GETs the record. Beside raw-GET it shows what a
	// script instead of a GET costs the client, which store-Begin (the
	// engine's replay) pays too: the server answers a few µs later (INFO
	// commandstats: ~3 µs per EVALSHA against ~0.4 µs per GET on a shared
	// 2-core machine), so the client's read more often finds no reply yet
	// and parks, and the process's CPU counts the scheduler's and the
	// network poller's wakeups that follow.
	b.Run("raw-script-GET", func(b *testing.B) {
		storebench.Modes(b, func(b *testing.B, parallel bool) {
			s, c := setup(b)
			require.NoError(b, getScript.Load(ctx, c).Err())
			storebench.Run(b, parallel, func(i int64) error {
				return getScript.EvalSha(ctx, c, []string{s.prefix + "{" + storebench.Key(i%keys) + "}"}).Err()
			})
		})
	})
}

var getScript = redis.NewScript(`return redis.call('GET', KEYS[1])`)

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
			storebench.Run(b, false, func(int64) error {
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
			storebench.Run(b, false, func(int64) error {
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

// BenchmarkScriptPaths runs the heartbeat (ExtendLease) and Finish scripts,
// serially, on a private server, down the paths that read a record but
// write nothing or little, with a 64 KiB response where there is one:
//
//	extend/fenced-own-64KiB   a heartbeat that meets its own request's
//	                          COMPLETED record (one on its way when Finish
//	                          stopped the heartbeat)
//	extend/fenced-other-64KiB a heartbeat that meets another token's
//	                          COMPLETED record (its claim was taken over)
//	extend/pending            the heartbeat that takes effect (a lease
//	                          within the record's expiry: SETRANGE)
//	finish/fenced-other-64KiB a Finish fenced by another token's COMPLETED record
//	finish/rerun-64KiB        a Finish run again (go-redis resent it) that
//	                          finds its own 64 KiB completion: it compares
//	                          the response and answers 1
//	begin+finish              a first request: Begin of a new key and the
//	                          Finish that takes effect (a 104-byte response)
//
// Besides ns/op (a round trip on loopback) it reports server-ns/op, the
// server's time in the script per call (INFO commandstats, EVALSHA), which
// the rest of a shared machine disturbs far less.
func BenchmarkScriptPaths(b *testing.B) {
	ctx := context.Background()
	resp := bigResponse(64 << 10)
	const tok, other = idem.Token(1), idem.Token(2)
	// setup leaves at key a record claimed by tok, finished by tok with resp
	// when final.
	setup := func(b *testing.B, final bool) (*Store, *redis.Client) {
		srv := testenv.StartRedis(b)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
		b.Cleanup(func() { _ = c.Close() })
		s := newStoreOn(b, c, Options{})
		require.NoError(b, s.LoadScripts(ctx))
		_, err := s.Begin(ctx, &idem.BeginRequest{Key: "k", Fingerprint: fp(1), Token: tok, Lease: time.Hour, TTL: 2 * time.Hour})
		require.NoError(b, err)
		if final {
			require.NoError(b, s.Finish(ctx, "k", tok, idem.StateCompleted, resp))
		}
		return s, c
	}
	for _, bc := range []struct {
		name  string
		final bool
		op    func(s *Store, i int) error
		want  error
		calls int // EVALSHA calls per op
	}{
		{"extend/fenced-own-64KiB", true, func(s *Store, _ int) error { return s.ExtendLease(ctx, "k", tok, time.Minute) }, idem.ErrFenced, 1},
		{"extend/fenced-other-64KiB", true, func(s *Store, _ int) error { return s.ExtendLease(ctx, "k", other, time.Minute) }, idem.ErrFenced, 1},
		{"extend/pending", false, func(s *Store, _ int) error { return s.ExtendLease(ctx, "k", tok, time.Minute) }, nil, 1},
		{"finish/fenced-other-64KiB", true, func(s *Store, _ int) error {
			return s.Finish(ctx, "k", other, idem.StateCompleted, resp)
		}, idem.ErrFenced, 1},
		{"finish/rerun-64KiB", true, func(s *Store, _ int) error { return s.Finish(ctx, "k", tok, idem.StateCompleted, resp) }, nil, 1},
		{"begin+finish", false, func(s *Store, i int) error { return storebench.FirstRequest(s)(int64(i)) }, nil, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, c := setup(b, bc.final)
			b.ReportAllocs()
			calls0, usec0 := evalshaStats(b, c)
			n := 0
			for b.Loop() {
				if err := bc.op(s, n); err != bc.want {
					b.Fatalf("got %v, want %v", err, bc.want)
				}
				n++
			}
			calls, usec := evalshaStats(b, c)
			require.Equal(b, int64(n*bc.calls), calls-calls0, "EVALSHA calls")
			b.ReportMetric(float64(usec-usec0)*1000/float64(n), "server-ns/op")
		})
	}
}

// evalshaStats returns the server's count of EVALSHA calls and their total
// time in µs (INFO commandstats).
func evalshaStats(b *testing.B, c *redis.Client) (calls, usec int64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	require.NoError(b, err)
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			k, x, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(x, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(x, 10, 64)
			}
		}
	}
	return calls, usec
}
