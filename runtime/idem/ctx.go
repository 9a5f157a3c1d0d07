package idem

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/internal/mono"
)

// boundedCtx behaves as context.WithDeadline(parent, deadline) at a fraction
// of its cost: the context of the first store call of a request (the one
// every replay makes) lives in the Call, and answers Deadline, Err and Value
// without allocating. Done (which a network store asks for on every call:
// go-redis and pgx do on every command) makes one channel and queues the
// context by its deadline in one of the shared deadline queues (see
// deadlineQueue), whose one timer closes it at the deadline: no timer of
// its own is armed or stopped; a parent that can be cancelled (a
// request's) is watched with context.AfterFunc, which costs what
// registering with it costs context.WithDeadline, and two allocations more.
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
// store may keep a child of it beyond the call. Released, it is in no
// deadline queue and holds no registration with its parent.
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
	start       atomic.Int64   // since epoch (a time.Duration), when the timeout started (see initAt); 0: not yet; written under mu, read without it by MonoStarted
	err         error          // why it ended; nil while it runs
	done        chan struct{}  // made by Done (closedChan when it ended before); closed when it ends
	q           *deadlineQueue // the queue Done put it in, until its release
	pw          *parentWatch   // watches the parent for it while Done is open and it is not released
	afters      []afterFunc    // what to run when it ends (children, context.AfterFunc)
	aftersBuf   [2]afterFunc
	afterID     uint32
	consulted   bool        // the store consulted the context (Err, Deadline, Done)
	parentEnded bool        // err is the parent's
	queued      bool        // in its queue (under q.mu: see below)
	fired       bool        // a fire took it out and has not yet ended it (under q.mu)
	made        atomic.Bool // Done was asked for (read without the lock by materialized)

	// In its queue (under q.mu), with queued and fired above (where they
	// cost no room): its index in the queue's heap, and next, the chain of
	// the contexts a fire took out. Its deadline there is due(), copied
	// into its heap entry: no field of its own, so that a Call's storeSide
	// and claimSide together (two boundedCtx) stay in the allocation size
	// class they had.
	qi   int32
	next *boundedCtx
}

// due returns its deadline since epoch, once its timeout started: under
// b.mu, or under its queue's mu while it is queued (start and timeout do
// not change then).
func (b *boundedCtx) due() time.Duration { return time.Duration(b.start.Load()) + b.timeout }

var (
	_ context.Context = (*boundedCtx)(nil)
	_ mono.Started    = (*boundedCtx)(nil)
)

// epoch anchors the monotonic readings of boundedCtx: time.Since(epoch)
// reads only the monotonic clock, at half the cost of time.Now. It is
// runtime/memstore's too (mono.Started).
var epoch = mono.Epoch

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
	b.start.Store(int64(start))
}

// started returns when the timeout started, noting now if it had not yet
// (the store's first look), and notes that the store consulted the context
// (b.mu held).
func (b *boundedCtx) started() time.Duration {
	b.consulted = true
	start := time.Duration(b.start.Load())
	if start == 0 {
		start = max(time.Since(epoch), 1)
		b.start.Store(int64(start))
	}
	return start
}

// MonoStarted implements mono.Started: when the call's timeout started,
// the reading memstore takes as the call's now (it reads no clock of its
// own). That is a reading made just before the call (initAt: the claim's
// Begin), or the one the store's first look made (its Err on entry).
func (b *boundedCtx) MonoStarted() (time.Duration, bool) {
	start := b.start.Load()
	return time.Duration(start), start > 0
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

// ownDeadline returns the call's own deadline, starting its timeout if
// the store never consulted the context (b.mu not held).
func (b *boundedCtx) ownDeadline() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deadline()
}

// materialized reports whether a store asked for Done.
func (b *boundedCtx) materialized() bool { return b.made.Load() }

