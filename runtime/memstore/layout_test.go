package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// model is what the store must hold: a plain map, expiry on the fake clock.
type model struct {
	state idem.State
	token idem.Token
	exp   time.Time
	resp  []byte
}

// TestAgainstModel runs random claims, finishes, reads and expiries against
// a plain map, on a store large enough never to evict: the index (probing,
// deletion), the slots, the chunks and the expiry queue and heap must agree
// with it at every step. With one window, every expiry goes through the
// queue (takeovers leave dead entries in it); with TTLs at random, most go
// through the heap.
func TestAgainstModel(t *testing.T) {
	for _, shards := range []int{1, 4} {
		for _, window := range []bool{false, true} {
			t.Run(fmt.Sprint(shards, map[bool]string{false: "/ttls", true: "/window"}[window]), func(t *testing.T) {
				s, c := newClockStore(t, memstore.Options{Shards: shards})
				ctx := context.Background()
				rng := rand.New(rand.NewPCG(1, uint64(shards)))
				want := map[string]*model{}
				ttl := func() time.Duration {
					if window {
						return 50 * time.Second
					}
					return time.Duration(1+rng.IntN(100)) * time.Second
				}
				keys := make([]string, 300)
				for i := range keys {
					keys[i] = fmt.Sprintf("k%d-%s", i, bytes.Repeat([]byte{'x'}, rng.IntN(40)))
				}
				live := func(k string) *model {
					m := want[k]
					if m != nil && !c.Now().Before(m.exp) {
						delete(want, k)
						return nil
					}
					return m
				}
				var tok idem.Token
				for step := 0; step < 20000; step++ {
					k := keys[rng.IntN(len(keys))]
					switch op := rng.IntN(10); {
					case op < 4:
						tok++
						ttl := ttl()
						res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Hour, TTL: ttl})
						require.NoError(t, err)
						m := live(k)
						free := m == nil || (m.state == idem.StateFailed && m.resp == nil)
						require.Equal(t, free, res.Acquired, "step %d: Begin(%s) acquired", step, k)
						if res.Acquired {
							want[k] = &model{state: idem.StatePending, token: tok, exp: c.Now().Add(ttl)}
						} else {
							require.Equal(t, m.state, res.Record.State)
							require.Equal(t, m.token, res.Record.Token)
							require.True(t, bytes.Equal(m.resp, res.Record.Response))
						}
					case op < 7:
						m := live(k)
						st := idem.StateCompleted
						var resp []byte
						switch rng.IntN(4) {
						case 0:
							st = idem.StateFailed
						case 1:
							resp = []byte{}
						default:
							resp = bytes.Repeat([]byte{byte(step)}, rng.IntN(3000))
						}
						var tk idem.Token
						if m != nil {
							tk = m.token
						}
						err := s.Finish(ctx, k, tk, st, resp)
						if m != nil && m.state == st && (m.resp == nil) == (resp == nil) && bytes.Equal(m.resp, resp) {
							require.NoError(t, err, "step %d: a re-run of the Finish that wrote the record", step)
							continue
						}
						if m == nil || m.state != idem.StatePending {
							require.ErrorIs(t, err, idem.ErrFenced, "step %d", step)
							continue
						}
						require.NoError(t, err)
						m.state, m.resp = st, resp
					case op < 9:
						rec, ok, err := s.Get(ctx, k)
						require.NoError(t, err)
						m := live(k)
						require.Equal(t, m != nil, ok, "step %d: Get(%s) found", step, k)
						if ok {
							require.Equal(t, m.state, rec.State)
							require.Equal(t, m.token, rec.Token)
							require.Equal(t, m.resp == nil, rec.Response == nil)
							require.True(t, bytes.Equal(m.resp, rec.Response))
							require.True(t, rec.ExpiresAt.Equal(m.exp))
						}
					default:
						c.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
					}
				}
				s.Sweep() // drop what expired unseen
				for k := range want {
					live(k)
				}
				require.Equal(t, len(want), s.Stats().Entries)
			})
		}
	}
}

// TestResponsesOutliveTheirRecords: a Response handed out stays intact
// after its record is evicted or expired and the shard's memory is reused
// and compacted.
func TestResponsesOutliveTheirRecords(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 2500, MinRetention: time.Nanosecond})
	ctx := context.Background()
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 500) }
	var held [][]byte
	for i := 0; i < 12000; i++ {
		k := fmt.Sprint("key", i)
		// Every tenth record lives long: the others leave holes in the
		// chunks, which the store must compact.
		ttl := time.Second
		if i%10 == 0 {
			ttl = time.Hour
		}
		_, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: idem.Token(i + 1), Lease: time.Minute, TTL: ttl})
		require.NoError(t, err)
		require.NoError(t, s.Finish(ctx, k, idem.Token(i+1), idem.StateCompleted, body(i)))
		if i%1000 == 1 {
			rec, ok, _ := s.Get(ctx, k)
			require.True(t, ok)
			held = append(held, rec.Response)
		}
		if i%500 == 499 {
			c.Add(2 * time.Second)
			s.Sweep()
		}
	}
	for j, r := range held {
		require.True(t, bytes.Equal(r, body(j*1000+1)), "held response %d changed", j)
	}
	for i := 0; i < 12000; i += 10 {
		rec, ok, _ := s.Get(ctx, fmt.Sprint("key", i))
		if ok {
			require.True(t, bytes.Equal(rec.Response, body(i)), "record %d", i)
		}
	}
	require.LessOrEqual(t, s.Stats().Entries, 2500)
}

func TestExtendLeaseNonPositive(t *testing.T) {
	s, _ := newClockStore(t, memstore.Options{})
	require.NoError(t, claim(t, s, "k", 1, time.Hour))
	before, _, _ := s.Get(context.Background(), "k")
	for _, d := range []time.Duration{0, -time.Second} {
		err := s.ExtendLease(context.Background(), "k", 1, d)
		require.Error(t, err)
		require.False(t, errors.Is(err, idem.ErrFenced))
	}
	after, _, _ := s.Get(context.Background(), "k")
	require.True(t, before.LeaseExpiresAt.Equal(after.LeaseExpiresAt))
}

// TestConcurrentReadersAndWriters: readers keep and read responses while
// writers append to the same chunks and records expire and are evicted
// (run with -race).
func TestConcurrentReadersAndWriters(t *testing.T) {
	s := memstore.New(memstore.Options{Shards: 1, MaxEntries: 200, MinRetention: time.Nanosecond, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100+i%300) }
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 3000; i += 3 {
				k := fmt.Sprint("k", i)
				tk := idem.Token(i + 1)
				if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tk, Lease: time.Minute, TTL: time.Hour}); err != nil {
					t.Error(err)
					return
				}
				if err := s.Finish(ctx, k, tk, idem.StateCompleted, body(i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held [][]byte
			var ids []int
			for i := 0; i < 3000; i++ {
				if rec, ok, _ := s.Get(ctx, fmt.Sprint("k", i)); ok && rec.State == idem.StateCompleted {
					held, ids = append(held, rec.Response), append(ids, i)
				}
			}
			for j, b := range held {
				if !bytes.Equal(b, body(ids[j])) {
					t.Errorf("response of k%d changed", ids[j])
				}
			}
		}()
	}
	wg.Wait()
}
