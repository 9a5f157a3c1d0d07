package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// clock is a fake clock for the store's own bookkeeping tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClockStore(t *testing.T, o memstore.Options) (*memstore.Store, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	o.Now = c.Now
	if o.SweepInterval == 0 {
		o.SweepInterval = -1
	}
	s := memstore.New(o)
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

func claim(t *testing.T, s *memstore.Store, key string, tok idem.Token, ttl time.Duration) error {
	t.Helper()
	res, err := s.Begin(context.Background(), &idem.BeginRequest{Key: key, Token: tok, Lease: time.Minute, TTL: ttl})
	if err == nil && !res.Acquired {
		t.Fatalf("Begin(%q) not acquired: %+v", key, res.Record)
	}
	return err
}

func TestEvictsExpiredThenOldestFinished(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 3, MinRetention: time.Second})
	ctx := context.Background()
	require.NoError(t, claim(t, s, "old", 1, time.Hour))
	require.NoError(t, s.Finish(ctx, "old", 1, idem.StateCompleted, []byte("a")))
	require.NoError(t, claim(t, s, "short", 2, time.Second))
	require.NoError(t, s.Finish(ctx, "short", 2, idem.StateCompleted, []byte("b")))
	require.NoError(t, claim(t, s, "newer", 3, time.Hour))
	require.NoError(t, s.Finish(ctx, "newer", 3, idem.StateCompleted, []byte("c")))

	c.Add(2 * time.Second) // "short" expired
	require.NoError(t, claim(t, s, "d", 4, time.Hour))
	_, ok, _ := s.Get(ctx, "old")
	assert.True(t, ok, "an expired record goes first, before the oldest finished one")
	_, ok, _ = s.Get(ctx, "short")
	assert.False(t, ok)

	require.NoError(t, claim(t, s, "e", 5, time.Hour))
	_, ok, _ = s.Get(ctx, "old")
	assert.False(t, ok, "then the oldest finished record")
	_, ok, _ = s.Get(ctx, "newer")
	assert.True(t, ok)
	st := s.Stats()
	assert.Equal(t, 3, st.Entries)
	assert.Equal(t, int64(1), st.Evicted)
	assert.Equal(t, int64(1), st.Expired)
}

func TestNeverEvictsPending(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 2})
	require.NoError(t, claim(t, s, "a", 1, time.Hour))
	require.NoError(t, claim(t, s, "b", 2, time.Hour))
	err := claim(t, s, "c", 3, time.Hour)
	require.True(t, errors.Is(err, memstore.ErrFull), "got %v", err)
	assert.Equal(t, int64(1), s.Stats().Full)
	for _, k := range []string{"a", "b"} {
		rec, ok, _ := s.Get(context.Background(), k)
		assert.True(t, ok && rec.State == idem.StatePending, k)
	}
	// Once one finishes, there is no room either (by default, a finished
	// record is kept for an hour), until it expires.
	require.NoError(t, s.Finish(context.Background(), "a", 1, idem.StateCompleted, nil))
	require.ErrorIs(t, claim(t, s, "c", 3, time.Hour), memstore.ErrFull)
	c.Add(time.Hour)
	require.NoError(t, claim(t, s, "c", 3, time.Hour))
	assert.Equal(t, int64(2), s.Stats().Expired, "both expired (b's lease ran out too)")
}

func TestByteBound(t *testing.T) {
	budget := int64(4 * (memstore.EntryOverhead + 100))
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: budget, MinRetention: time.Nanosecond})
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		c.Add(time.Millisecond)
		k := fmt.Sprintf("k%02d", i)
		require.NoError(t, claim(t, s, k, idem.Token(i+1), time.Hour))
		require.NoError(t, s.Finish(ctx, k, idem.Token(i+1), idem.StateCompleted, make([]byte, 100)))
		assert.LessOrEqual(t, s.Stats().Bytes, budget, "after %d records", i+1)
	}
	_, ok, _ := s.Get(ctx, "k09")
	assert.True(t, ok, "the newest record stays")
	// A single response larger than the budget is still stored.
	require.NoError(t, claim(t, s, "huge", 99, time.Hour))
	require.NoError(t, s.Finish(ctx, "huge", 99, idem.StateCompleted, make([]byte, 2*budget)))
	rec, ok, _ := s.Get(ctx, "huge")
	require.True(t, ok)
	assert.Len(t, rec.Response, int(2*budget))
}

