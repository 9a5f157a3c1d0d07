package idem

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/internal/mono"
)

func newBounded(parent context.Context, d time.Duration) *boundedCtx {
	b := &boundedCtx{}
	b.init(parent, d)
	return b
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type ctxKey struct{}

// TestBoundedCtx checks that the lazy context behaves as
// context.WithDeadline(parent, deadline) would.
func TestBoundedCtx(t *testing.T) {
	t.Run("Deadline", func(t *testing.T) {
		before := time.Now()
		b := newBounded(context.Background(), time.Minute)
		d, ok := b.Deadline()
		require.True(t, ok)
		assert.WithinDuration(t, before.Add(time.Minute), d, time.Second)

		parent, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		pd, _ := parent.Deadline()
		d, ok = newBounded(parent, time.Minute).Deadline()
		require.True(t, ok)
		assert.Equal(t, pd, d, "the parent's earlier deadline")
	})
	t.Run("ErrWithoutDone", func(t *testing.T) {
		b := newBounded(context.Background(), 20*time.Millisecond)
		assert.NoError(t, b.Err())
		assert.Nil(t, b.current0(), "Err alone makes nothing")
		time.Sleep(40 * time.Millisecond)
		assert.ErrorIs(t, b.Err(), context.DeadlineExceeded)
		assert.True(t, closed(b.Done()), "Done agrees with Err")
		assert.Equal(t, context.DeadlineExceeded, context.Cause(b))
	})
	t.Run("MonoStarted", func(t *testing.T) {
		// The reading a store takes as its call's now (mono.Started):
		// none before the store's first look without initAt, then the
		// reading that look made; the caller's with initAt.
		b := &boundedCtx{}
		b.init(context.Background(), time.Minute)
		defer b.release()
		_, ok := b.MonoStarted()
		assert.False(t, ok, "no reading yet")
		before := time.Since(epoch)
		assert.NoError(t, b.Err())
		at, ok := b.MonoStarted()
		assert.True(t, ok)
		assert.True(t, at >= before && at <= time.Since(epoch), "the first look's reading: %v not in [%v, now]", at, before)
		assert.NoError(t, b.Err())
		again, _ := b.MonoStarted()
		assert.Equal(t, at, again, "later looks keep it")

		start := max(time.Since(epoch)-time.Millisecond, 1)
		b2 := &boundedCtx{}
		b2.initAt(context.Background(), time.Minute, start)
		defer b2.release()
		at, ok = b2.MonoStarted()
		assert.True(t, ok)
		assert.Equal(t, start, at, "the caller's reading")
		var _ mono.Started = b2
	})
	t.Run("StartedAt", func(t *testing.T) {
		// initAt: the timeout counts from the caller's reading, not from
		// the store's first look, which reads no clock and finds no
		// deadline passed.
		start := time.Since(epoch) - 30*time.Millisecond
		b := &boundedCtx{}
		b.initAt(context.Background(), 20*time.Millisecond, start)
		assert.NoError(t, b.Err(), "the store's first look")
		d, ok := b.Deadline()
		require.True(t, ok)
		assert.Equal(t, epoch.Add(start+20*time.Millisecond), d)
		assert.ErrorIs(t, b.Err(), context.DeadlineExceeded, "a later look, past the deadline")

		b = &boundedCtx{}
		b.initAt(context.Background(), time.Minute, time.Since(epoch))
		defer b.release()
		assert.NoError(t, b.Err())
		assert.NoError(t, b.Err())
		d, _ = b.Deadline()
		assert.WithinDuration(t, time.Now().Add(time.Minute), d, time.Second)
	})
	t.Run("DoneAtDeadline", func(t *testing.T) {
		b := newBounded(context.Background(), 20*time.Millisecond)
		defer b.release()
		select {
		case <-b.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close at the deadline")
		}
		assert.ErrorIs(t, b.Err(), context.DeadlineExceeded)
	})
	t.Run("ParentCancelled", func(t *testing.T) {
		parent, cancel := context.WithCancelCause(context.Background())
		b := newBounded(parent, time.Minute)
		boom := errors.New("boom")
		cancel(boom)
		assert.ErrorIs(t, b.Err(), context.Canceled, "before Done")
		assert.True(t, closed(b.Done()))
		assert.ErrorIs(t, b.Err(), context.Canceled)
		assert.Equal(t, boom, context.Cause(b))

		parent, cancel2 := context.WithCancel(context.Background())
		b = newBounded(parent, time.Minute)
		done := b.Done()
		assert.False(t, closed(done))
		cancel2()
		// The parent's end reaches Done a goroutine later (context.AfterFunc);
		// Err sees it at once.
		assert.ErrorIs(t, b.Err(), context.Canceled)
		assert.True(t, closed(done), "after Done, by Err")

		parent, cancel3 := context.WithCancel(context.Background())
		b = newBounded(parent, time.Minute)
		done = b.Done()
		cancel3()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close when the parent ended")
		}
		assert.ErrorIs(t, b.Err(), context.Canceled)
	})
	t.Run("Release", func(t *testing.T) {
		b := newBounded(context.Background(), time.Minute)
		b.release()
		assert.ErrorIs(t, b.Err(), context.Canceled, "released before Done")
		assert.True(t, closed(b.Done()))

		b = newBounded(context.Background(), time.Minute)
		done := b.Done()
		b.release()
		assert.True(t, closed(done))
		assert.ErrorIs(t, b.Err(), context.Canceled)
	})
	t.Run("Children", func(t *testing.T) {
		// Children made with context.With* end with it: at its deadline and
		// when it is released; a child's own deadline is the earlier one.
		b := newBounded(context.Background(), 30*time.Millisecond)
		child, cancel := context.WithCancel(b)
		defer cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("child did not end at the parent's deadline")
		}
		assert.ErrorIs(t, child.Err(), context.DeadlineExceeded)

		b = newBounded(context.Background(), time.Minute)
		child, cancel = context.WithTimeout(b, time.Hour)
		defer cancel()
		d, _ := child.Deadline()
		bd, _ := b.Deadline()
		assert.Equal(t, bd, d)
		b.release()
		assert.True(t, closed(child.Done()))

		b = newBounded(context.Background(), time.Minute)
		fired := make(chan struct{})
		stop := context.AfterFunc(b, func() { close(fired) })
		defer stop()
		b.release()
		select {
		case <-fired:
		case <-time.After(5 * time.Second):
			t.Fatal("AfterFunc did not run")
		}
	})
	t.Run("Value", func(t *testing.T) {
		parent := context.WithValue(context.Background(), ctxKey{}, "v")
		b := newBounded(parent, time.Minute)
		defer b.release()
		assert.Equal(t, "v", b.Value(ctxKey{}))
		_ = b.Done()
		assert.Equal(t, "v", b.Value(ctxKey{}))
		assert.Nil(t, b.Value("other"))
	})
	t.Run("Concurrent", func(t *testing.T) {
		// Stores watch Done from other goroutines (pgx's context watcher).
		b := newBounded(context.Background(), 50*time.Millisecond)
		var wg sync.WaitGroup
		chans := make([]<-chan struct{}, 8)
		for i := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = b.Err()
				chans[i] = b.Done()
				_ = b.Value(ctxKey{})
			}()
		}
		wg.Wait()
		for _, ch := range chans {
			assert.Equal(t, chans[0], ch, "one Done channel")
		}
		<-chans[0]
		b.release()
	})
}

