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
			ms := memstore.New(memstore.Options{})
			defer ms.Close()
			p := mustCompile(t, idem.Spec{Operation: "charge", Semantics: idem.Strict,
				InFlight: idem.InFlightSpec{Lease: 300 * time.Millisecond}})
			var down atomic.Bool
			down.Store(true)
			e := idem.New(partitioned{ms, &down}, idem.Options{Principal: idem.Anonymous, CancelOnLeaseLost: on,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
			do := func() int {
				r := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"amount":100}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", "k-1")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
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
