package pgstore

// Contract tests of idem.Store (runtime/idem/store.go), written against the
// interface only. The same file lives in runtime/redisstore. They were written
// before the shared suite (runtime/storetest) existed and stay as a second
// opinion: key spellings, bad requests, ExpiresAt kept by Finish, a holder
// finishing after its lease ran out, 50-way concurrency.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func runContract(t *testing.T, newStore func(t *testing.T) idem.Store) {
	const (
		long = time.Minute
		tiny = 40 * time.Millisecond
	)
	req := func(key string, f byte, tok idem.Token, lease, ttl time.Duration) *idem.BeginRequest {
		return &idem.BeginRequest{Key: key, Fingerprint: fp(f), Token: tok, Lease: lease, TTL: ttl}
	}
	ctx := context.Background()

	t.Run("ClaimNewKey", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		before := time.Now()
		r, err := s.Begin(ctx, req("k", 1, 11, 30*time.Second, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true}, r)

		rec, found, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, idem.StatePending, rec.State)
		assert.Equal(t, fp(1), rec.Fingerprint)
		assert.Equal(t, idem.Token(11), rec.Token)
		assert.Nil(t, rec.Response)
		// The store's clock, not ours, but the servers here run on this machine.
		assert.WithinDuration(t, before.Add(30*time.Second), rec.LeaseExpiresAt, 5*time.Second)
		assert.WithinDuration(t, before.Add(time.Hour), rec.ExpiresAt, 5*time.Second)
		assert.Equal(t, time.Hour-30*time.Second, rec.ExpiresAt.Sub(rec.LeaseExpiresAt).Round(10*time.Millisecond))
	})

	t.Run("DuplicateWhilePending", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, long, time.Hour))
		require.NoError(t, err)
		r, err := s.Begin(ctx, req("k", 2, 22, long, time.Hour))
		require.NoError(t, err)
		assert.False(t, r.Acquired)
		assert.Equal(t, idem.State(0), r.Prior)
		assert.Equal(t, idem.StatePending, r.Record.State)
		assert.Equal(t, idem.Token(11), r.Record.Token)
		assert.Equal(t, fp(1), r.Record.Fingerprint)
	})

	t.Run("FinishAndReplay", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, long, time.Hour))
		require.NoError(t, err)
		pending, _, err := s.Get(ctx, "k")
		require.NoError(t, err)

		assert.ErrorIs(t, s.Finish(ctx, "k", 12, idem.StateCompleted, []byte("x")), idem.ErrFenced, "wrong token")
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateCompleted, []byte("response")))
		assert.ErrorIs(t, s.Finish(ctx, "k", 11, idem.StateFailed, nil), idem.ErrFenced, "second finish")

		rec, found, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, idem.StateCompleted, rec.State)
		assert.Equal(t, []byte("response"), rec.Response)
		assert.Equal(t, pending.ExpiresAt, rec.ExpiresAt, "Finish keeps ExpiresAt")
		assert.Equal(t, idem.Token(11), rec.Token)

		r, err := s.Begin(ctx, req("k", 1, 33, long, time.Hour))
		require.NoError(t, err)
		assert.False(t, r.Acquired)
		assert.Equal(t, rec, r.Record)
	})

	t.Run("FinishMissing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		assert.ErrorIs(t, s.Finish(ctx, "nothing", 1, idem.StateCompleted, []byte("x")), idem.ErrFenced)
		_, found, err := s.Get(ctx, "nothing")
		require.NoError(t, err)
		assert.False(t, found)
	})

	t.Run("TakeOverExpiredLease", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, tiny, time.Hour))
		require.NoError(t, err)
		r, err := s.Begin(ctx, req("k", 2, 22, long, time.Hour))
		require.NoError(t, err)
		require.False(t, r.Acquired, "lease still running")
		time.Sleep(2 * tiny)
		r, err = s.Begin(ctx, req("k", 2, 22, long, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true, Prior: idem.StatePending}, r)
		assert.ErrorIs(t, s.Finish(ctx, "k", 11, idem.StateCompleted, []byte("late")), idem.ErrFenced, "old holder fenced")
		require.NoError(t, s.Finish(ctx, "k", 22, idem.StateCompleted, []byte("new")))
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, []byte("new"), rec.Response)
		assert.Equal(t, fp(2), rec.Fingerprint, "the takeover writes its own fingerprint")
	})

	t.Run("ExpiredLeaseStillFinishes", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, tiny, time.Hour))
		require.NoError(t, err)
		time.Sleep(2 * tiny)
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateCompleted, []byte("ok")), "nobody took over")
	})

	t.Run("ReclaimFailed", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, long, time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateFailed, nil))
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.True(t, rec.Reclaimable())

		other := req("k", 2, 22, long, time.Hour)
		other.SameFingerprintToReclaim = true
		r, err := s.Begin(ctx, other)
		require.NoError(t, err)
		assert.False(t, r.Acquired, "other fingerprint")
		assert.Equal(t, idem.StateFailed, r.Record.State)
		assert.Nil(t, r.Record.Response)

		same := req("k", 1, 33, long, time.Hour)
		same.SameFingerprintToReclaim = true
		r, err = s.Begin(ctx, same)
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true, Prior: idem.StateFailed}, r)

		require.NoError(t, s.Finish(ctx, "k", 33, idem.StateFailed, nil))
		r, err = s.Begin(ctx, req("k", 2, 44, long, time.Hour)) // fingerprint check off
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true, Prior: idem.StateFailed}, r)
	})

	t.Run("FailedWithResponseIsFinal", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, long, time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateFailed, []byte("500")))
		r, err := s.Begin(ctx, req("k", 1, 22, long, time.Hour))
		require.NoError(t, err)
		assert.False(t, r.Acquired)
		assert.Equal(t, idem.StateFailed, r.Record.State)
		assert.Equal(t, []byte("500"), r.Record.Response)
		assert.False(t, r.Record.Reclaimable())
	})

	t.Run("EmptyResponseIsNotNil", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, long, time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateFailed, []byte{}))
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.NotNil(t, rec.Response)
		assert.Empty(t, rec.Response)
		assert.False(t, rec.Reclaimable())
	})

	t.Run("BinaryResponse", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		resp := make([]byte, 256*1024)
		for i := range resp {
			resp[i] = byte(i * 7)
		}
		_, err := s.Begin(ctx, req("k", 1, 11, long, time.Hour))
		require.NoError(t, err)
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateCompleted, resp))
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, resp, rec.Response)
	})

	t.Run("FullWidthTokens", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		// Tokens that a double cannot tell apart, and the sign bit.
		const a, b = idem.Token(1<<64 - 1), idem.Token(1<<64 - 2)
		_, err := s.Begin(ctx, req("k", 1, a, long, time.Hour))
		require.NoError(t, err)
		assert.ErrorIs(t, s.Finish(ctx, "k", b, idem.StateCompleted, nil), idem.ErrFenced)
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, a, rec.Token)
		require.NoError(t, s.Finish(ctx, "k", a, idem.StateCompleted, nil))
		_, err = s.Begin(ctx, req("k2", 1, 1<<63, long, time.Hour))
		require.NoError(t, err)
		rec, _, err = s.Get(ctx, "k2")
		require.NoError(t, err)
		assert.Equal(t, idem.Token(1<<63), rec.Token)
	})

	t.Run("Expiry", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, long, 80*time.Millisecond))
		require.NoError(t, err)
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateCompleted, []byte("x")))
		_, err = s.Begin(ctx, req("p", 1, 11, long, 80*time.Millisecond))
		require.NoError(t, err)
		time.Sleep(150 * time.Millisecond)

		_, found, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.False(t, found, "completed record expired")
		assert.ErrorIs(t, s.Finish(ctx, "p", 11, idem.StateCompleted, nil), idem.ErrFenced, "pending record expired")
		r, err := s.Begin(ctx, req("k", 2, 22, long, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true}, r, "an expired record counts as none")
		r, err = s.Begin(ctx, req("p", 2, 22, long, time.Hour))
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true}, r)
	})

	t.Run("KeysAreDistinct", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		keys := []string{"a", "A", "a ", "{a}", "%7Ba%7D", "%", "%25", "}", "{", "ü/ключ/键", "a:b:c"}
		for i, k := range keys {
			r, err := s.Begin(ctx, req(k, 1, idem.Token(i+1), long, time.Hour))
			require.NoError(t, err)
			require.True(t, r.Acquired, "key %q", k)
		}
		for i, k := range keys {
			rec, found, err := s.Get(ctx, k)
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, idem.Token(i+1), rec.Token, "key %q", k)
		}
	})

	t.Run("BadRequests", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		_, err := s.Begin(ctx, req("k", 1, 11, 0, time.Hour))
		assert.Error(t, err, "zero lease")
		_, err = s.Begin(ctx, req("k", 1, 11, time.Second, -time.Second))
		assert.Error(t, err, "negative TTL")
		_, err = s.Begin(ctx, req("", 1, 11, time.Second, time.Hour))
		assert.Error(t, err, "empty key")
		_, err = s.Begin(ctx, req("k", 1, 11, time.Second, time.Hour))
		require.NoError(t, err)
		err = s.Finish(ctx, "k", 11, idem.StatePending, nil)
		assert.Error(t, err)
		assert.False(t, errors.Is(err, idem.ErrFenced), "a bad state is not a fence")
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.Equal(t, idem.StatePending, rec.State, "a rejected finish changes nothing")
	})

	t.Run("ExtendLease", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		le, ok := s.(idem.LeaseExtender)
		if !ok {
			t.Skip("not a LeaseExtender")
		}
		_, err := s.Begin(ctx, req("k", 1, 11, 100*time.Millisecond, time.Hour))
		require.NoError(t, err)
		assert.ErrorIs(t, le.ExtendLease(ctx, "k", 12, time.Minute), idem.ErrFenced)
		assert.ErrorIs(t, le.ExtendLease(ctx, "none", 11, time.Minute), idem.ErrFenced)
		require.NoError(t, le.ExtendLease(ctx, "k", 11, time.Minute))
		rec, _, err := s.Get(ctx, "k")
		require.NoError(t, err)
		assert.WithinDuration(t, time.Now().Add(time.Minute), rec.LeaseExpiresAt, 5*time.Second)
		time.Sleep(200 * time.Millisecond)
		r, err := s.Begin(ctx, req("k", 2, 22, long, time.Hour))
		require.NoError(t, err)
		assert.False(t, r.Acquired, "the extended lease holds")
		require.NoError(t, s.Finish(ctx, "k", 11, idem.StateCompleted, nil))
		assert.ErrorIs(t, le.ExtendLease(ctx, "k", 11, time.Minute), idem.ErrFenced, "no longer pending")
	})

	t.Run("OneWinner", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		const n = 50
		var (
			wg      sync.WaitGroup
			winners atomic.Int64
			winner  atomic.Uint64
			start   = make(chan struct{})
			results = make([]idem.BeginResult, n)
			errs    = make([]error, n)
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := s.Begin(ctx, req("k", byte(i), idem.Token(i+1), long, time.Hour))
				results[i], errs[i] = r, err
				if err == nil && r.Acquired {
					winners.Add(1)
					winner.Store(uint64(i + 1))
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, int64(1), winners.Load())
		for _, r := range results {
			if !r.Acquired {
				assert.Equal(t, idem.Token(winner.Load()), r.Record.Token, "every loser sees the winner")
				assert.Equal(t, idem.StatePending, r.Record.State)
			}
		}
	})

	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Begin(cctx, req("k", 1, 11, long, time.Hour))
		assert.ErrorIs(t, err, context.Canceled)
		_, _, err = s.Get(cctx, "k")
		assert.ErrorIs(t, err, context.Canceled)
	})
}