// current0 returns the Done channel made (nil when none was).
func (b *boundedCtx) current0() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// TestBoundedCtxAllocs: a store that asks only for Err (the in-memory one)
// costs no allocation.
func TestBoundedCtxAllocs(t *testing.T) {
	var b boundedCtx
	n := testing.AllocsPerRun(100, func() {
		b = boundedCtx{}
		b.init(context.Background(), time.Minute)
		_ = b.Err()
		_, _ = b.Deadline()
		b.release()
	})
	assert.Zero(t, n)
}

// TestBoundedCtxCause: context.Cause of a context that ended on its own is
// its Err, also over a parent that can be cancelled (whose cancelCtx would
// answer nil).
func TestBoundedCtxCause(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := newBounded(parent, 10*time.Millisecond)
	assert.NoError(t, context.Cause(b))
	<-b.Done()
	assert.Equal(t, context.DeadlineExceeded, context.Cause(b))
	child, cancelChild := context.WithCancel(b)
	defer cancelChild()
	assert.Equal(t, context.DeadlineExceeded, context.Cause(child))
	b.release()
	assert.Equal(t, context.DeadlineExceeded, context.Cause(b), "the first end stays")

	b = newBounded(parent, time.Minute)
	_ = b.Done()
	b.release()
	assert.Equal(t, context.Canceled, context.Cause(b))
	assert.NotNil(t, cancelCtxKey, "context.Cause asks Value for its key")

	// Its own end stays its cause when the parent ends later with one.
	pc, cancelCause := context.WithCancelCause(context.Background())
	b = newBounded(pc, time.Millisecond)
	<-b.Done()
	cancelCause(errors.New("later"))
	assert.Equal(t, context.DeadlineExceeded, context.Cause(b))
	b.release()
}