// release ends the context (as a CancelFunc does), takes it out of its
// deadline queue and ends the watch of its parent. When it returns, no
// queue or parent callback can touch b any more.
func (b *boundedCtx) release() {
	b.mu.Lock()
	q, pw := b.q, b.pw
	b.q, b.pw = nil, nil
	fs := b.endLocked(context.Canceled, false)
	b.mu.Unlock()
	runAfters(fs)
	if pw != nil {
		pw.disarm()
	}
	if q != nil {
		q.remove(b)
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

// Done makes the channel and queues the context by its deadline on its
// first call.
func (b *boundedCtx) Done() <-chan struct{} {
	b.mu.Lock()
	if b.done != nil {
		b.mu.Unlock()
		return b.done
	}
	b.made.Store(true)
	b.started()
	b.done = make(chan struct{})
	var fs []afterFunc
	if err := b.parent.Err(); err != nil {
		fs = b.endLocked(err, true)
	} else {
		// A deadline already past (Err ends it as it sees it) is for the
		// queue's timer to end, at once: Done reads no clock to check.
		b.q = pickQueue(b)
		b.q.add(b)
		if b.parent.Done() != nil {
			b.pw = parentWatches.Get().(*parentWatch)
			b.pw.arm(b)
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

// deadlineQueue holds the contexts whose Done was asked for and that are
// not released, in a min-heap by deadline, with one timer set for the first
// deadline: at it, the timer's function (fire) takes out the contexts whose
// deadline passed and ends them, and sets the timer for the next deadline.
// A context is queued by Done and taken out by its release, which does not
// touch the timer: a timer that fires for a context released meanwhile finds
// nothing to end and sets itself for the next deadline, if any. A queue
// under steady use fires about once per StoreTimeout, whatever the number of
// store calls; a context thus costs Done and its release an insertion and a
// removal under a mutex that is rarely contended, where a timer of its own
// cost a heap insertion and removal in the runtime's timers. The heap
// bounds both at O(log n) steps for n contexts in the queue, whatever their
// deadlines (Engines of different StoreTimeouts, or a stalled store with
// many calls in flight, share the queues); with one StoreTimeout a new
// deadline is (nearly) the last, and its insertion stops at its first
// comparison. Contexts are spread over several queues (pickQueue), so that
// the cores of a busy server do not take turns at one mutex.
type deadlineQueue struct {
	mu    sync.Mutex
	heap  []queued      // heap[i]'s deadline is no earlier than heap[(i-1)/2]'s
	t     *time.Timer   // made by the first add
	armed time.Duration // when t fires (since epoch); 0: not set
	// ending: a release waits on it for a fire that took its context out to
	// have ended it (fired false); waiting counts such releases.
	ending  sync.Cond
	waiting int
	steps   int      // heap levels moved by add and remove (for tests)
	_       [64]byte // apart from the next queue's mutexes
}

// queued is an entry of a deadlineQueue's heap: its deadline beside it,
// so that ordering reads no context.
type queued struct {
	at time.Duration
	b  *boundedCtx
}

// deadlineQueues are 1<<queueBits queues, at least 4 per P.
var deadlineQueues, queueBits = func() ([]deadlineQueue, int) {
	bits := 3
	for 1<<bits < 4*runtime.GOMAXPROCS(0) && bits < 8 {
		bits++
	}
	return make([]deadlineQueue, 1<<bits), bits
}()

// pickQueue returns b's queue: by a multiplicative hash of its address,
// which spreads the contexts of the requests in flight (each in memory of
// its own, or in a Call the pool keeps on its P) over the queues for a few
// instructions (math/rand/v2 cost ten times as many).
func pickQueue(b *boundedCtx) *deadlineQueue {
	return &deadlineQueues[uint64(uintptr(unsafe.Pointer(b)))*0x9e3779b97f4a7c15>>(64-queueBits)]
}

// add queues b, whose timeout started (b.mu held). It reads the clock only
// to set the timer, when b's deadline is the first.
func (q *deadlineQueue) add(b *boundedCtx) {
	at := b.due()
	q.mu.Lock()
	b.queued = true
	q.heap = append(q.heap, queued{at, b})
	q.up(len(q.heap) - 1)
	switch {
	case q.t == nil:
		q.t = time.AfterFunc(at-time.Since(epoch), q.fire)
		q.armed = at
	case q.armed == 0 || at < q.armed:
		q.t.Reset(at - time.Since(epoch))
		q.armed = at
	}
	q.mu.Unlock()
}

// up moves the entry at i towards the root while its deadline is earlier
// than its parent's (q.mu held).
func (q *deadlineQueue) up(i int) {
	h := q.heap
	e := h[i]
	for i > 0 {
		p := (i - 1) / 2
		if h[p].at <= e.at {
			break
		}
		q.steps++
		h[i] = h[p]
		h[i].b.qi = int32(i)
		i = p
	}
	h[i] = e
	e.b.qi = int32(i)
}

// down moves the entry at i away from the root while a child's deadline is
// earlier (q.mu held).
func (q *deadlineQueue) down(i int) {
	h := q.heap
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].at < h[c].at {
			c++
		}
		if e.at <= h[c].at {
			break
		}
		q.steps++
		h[i] = h[c]
		h[i].b.qi = int32(i)
		i = c
	}
	h[i] = e
	e.b.qi = int32(i)
}

// unlink takes b out of the heap (q.mu held).
func (q *deadlineQueue) unlink(b *boundedCtx) {
	i := int(b.qi)
	n := len(q.heap) - 1
	if i != n {
		q.heap[i] = q.heap[n]
		q.heap[i].b.qi = int32(i)
	}
	q.heap[n] = queued{}
	q.heap = q.heap[:n]
	if c := cap(q.heap); c > 1024 && n < c/4 {
		// Give back what a crowd of calls in flight made it grow to.
		q.heap = append(make([]queued, 0, c/2), q.heap...)
	}
	if i != n {
		if i > 0 && q.heap[i].at < q.heap[(i-1)/2].at {
			q.up(i)
		} else {
			q.down(i)
		}
	}
	b.qi, b.queued = 0, false
}

// remove takes b out of the queue, or, if a fire took it out, waits until
// that fire has ended it (b released: b.mu not held). It waits for b alone,
// not for the other contexts the fire ends.
func (q *deadlineQueue) remove(b *boundedCtx) {
	q.mu.Lock()
	if b.queued {
		q.unlink(b)
	}
	for b.fired {
		if q.ending.L == nil {
			q.ending.L = &q.mu
		}
		q.waiting++
		q.ending.Wait()
		q.waiting--
	}
	q.mu.Unlock()
}

// fire ends the contexts whose deadline passed and sets the timer for the
// next deadline, if any.
func (q *deadlineQueue) fire() {
	q.mu.Lock()
	now := time.Since(epoch)
	var ended *boundedCtx // the contexts taken out, chained by next
	for len(q.heap) > 0 && q.heap[0].at <= now {
		b := q.heap[0].b
		q.unlink(b)
		b.fired, b.next = true, ended
		ended = b
	}
	q.armed = 0
	if len(q.heap) > 0 {
		q.armed = q.heap[0].at
		q.t.Reset(q.armed - now)
	}
	q.mu.Unlock()
	for b := ended; b != nil; {
		next := b.next // read before b may be released (its release waits for fired false)
		b.end(context.DeadlineExceeded, false)
		q.mu.Lock()
		b.fired, b.next = false, nil
		if q.waiting > 0 {
			q.ending.Broadcast()
		}
		q.mu.Unlock()
		b = next
	}
}

// parentWatch watches the parent of a boundedCtx whose Done was asked for
// (context.AfterFunc), kept in parentWatches and reused. Its callback may
// run late, for a context that was released, or run for the next context
// it watches for: it takes the context it watches for under mu and ends it
// only if that context's parent ended. A context disarms it under mu, so
// that no callback touches the context after its release returns.
type parentWatch struct {
	onParent func()      // pw.parentEnded, made once
	stop     func() bool // ends the watch (context.AfterFunc's)

	mu sync.Mutex
	b  *boundedCtx // the context it watches for; nil in the pool
}

var parentWatches = sync.Pool{New: func() any {
	pw := new(parentWatch)
	pw.onParent = pw.parentEnded
	return pw
}}

// arm sets pw to watch b's parent for b (b.mu held: pw.mu is taken after
// b.mu only here, where no callback can hold pw.mu and wait for b.mu, since
// pw.b is not b yet).
func (pw *parentWatch) arm(b *boundedCtx) {
	pw.mu.Lock()
	pw.b = b
	pw.mu.Unlock()
	pw.stop = context.AfterFunc(b.parent, pw.onParent)
}

// disarm ends the watch, waits for a callback that holds its context, leaves
// later ones nothing to end and puts pw back in the pool.
func (pw *parentWatch) disarm() {
	pw.stop()
	pw.stop = nil
	pw.mu.Lock()
	pw.b = nil
	pw.mu.Unlock()
	parentWatches.Put(pw)
}

func (pw *parentWatch) parentEnded() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if b := pw.b; b != nil {
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