func TestSweep(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 4})
	for i := 0; i < 100; i++ {
		require.NoError(t, claim(t, s, fmt.Sprint(i), idem.Token(i+1), time.Duration(i+1)*time.Second))
	}
	c.Add(50*time.Second + time.Millisecond)
	s.Sweep()
	st := s.Stats()
	assert.Equal(t, 50, st.Entries)
	assert.Equal(t, int64(50), st.Expired)
}

func TestBackgroundSweeperStops(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: 5 * time.Millisecond})
	require.NoError(t, claim(t, s, "k", 1, 10*time.Millisecond))
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Entries != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the background sweeper did not drop the expired record")
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")
}

func TestWatchWokenByExpiryAndTakeover(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{})
	ctx := context.Background()
	require.NoError(t, claim(t, s, "k", 1, time.Hour))
	ch, stop := s.Watch(ctx, "k")
	defer stop()
	c.Add(2 * time.Minute) // the lease (1 min) ran out
	require.NoError(t, claim(t, s, "k", 2, time.Hour))
	select {
	case <-ch:
	default:
		t.Fatal("a takeover did not wake the watcher")
	}
	ch2, stop2 := s.Watch(ctx, "k")
	defer stop2()
	c.Add(2 * time.Hour)
	_, ok, _ := s.Get(ctx, "k")
	require.False(t, ok)
	select {
	case <-ch2:
	default:
		t.Fatal("expiry did not wake the watcher")
	}
}

func BenchmarkBeginFinish(b *testing.B) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("i1p0:11:createOrderk36:%036d", i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		i++
		tok := idem.Token(i)
		res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Minute, TTL: time.Hour})
		if err != nil || !res.Acquired {
			b.Fatalf("Begin: %v %+v", err, res)
		}
		// FAILED without a response frees the key for the next round.
		if err := s.Finish(ctx, k, tok, idem.StateFailed, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetParallel(b *testing.B) {
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint(i)
		_, _ = s.Begin(ctx, &idem.BeginRequest{Key: keys[i], Token: 1, Lease: time.Minute, TTL: time.Hour})
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_, _, _ = s.Get(ctx, keys[i&1023])
			i++
		}
	})
}

// BenchmarkFirstRequest is the store's part of a first request: a claim of a
// new key and its completion with a 256-byte response, every record kept
// (as within a window). With garbage, each request also allocates what a
// handler would (4 KiB in small objects), so the garbage collector runs as
// often as in a server and pays for tracing the records it holds. With
// readlocal, the claim follows a ReadLocal that finds no record, as for a
// first request whose fingerprint is not in the engine's cache.
func BenchmarkFirstRequest(b *testing.B) {
	for _, v := range []struct {
		name             string
		garbage, readLoc bool
	}{{"alone", false, false}, {"garbage", true, false}, {"alone-readlocal", false, true}} {
		garbage := v.garbage
		b.Run(v.name, func(b *testing.B) {
			// MinRetention of 1ns: the benchmark keeps claiming new keys,
			// past what the default bounds hold within an hour, evicting
			// the oldest finished records.
			s := memstore.New(memstore.Options{SweepInterval: -1, MinRetention: time.Nanosecond})
			defer s.Close()
			ctx := context.Background()
			resp := make([]byte, 256)
			keys := make([]string, 1<<16)
			round := 0
			var sink [][]byte
			b.ReportAllocs()
			i := len(keys)
			for b.Loop() {
				if i == len(keys) {
					b.StopTimer()
					round++
					for j := range keys {
						keys[j] = fmt.Sprintf("i1p0:11:createOrderk36:%08d-%027d", round, j)
					}
					i = 0
					b.StartTimer()
				}
				k := keys[i]
				i++
				tok := idem.Token(i)
				if v.readLoc {
					if _, found := s.ReadLocal(k, nil); found {
						b.Fatal("ReadLocal found a new key")
					}
				}
				res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Minute, TTL: time.Hour})
				if err != nil || !res.Acquired {
					b.Fatalf("Begin: %v %+v", err, res)
				}
				if err := s.Finish(ctx, k, tok, idem.StateCompleted, resp); err != nil {
					b.Fatal(err)
				}
				if garbage {
					sink = sink[:0]
					for range 32 {
						sink = append(sink, make([]byte, 128))
					}
				}
			}
			_ = sink
		})
	}
}

