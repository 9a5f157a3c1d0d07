package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// boundedCtx behaves as context.WithDeadline(parent, deadline) at a fraction
// of its cost: the context of the first store call of a request (the one
// every replay makes) lives in the Call, and answers Deadline, Err and Value
// without allocating. Done (which a network store asks for on every call:
// go-redis and pgx do on every command) makes one channel and arms a timer
// taken from storeTimers, made once and reset for each use, that closes it
// at the deadline; a parent that can be cancelled (a request's) is watched
// with context.AfterFunc, which costs what registering with it costs
// context.WithDeadline, and two allocations more.
//
// It ends (Err non-nil, Done closed) at the deadline (DeadlineExceeded),
// when its parent ends (the parent's error; context.Cause gives the
// parent's cause) or when it is released (Canceled), whichever comes first,
// as WithDeadline's context does with its CancelFunc. Err sees the parent's
// end at once; Done closes for it a goroutine later (context.AfterFunc
// runs its function in a goroutine), as for any context over a parent the
// context package did not make. Children made with context.With* and
// context.AfterFunc attach through its AfterFunc method, and end as it ends,
// in the goroutine that ends it (release before it returns). A boundedCtx
// is used for one store call and then released; it is never reset, since a
// store may keep a child of it beyond the call. Released, it holds no timer
// nor registration with its parent.
//
// The timeout counts from the store's first look at the context (its first
// Err, Deadline or Done, which a store makes as it starts), read on the
// monotonic clock: a request reads no clock for a store call the store does
// not time. A caller that read the clock just before the call (the claim's
// Begin, under a heartbeat: hbGrant) starts it there instead (initAt), which
// spares the store's first look a reading.
type boundedCtx struct {
	parent  context.Context
	timeout time.Duration

	mu          sync.Mutex
	start       time.Duration // since epoch, when the timeout started (see initAt); 0: not yet
	consulted   bool          // the store consulted the context (Err, Deadline, Done)
	err         error         // why it ended; nil while it runs
	parentEnded bool          // err is the parent's
	done        chan struct{} // made by Done (closedChan when it ended before); closed when it ends
	st          *storeTimer   // armed for it while Done is open and it is not released
	stopParent  func() bool   // ends the watch of the parent
	afters      []afterFunc   // what to run when it ends (children, context.AfterFunc)
	aftersBuf   [2]afterFunc
	afterID     uint32
	made        atomic.Bool // Done was asked for (read without the lock by materialized)
}

var _ context.Context = (*boundedCtx)(nil)

// epoch anchors the monotonic readings of boundedCtx: time.Since(epoch)
// reads only the monotonic clock, at half the cost of time.Now.
var epoch = time.Now()

// closedChan is the Done channel of a boundedCtx that ended before a store
// asked for it.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// init prepares the context of one store call. It reads no clock: the
// timeout counts from the first time the store consults the context (Err,
// Deadline, Done), which for a store is the start of its work.
func (b *boundedCtx) init(parent context.Context, d time.Duration) {
	b.parent = parent
	b.timeout = d
}

// initAt is init with the timeout started at start (since epoch, > 0), a
// reading the caller made just before the store call: the store's first
// look reads no clock.
func (b *boundedCtx) initAt(parent context.Context, d, start time.Duration) {
	b.parent = parent
	b.timeout = d
	b.start = start
}

// started returns when the timeout started, noting now if it had not yet
// (the store's first look), and notes that the store consulted the context
// (b.mu held).
func (b *boundedCtx) started() time.Duration {
	b.consulted = true
	if b.start == 0 {
		b.start = max(time.Since(epoch), 1)
	}
	return b.start
}

// deadline returns the call's own deadline (b.mu held).
func (b *boundedCtx) deadline() time.Time { return epoch.Add(b.started() + b.timeout) }

// afterFunc is a function registered by AfterFunc.
type afterFunc struct {
	f  func()
	id uint32
}

// end ends the context with err unless it already ended (b.mu not held).
func (b *boundedCtx) end(err error, parent bool) {
	b.mu.Lock()
	fs := b.endLocked(err, parent)
	b.mu.Unlock()
	runAfters(fs)
}

// endLocked ends the context with err unless it already ended, and returns
// the functions registered by AfterFunc, for the caller to run once it
// released b.mu (b.mu held).
func (b *boundedCtx) endLocked(err error, parent bool) []afterFunc {
	if b.err != nil {
		return nil
	}
	b.err, b.parentEnded = err, parent
	if b.done == nil {
		b.done = closedChan
	} else {
		close(b.done)
	}
	fs := b.afters
	b.afters = nil
	return fs
}

func runAfters(fs []afterFunc) {
	for _, a := range fs {
		a.f()
	}
}

