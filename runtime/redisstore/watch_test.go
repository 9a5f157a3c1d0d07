package redisstore

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

func fired(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// closed reports whether ch is closed now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWatch(t *testing.T) {
	ctx := context.Background()

	t.Run("Finish", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestStore(t, Options{})
		_, err := s.Begin(ctx, beginReq("k", 1))
		require.NoError(t, err)
		ch1, stop1 := s.Watch(ctx, "k")
		defer stop1()
		ch2, stop2 := s.Watch(ctx, "k")
		defer stop2()
		other, stopOther := s.Watch(ctx, "other")
		defer stopOther()

		le := idem.LeaseExtender(s)
		require.NoError(t, le.ExtendLease(ctx, "k", 1, time.Minute))
		assert.False(t, fired(ch1, 100*time.Millisecond), "a heartbeat is not a change")
		assert.ErrorIs(t, s.Finish(ctx, "k", 2, idem.StateCompleted, nil), idem.ErrFenced)
		assert.False(t, fired(ch1, 50*time.Millisecond), "a fenced finish changes nothing")

		require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, []byte("x")))
		assert.True(t, fired(ch1, 2*time.Second))
		assert.True(t, fired(ch2, 2*time.Second), "every watcher is told")
		assert.False(t, fired(other, 50*time.Millisecond), "other keys are not")
	})

	t.Run("TakeOver", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestStore(t, Options{})
		r := beginReq("k", 1)
		r.Lease = 30 * time.Millisecond
		_, err := s.Begin(ctx, r)
		require.NoError(t, err)
		ch, stop := s.Watch(ctx, "k")
		defer stop()
		time.Sleep(60 * time.Millisecond)
		res, err := s.Begin(ctx, beginReq("k", 2))
		require.NoError(t, err)
		require.True(t, res.Acquired)
		assert.True(t, fired(ch, 2*time.Second))
	})

	t.Run("WatchGetWaitMissesNothing", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestStore(t, Options{})
		for i := range 20 {
			key := "k" + string(rune('a'+i))
			_, err := s.Begin(ctx, beginReq(key, 1))
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() { done <- s.Finish(ctx, key, 1, idem.StateCompleted, nil) }()
			ch, stop := s.Watch(ctx, key)
			rec, _, err := s.Get(ctx, key)
			require.NoError(t, err)
			if rec.State == idem.StatePending {
				assert.True(t, fired(ch, 2*time.Second), "finished after the read, so the watch must fire")
			}
			stop()
			require.NoError(t, <-done)
		}
	})

	t.Run("StopUnsubscribes", func(t *testing.T) {
		t.Parallel()
		s, c := newTestStore(t, Options{})
		channel := s.key("k")
		numsub := func() int64 {
			n, err := c.PubSubNumSub(ctx, channel).Result()
			require.NoError(t, err)
			return n[channel]
		}
		_, stop1 := s.Watch(ctx, "k")
		_, stop2 := s.Watch(ctx, "k")
		assert.Equal(t, int64(1), numsub(), "one subscription shared by both watchers")
		stop1()
		stop1() // idempotent
		assert.Equal(t, int64(1), numsub())
		stop2()
		assert.Eventually(t, func() bool { return numsub() == 0 }, 2*time.Second, 10*time.Millisecond)
		// Subscribing again after the last stop works.
		_, err := s.Begin(ctx, beginReq("k", 1))
		require.NoError(t, err)
		ch, stop3 := s.Watch(ctx, "k")
		defer stop3()
		require.NoError(t, s.Finish(ctx, "k", 1, idem.StateFailed, nil))
		assert.True(t, fired(ch, 2*time.Second))
	})

	t.Run("DisableNotify", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestStore(t, Options{DisableNotify: true})
		_, err := s.Begin(ctx, beginReq("k", 1))
		require.NoError(t, err)
		ch, stop := s.Watch(ctx, "k")
		defer stop()
		require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, nil))
		assert.False(t, fired(ch, 200*time.Millisecond))
	})

	t.Run("ContextDone", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestStore(t, Options{})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		ch, stop := s.Watch(cctx, "k")
		defer stop()
		assert.True(t, fired(ch, time.Second), "look again")
	})

	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		s, _ := newTestStore(t, Options{})
		ch, stop := s.Watch(ctx, "k")
		defer stop()
		require.NoError(t, s.Close())
		assert.True(t, fired(ch, time.Second), "closing wakes waiters")
		ch2, stop2 := s.Watch(ctx, "k")
		defer stop2()
		assert.True(t, fired(ch2, time.Second), "a closed store answers at once")
		_, err := s.Begin(ctx, beginReq("k", 1))
		assert.NoError(t, err, "Close leaves the client alone")
	})
}

