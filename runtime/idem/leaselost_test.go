package idem_test

import (
	"context"
	"errors"
	"io"
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

// partitioned is a memstore whose lease extensions fail while down, as a
// store the holder cannot reach for longer than its lease.
type partitioned struct {
	*memstore.Store
	down *atomic.Bool
}

func (p partitioned) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if p.down.Load() {
		return errors.New("dial tcp: connection refused")
	}
	return p.Store.ExtendLease(ctx, key, token, lease)
}

// partitionedEngine returns an engine (CancelOnLeaseLost as on, logging to
// logs) over a memstore that cannot be reached to extend a lease while down
// (down from the start), and an operation "charge" with a 300 ms lease
// under failures.
func partitionedEngine(t *testing.T, failures idem.FailurePolicy, on bool, logs io.Writer) (*idem.Engine, *idem.Policy, *atomic.Bool) {
	t.Helper()
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = ms.Close() })
	p := mustCompile(t, idem.Spec{Operation: "charge", Semantics: idem.Strict, Failures: failures,
		InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
	down := &atomic.Bool{}
	down.Store(true)
	e := idem.New(partitioned{ms, down}, idem.Options{Principal: idem.Anonymous, CancelOnLeaseLost: on,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return e, p, down
}

// postCharge sends h a charge under the key k-1.
func postCharge(h http.Handler) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":100}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "k-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestCancelOnLeaseLost: a security trial's takeover. The store cannot be
// reached to extend a 300 ms lease while a 1 s handler (calling a PSP)
// runs; the client's retry at 500 ms (the store reachable again) takes the
// key over and runs the operation again. Without Options.CancelOnLeaseLost the first run is not
// told and the card is charged twice (the context's cause nil); with it,
// the first run's context ends with ErrLeaseLost as the lease runs out,
// before the retry, and a handler that checks idem.LeaseLost before
// charging charges once.
func TestCancelOnLeaseLost(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(map[bool]string{false: "off", true: "on"}[on], func(t *testing.T) {
			e, p, down := partitionedEngine(t, idem.FailuresRetry, on, io.Discard)
			var charges atomic.Int32
			var mu sync.Mutex
			var causes []error
			h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(time.Second): // calling the PSP
				case <-r.Context().Done():
				}
				mu.Lock()
				causes = append(causes, context.Cause(r.Context()))
				mu.Unlock()
				if idem.LeaseLost(r.Context()) {
					http.Error(w, "lost", http.StatusServiceUnavailable)
					return
				}
				charges.Add(1)
				w.WriteHeader(http.StatusCreated)
			}))
			do := func() int { return postCharge(h).Code }
			var wg sync.WaitGroup
			var first int
			wg.Add(1)
			go func() { defer wg.Done(); first = do() }()
			time.Sleep(500 * time.Millisecond) // the client's retry, after the lease ran out
			down.Store(false)
			retry := do()
			wg.Wait()
			t.Logf("first %d, retry %d, charges %d, causes %v", first, retry, charges.Load(), causes)
			if !on {
				if charges.Load() != 2 {
					t.Fatalf("without the option: %d charges, want 2 (the behaviour the option exists for)", charges.Load())
				}
				return
			}
			if charges.Load() != 1 || retry != http.StatusCreated || first != http.StatusServiceUnavailable {
				t.Fatalf("first %d, retry %d, charges %d: want the first run cancelled, one charge", first, retry, charges.Load())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(causes) != 2 || !errors.Is(causes[0], idem.ErrLeaseLost) || causes[1] != nil {
				t.Fatalf("causes %v: want ErrLeaseLost for the first run, nil for the retry", causes)
			}
		})
	}
}

