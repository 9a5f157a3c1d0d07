package idem

import (
	"sync"
	"time"
)

// hbSched arms the heartbeats of running holders lazily. A claim registers
// its Call (a list insertion under a lock, no timer); a goroutine, running
// only while claims are registered, ticks every sixth of the shortest lease
// registered and arms the heartbeat of every Call whose claim's Begin
// started (hbGrant) a sixth of its lease ago or more, so the first
// extension is due a third of the lease after the start of the Begin (as
// the lease it extends counts from there), and one every Lease/3 after.
// A claim whose Begin took a sixth of the lease or more is armed at once
// (acquired). Finishing unregisters. Most handlers end well before the
// first tick, and never pay for a timer.
type hbSched struct {
	clk     hbClock // nil: the monotonic clock since epoch, and time.AfterFunc
	mu      sync.Mutex
	head    *Call
	period  time.Duration
	running bool
	wake    chan struct{}
}

func newHBSched() *hbSched { return &hbSched{wake: make(chan struct{}, 1)} }

// hbClock is the heartbeats' clock when a test sets one (export_test.go):
// the readings since epoch that hbGrant and the heartbeat's schedule take,
// and the heartbeat's timer. The scheduler's tick stays on the real clock
// (it only looks at the readings).
type hbClock interface {
	since() time.Duration
	afterFunc(d time.Duration, f func()) hbTimer
}

// hbTimer is a heartbeat's timer: a *time.Timer, or a test clock's.
type hbTimer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// since is the heartbeats' clock reading: time.Since(epoch), or the test's.
func (s *hbSched) since() time.Duration {
	if s.clk != nil {
		return s.clk.since()
	}
	return time.Since(epoch)
}

// afterFunc is time.AfterFunc, or the test clock's.
func (s *hbSched) afterFunc(d time.Duration, f func()) hbTimer {
	if s.clk != nil {
		return s.clk.afterFunc(d, f)
	}
	return time.AfterFunc(d, f)
}

func (s *hbSched) register(c *Call, lease time.Duration) {
	p := max(lease/6, time.Millisecond)
	s.mu.Lock()
	c.hbPrev, c.hbNext, c.hbListed = nil, s.head, true
	if s.head != nil {
		s.head.hbPrev = c
	}
	s.head = c
	switch {
	case !s.running:
		s.running, s.period = true, p
		go s.run()
	case p < s.period:
		s.period = p
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	s.mu.Unlock()
}

// collect marks c, not registered, as taken to arm its heartbeat: a claim
// whose Begin took a sixth of the lease or more.
func (s *hbSched) collect(c *Call) {
	s.mu.Lock()
	c.hbCollected = true
	s.mu.Unlock()
}

// unregister takes c off the list; it reports whether the scheduler took
// it to arm its heartbeat (then it may still touch the Call).
func (s *hbSched) unregister(c *Call) (armed bool) {
	s.mu.Lock()
	if c.hbListed {
		s.unlink(c)
	}
	armed = c.hbCollected
	s.mu.Unlock()
	return armed
}

func (s *hbSched) unlink(c *Call) {
	if c.hbPrev != nil {
		c.hbPrev.hbNext = c.hbNext
	} else {
		s.head = c.hbNext
	}
	if c.hbNext != nil {
		c.hbNext.hbPrev = c.hbPrev
	}
	c.hbPrev, c.hbNext, c.hbListed = nil, nil, false
}

func (s *hbSched) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var due []*Call
	for {
		s.mu.Lock()
		p := s.period
		s.mu.Unlock()
		t.Reset(p)
		select {
		case <-t.C:
		case <-s.wake:
			continue // a shorter lease: tick sooner
		}
		s.mu.Lock()
		// hbGrant is written before register, which orders it before
		// this read (under s.mu); nothing writes it while listed.
		now := s.since()
		for c := s.head; c != nil; {
			next := c.hbNext
			if now-c.hbGrant >= c.p.spec.InFlight.Lease/6 {
				s.unlink(c)
				c.hbCollected = true
				due = append(due, c)
			}
			c = next
		}
		if s.head == nil && len(due) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for _, c := range due {
			c.armHeartbeat()
		}
		clear(due)
		due = due[:0]
	}
}
