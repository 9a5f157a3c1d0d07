package idem

import (
	"context"
	"sync"
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
type boundedCtx struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	derived  context.Context
	cancel   context.CancelFunc
	released bool
}

var _ context.Context = (*boundedCtx)(nil)

func (b *boundedCtx) init(parent context.Context, d time.Duration) {
	b.parent = parent
	b.deadline = time.Now().Add(d)
}

// materialize returns the WithDeadline context, making it on first use.
func (b *boundedCtx) materialize() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.derived == nil {
		b.derived, b.cancel = context.WithDeadline(b.parent, b.deadline)
		if b.released {
			b.cancel()
		}
	}
	return b.derived
}

// materialized reports whether the real deadline context was made (a store
// asked for Done).
func (b *boundedCtx) materialized() bool {
	d, _ := b.current()
	return d != nil
}

func (b *boundedCtx) current() (context.Context, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.derived, b.released
}

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
	if d, ok := b.parent.Deadline(); ok && d.Before(b.deadline) {
		return d, true
	}
	return b.deadline, true
}

func (b *boundedCtx) Done() <-chan struct{} { return b.materialize().Done() }

func (b *boundedCtx) Err() error {
	d, released := b.current()
	if d != nil {
		return d.Err()
	}
	if err := b.parent.Err(); err != nil {
		return err
	}
	if released || !time.Now().Before(b.deadline) {
		return b.materialize().Err()
	}
	return nil
}

func (b *boundedCtx) Value(key any) any {
	if d, _ := b.current(); d != nil {
		return d.Value(key)
	}
	return b.parent.Value(key)
}

func (b *boundedCtx) String() string { return "idem.boundedCtx" }
