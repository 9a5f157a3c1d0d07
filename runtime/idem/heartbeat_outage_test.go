package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

var errRefused = errors.New("connection refused")

// outageStore is a memstore whose extensions number first..last (1-based)
// fail: at once (refuse), or by hanging until their context ends. Every
// other call goes through.
type outageStore struct {
	*memstore.Store
	n           atomic.Int64
	now         func() time.Duration // when an extension starts (nil: time.Since(t0))
	first, last int64
	refuse      bool
	fenceAt     int64 // extension number answered ErrFenced (0: none)
	t0          time.Time
	beforeN     int64 // before extension number beforeN is forwarded, before runs
	before      func(key string)

	lastOK atomic.Bool // the last extension forwarded got through

	mu     sync.Mutex
	log    []string
	starts []time.Duration // of every extension attempted
}

func (s *outageStore) ExtendLease(ctx context.Context, key string, tok idem.Token, lease time.Duration) error {
	n := s.n.Add(1)
	start := time.Since(s.t0)
	if s.now != nil {
		start = s.now()
	}
	s.mu.Lock()
	s.starts = append(s.starts, start)
	s.mu.Unlock()
	if n == s.beforeN && s.before != nil {
		s.before(strings.Clone(key))
	}
	if n == s.fenceAt {
		s.note("extend #%d at %v: fenced", n, start.Round(time.Millisecond))
		return idem.ErrFenced
	}
	if n >= s.first && (s.last == 0 || n <= s.last) {
		if s.refuse {
			s.note("extend #%d at %v: refused", n, start.Round(time.Millisecond))
			return errRefused
		}
		<-ctx.Done()
		s.note("extend #%d at %v: hung, %v", n, start.Round(time.Millisecond), ctx.Err())
		return ctx.Err()
	}
	err := s.Store.ExtendLease(ctx, key, tok, lease)
	s.lastOK.Store(err == nil)
	s.note("extend #%d at %v: %v", n, start.Round(time.Millisecond), err)
	return err
}

func (s *outageStore) note(f string, a ...any) {
	s.mu.Lock()
	s.log = append(s.log, fmt.Sprintf(f, a...))
	s.mu.Unlock()
}

func (s *outageStore) dump(t *testing.T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.log {
		t.Log(l)
	}
}

// hbLease is the lease of the heartbeat outage tests: long enough that a
// loaded 2-core machine running timers late by a good part of a hundred
// milliseconds does not lose a lease the schedule keeps (the margins are
// fractions of it).
const hbLease = 900 * time.Millisecond

// hbOutage runs a handler while the extensions first..last fail; just
// before extension number before is forwarded (the first after the
// outage), a duplicate arrives, and the handler ends once it is answered.
// The outage is shorter than 2/3 of the lease, so the holder's lease must
// still be alive then: the duplicate is answered in flight, and the handler
// runs once.
//
// The margins are fractions of the lease (a third at the default ratio);
// a machine that stalls this process for a good part of it (a hung
// extension's context whose deadline fired 430ms late was seen, on a
// loaded 2-core machine running other packages' tests under -race) makes
// the lease run out whatever the schedule. An attempt during which the
// process stalled by more than hbStall (stallWatch: a goroutine of the
// test's own sleeping 5ms at a time woke that late) is run again, up to
// hbAttempts times in all, and the test fails, saying so, if every one
// stalled (a skip would hide a machine too loaded to check anything);
// one that did not stall must pass. The engine's own lateness is no
// stall: its schedule is checked as before.
func hbOutage(t *testing.T, storeTimeout time.Duration, refuse bool, first, last, before int64) {
	for attempt := 1; ; attempt++ {
		stop := stallWatch()
		hs, runs := hbOutageOnce(storeTimeout, refuse, first, last, before)
		stall := stop()
		failed := runs != 1 || hs.n.Load() < before
		if failed && stall > hbStall {
			t.Logf("attempt %d: the process stalled by up to %v (more than %v): run again", attempt, stall.Round(time.Millisecond), hbStall)
			hs.dump(t)
			if attempt == hbAttempts {
				t.Fatalf("the process stalled by more than %v in each of %d attempts: the heartbeat's schedule could not be checked", hbStall, attempt)
			}
			continue
		}
		hs.dump(t)
		if runs != 1 {
			t.Errorf("handler ran %d times after heartbeats #%d..#%d failed (lease %v, StoreTimeout %v; the process stalled by up to %v)", runs, first, last, hbLease, storeTimeout, stall.Round(time.Millisecond))
		}
		if hs.n.Load() < before {
			t.Errorf("extension #%d never came", before)
		}
		return
	}
}