// TestExpiryAfterTakeovers: reclaiming a FAILED record gives it a new
// expiry, which leaves a dead entry in the shard's expiry queue. Thousands
// of them, in any order, behind a record that expires first (the queue
// compacts and its pages rotate), change nothing about which records
// expire when.
func TestExpiryAfterTakeovers(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	const n, rounds = 100, 60
	start := c.Now()
	require.NoError(t, claim(t, s, "first", 1, time.Hour))
	require.NoError(t, s.Finish(ctx, "first", 1, idem.StateCompleted, nil))
	exp := make([]time.Time, n)
	tok := idem.Token(1)
	for round := range rounds {
		for _, i := range rng.Perm(n) {
			k := fmt.Sprint("k", i)
			tok++
			res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Minute, TTL: time.Hour})
			require.NoError(t, err)
			require.True(t, res.Acquired)
			if round > 0 {
				require.Equal(t, idem.StateFailed, res.Prior, "round %d, %s", round, k)
			}
			exp[i] = c.Now().Add(time.Hour)
			require.NoError(t, s.Finish(ctx, k, tok, idem.StateFailed, nil))
			c.Add(time.Millisecond)
		}
	}
	// The last round's claims were made from (rounds-1)*n to rounds*n ms
	// after the start: "first" and half of them expired.
	c.Set(start.Add(time.Hour + ((rounds-1)*n+n/2)*time.Millisecond))
	s.Sweep()
	expired := 1
	for i := range n {
		if !c.Now().Before(exp[i]) {
			expired++
		}
	}
	require.Less(t, 1, expired)
	require.Less(t, expired, n)
	st := s.Stats()
	require.Equal(t, int64(expired), st.Expired)
	require.Equal(t, n+1-expired, st.Entries)
	for i := range n {
		_, ok, err := s.Get(ctx, fmt.Sprint("k", i))
		require.NoError(t, err)
		require.Equal(t, c.Now().Before(exp[i]), ok, "k%d", i)
	}
}

// TestSmallBoundsFillUp: a store with small bounds has few shards, so that
// each holds a few hundred records: MaxEntries PENDING records fit, however
// their keys hash. (With 32 shards of 2 records each, MaxEntries 64 refused a
// claim with ErrFull as soon as 3 keys met in one shard: after 5 records at
// worst, about 30 on average.)
func TestSmallBoundsFillUp(t *testing.T) {
	for _, o := range []memstore.Options{
		{MaxEntries: 64},
		{MaxEntries: 64, Shards: 1024},
		{MaxBytes: 64 * (memstore.EntryOverhead + 8)},
	} {
		for trial := range 20 {
			s, _ := newClockStore(t, o)
			for i := range 64 {
				require.NoError(t, claim(t, s, fmt.Sprintf("%02d-%05d", trial, i), 1, time.Hour), "%+v: record %d", o, i+1)
			}
			assert.ErrorIs(t, claim(t, s, "one more", 1, time.Hour), memstore.ErrFull)
		}
	}
}

// TestMaxEntriesBound: a store never holds more than MaxEntries records.
func TestMaxEntriesBound(t *testing.T) {
	for _, o := range []memstore.Options{{MaxEntries: 10}, {MaxEntries: 1001, Shards: 2}} {
		o.MinRetention = time.Nanosecond
		s, c := newClockStore(t, o)
		ctx := context.Background()
		for i := range 5000 {
			c.Add(time.Millisecond)
			k := fmt.Sprint("k", i)
			require.NoError(t, claim(t, s, k, 1, time.Hour))
			require.NoError(t, s.Finish(ctx, k, 1, idem.StateCompleted, nil))
		}
		assert.Equal(t, o.MaxEntries, s.Stats().Entries, "%+v", o)
	}
}

// TestKeyLargerThanShare: a record whose key alone exceeds its shard's share
// of MaxBytes is admitted into an empty shard, as a response larger than the
// share is stored. (It was refused with ErrFull, whose message blames PENDING
// records, on an empty store.)
func TestKeyLargerThanShare(t *testing.T) {
	ctx := context.Background()
	for _, budget := range []int64{200, 100} {
		for _, evict := range []bool{false, true} {
			s, c := newClockStore(t, memstore.Options{MaxBytes: budget})
			huge := strings.Repeat("k", 120)
			require.NoError(t, claim(t, s, huge, 1, 2*time.Hour), "MaxBytes %d", budget)
			assert.ErrorIs(t, claim(t, s, "small", 2, time.Hour), memstore.ErrFull, "the shard's one record is PENDING")
			require.NoError(t, s.Finish(ctx, huge, 1, idem.StateCompleted, []byte("r")))
			if !evict {
				assert.ErrorIs(t, claim(t, s, "small", 2, time.Hour), memstore.ErrFull, "the finished record is younger than MinRetention")
			}
			c.Add(time.Hour) // evict: MinRetention passed; else the record expires (2h)
			if !evict {
				c.Add(time.Hour)
			}
			require.NoError(t, claim(t, s, "small", 2, time.Hour), "the finished record is evicted (or expired)")
			_, ok, _ := s.Get(ctx, huge)
			assert.False(t, ok)
			assert.Equal(t, 1, s.Stats().Entries)
		}
	}
}

