package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// boundedCtx is context.WithDeadline(parent, deadline) made lazily: the
// context of the first store call of a request (the one every replay makes)
// lives in the Call, and the timer and channel that a deadline needs are made
// only when the store asks for Done or the deadline has passed. A network
// store asks for Done (and pays what WithDeadline costs anyway); the
// in-memory store asks only for Err, and a replay then allocates nothing
// for its deadline.
//
// Once the lazy context exists, every method defers to it, so the type
// behaves exactly as WithDeadline's context: children made with context.With*
// attach to it (Value hands out its cancelCtx), context.Cause and
// context.AfterFunc work. A boundedCtx is used for one store call and then
// released; it is never reset, since a store may keep a child of it beyond
// the call.
//
// The timeout counts from the store's first look at the context (its first
// Err, Deadline or Done, which a store makes as it starts), read on the
// monotonic clock: a request reads no clock for a store call the store does
// not time.
type boundedCtx struct {
	parent  context.Context
	timeout time.Duration

	mu       sync.Mutex
	start    time.Duration // since epoch, when the store first consulted the context; 0: not yet
	derived  context.Context
	cancel   context.CancelFunc
	released bool
	made     atomic.Bool // derived was made (read without the lock by materialized)
}

var _ context.Context = (*boundedCtx)(nil)

// epoch anchors the monotonic readings of boundedCtx: time.Since(epoch)
// reads only the monotonic clock, at half the cost of time.Now.
var epoch = time.Now()

// init prepares the context of one store call. It reads no clock: the
// timeout counts from the first time the store consults the context (Err,
// Deadline, Done), which for a store is the start of its work.
func (b *boundedCtx) init(parent context.Context, d time.Duration) {
	b.parent = parent
	b.timeout = d
}

// started returns when the store first consulted the context, noting now
// if it had not yet (b.mu held).
func (b *boundedCtx) started() time.Duration {
	if b.start == 0 {
		b.start = max(time.Since(epoch), 1)
	}
	return b.start
}

// deadline returns the call's own deadline (b.mu held).
func (b *boundedCtx) deadline() time.Time { return epoch.Add(b.started() + b.timeout) }

// materialize returns the WithDeadline context, making it on first use.
func (b *boundedCtx) materialize() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.derived == nil {
		b.derived, b.cancel = context.WithDeadline(b.parent, b.deadline())
		b.made.Store(true)
		if b.released {
			b.cancel()
		}
	}
	return b.derived
}

// materialized reports whether the real deadline context was made (a store
// asked for Done).
func (b *boundedCtx) materialized() bool { return b.made.Load() }

// release ends the context (as a CancelFunc does).
func (b *boundedCtx) release() {
	b.mu.Lock()
	b.released = true
	cancel := b.cancel
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (b *boundedCtx) Deadline() (time.Time, bool) {
	b.mu.Lock()
	own := b.deadline()
	b.mu.Unlock()
	if d, ok := b.parent.Deadline(); ok && d.Before(own) {
		return d, true
	}
	return own, true
}

func (b *boundedCtx) Done() <-chan struct{} { return b.materialize().Done() }

// Err costs one monotonic clock reading (the first call reads it to start
// the timeout, later ones to check it) while no Done was asked for.
func (b *boundedCtx) Err() error {
	b.mu.Lock()
	d, released := b.derived, b.released
	first := b.start == 0
	start := b.started()
	b.mu.Unlock()
	if d != nil {
		return d.Err()
	}
	if err := b.parent.Err(); err != nil {
		return err
	}
	if released || (!first && time.Since(epoch) >= start+b.timeout) {
		return b.materialize().Err()
	}
	return nil
}

func (b *boundedCtx) Value(key any) any {
	b.mu.Lock()
	d := b.derived
	b.mu.Unlock()
	if d != nil {
		return d.Value(key)
	}
	return b.parent.Value(key)
}

func (b *boundedCtx) String() string { return "idem.boundedCtx" }
