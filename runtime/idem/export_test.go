package idem

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// Hooks for the tests of package idem_test.

// OnFingerprint has f called for every fingerprint e computes (not for
// one its cache answers), until t ends. It replaces the f of an earlier
// call that t's test has not ended.
func OnFingerprint(t testing.TB, e *Engine, f func()) {
	h := func(c *fpCache) {
		if c == e.fpc {
			f()
		}
	}
	sumHook.Store(&h)
	t.Cleanup(func() { sumHook.CompareAndSwap(&h, nil) })
}

// FlushFingerprints empties e's fingerprint cache, as 1024 other requests
// would. Call it while e serves no request.
func FlushFingerprints(e *Engine) {
	for i := range e.fpc.slots {
		s := &e.fpc.slots[i]
		s.seq.Store(0)
		for j := range s.w {
			s.w[j].Store(0)
		}
	}
}

// RecordTag returns the domain of the tag of an encoded response (false:
// untagged), and e's domain.
func RecordTag(e *Engine, resp []byte) (domain, own uint64, tagged bool) {
	t, _, ok := cutRecordTag(resp)
	return t.domain, e.fpc.domain, ok
}

// UseLateBytes counts n bytes of responses as kept by Finish calls retried
// in the background (as if other retries held them).
func UseLateBytes(e *Engine, n int64) {
	e.lateMu.Lock()
	e.lateBytes += n
	e.lateMu.Unlock()
}

// SetLateBackoff sets the first backoff of the Finish calls e retries in
// the background, and its cap (before e serves a request).
func SetLateBackoff(e *Engine, first, max time.Duration) { e.lateFirst, e.lateMax = first, max }

// SetLateWake sets how soon after its last attempt at the earliest a
// retry woken by a Drain or a store call tries again (lateFinishFirst),
// and the jitter added to a store call's wake (lateWakeJitter), before e
// serves a request.
func SetLateWake(e *Engine, least, jitter time.Duration) {
	e.lateWakeMin, e.lateWakeJit = least, jitter
}

// SetReleaseDropLogEvery sets how often at most e logs the claim releases
// it did not try (their budget full).
func SetReleaseDropLogEvery(e *Engine, d time.Duration) {
	e.lateMu.Lock()
	e.relDrop.every = d
	e.lateMu.Unlock()
}

// HeartbeatClock is a clock for e's heartbeats that moves only when the
// test fires a timer (FireNext) or advances it (Advance): the lease grants
// (a claim's Begin), the scheduler's look at them and the heartbeat's
// schedule read it, and the heartbeat's timer runs on it. The scheduler
// still ticks on the real clock (every sixth of the shortest lease).
type HeartbeatClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*hbTestTimer
	set    chan struct{} // a timer was set (capacity 1)
}

type hbTestTimer struct {
	c      *HeartbeatClock
	at     time.Duration
	f      func()
	active bool
}

// SetHeartbeatClock gives e's heartbeats a clock of the test's, starting at
// the real reading (Begin's store timeout does not count from it). Call it
// before e serves a request.
func SetHeartbeatClock(e *Engine) *HeartbeatClock {
	c := &HeartbeatClock{now: time.Since(epoch), set: make(chan struct{}, 1)}
	e.hbs.clk = c
	return c
}

func (c *HeartbeatClock) since() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *HeartbeatClock) afterFunc(d time.Duration, f func()) hbTimer {
	t := &hbTestTimer{c: c, f: f}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

func (t *hbTestTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	was := t.active
	t.at, t.active = c.now+d, true
	c.mu.Unlock()
	select {
	case c.set <- struct{}{}:
	default:
	}
	return was
}

func (t *hbTestTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

// Now returns the clock's reading.
func (c *HeartbeatClock) Now() time.Duration { return c.since() }

// Advance moves the clock d on, firing no timer.
func (c *HeartbeatClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

// FireNext waits, up to wait, until a timer is set, moves the clock to
// when the earliest one is due (if that is later), and runs its function
// in this goroutine, which returns once it did. It reports when that was,
// and false if no timer was set by then.
func (c *HeartbeatClock) FireNext(wait time.Duration) (at time.Duration, ok bool) {
	return c.FireNextAt(wait, 0)
}

// FireNextAt is FireNext firing the timer late: the clock moves to late
// if that is after the timer is due.
func (c *HeartbeatClock) FireNextAt(wait, late time.Duration) (at time.Duration, ok bool) {
	limit := time.After(wait)
	for {
		c.mu.Lock()
		var next *hbTestTimer
		for _, t := range c.timers {
			if t.active && (next == nil || t.at < next.at) {
				next = t
			}
		}
		if next != nil {
			next.active = false
			c.now = max(c.now, next.at, late)
			at = c.now
			c.mu.Unlock()
			next.f()
			return at, true
		}
		c.mu.Unlock()
		select {
		case <-c.set:
		case <-limit:
			return 0, false
		}
	}
}

// CaptureHolds returns how many hold the buffer of the capture CaptureBody
// made for r (r as the handler inside CaptureBody got it), and whether the
// buffer went back to the pool; ok is false when r has no capture.
func CaptureHolds(r *http.Request) (holders int32, pooled, ok bool) {
	cp, _ := findCapture(r)
	if cp == nil {
		return 0, false, false
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.holders.Load(), cp.buf == nil, true
}

// ScopeKey is the scope key of a keyed request of principal to operation.
func ScopeKey(principal, operation, key string) string {
	return string(appendScope(nil, principal, operation, kindKey, key))
}