// TestBoundedCtxReuse reuses the memory of one boundedCtx (as a recycled
// Call does) and the deadline queues many times, with deadlines that fire
// around the release, parents that end around it, and long deadlines: a late
// callback of an earlier use must never end a later one.
func TestBoundedCtxReuse(t *testing.T) {
	var b boundedCtx
	for i := range 3000 {
		parent, cancel := context.WithCancel(context.Background())
		switch i % 3 {
		case 0: // a deadline that fires around the release
			b = boundedCtx{}
			b.init(parent, time.Duration(i%50)*time.Microsecond+time.Microsecond)
			done := b.Done()
			time.Sleep(time.Duration(i%7) * 10 * time.Microsecond)
			if closed(done) {
				require.ErrorIs(t, b.Err(), context.DeadlineExceeded)
			}
			b.release()
			require.True(t, closed(done))
			require.Error(t, b.Err())
		case 1: // a parent that ends around the release
			b = boundedCtx{}
			b.init(parent, time.Hour)
			done := b.Done()
			go cancel()
			time.Sleep(time.Duration(i%5) * 10 * time.Microsecond)
			b.release()
			require.True(t, closed(done))
			if err := b.Err(); err != context.Canceled {
				t.Fatalf("use %d: Err = %v", i, err)
			}
		case 2: // a long deadline: nothing may end it before its release
			b = boundedCtx{}
			b.init(parent, time.Hour)
			done := b.Done()
			for range 3 {
				runtime.Gosched()
				time.Sleep(20 * time.Microsecond)
			}
			if closed(done) || b.Err() != nil {
				t.Fatalf("use %d: ended before its release: %v", i, b.Err())
			}
			b.release()
			require.True(t, closed(done))
			require.ErrorIs(t, b.Err(), context.Canceled)
		}
		cancel()
	}
}

// TestBoundedCtxStress runs store-like goroutines over many contexts that
// end by deadline, parent or release, under the race detector.
func TestBoundedCtxStress(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				parent, cancel := context.WithCancel(context.Background())
				b := newBounded(parent, time.Duration((g*31+i)%200)*time.Microsecond+time.Microsecond)
				var inner sync.WaitGroup
				for w := range 3 {
					inner.Add(1)
					go func() {
						defer inner.Done()
						child, cancelChild := context.WithCancel(b)
						defer cancelChild()
						stop := context.AfterFunc(b, func() {})
						defer stop()
						select {
						case <-b.Done():
						case <-child.Done():
						case <-time.After(time.Duration(w) * 50 * time.Microsecond):
						}
						_, _ = b.Deadline()
						_ = b.Value(ctxKey{})
						_ = context.Cause(b)
						_ = b.Err()
					}()
				}
				if i%4 == 0 {
					cancel()
				}
				inner.Wait()
				b.release()
				select {
				case <-b.Done():
				default:
					t.Error("Done open after release")
				}
				if b.Err() == nil {
					t.Error("Err nil after release")
				}
				cancel()
			}
		}()
	}
	wg.Wait()
}

