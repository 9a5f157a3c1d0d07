package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// claimAs claims key for principal and, when resp is not nil, completes it
// with resp; it returns Begin's error.
func claimAs(t *testing.T, s *memstore.Store, principal, key string, ttl time.Duration, resp []byte) error {
	t.Helper()
	ctx := context.Background()
	res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Token: 7, Lease: time.Minute, TTL: ttl, Principal: principal})
	if err != nil {
		return err
	}
	require.True(t, res.Acquired, "Begin(%q) not acquired", key)
	if resp != nil {
		require.NoError(t, s.Finish(ctx, key, 7, idem.StateCompleted, resp))
	}
	return nil
}

// TestPrincipalFloodLeavesOthersAdmitted: the security trial's flood (HIGH
// 2) on the store: one principal claims fresh keys with 1 KiB responses
// until it is refused. Its refusal is ErrPrincipalFull (and
// idem.ErrQuotaExceeded, idem.ErrNothingDone), before the store is full;
// then another principal, and no principal, are still admitted, key after
// key, until the store itself is full (ErrFull, for all). Before
// MaxPrincipalShare, the flood filled the store and everyone got ErrFull.
func TestPrincipalFloodLeavesOthersAdmitted(t *testing.T) {
	const maxBytes = 256 << 10
	s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: maxBytes})
	resp := make([]byte, 1<<10)
	var err error
	n := 0
	for ; n < 1000; n++ {
		if err = claimAs(t, s, "mallory", fmt.Sprint("m-", n), time.Hour, resp); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, memstore.ErrPrincipalFull)
	require.ErrorIs(t, err, idem.ErrQuotaExceeded)
	require.ErrorIs(t, err, idem.ErrNothingDone)
	require.NotErrorIs(t, err, memstore.ErrFull)
	var pf *memstore.PrincipalFullError
	require.True(t, errors.As(err, &pf))
	assert.Equal(t, time.Hour, pf.RetryAfter(), "the shard's soonest record expires, and its oldest reaches MinRetention, in an hour")
	st := s.Stats()
	assert.Greater(t, st.Bytes, int64(maxBytes/2), "refused only under pressure")
	assert.Less(t, st.Bytes, int64(maxBytes*3/5), "refused once over half the store")
	assert.Equal(t, int64(1), st.PrincipalFull)
	assert.Zero(t, st.Full)

	// Mallory stays refused; alice and the anonymous callers are admitted.
	require.ErrorIs(t, claimAs(t, s, "mallory", "m-again", time.Hour, resp), memstore.ErrPrincipalFull)
	alice := 0
	for ; alice < 20; alice++ {
		require.NoError(t, claimAs(t, s, "alice", fmt.Sprint("a-", alice), time.Hour, resp))
		require.NoError(t, claimAs(t, s, "", fmt.Sprint("anon-", alice), time.Hour, resp))
	}
	// Alice goes on until she holds more than her share (an eighth: 32
	// KiB), then she is refused too.
	for ; ; alice++ {
		err := claimAs(t, s, "alice", fmt.Sprint("a-", alice), time.Hour, resp)
		if err != nil {
			require.ErrorIs(t, err, memstore.ErrPrincipalFull)
			break
		}
	}
	assert.Equal(t, (32<<10)/(1024+len("a-10")+memstore.EntryOverhead)+1, alice, "alice's share: an eighth of 256 KiB, in records of about 1.2 KiB")
	// Bob is admitted, and the anonymous callers until the store is full.
	require.NoError(t, claimAs(t, s, "bob", "b-0", time.Hour, resp))
	for i := 0; ; i++ {
		err := claimAs(t, s, "", fmt.Sprint("anon-more-", i), time.Hour, resp)
		if err != nil {
			require.ErrorIs(t, err, memstore.ErrFull, "no principal: never ErrPrincipalFull")
			break
		}
	}
}

