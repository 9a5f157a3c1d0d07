package clientapi_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// lossy is 30% of mixed faults: resets before the server, responses lost
// or cut after it, 503s and 409s in flight with Retry-After.
var lossy = faultnet.Rates{Reset: 0.08, Drop: 0.08, Truncate: 0.04, Unavailable: 0.05, InFlight: 0.05, RetryAfter: "1"}

// callDeadline bounds each helper call, on the caller's virtual clock: short
// enough that some calls stop at it.
const callDeadline = 3 * time.Second

type lossyRun struct {
	calls, workers int
	// client returns worker w's client (each worker has its own virtual
	// clock and jitter source, so its calls are deterministic).
	client func(t *testing.T, w int) *client
	// exact: the fault plan sees every attempt the Doer makes (in process),
	// so the run is the same each time and the counts below are exact.
	exact bool
}

type lossyStats struct {
	errs     map[string]int // by kind of clear error
	resumes  int
	attempts int
}

// runLossy makes calls logical calls (every operation in turn, each with
// its own key) on workers goroutines over a lossy network. A call that
// ends in an error is resumed with its key, as a caller that persisted the
// key would, until it succeeds. Every helper call must end with a response
// or a clear error, within its deadline; every operation must run exactly
// once per key, and the caller must get the first response.
func runLossy(t *testing.T, e *env, r lossyRun) lossyStats {
	type call struct {
		op  op
		key string
	}
	calls := make([]call, r.calls)
	for i := range calls {
		o := ops[i%len(ops)]
		v := byte(7)
		if o.name == "createPayment" {
			v = 4
		}
		calls[i] = call{o, testKey(fmt.Sprintf("lossy-%d", i), v)}
	}
	var (
		mu    sync.Mutex
		stats = lossyStats{errs: map[string]int{}}
		wg    sync.WaitGroup
	)
	for w := range r.workers {
		c := r.client(t, w)
		wg.Go(func() {
			for i := w; i < len(calls); i += r.workers {
				cl := calls[i]
				for try := 0; ; try++ {
					if !assert.Less(t, try, 8, "%s %s never succeeded", cl.op.name, cl.key) {
						return
					}
					start := c.clock.Now()
					ctx, cancel := context.WithDeadline(context.Background(), start.Add(callDeadline))
					res := cl.op.call(ctx, c, idemclient.WithKey(cl.key))
					cancel()
					assert.LessOrEqual(t, c.clock.Now().Sub(start), callDeadline, "%s %s: past its deadline", cl.op.name, cl.key)
					assert.Equal(t, cl.key, res.key)
					if res.err == nil {
						assert.Less(t, res.resp.StatusCode, 300)
						assert.Equal(t, string(e.rec.First(cl.key)), string(res.body), "%s %s: not the first response", cl.op.name, cl.key)
						break
					}
					kind := clearError(res.err)
					assert.NotEmpty(t, kind, "%s %s: not a clear error: %v", cl.op.name, cl.key, res.err)
					mu.Lock()
					stats.errs[kind]++
					stats.resumes++
					mu.Unlock()
				}
			}
			mu.Lock()
			stats.attempts += c.AttemptCount()
			mu.Unlock()
		})
	}
	wg.Wait()

	total := 0
	for _, cl := range calls {
		n := e.shop.Executions(cl.op.name, cl.key)
		assert.Equal(t, 1, n, "%s %s ran %d times", cl.op.name, cl.key, n)
		total += n
		if r.exact {
			sameBytes(t, e.rec, cl.key)
		}
	}
	assert.Equal(t, r.calls, total, "executions = successful distinct calls")
	assert.Equal(t, r.calls, e.shop.Total(), "nothing ran without a key or twice")
	return stats
}

// clearError names the kind of a helper's error, "" when it is not one
// the documentation promises.
func clearError(err error) string {
	var pe *idemclient.ProblemError
	if errors.As(err, &pe) {
		return pe.Code
	}
	var ie *idemclient.Error
	if !errors.As(err, &ie) || ie.Key == "" || ie.Attempts == 0 {
		return ""
	}
	for _, reason := range []error{idemclient.ErrAttemptsExhausted, idemclient.ErrNoTimeLeft, idemclient.ErrRetryAfterTooLong, idemclient.ErrNotRetryable} {
		if errors.Is(ie.Reason, reason) {
			return reason.Error()
		}
	}
	return ""
}

// 300 calls on 24 goroutines through faultnet's in-process transport, with
// faults drawn per key and attempt from a fixed seed: the run is the same
// every time (it is made twice, on two servers, and compared).
func TestLossyNetwork(t *testing.T) {
	run := func() (faultnet.Stats, lossyStats) {
		e := newEnv(t)
		hc, ft := transportClient(e.srv, faultnet.RandomPerKey(20250301, lossy, requestKey))
		stats := runLossy(t, e, lossyRun{calls: 300, workers: 24, exact: true, client: func(t *testing.T, w int) *client {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			return newClient(t, e.srv.URL, hc, idemclient.WithRandom(rnd.Float64))
		}})
		return ft.Stats(), stats
	}
	s, stats := run()
	t.Logf("%d requests, %d faults (reset %d, drop %d, truncate %d, 503 %d, 409 %d), %d attempts, %d resumed calls: %v",
		s.Requests, s.Requests-s.Count(faultnet.Pass), s.Count(faultnet.Reset), s.Count(faultnet.Drop), s.Count(faultnet.Truncate),
		s.Count(faultnet.Unavailable), s.Count(faultnet.InFlight), stats.attempts, stats.resumes, stats.errs)
	assert.Equal(t, s.Requests, stats.attempts, "every attempt went through the fault injector once")
	faults := float64(s.Requests-s.Count(faultnet.Pass)) / float64(s.Requests)
	assert.InDelta(t, 0.30, faults, 0.06, "the network was as lossy as planned")
	assert.Positive(t, s.Count(faultnet.Drop), "some responses were lost after the server ran the operation")
	assert.Positive(t, stats.resumes, "some calls needed their caller to resume them")

	s2, stats2 := run()
	assert.Equal(t, s, s2, "the same faults")
	assert.Equal(t, stats, stats2, "the same outcomes")
}

// The same over real TCP through faultnet's proxy (resets are real), with
// keep-alive connections: net/http may then replay a request carrying
// Idempotency-Key on its own after a reset, which the server must absorb
// too. Faults depend on arrival order, so only the invariants are checked.
func TestLossyNetworkTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("real TCP resets; run without -short")
	}
	e := newEnv(t)
	url, p := proxyURL(t, e.srv, faultnet.RandomPerKey(7, lossy, requestKey))
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	t.Cleanup(hc.CloseIdleConnections)
	stats := runLossy(t, e, lossyRun{calls: 96, workers: 12, client: func(t *testing.T, w int) *client {
		rnd := rand.New(rand.NewPCG(uint64(w), 11))
		return newClient(t, url, hc, idemclient.WithRandom(rnd.Float64))
	}})
	s := p.Stats()
	t.Logf("%d requests through the proxy (reset %d, drop %d, truncate %d), %d attempts, %d resumed calls: %v",
		s.Requests, s.Count(faultnet.Reset), s.Count(faultnet.Drop), s.Count(faultnet.Truncate), stats.attempts, stats.resumes, stats.errs)
	require.Positive(t, s.Count(faultnet.Drop)+s.Count(faultnet.Reset))
}