// TestBoundedCtxDoneAllocs: asking for Done makes one channel; its
// deadline queue makes its one timer on its first use.
func TestBoundedCtxDoneAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var b boundedCtx
	n := testing.AllocsPerRun(200, func() {
		b = boundedCtx{}
		b.init(context.Background(), time.Minute)
		select {
		case <-b.Done():
			t.Fatal("closed")
		default:
		}
		_ = b.Err()
		b.release()
	})
	assert.LessOrEqual(t, n, 1.0)
}

// BenchmarkBoundedCtxDone is a store call that asks for Done (as go-redis
// and pgx do on every command), beside context.WithTimeout, which it
// replaces; under a parent that cannot be cancelled (a detached context,
// Finish's) and under one that can (a request's, Begin's).
func BenchmarkBoundedCtxDone(b *testing.B) {
	parents := []struct {
		name string
		new  func() (context.Context, context.CancelFunc)
	}{
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancelable", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
	}
	for _, p := range parents {
		b.Run(p.name+"/bounded", func(b *testing.B) {
			b.ReportAllocs()
			var c boundedCtx
			for b.Loop() {
				parent, cancel := p.new()
				c = boundedCtx{}
				c.init(parent, time.Minute)
				select {
				case <-c.Done():
				default:
				}
				_ = c.Err()
				c.release()
				cancel()
			}
		})
		b.Run(p.name+"/WithTimeout", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				parent, cancelParent := p.new()
				ctx, cancel := context.WithTimeout(parent, time.Minute)
				select {
				case <-ctx.Done():
				default:
				}
				_ = ctx.Err()
				cancel()
				cancelParent()
			}
		})
	}
}

// doneOn is Done queueing b on q rather than on a queue picked at random.
func doneOn(q *deadlineQueue, b *boundedCtx) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.made.Store(true)
	b.started()
	b.done = make(chan struct{})
	b.q = q
	q.add(b)
	return b.done
}

// queued returns the contexts in q, first deadline first, and panics if
// its heap is not one (an entry earlier than its parent, or an index that
// is not its context's).
func (q *deadlineQueue) queued() []*boundedCtx {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.heap {
		if int(e.b.qi) != i || !e.b.queued || e.at != e.b.due() || i > 0 && e.at < q.heap[(i-1)/2].at {
			panic("deadlineQueue: not a heap")
		}
	}
	h := slices.Clone(q.heap)
	slices.SortStableFunc(h, func(x, y queued) int { return cmp.Compare(x.at, y.at) })
	var out []*boundedCtx
	for _, e := range h {
		out = append(out, e.b)
	}
	return out
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not end", what)
	}
}

