package idem

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeadlineQueueAddBounded: with 10,000 contexts of a later deadline in
// a queue (another Engine's longer StoreTimeout, or a stalled store's calls
// in flight), adding and removing one of an earlier deadline moves it a
// number of steps bounded by the heap's depth, not by the contexts queued
// (a list walked back from its end passed every later one: 10,000 steps).
func TestDeadlineQueueAddBounded(t *testing.T) {
	q := new(deadlineQueue)
	const n = 10000
	long := make([]*boundedCtx, n)
	for i := range long {
		long[i] = newBounded(context.Background(), time.Hour)
		doneOn(q, long[i])
	}
	defer func() {
		for _, b := range long {
			b.release()
		}
		assert.Empty(t, q.queued())
	}()
	depth := bits.Len(uint(n + 1))
	for range 100 {
		short := newBounded(context.Background(), time.Minute)
		q.mu.Lock()
		before := q.steps
		q.mu.Unlock()
		doneOn(q, short)
		q.mu.Lock()
		added := q.steps - before
		q.mu.Unlock()
		assert.LessOrEqual(t, added, depth, "steps to add one of %d", n)
		assert.Equal(t, short, q.queued()[0])
		q.mu.Lock()
		before = q.steps
		q.mu.Unlock()
		short.release()
		q.mu.Lock()
		removed := q.steps - before
		q.mu.Unlock()
		assert.LessOrEqual(t, removed, 2*depth, "steps to remove one of %d", n)
	}
	// Contexts released in any order leave a heap.
	rand.Shuffle(len(long), func(i, j int) { long[i], long[j] = long[j], long[i] })
	for _, b := range long[:n/2] {
		b.release()
	}
	require.Len(t, q.queued(), n/2)
}

// TestDeadlineQueueReleaseWaitsForItsOwn: when a fire ends several
// contexts, the release of one it already ended does not wait for it to
// end the others (here one whose child blocks as it is cancelled).
func TestDeadlineQueueReleaseWaitsForItsOwn(t *testing.T) {
	q := new(deadlineQueue)
	// A timer of the test's: the test runs fire itself, once both are queued.
	q.t = time.AfterFunc(time.Hour, func() {})
	defer q.t.Stop()
	q.armed = 1
	for time.Since(epoch) < 10*time.Millisecond { // a test run alone starts right after epoch
		time.Sleep(time.Millisecond)
	}
	past := time.Duration(1)
	slow, quick := new(boundedCtx), new(boundedCtx)
	slow.initAt(context.Background(), time.Millisecond, past)
	quick.initAt(context.Background(), 2*time.Millisecond, past) // ended first: fire ends the later deadline first
	entered, unblock := make(chan struct{}), make(chan struct{})
	doneOn(q, slow)
	slow.AfterFunc(func() { close(entered); <-unblock })
	doneQuick := doneOn(q, quick)
	go q.fire()
	<-entered
	waitClosed(t, doneQuick, "the context ended first")
	released := make(chan struct{})
	go func() { quick.release(); close(released) }()
	select {
	case <-released:
	case <-time.After(time.Second):
		t.Error("the release of a context fire ended waited for fire to end another")
	}
	close(unblock)
	<-released
	slow.release()
	assert.ErrorIs(t, slow.Err(), context.DeadlineExceeded)
	assert.Empty(t, q.queued())
}

// TestDeadlineQueueStress: contexts with mixed short timeouts (so that adds
// race fires and Resets), released at random around their deadline, some
// with parents that end. Each must end: not before its deadline by
// DeadlineExceeded, and within a bound after it when not released; a
// released one is in no queue. (From a review.)
func TestDeadlineQueueStress(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	var mu sync.Mutex
	var all []*boundedCtx
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3000 {
				d := time.Duration(rand.IntN(2000)) * time.Microsecond
				parent, cancel := context.WithCancel(context.Background())
				b := new(boundedCtx)
				if rand.IntN(4) == 0 {
					b.initAt(parent, d, max(time.Since(epoch)-time.Duration(rand.IntN(3000))*time.Microsecond, 1))
				} else {
					b.init(parent, d)
				}
				done := b.Done()
				b.mu.Lock()
				dl := epoch.Add(b.due())
				b.mu.Unlock()
				switch rand.IntN(4) {
				case 0:
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				case 1:
					cancel()
					time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				case 2:
					select {
					case <-done:
						if err := b.Err(); err == nil {
							errs <- errors.New("Done closed, Err nil")
						} else if errors.Is(err, context.DeadlineExceeded) && time.Now().Before(dl) {
							errs <- errors.New("ended before its deadline")
						}
					case <-time.After(d + 500*time.Millisecond):
						errs <- errors.New("not ended 500ms past its deadline")
					}
				}
				b.release()
				select {
				case <-done:
				default:
					errs <- errors.New("release left Done open")
				}
				if b.Err() == nil {
					errs <- errors.New("released, Err nil")
				}
				cancel()
				q := pickQueue(b) // the queue its Done put it in
				q.mu.Lock()
				if b.queued || b.fired || b.next != nil {
					errs <- errors.New("released, still queued")
				}
				q.mu.Unlock()
				b.mu.Lock()
				if b.q != nil || b.pw != nil {
					errs <- errors.New("released, still holds its queue or watch")
				}
				b.mu.Unlock()
				mu.Lock()
				all = append(all, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n < 10 {
			t.Error(err)
		}
		n++
	}
	// None of its own contexts is left in a queue (other tests of the
	// package may have contexts of theirs queued meanwhile).
	own := make(map[*boundedCtx]bool, len(all))
	for _, b := range all {
		own[b] = true
	}
	for i := range deadlineQueues {
		for _, b := range deadlineQueues[i].queued() {
			if own[b] {
				t.Errorf("queue %d holds a released context", i)
			}
		}
	}
}

// BenchmarkDeadlineQueueInFlight: n store calls in flight with a long
// deadline (another Engine's StoreTimeout, or a stalled store), and a new
// call with a shorter (or the same) one asks for Done and is released.
// (From a review.)
func BenchmarkDeadlineQueueInFlight(b *testing.B) {
	for _, mode := range []string{"shorter", "same"} {
		for _, n := range []int{0, 1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%s/inflight=%d", mode, n), func(b *testing.B) {
				d := time.Hour
				if mode == "same" {
					d = time.Minute
				}
				long := inFlight(n, d)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					c := new(boundedCtx)
					c.init(context.Background(), time.Minute)
					c.Done()
					c.release()
				}
				b.StopTimer()
				releaseAll(long)
				runtime.GC()
			})
		}
	}
}

// BenchmarkDeadlineQueueInFlightParallel: as above, from all Ps at once.
func BenchmarkDeadlineQueueInFlightParallel(b *testing.B) {
	for _, n := range []int{0, 10000, 100000} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			long := inFlight(n, time.Hour)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := new(boundedCtx)
					c.init(context.Background(), time.Minute)
					c.Done()
					c.release()
				}
			})
			b.StopTimer()
			releaseAll(long)
		})
	}
}

// inFlight returns n contexts of timeout d whose Done was asked for: in
// their deadline queues until releaseAll.
func inFlight(n int, d time.Duration) []*boundedCtx {
	long := make([]*boundedCtx, n)
	for i := range long {
		long[i] = new(boundedCtx)
		long[i].init(context.Background(), d)
		long[i].Done()
	}
	return long
}

func releaseAll(bs []*boundedCtx) {
	for _, b := range bs {
		b.release()
	}
}