// hbStall is how late stallWatch's goroutine may wake during an attempt of
// hbOutage that fails before the failure is taken for the machine's:
// a sixth of the margin (a third of the lease) that the attempts' few
// timers, each as late, would use up; hbAttempts bounds the attempts.
const (
	hbStall    = hbLease / 18
	hbAttempts = 5
)

// stallWatch measures, until stop is called, how late a goroutine that
// sleeps 5ms at a time wakes at most: how long the machine stalled the
// process (CPU starvation), which delays every timer alike.
func stallWatch() (stop func() time.Duration) {
	const tick = 5 * time.Millisecond
	done := make(chan struct{})
	var worst time.Duration
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			t0 := time.Now()
			select {
			case <-done:
				return
			case <-time.After(tick):
			}
			worst = max(worst, time.Since(t0)-tick)
		}
	}()
	return func() time.Duration {
		close(done)
		<-finished
		return worst
	}
}

// hbOutageOnce is one attempt of hbOutage: it returns the store (its log,
// the extensions attempted) and how many times the handler ran.
func hbOutageOnce(storeTimeout time.Duration, refuse bool, first, last, before int64) (*outageStore, int64) {
	const lease = hbLease
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	hs := &outageStore{Store: ms, first: first, last: last, refuse: refuse, t0: time.Now(), beforeN: before}
	var runs atomic.Int64
	dupDone := make(chan struct{})
	eng := idem.New(hs, idem.Options{Principal: func(*http.Request) (string, error) { return "p", nil }, StoreTimeout: storeTimeout})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict, Window: time.Minute,
		InFlight: idem.InFlightSpec{Lease: lease}})
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		hs.note("run %d starts at %v", n, time.Since(hs.t0).Round(time.Millisecond))
		if n == 1 {
			select {
			case <-dupDone:
			case <-time.After(time.Minute):
			}
		}
		w.WriteHeader(201)
	}))
	do := func() int { return send(h, req{target: "/op", key: "k1", body: `{"a":1}`}).Code }
	var wg sync.WaitGroup
	hs.before = func(key string) {
		rec, _, _ := ms.Get(context.Background(), key)
		hs.note("before extension #%d: lease ends in %v (state %v)", before, time.Until(rec.LeaseExpiresAt).Round(time.Millisecond), rec.State)
		wg.Add(1)
		go func() { defer wg.Done(); hs.note("duplicate answered %d", do()); close(dupDone) }()
		time.Sleep(20 * time.Millisecond)
	}
	first1 := do()
	hs.note("first answered %d", first1)
	wg.Wait()
	return hs, runs.Load()
}

// One extension hangs, with StoreTimeout (the default, 5s) above lease/3:
// the next must come before the lease runs out.
func TestHeartbeatOutageOneTimeout(t *testing.T) { hbOutage(t, 0, false, 3, 3, 4) }

// StoreTimeout = lease/6 (the defaults' ratio: 5s and 30s): two extensions
// in a row time out.
func TestHeartbeatOutageTwoTimeoutsDefaultRatio(t *testing.T) {
	hbOutage(t, hbLease/6, false, 3, 4, 5)
}

// A store that refuses at once, twice in a row.
func TestHeartbeatOutageTwoFastFailures(t *testing.T) { hbOutage(t, 0, true, 3, 4, 5) }

// hbRun runs one handler over hs until done (given the log so far) says
// so, or a minute passed (then the test fails), and returns the log.
func hbRun(t *testing.T, hs *outageStore, lease time.Duration, done func(logs string) bool) string {
	t.Helper()
	var buf lockedBuffer
	eng := idem.New(hs, idem.Options{Principal: func(*http.Request) (string, error) { return "p", nil },
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict, Window: time.Hour,
		InFlight: idem.InFlightSpec{Lease: lease}})
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for limit := time.Now().Add(time.Minute); !done(buf.String()); time.Sleep(time.Millisecond) {
			if time.Now().After(limit) {
				t.Errorf("the heartbeats did not get there in a minute")
				break
			}
		}
		w.WriteHeader(201)
	}))
	req := httptest.NewRequest("POST", "/op", strings.NewReader(`{"a":1}`))
	req.Header.Set("Idempotency-Key", "k1")
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(httptest.NewRecorder(), req)
	hs.dump(t)
	return buf.String()
}