// TestDeadlineQueue: a queue keeps its contexts in order of deadline
// whatever the order they come in (a shorter StoreTimeout, another
// Engine's, after longer ones), sets its timer for the first and again for
// an earlier one, ends each at its deadline and not before, and leaves a
// released context alone.
func TestDeadlineQueue(t *testing.T) {
	q := new(deadlineQueue)
	long1 := newBounded(context.Background(), time.Hour)
	short := newBounded(context.Background(), 40*time.Millisecond)
	mid := newBounded(context.Background(), 80*time.Millisecond)
	long2 := newBounded(context.Background(), time.Hour+time.Second)
	released := newBounded(context.Background(), 20*time.Millisecond)
	start := time.Now()
	doneLong1 := doneOn(q, long1)
	doneShort := doneOn(q, short)
	doneMid := doneOn(q, mid)
	doneLong2 := doneOn(q, long2)
	doneReleased := doneOn(q, released)
	assert.Equal(t, []*boundedCtx{released, short, mid, long1, long2}, q.queued())
	released.release()
	assert.True(t, closed(doneReleased))
	assert.Equal(t, []*boundedCtx{short, mid, long1, long2}, q.queued())

	waitClosed(t, doneShort, "the 40ms context")
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "not before its deadline")
	assert.ErrorIs(t, short.Err(), context.DeadlineExceeded)
	waitClosed(t, doneMid, "the 80ms context")
	assert.GreaterOrEqual(t, time.Since(start), 80*time.Millisecond)
	assert.ErrorIs(t, mid.Err(), context.DeadlineExceeded)
	assert.ErrorIs(t, released.Err(), context.Canceled, "a released context stays released")
	assert.False(t, closed(doneLong1))
	assert.False(t, closed(doneLong2))
	assert.Equal(t, []*boundedCtx{long1, long2}, q.queued())

	q.mu.Lock()
	armed := q.armed
	q.mu.Unlock()
	assert.Equal(t, long1.due(), armed, "the timer is set for the next deadline")
	for _, b := range []*boundedCtx{short, mid, long1, long2} {
		b.release()
	}
	assert.Empty(t, q.queued())
	assert.True(t, closed(doneLong1))
	assert.ErrorIs(t, long2.Err(), context.Canceled)

	// A queue whose contexts were all released lets its timer run out.
	b := newBounded(context.Background(), 10*time.Millisecond)
	doneOn(q, b)
	b.release()
	assert.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.armed == 0
	}, 5*time.Second, time.Millisecond)
	assert.ErrorIs(t, b.Err(), context.Canceled)
}

// TestBoundedCtxPastDeadline: a context whose timeout started before the
// store's first look (initAt) and ran out meanwhile ends at once when the
// store asks for Done, by its queue's timer (Done reads no clock).
func TestBoundedCtxPastDeadline(t *testing.T) {
	b := &boundedCtx{}
	b.initAt(context.Background(), 10*time.Millisecond, max(time.Since(epoch)-time.Second, 1))
	defer b.release()
	waitClosed(t, b.Done(), "a context past its deadline")
	assert.ErrorIs(t, b.Err(), context.DeadlineExceeded)
}

// TestBoundedCtxReleasedLeavesQueue: a released context is in no queue,
// whether its deadline fired or not.
func TestBoundedCtxReleasedLeavesQueue(t *testing.T) {
	for _, d := range []time.Duration{time.Microsecond, time.Hour} {
		b := newBounded(context.Background(), d)
		done := b.Done()
		b.mu.Lock()
		q := b.q
		b.mu.Unlock()
		require.NotNil(t, q)
		if d < time.Second {
			waitClosed(t, done, "a 1µs context")
		}
		b.release()
		q.mu.Lock()
		in, fired := b.queued, b.fired
		q.mu.Unlock()
		assert.False(t, in)
		assert.False(t, fired)
		assert.NotContains(t, q.queued(), b)
		assert.Nil(t, b.q)
	}
}

// TestPickQueueSpreads: the contexts of requests in flight, each in memory
// of its own, spread over all the deadline queues.
func TestPickQueueSpreads(t *testing.T) {
	n := 64 * len(deadlineQueues)
	count := map[*deadlineQueue]int{}
	keep := make([]*storeSide, n)
	for i := range keep {
		keep[i] = new(storeSide)
		count[pickQueue(&keep[i].bctx)]++
	}
	require.Len(t, count, len(deadlineQueues))
	for q, c := range count {
		assert.Greater(t, c, n/len(deadlineQueues)/4, "queue %p", q)
	}
}