// TestPrincipalAloneNotRefusedBelowPressure: a single principal on an idle
// store is never refused while the store is at most half full, whatever
// its share; above that it is (MaxPrincipalShare), and a negative share
// lets it fill the store (ErrFull).
func TestPrincipalAloneNotRefusedBelowPressure(t *testing.T) {
	const maxBytes = 256 << 10
	resp := make([]byte, 2<<10)
	t.Run("default", func(t *testing.T) {
		s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: maxBytes})
		for i := 0; ; i++ {
			before := s.Stats().Bytes
			err := claimAs(t, s, "tenant", fmt.Sprint("k-", i), time.Hour, resp)
			if err != nil {
				require.ErrorIs(t, err, memstore.ErrPrincipalFull)
				assert.Greater(t, before, int64(maxBytes/2), "refused with the store at most half full")
				return
			}
		}
	})
	t.Run("entries", func(t *testing.T) {
		s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000})
		for i := 0; ; i++ {
			before := s.Stats().Entries
			err := claimAs(t, s, "tenant", fmt.Sprint("k-", i), time.Hour, nil)
			if err != nil {
				require.ErrorIs(t, err, memstore.ErrPrincipalFull)
				assert.Equal(t, 501, before, "refused once over half of MaxEntries")
				return
			}
		}
	})
	t.Run("disabled", func(t *testing.T) {
		s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: maxBytes, MaxPrincipalShare: -1})
		for i := 0; ; i++ {
			err := claimAs(t, s, "tenant", fmt.Sprint("k-", i), time.Hour, resp)
			if err != nil {
				require.ErrorIs(t, err, memstore.ErrFull)
				assert.Greater(t, s.Stats().Bytes, int64(maxBytes*9/10))
				assert.Zero(t, s.Stats().Principals, "nothing accounted")
				return
			}
		}
	})
	t.Run("share 1", func(t *testing.T) { // or more: no limit
		s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxBytes: maxBytes, MaxPrincipalShare: 1})
		for i := 0; ; i++ {
			err := claimAs(t, s, "tenant", fmt.Sprint("k-", i), time.Hour, resp)
			if err != nil {
				require.ErrorIs(t, err, memstore.ErrFull)
				return
			}
		}
	})
}

// TestAnonymousNeverLimited: claims without a principal fill the store
// (ErrFull), never ErrPrincipalFull, and are accounted to no one.
func TestAnonymousNeverLimited(t *testing.T) {
	s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000})
	for i := 0; ; i++ {
		err := claimAs(t, s, "", fmt.Sprint("k-", i), time.Hour, []byte("ok"))
		if err != nil {
			require.ErrorIs(t, err, memstore.ErrFull)
			assert.Equal(t, 1000, i)
			break
		}
	}
	st := s.Stats()
	assert.Zero(t, st.PrincipalFull)
	assert.Zero(t, st.Principals)
}

// TestPrincipalFullRetryAfter: the refusal's hint is when the shard may
// next drop a record (here: p's records expire, the soonest), at least a
// second, at most an hour.
func TestPrincipalFullRetryAfter(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 100})
	for i := range 50 {
		require.NoError(t, claimAs(t, s, "", fmt.Sprint("anon-", i), time.Minute, nil))
	}
	for i := range 13 {
		require.NoError(t, claimAs(t, s, "p", fmt.Sprint("p-", i), 10*time.Minute, nil))
	}
	c.Add(2 * time.Minute) // the anonymous records expire
	for i := range 60 {
		require.NoError(t, claimAs(t, s, "", fmt.Sprint("anon2-", i), 30*time.Minute, nil))
	}
	err := claimAs(t, s, "p", "p-more", time.Hour, nil)
	var pf *memstore.PrincipalFullError
	require.True(t, errors.As(err, &pf), "%v", err)
	assert.Equal(t, 8*time.Minute, pf.RetryAfter())
	c.Add(8*time.Minute - time.Millisecond)
	err = claimAs(t, s, "p", "p-more", time.Hour, nil)
	require.True(t, errors.As(err, &pf), "%v", err)
	assert.Equal(t, time.Second, pf.RetryAfter(), "at least a second")
	c.Add(time.Millisecond) // p's records expire: admitted again
	require.NoError(t, claimAs(t, s, "p", "p-more", time.Hour, nil))
}

