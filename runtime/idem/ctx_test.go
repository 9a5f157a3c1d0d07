package idem

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		assert.True(t, closed(done), "after Done")
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

// current0 returns the lazily made context (nil when none was made).
func (b *boundedCtx) current0() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.derived
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