// BenchmarkReadLocal: ReadLocal of a key among 1Ki or 64Ki records,
// present (its 256-byte response copied into a buffer) or missing (what a
// first request whose fingerprint is not in the engine's cache pays before
// its claim; with 1Ki records, in caches, the lookup's own work, since the
// claim that follows would miss the caches as it does).
func BenchmarkReadLocal(b *testing.B) {
	ctx := context.Background()
	resp := make([]byte, 256)
	for _, n := range []int{1 << 10, 1 << 16} {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		defer s.Close()
		keys, missing := make([]string, n), make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("i1p0:11:createOrderk36:%036d", i)
			missing[i] = fmt.Sprintf("i1p0:11:createOrderk36:%036d", n+i)
			if _, err := s.Begin(ctx, &idem.BeginRequest{Key: keys[i], Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
				b.Fatal(err)
			}
			if err := s.Finish(ctx, keys[i], 1, idem.StateCompleted, resp); err != nil {
				b.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name  string
			keys  []string
			found bool
		}{{"missing", missing, false}, {"found", keys, true}} {
			b.Run(fmt.Sprintf("%s-%dKi", tc.name, n>>10), func(b *testing.B) {
				buf := make([]byte, 0, 512)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, found := s.ReadLocal(tc.keys[i%n], buf); found != tc.found {
						b.Fatal("found", found)
					}
					i += 7919 // a prime: the keys in another order than their slots
				}
			})
		}
	}
}

// TestFullRefusesInsteadOfEvicting: a caller that fills a shard with large
// responses under fresh keys gets its claims refused (ErrFull) once the
// shard is full, and never evicts another caller's finished record younger
// than MinRetention (whose retry would execute again): by default (an
// hour) and with a negative MinRetention (never within its window); once
// the victim's record is older than MinRetention (here a second), the
// attacker evicts it. Expired records are reclaimed first in every mode,
// and a completion that takes the shard over its budget is stored.
func TestFullRefusesInsteadOfEvicting(t *testing.T) {
	const resp = 1000
	budget := int64(8 * (memstore.EntryOverhead + resp))
	for _, minRet := range []time.Duration{0, -1, time.Second} {
		evict := minRet > 0
		t.Run(fmt.Sprint("MinRetention=", minRet), func(t *testing.T) {
			s, c := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: budget, MinRetention: minRet})
			ctx := context.Background()
			// Records that expire soon: reclaimed first.
			for i := range 3 {
				k := fmt.Sprint("short", i)
				require.NoError(t, claim(t, s, k, 1, time.Second))
				require.NoError(t, s.Finish(ctx, k, 1, idem.StateCompleted, make([]byte, resp)))
			}
			require.NoError(t, claim(t, s, "victim", 1, time.Hour))
			require.NoError(t, s.Finish(ctx, "victim", 1, idem.StateCompleted, []byte(`{"id":"pay_1"}`)))
			c.Add(2 * time.Second)
			refused := 0
			for i := range 40 {
				if evict {
					c.Add(time.Second) // the attacker's own records age past MinRetention too
				}
				k := fmt.Sprint("attacker", i)
				err := claim(t, s, k, 1, time.Hour)
				if err != nil {
					require.ErrorIs(t, err, memstore.ErrFull)
					refused++
					continue
				}
				require.NoError(t, s.Finish(ctx, k, 1, idem.StateCompleted, make([]byte, resp)))
				rec, ok, _ := s.Get(ctx, k)
				require.True(t, ok, "a completion is never lost")
				require.Len(t, rec.Response, resp)
			}
			st := s.Stats()
			assert.Equal(t, int64(3), st.Expired, "the expired records were reclaimed")
			_, victim, _ := s.Get(ctx, "victim")
			if evict {
				assert.Zero(t, refused)
				assert.Zero(t, st.Full)
				assert.NotZero(t, st.Evicted)
				assert.False(t, victim, "the oldest finished record is evicted once older than MinRetention")
				assert.LessOrEqual(t, st.Bytes, budget)
				return
			}
			assert.Equal(t, 40-8, refused, "8 attacker claims fit beside the victim's record (the 8th completion over the budget)")
			assert.Equal(t, int64(refused), st.Full)
			assert.Zero(t, st.Evicted)
			assert.True(t, victim, "a record within its window is never evicted")
			assert.Greater(t, st.Bytes, budget, "the last completion is stored over the budget")
			// Room again once records expire (or, by default, age).
			c.Add(time.Hour)
			require.NoError(t, claim(t, s, "later", 1, time.Hour))
		})
	}
}