// TestPrincipalAccountingReturnsToZero: what principals hold goes back to
// nothing once their records expire, are evicted, or are taken over by
// no principal, and Stats counts the accounts held.
func TestPrincipalAccountingReturnsToZero(t *testing.T) {
	ctx := context.Background()
	s, c := newClockStore(t, memstore.Options{MaxEntries: 400, MinRetention: time.Minute})
	for i := range 200 {
		p := fmt.Sprint("p", i%7)
		require.NoError(t, claimAs(t, s, p, fmt.Sprint("k-", i), time.Hour, make([]byte, i)))
	}
	assert.Equal(t, 7, s.Stats().Principals, "seven principals (one shard: 400 records are too few for two)")
	// A reclaimable FAILED record, taken over by another principal.
	_, err := s.Begin(ctx, &idem.BeginRequest{Key: "shared", Token: 1, Lease: time.Minute, TTL: time.Hour, Principal: "x"})
	require.NoError(t, err)
	require.NoError(t, s.Finish(ctx, "shared", 1, idem.StateFailed, nil))
	res, err := s.Begin(ctx, &idem.BeginRequest{Key: "shared", Token: 2, Lease: time.Minute, TTL: time.Hour, Principal: "y"})
	require.NoError(t, err)
	require.True(t, res.Acquired)
	records, _ := s.PrincipalUsage("x")
	assert.Zero(t, records, "x's record went to y")
	records, _ = s.PrincipalUsage("y")
	assert.Equal(t, 1, records)
	// Eviction: others fill the store, and their records too grow older
	// than MinRetention.
	for i := range 1200 {
		if i%100 == 0 {
			c.Add(2 * time.Minute)
		}
		require.NoError(t, claimAs(t, s, "", fmt.Sprint("anon-", i), 2*time.Hour, []byte{}))
	}
	for i := range 7 {
		records, bytes := s.PrincipalUsage(fmt.Sprint("p", i))
		assert.Zero(t, records, "p%d", i)
		assert.Zero(t, bytes, "p%d", i)
	}
	assert.NotZero(t, s.Stats().Evicted)
	// Expiry.
	for i := range 50 {
		require.NoError(t, claimAs(t, s, fmt.Sprint("q", i%3), fmt.Sprint("q-", i), time.Hour, []byte("resp")))
	}
	assert.NotZero(t, s.Stats().Principals)
	c.Add(3 * time.Hour)
	s.Sweep()
	st := s.Stats()
	assert.Zero(t, st.Entries)
	assert.Zero(t, st.Principals)
	for _, p := range []string{"q0", "q1", "q2", "y"} {
		records, bytes := s.PrincipalUsage(p)
		assert.Zero(t, records, p)
		assert.Zero(t, bytes, p)
	}
}

// BenchmarkFirstRequestNamed is BenchmarkFirstRequest's "alone" for
// claims made by named principals (idem.BeginRequest.Principal), taken in
// turn from a set of them: their accounts are found by hash, and the store
// is under pressure all along (it evicts), each principal below its share.
func BenchmarkFirstRequestNamed(b *testing.B) {
	for _, n := range []int{64, 4096} {
		b.Run(fmt.Sprint("principals=", n), func(b *testing.B) {
			s := memstore.New(memstore.Options{SweepInterval: -1, MinRetention: time.Nanosecond})
			defer s.Close()
			ctx := context.Background()
			resp := make([]byte, 256)
			keys := make([]string, 1<<16)
			principals := make([]string, n)
			for i := range principals {
				principals[i] = fmt.Sprintf("user-%08d", i)
			}
			round := 0
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
				res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Minute, TTL: time.Hour, Principal: principals[i%n]})
				if err != nil || !res.Acquired {
					b.Fatalf("Begin: %v %+v", err, res)
				}
				if err := s.Finish(ctx, k, tok, idem.StateCompleted, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