// attempts returns the start times of the extensions attempted so far.
func (s *outageStore) attempts() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.starts...)
}

const ranOutWarn = "lease will run out before the next attempt"

// When the store stays unreachable past the end of the lease, the holder
// says once that the lease will run out before the next attempt (the old
// WARN, "lease ran out", could come up to lease/12 before the end), and
// stops retrying quickly: from retries every lease/12 back to one attempt
// every lease/3 (a store back while nobody took the key extends the lapsed
// lease). The heartbeats run on a clock of the test's (SetHeartbeatClock),
// which moves only when the test fires their timer: the schedule is
// checked exactly whatever the machine's load. (On the real clock, a first
// attempt that came late, the process stalled, left fewer than three
// attempts before the WARN, and the test failed.) A first attempt that
// comes late (tc.late) leaves no room for the retries the lease cannot
// hold: the WARN comes after the attempt whose next would start at or
// after the lease's end.
func TestHeartbeatLeaseRanOut(t *testing.T) {
	const lease = 240 * time.Millisecond
	for _, tc := range []struct {
		name string
		late time.Duration // how late the first attempt comes
		warn int           // the attempt after which the WARN comes (1-based)
	}{
		{"on time", 0, 8},                   // lease/3, then every lease/12: 80, 100, ... 220ms, whose next (240ms) is at the end
		{"late", 125 * time.Millisecond, 2}, // 205, 225ms (next at 245ms)
		{"past the end", lease, 1},          // 320ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			const attempts = 12
			ms := memstore.New(memstore.Options{})
			defer ms.Close()
			hs := &outageStore{Store: ms, first: 1, refuse: true, t0: time.Now()}
			var buf lockedBuffer
			eng := idem.New(hs, idem.Options{Principal: func(*http.Request) (string, error) { return "p", nil },
				Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			clk := idem.SetHeartbeatClock(eng)
			grant := clk.Now() // the Begin reads it: the clock has not moved
			hs.now = func() time.Duration { return clk.Now() - grant }
			pol := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict, Window: time.Hour,
				InFlight: idem.InFlightSpec{Lease: lease}})
			started, release := make(chan struct{}), make(chan struct{})
			h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(started)
				<-release
				w.WriteHeader(201)
			}))
			done := make(chan int)
			go func() { done <- send(h, req{target: "/op", key: "k1", body: `{"a":1}`}).Code }()
			defer func() { close(release); <-done }()
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("the handler did not start in a minute")
			}
			// The scheduler (ticking on the real clock) arms the heartbeat
			// once a sixth of the lease passed on the test's: its timer,
			// due at lease/3, is fired tc.late after that.
			clk.Advance(lease / 6)
			warnAt := 0
			for n := 1; n <= attempts; n++ {
				if n == 1 && tc.late > 0 {
					if _, ok := clk.FireNextAt(time.Minute, grant+lease/3+tc.late); !ok {
						t.Fatal("no heartbeat armed in a minute")
					}
				} else if _, ok := clk.FireNext(time.Minute); !ok {
					t.Fatalf("no heartbeat armed in a minute after attempt #%d", n-1)
				}
				if warnAt == 0 && strings.Contains(buf.String(), ranOutWarn) {
					warnAt = n
				}
			}
			hs.dump(t)
			logs := buf.String()
			if n := strings.Count(logs, ranOutWarn); n != 1 {
				t.Fatalf("%d logs of the lease running out, want 1:\n%s", n, logs)
			}
			if warnAt != tc.warn {
				t.Errorf("the WARN after attempt #%d, want #%d", warnAt, tc.warn)
			}
			// Each attempt starts lease/12 after the previous one while the
			// next would start before the lease's end, lease/3 after it once
			// it would not.
			at := hs.attempts()
			if len(at) != attempts {
				t.Fatalf("%d extensions attempted, want %d", len(at), attempts)
			}
			want := lease/3 + tc.late
			for i, got := range at {
				if got != want {
					t.Errorf("attempt #%d at %v after the grant, want %v", i+1, got, want)
				}
				if i+1 < tc.warn {
					want += lease / 12
				} else {
					want += lease / 3
				}
			}
		})
	}
}