// TestNeverEvictsPendingPastMinRetention: only finished records are
// evicted; a shard of PENDING records refuses a claim, however old they are.
func TestNeverEvictsPendingPastMinRetention(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 2, MinRetention: time.Second})
	require.NoError(t, claim(t, s, "a", 1, 3*time.Hour))
	require.NoError(t, claim(t, s, "b", 2, 3*time.Hour))
	c.Add(2 * time.Hour)
	require.ErrorIs(t, claim(t, s, "c", 3, time.Hour), memstore.ErrFull)
	require.NoError(t, s.Finish(context.Background(), "a", 1, idem.StateCompleted, nil))
	require.ErrorIs(t, claim(t, s, "c", 3, time.Hour), memstore.ErrFull, "MinRetention counts from the finish")
	c.Add(time.Second)
	require.NoError(t, claim(t, s, "c", 3, time.Hour), "the finished record is evicted")
	_, ok, _ := s.Get(context.Background(), "a")
	assert.False(t, ok)
	assert.Equal(t, int64(1), s.Stats().Evicted)
}

// TestFinishOverBudgetDropsExpired: a completion that takes its shard over
// the byte budget first drops the shard's expired records (not only Begin
// does), so the shard holds no more than it must; an unexpired one stays.
func TestFinishOverBudgetDropsExpired(t *testing.T) {
	budget := int64(3 * (memstore.EntryOverhead + 1000))
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: budget})
	ctx := context.Background()
	require.NoError(t, claim(t, s, "old", 1, time.Second))
	require.NoError(t, s.Finish(ctx, "old", 1, idem.StateCompleted, make([]byte, 1000)))
	require.NoError(t, claim(t, s, "kept", 1, time.Hour))
	require.NoError(t, s.Finish(ctx, "kept", 1, idem.StateCompleted, make([]byte, 1000)))
	require.NoError(t, claim(t, s, "new", 1, time.Hour))
	c.Add(2 * time.Second) // "old" expired after the claim
	require.NoError(t, s.Finish(ctx, "new", 1, idem.StateCompleted, make([]byte, 2000)))
	st := s.Stats()
	assert.Equal(t, int64(1), st.Expired)
	assert.Zero(t, st.Evicted)
	assert.Equal(t, 2, st.Entries)
	_, ok, _ := s.Get(ctx, "kept")
	assert.True(t, ok)
}

// TestFailedFinishOverBudgetEvictsNothing: a FAILED finish with no response
// (a reclaimable record, adding no bytes) on a shard over its byte budget
// evicts nothing: it used to keep itself and evict an older replayable
// record, whose retry would run again, to make room it did not need.
func TestFailedFinishOverBudgetEvictsNothing(t *testing.T) {
	budget := int64(3 * (memstore.EntryOverhead + 1000))
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: budget, MinRetention: time.Second})
	ctx := context.Background()
	require.NoError(t, claim(t, s, "replay", 1, time.Hour))
	require.NoError(t, s.Finish(ctx, "replay", 1, idem.StateCompleted, make([]byte, 1000)))
	require.NoError(t, claim(t, s, "failed", 1, time.Hour))
	require.NoError(t, claim(t, s, "big", 1, time.Hour))
	// Over the budget: "replay" is younger than MinRetention, so it stays.
	require.NoError(t, s.Finish(ctx, "big", 1, idem.StateCompleted, make([]byte, 3000)))
	require.Greater(t, s.Stats().Bytes, budget)
	c.Add(2 * time.Second)
	require.NoError(t, s.Finish(ctx, "failed", 1, idem.StateFailed, nil))
	st := s.Stats()
	assert.Zero(t, st.Evicted, "a finish that adds no bytes evicts no replayable record")
	_, ok, _ := s.Get(ctx, "replay")
	assert.True(t, ok)
	// A claim still makes room as before: the reclaimable FAILED record first.
	require.NoError(t, claim(t, s, "next", 1, time.Hour))
	_, ok, _ = s.Get(ctx, "failed")
	assert.False(t, ok)
	assert.Equal(t, int64(1), s.Stats().EvictedFailed)
}