// Under failures: replay, a run cancelled by CancelOnLeaseLost (the
// store unreachable past the lease, nobody took the key over) that answers
// 503 as LeaseLost advises: is that 503 stored and replayed to every retry?
func TestLeaseLostUnderFailuresReplayFreesTheKey(t *testing.T) {
	e, p, down := partitionedEngine(t, idem.FailuresReplay, true, io.Discard)
	var runs atomic.Int32
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
		if idem.LeaseLost(r.Context()) {
			down.Store(false) // the store is back as the handler answers
			http.Error(w, "lost", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	first := postCharge(h)
	retry := postCharge(h)
	t.Logf("first %d %q; retry %d replayed=%q %q; runs %d", first.Code, first.Body, retry.Code, retry.Header().Get("Idempotent-Replayed"), retry.Body, runs.Load())
	if retry.Header().Get("Idempotent-Replayed") == "true" {
		t.Errorf("the cancelled run's 503 is replayed to the retry: the operation never ran, and the client takes a replay as final")
	}
	if first.Code != http.StatusServiceUnavailable || retry.Code != http.StatusCreated || runs.Load() != 2 {
		t.Errorf("first %d, retry %d, runs %d: want 503, then the retry running the operation (201)", first.Code, retry.Code, runs.Load())
	}
}

// lying pretends to extend the lease (the heartbeat "succeeds") while fake is
// set, so the store's lease runs out and a retry takes the key over; once
// fake is cleared the next heartbeat reaches the store and is fenced.
type lying struct {
	*memstore.Store
	fake  *atomic.Bool
	calls *atomic.Int32
}

func (l lying) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	l.calls.Add(1)
	if l.fake.Load() {
		return nil
	}
	return l.Store.ExtendLease(ctx, key, token, lease)
}

// The ErrFenced path of Options.CancelOnLeaseLost. The first run's
// heartbeat is fenced once a retry took the key over: its context ends with
// ErrFenced as the cause, its finish is fenced, and the retry's record (the
// takeover holder's) is what a third request replays.
func TestCancelOnLeaseLostFenced(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	p := mustCompile(t, idem.Spec{Operation: "charge", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
	var fake atomic.Bool
	var calls atomic.Int32
	fake.Store(true)
	var events sync.Map
	e := idem.New(lying{ms, &fake, &calls}, idem.Options{Principal: idem.Anonymous, CancelOnLeaseLost: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observer: idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
			n, _ := events.LoadOrStore(ev.Kind.String(), new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		})})
	var runs, charges atomic.Int32
	var mu sync.Mutex
	var causes []error
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			select {
			case <-time.After(3 * time.Second):
			case <-r.Context().Done():
			}
		}
		mu.Lock()
		causes = append(causes, context.Cause(r.Context()))
		mu.Unlock()
		if idem.LeaseLost(r.Context()) {
			http.Error(w, "lost", http.StatusServiceUnavailable)
			return
		}
		charges.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "charged")
	}))
	do := func() *httptest.ResponseRecorder { return postCharge(h) }
	var wg sync.WaitGroup
	var first *httptest.ResponseRecorder
	wg.Add(1)
	start := time.Now()
	go func() { defer wg.Done(); first = do() }()
	time.Sleep(450 * time.Millisecond) // the store's lease (300 ms) ran out; the heartbeats "succeeded"
	retry := do()
	fake.Store(false)
	wg.Wait()
	third := do()
	t.Logf("first %d %q after %v, retry %d, third %d replayed=%q %q, charges %d, heartbeats %d, causes %v",
		first.Code, first.Body, time.Since(start).Round(time.Millisecond), retry.Code, third.Code,
		third.Header().Get("Idempotent-Replayed"), third.Body, charges.Load(), calls.Load(), causes)
	events.Range(func(k, v any) bool { t.Logf("event %v: %d", k, v.(*atomic.Int32).Load()); return true })
	if retry.Code != http.StatusCreated || charges.Load() != 1 {
		t.Fatalf("retry %d, charges %d", retry.Code, charges.Load())
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("the first run was not cancelled")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(causes) != 2 || causes[0] != nil || !errors.Is(causes[1], idem.ErrFenced) {
		t.Fatalf("causes %v: want nil for the retry (it ran first to the end), ErrFenced for the first run", causes)
	}
	if third.Code != http.StatusCreated || third.Header().Get("Idempotent-Replayed") != "true" || third.Body.String() != "charged" {
		t.Fatalf("third: %d %q %q: want the takeover's 201 replayed", third.Code, third.Header(), third.Body)
	}
}

// CancelOnLeaseLost cancels the handler as its lease ends (the
// heartbeat's last attempt at the lease's end), not a third of a lease later.
func TestCancelOnLeaseLostTiming(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	const lease = 600 * time.Millisecond
	p := mustCompile(t, idem.Spec{Operation: "charge", Semantics: idem.Strict, InFlight: idem.InFlightSpec{Lease: lease}})
	var down atomic.Bool
	down.Store(true)
	e := idem.New(partitioned{ms, &down}, idem.Options{Principal: idem.Anonymous, CancelOnLeaseLost: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var took time.Duration
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		select {
		case <-time.After(3 * lease):
		case <-r.Context().Done():
		}
		took = time.Since(start)
	}))
	r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(httptest.NewRecorder(), r)
	t.Logf("cancelled after %v (lease %v)", took, lease)
	if took > lease+lease/12 {
		t.Fatalf("cancelled %v after the handler started, the lease being %v: a takeover could run meanwhile", took, lease)
	}
}

// Under CancelOnLeaseLost the handler's context is its own (a context per
// protected run): the run's end cancels it, with no cause of a lost lease,
// so what the handler started on it (a goroutine, a timer) stops with the
// request, as it would on the request's context.
func TestCancelOnLeaseLostEndCancels(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	defer ms.Close()
	p := mustCompile(t, idem.Spec{Operation: "charge", Semantics: idem.Strict})
	e := idem.New(ms, idem.Options{Principal: idem.Anonymous, CancelOnLeaseLost: true})
	var ctx context.Context
	h := e.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx = r.Context()
		if ctx.Err() != nil {
			t.Errorf("the handler's context ended as it started: %v", context.Cause(ctx))
		}
		w.WriteHeader(http.StatusCreated)
	}))
	r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated || r.Context().Err() != nil {
		t.Fatalf("%d; the request's context: %v", w.Code, r.Context().Err())
	}
	if ctx.Err() == nil {
		t.Fatalf("the handler's context is still live after the run ended")
	}
	if idem.LeaseLost(ctx) || !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Fatalf("cause %v: want context.Canceled, not a lost lease", context.Cause(ctx))
	}
}