// ErrFenced stops the heartbeats at once.
func TestHeartbeatFencedStops(t *testing.T) {
	const lease = 120 * time.Millisecond
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	hs := &outageStore{Store: ms, fenceAt: 1, t0: time.Now()}
	var lost time.Time
	logs := hbRun(t, hs, lease, func(logs string) bool {
		if lost.IsZero() && strings.Contains(logs, "lease lost") {
			lost = time.Now()
		}
		return !lost.IsZero() && time.Since(lost) > 2*lease // time for more attempts, were there any
	})
	if n := hs.n.Load(); n != 1 {
		t.Errorf("%d extensions attempted after ErrFenced, want 1", n)
	}
	if !strings.Contains(logs, "lease lost") {
		t.Errorf("no log of the lost lease:\n%s", logs)
	}
}

// A store back after the lease ran out, before anyone took the key over:
// the heartbeats, gone on every lease/3, extend the lapsed lease, and the
// completion is stored (not fenced).
func TestHeartbeatLapsedLeaseExtended(t *testing.T) {
	const lease = 240 * time.Millisecond
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	hs := &outageStore{Store: ms, first: 1, last: 11, refuse: true, t0: time.Now()}
	logs := hbRun(t, hs, lease, func(string) bool { return hs.n.Load() > 11 && hs.lastOK.Load() })
	if n := strings.Count(logs, ranOutWarn); n != 1 {
		t.Errorf("%d logs of the lease running out, want 1:\n%s", n, logs)
	}
	if !hs.lastOK.Load() {
		t.Errorf("no extension got through after the outage")
	}
	if strings.Contains(logs, "late completion rejected") {
		t.Errorf("the completion was fenced:\n%s", logs)
	}
}

// slowReplyStore is a memstore whose first Begin is answered delay after
// the store ran it (a slow reply, within StoreTimeout).
type slowReplyStore struct {
	*outageStore
	delay time.Duration
	n     atomic.Int64
}

func (s *slowReplyStore) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	res, err := s.Store.Begin(ctx, req)
	if s.n.Add(1) == 1 {
		time.Sleep(s.delay)
	}
	return res, err
}

// With no outage at all, a claim whose Begin reply took most of the lease
// keeps it: the lease counts from the start of the Begin, and so must the
// first extension. Timed from the claim's registration (after Begin
// returned), it came lease/6..lease/3 later, past the lease's end, and a
// duplicate took the key over and ran the handler again.
func TestHeartbeatAfterSlowBeginReply(t *testing.T) {
	const lease = hbLease
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	hs := &slowReplyStore{outageStore: &outageStore{Store: ms, first: 1 << 62, t0: time.Now()}, delay: lease * 3 / 4}
	var runs atomic.Int64
	eng := idem.New(hs, idem.Options{Principal: func(*http.Request) (string, error) { return "p", nil }})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict, Window: time.Minute,
		InFlight: idem.InFlightSpec{Lease: lease}})
	release := make(chan struct{})
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			<-release
		}
		w.WriteHeader(201)
	}))
	do := func() int { return send(h, req{target: "/op", key: "k1", body: `{"a":1}`}).Code }
	done := make(chan int)
	go func() { done <- do() }()
	// Duplicates from just after the first handler starts until one and a
	// half leases after the Begin: past the end of the lease it granted
	// (the first extension timed from the registration came at 13/12).
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for deadline := hs.t0.Add(3 * lease / 2); time.Now().Before(deadline) && runs.Load() < 2; {
		hs.note("duplicate answered %d", do())
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	hs.note("first answered %d", <-done)
	if n := runs.Load(); n != 1 {
		hs.dump(t)
		t.Errorf("handler ran %d times with no store outage (the Begin's reply took %v of a %v lease)", n, hs.delay, lease)
	}
}
