package idem_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// txExtendFails is fakeTx whose ExtendLease fails with err.
type txExtendFails struct {
	*fakeTx
	err     error
	extends atomic.Int32
}

func (s *txExtendFails) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	s.extends.Add(1)
	return s.err
}

// A transactional handler whose claim is lost while it runs (a heartbeat
// fenced: the key taken over; or heartbeats failing until the lease ran
// out: the store unreachable) has its transaction's context cancelled,
// with ErrFenced or ErrLeaseLost as the cause: nothing it writes there can
// commit as its claim's, and a store call that hangs (a blackholed
// connection) no longer holds the request and its pooled connection until
// the client gives up. The heartbeats run on the test's clock.
func TestTxCancelledWhenLeaseLost(t *testing.T) {
	const lease = 240 * time.Millisecond
	for _, tc := range []struct {
		name    string
		err     error
		cause   error
		code    int // what the client is sent
		handler int // what the handler answers once its context ended
	}{
		{"fenced", idem.ErrFenced, idem.ErrFenced, 409, 201},
		{"fenced, the handler fails", idem.ErrFenced, idem.ErrFenced, 409, 500},
		{"store unreachable past the lease", errStoreDown, idem.ErrLeaseLost, 503, 201},
		{"store unreachable past the lease, the handler fails", errStoreDown, idem.ErrLeaseLost, 503, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			defer ms.Close()
			s := &txExtendFails{fakeTx: &fakeTx{Store: ms}, err: tc.err}
			eng := idem.New(s, idem.Options{Transactional: true, Principal: idem.Anonymous, Logger: discardLogger})
			clk := idem.SetHeartbeatClock(eng)
			grant := clk.Now()
			pol := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict, Window: time.Hour,
				InFlight: idem.InFlightSpec{Lease: lease}})
			started := make(chan struct{})
			cause := make(chan error, 1)
			var hctx context.Context // the handler's, read after started
			h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hctx = r.Context()
				close(started)
				select {
				case <-r.Context().Done(): // a store call on the transaction, blackholed
					cause <- context.Cause(r.Context())
				case <-time.After(5 * time.Second):
					cause <- nil
				}
				w.WriteHeader(tc.handler) // 500: its write on the transaction failed
			}))
			done := make(chan int, 1)
			go func() { done <- send(h, req{target: "/op", key: "k1", body: `{"a":1}`}).Code }()
			<-started
			clk.Advance(lease / 6) // the scheduler arms the heartbeat
			for n := 0; ; n++ {
				require.Less(t, n, 20, "the transaction was not cancelled after %d heartbeats", n)
				at, ok := clk.FireNext(2 * time.Second)
				require.True(t, ok, "no heartbeat armed, and the transaction not cancelled")
				// The heartbeat that cancels runs within FireNext: no wait.
				if hctx.Err() == nil {
					continue
				}
				select {
				case err := <-cause:
					require.ErrorIs(t, err, tc.cause)
					if tc.cause == idem.ErrLeaseLost {
						assert.GreaterOrEqual(t, at, grant+lease, "not before the lease's end")
						assert.LessOrEqual(t, at, grant+lease, "at the lease's end")
					}
					assert.Equal(t, tc.code, <-done, "nothing committed")
					s.mu.Lock()
					assert.Zero(t, s.commits)
					s.mu.Unlock()
					return
				case <-time.After(5 * time.Second):
					t.Fatal("the handler did not see its context end")
				}
			}
		})
	}
}

// txLockHeld is txExtendFails whose transactions say whether they hold
// the record's lock (idem.TxLockHolder).
type txLockHeld struct {
	*txExtendFails
	held  atomic.Bool
	asked atomic.Int32
}

func (s *txLockHeld) TxHoldsLock(key string, token idem.Token) bool {
	s.asked.Add(1)
	return s.held.Load()
}

// A transactional holder whose heartbeats fail past its lease's end (a
// starved pool: the heartbeat gets no connection) is not cancelled while
// its store says the transaction holds the record's lock (TxLockHolder:
// pgstore above READ COMMITTED), which keeps every takeover out: it
// commits. Once the store says the lock is gone, the next heartbeat that
// fails cancels it (ErrLeaseLost), and one fenced cancels it whatever the
// lock (TestTxCancelledWhenLeaseLost). Before TxLockHolder, it was
// cancelled as the lease ended and answered 503 (held case).
func TestTxNotCancelledWhileLockHeld(t *testing.T) {
	const lease = 240 * time.Millisecond
	for _, lost := range []bool{false, true} {
		name := "held"
		if lost {
			name = "lock lost after the lease's end"
		}
		t.Run(name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			defer ms.Close()
			s := &txLockHeld{txExtendFails: &txExtendFails{fakeTx: &fakeTx{Store: ms}, err: errStoreDown}}
			s.held.Store(true)
			eng := idem.New(s, idem.Options{Transactional: true, Principal: idem.Anonymous, Logger: discardLogger})
			clk := idem.SetHeartbeatClock(eng)
			grant := clk.Now()
			pol := idem.MustCompile(idem.Spec{Operation: "op", Semantics: idem.Strict, Window: time.Hour,
				InFlight: idem.InFlightSpec{Lease: lease}})
			started, finish := make(chan struct{}), make(chan struct{})
			cause := make(chan error, 1)
			var hctx context.Context // the handler's, read after started
			h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hctx = r.Context()
				close(started)
				select {
				case <-r.Context().Done():
					cause <- context.Cause(r.Context())
					w.WriteHeader(500)
				case <-finish:
					cause <- nil
					w.WriteHeader(201)
				}
			}))
			done := make(chan int, 1)
			go func() { done <- send(h, req{target: "/op", key: "k1", body: `{"a":1}`}).Code }()
			<-started
			clk.Advance(lease / 6) // the scheduler arms the heartbeat
			// Heartbeats fail (errStoreDown) until three leases have passed.
			for {
				at, ok := clk.FireNext(2 * time.Second)
				require.True(t, ok, "the heartbeats stopped")
				require.NoError(t, hctx.Err(), "cancelled at %v after the grant (lease %v) although the lock is held", at-grant, lease)
				if at >= grant+3*lease {
					break
				}
			}
			assert.Greater(t, s.asked.Load(), int32(0), "the engine asked the store")
			assert.GreaterOrEqual(t, s.extends.Load(), int32(9), "the heartbeats went on (every third of the lease)")
			if !lost {
				close(finish)
				require.NoError(t, <-cause)
				assert.Equal(t, 201, <-done, "the transaction commits")
				s.mu.Lock()
				assert.Equal(t, 1, s.commits)
				s.mu.Unlock()
				return
			}
			s.held.Store(false)
			_, ok := clk.FireNext(2 * time.Second)
			require.True(t, ok, "the heartbeats stopped")
			require.Error(t, hctx.Err(), "the next failed heartbeat, the lock gone, cancels")
			require.ErrorIs(t, <-cause, idem.ErrLeaseLost)
			assert.Equal(t, 503, <-done, "nothing committed")
			s.mu.Lock()
			assert.Zero(t, s.commits)
			s.mu.Unlock()
		})
	}
}