// AfterFunc lets the context package attach children (context.With*,
// context.AfterFunc) to b as it does to its own contexts: f runs when b ends,
// in the goroutine that ends it (release cancels the children before it
// returns, as a CancelFunc does), and no goroutine watches Done meanwhile.
func (b *boundedCtx) AfterFunc(f func()) (stop func() bool) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if b.afters == nil {
		b.afters = b.aftersBuf[:0]
	}
	b.afterID++
	id := b.afterID
	b.afters = append(b.afters, afterFunc{f: f, id: id})
	b.mu.Unlock()
	return func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, a := range b.afters {
			if a.id == id {
				b.afters = append(b.afters[:i], b.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// left returns the time left before the deadline (b.mu not held).
func (b *boundedCtx) left() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started() + b.timeout - time.Since(epoch)
}

// ownDeadline returns the call's own deadline, starting its timeout if
// the store never consulted the context (b.mu not held).
func (b *boundedCtx) ownDeadline() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deadline()
}

// materialized reports whether a store asked for Done.
func (b *boundedCtx) materialized() bool { return b.made.Load() }

// release ends the context (as a CancelFunc does) and gives its timer back.
// When it returns, no timer or parent callback can touch b any more.
func (b *boundedCtx) release() {
	b.mu.Lock()
	st, stop := b.st, b.stopParent
	b.st, b.stopParent = nil, nil
	fs := b.endLocked(context.Canceled, false)
	b.mu.Unlock()
	runAfters(fs)
	if stop != nil {
		stop()
	}
	if st != nil {
		st.disarm()
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

// Done makes the channel and arms the timer on its first call.
func (b *boundedCtx) Done() <-chan struct{} {
	b.mu.Lock()
	if b.done != nil {
		b.mu.Unlock()
		return b.done
	}
	b.made.Store(true)
	left := b.started() + b.timeout - time.Since(epoch)
	b.done = make(chan struct{})
	var fs []afterFunc
	switch {
	case b.parent.Err() != nil:
		fs = b.endLocked(b.parent.Err(), true)
	case left <= 0:
		fs = b.endLocked(context.DeadlineExceeded, false)
	default:
		st := storeTimers.Get().(*storeTimer)
		st.arm(b, left)
		b.st = st
		if b.parent.Done() != nil {
			b.stopParent = context.AfterFunc(b.parent, st.onParent)
		}
	}
	done := b.done
	b.mu.Unlock()
	runAfters(fs)
	return done
}

// Err costs one monotonic clock reading (the first call reads it to start
// the timeout, later ones to check it) while no Done was asked for.
func (b *boundedCtx) Err() error {
	b.mu.Lock()
	if err := b.err; err != nil {
		b.mu.Unlock()
		return err
	}
	// No deadline has passed at the store's first Err (Deadline and Done
	// report a timeout started by initAt as it stands, even if past).
	first := !b.consulted
	start := b.started()
	var fs []afterFunc
	err := b.parent.Err()
	switch {
	case err != nil:
		fs = b.endLocked(err, true)
	case !first && time.Since(epoch) >= start+b.timeout:
		err = context.DeadlineExceeded
		fs = b.endLocked(err, false)
	}
	b.mu.Unlock()
	runAfters(fs)
	return err
}

// Value answers from the parent but for context.Cause's question, which it
// answers itself when it ended on its own (Cause then gives Err).
func (b *boundedCtx) Value(key any) any {
	if key == cancelCtxKey && cancelCtxKey != nil {
		b.mu.Lock()
		own := b.err != nil && !b.parentEnded
		b.mu.Unlock()
		if own {
			return nil
		}
	}
	return b.parent.Value(key)
}

func (b *boundedCtx) String() string { return "idem.boundedCtx" }

// storeTimer is the timer of a boundedCtx whose Done was asked for: made
// once, kept in storeTimers and reset for each store call. Its callbacks
// (the timer's and the parent watch's) may run late, for a context that was
// released, or run for the next context it is armed for: each takes the
// context it is armed for under mu and ends it only if what it signals holds
// for that context (the deadline passed, the parent ended). A context
// disarms it under mu, so that no callback touches the context after its
// release returns.
type storeTimer struct {
	t        *time.Timer
	onParent func() // st.parentEnded, made once

	mu sync.Mutex
	b  *boundedCtx // the context it is armed for; nil in the pool
}

var storeTimers = sync.Pool{New: func() any {
	st := new(storeTimer)
	st.t = time.AfterFunc(time.Hour, st.fired)
	st.t.Stop()
	st.onParent = st.parentEnded
	return st
}}

// arm arms st for b, to fire in d (b.mu held: st.mu is taken after b.mu only
// here, where no callback can hold st.mu and wait for b.mu, since st.b is
// not b yet).
func (st *storeTimer) arm(b *boundedCtx, d time.Duration) {
	st.mu.Lock()
	st.b = b
	st.mu.Unlock()
	st.t.Reset(d)
}

// disarm waits for a callback that holds its context, leaves later ones
// nothing to end, stops st and puts it back in the pool.
func (st *storeTimer) disarm() {
	st.mu.Lock()
	st.b = nil
	st.mu.Unlock()
	st.t.Stop()
	storeTimers.Put(st)
}

// fired ends the context st is armed for if its deadline passed, and else
// (a late callback of an earlier use) makes sure st fires at its deadline.
func (st *storeTimer) fired() {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := st.b
	if b == nil {
		return
	}
	if left := b.left(); left > 0 {
		st.t.Reset(left)
		return
	}
	b.end(context.DeadlineExceeded, false)
}

func (st *storeTimer) parentEnded() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if b := st.b; b != nil {
		if err := b.parent.Err(); err != nil {
			b.end(err, true)
		}
	}
}

// cancelCtxKey is the key by which context.Cause asks a context for the
// cancelCtx that holds its cause (the context package does not export it):
// noted once by a context that records the first key it is asked for. Nil
// if Cause ever stops asking, and Value then always defers to the parent.
var cancelCtxKey = func() any {
	p := new(keyProbe)
	_ = context.Cause(p)
	return p.key
}()

type keyProbe struct{ key any }

func (*keyProbe) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keyProbe) Done() <-chan struct{}       { return nil }
func (*keyProbe) Err() error                  { return context.Canceled } // Cause asks Value only then
func (p *keyProbe) Value(key any) any {
	if p.key == nil {
		p.key = key
	}
	return nil
}