// TestWatchReconnect: a killed pub/sub connection is re-established by
// go-redis; the watcher is woken (a change may have gone by) and later
// changes are delivered again.
func TestWatchReconnect(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := New(c, Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx := ctxTimeout(t, 30*time.Second)

	_, err = s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	ch, stop := s.Watch(ctx, "k")
	defer stop()
	require.NoError(t, c.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	// go-redis notices at its next read (its health check pings every few seconds).
	assert.True(t, fired(ch, 10*time.Second), "woken after the reconnect")

	ch2, stop2 := s.Watch(ctx, "k")
	defer stop2()
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, nil))
	assert.True(t, fired(ch2, 2*time.Second), "notifications flow again")
}

// TestWatchLostSubscription: a watch whose context ends before the server
// confirmed its SUBSCRIBE, on a pub/sub connection that then drops before
// the confirmation was read, leaves a SUBSCRIBE that is never confirmed
// (go-redis resubscribes only the channels still subscribed). Later watches
// of that key must not wait for it: one made within readyTimeout of the lost
// SUBSCRIBE waits about readyTimeout and says "look again", and the key's
// subscription is whole again; one made later is confirmed at once, also
// when its context is shorter than readyTimeout. (Before, every later Watch
// of the key waited out its whole context: a waiting duplicate, which
// watches with its whole wait deadline, stopped polling.) The lost
// SUBSCRIBE of a key not watched again is forgotten too (before, one count
// per such key stayed in the hub for good).
func TestWatchLostSubscription(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer c.Close()
	s, err := New(c, Options{})
	require.NoError(t, err)
	defer s.Close()
	ctx := ctxTimeout(t, 60*time.Second)

	_, stop := s.Watch(ctx, "warm-up") // opens the pub/sub connection
	stop()
	require.NoError(t, srv.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool { // the signal has taken effect
		pctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return c.Ping(pctx).Err() != nil
	}, 5*time.Second, 10*time.Millisecond)
	lost := time.Now()
	sentBy := map[string]time.Time{} // each lost SUBSCRIBE was sent by then
	for _, key := range []string{"k", "late", "gone"} {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		ch, stop := s.Watch(short, key)
		sentBy[key] = time.Now()
		assert.True(t, closed(ch), "unconfirmed when its context ended")
		stop()
		cancel()
	}
	gone := time.Now()
	srv.Stop() // the connection drops before the confirmations were read
	require.NoError(t, srv.Start())
	// go-redis reconnects the pub/sub connection at its next read.
	require.Eventually(t, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		ch, stop := s.Watch(wctx, "other")
		defer stop()
		return !closed(ch)
	}, 10*time.Second, 50*time.Millisecond, "the pub/sub connection is back")

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	ch, stop := s.Watch(wctx, "k")
	took := time.Since(start)
	stop()
	assert.Less(t, took, readyTimeout+time.Second, "Watch waited for a confirmation that never comes")
	if start.Sub(lost) < readyTimeout-100*time.Millisecond {
		assert.True(t, closed(ch), "look again")
	}
	// A Watch held back by a SUBSCRIBE that is never confirmed returns
	// when readyTimeout runs out, not sooner: that, not how fast a loaded
	// machine confirms, is the bound.
	start = time.Now()
	ch, stop = s.Watch(wctx, "k")
	defer stop()
	assert.Less(t, time.Since(start), readyTimeout, "the subscription is confirmed again")
	assert.False(t, closed(ch))
	_, err = s.Begin(ctx, beginReq("k", 1))
	require.NoError(t, err)
	require.NoError(t, s.Finish(ctx, "k", 1, idem.StateCompleted, nil))
	assert.True(t, fired(ch, 2*time.Second), "changes are delivered again")

	// Once the lost SUBSCRIBE of "late" is readyTimeout old, a Watch whose
	// context is shorter than readyTimeout (so it never reaches the
	// resubscription after readyTimeout) is confirmed; held back, it would
	// end with its context. The context is as long as "shorter than
	// readyTimeout" allows, for a loaded machine's confirmation.
	time.Sleep(time.Until(sentBy["late"].Add(readyTimeout)))
	short, cancel := context.WithTimeout(ctx, readyTimeout-100*time.Millisecond)
	defer cancel()
	ch, stop = s.Watch(short, "late")
	defer stop()
	assert.False(t, closed(ch), "a SUBSCRIBE lost readyTimeout ago holds back no confirmation")

	// A key never watched again: its lost SUBSCRIBE is forgotten all the same.
	time.Sleep(time.Until(gone.Add(readyTimeout)))
	_, stop = s.Watch(ctx, "another")
	stop()
	assert.NotContains(t, pendingChannels(s), s.key("gone"), "the lost SUBSCRIBE of a key no longer watched is forgotten")
}
