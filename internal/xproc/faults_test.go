package xproc

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// lease is the in-flight lease of the fault tests' servers: short, so that
// a claim left behind is taken over quickly.
const lease = time.Second

// storeTimeout is the servers' idem.Options.StoreTimeout in the fault tests.
const storeTimeout = time.Second

// failBound is how long a request may take while the store is down or hung:
// the store timeout and a generous margin for a loaded machine.
const failBound = storeTimeout + 4*time.Second

// TestStoreOutage stops the store under load, a private redis-server (killed)
// or PostgreSQL cluster (pg_ctl stop -m immediate; plain and transactional
// mode), and starts it again.
func TestStoreOutage(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		// Records survive the restart (appendfsync always), as on a durable
		// Redis; the test does not depend on it.
		srv := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
		cfg := config{store: "redis", storeURL: srv.URL, ns: "xproc:", effects: "memory",
			lease: lease, storeTimeout: storeTimeout}
		runFault(t, cfg, nil, "stopped", func() { srv.Stop() }, func() { require.NoError(t, srv.Start()) })
	})
	for _, mode := range []string{"pg", "pgtx"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv := testenv.StartPostgres(t)
			p, err := pgxpool.New(context.Background(), srv.URL)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			migrate(t, p, "xproc")
			cfg := config{store: mode, storeURL: srv.URL, ns: "xproc", effects: "memory",
				lease: lease, storeTimeout: storeTimeout}
			var eff effects
			if mode == "pgtx" {
				// The handler's write in the store's transaction.
				cfg.effects, eff = "pg", pgEffects{p: p, ns: "xproc"}
			}
			runFault(t, cfg, eff, "stopped", func() { require.NoError(t, srv.Stop()) }, func() { require.NoError(t, srv.Start()) })
		})
	}
}

// TestStoreHang puts a proxy between the servers and the store and freezes
// it: connections are accepted, nothing is forwarded, like a store that
// hangs. The shared servers stay undisturbed behind the proxy.
func TestStoreHang(t *testing.T) {
	for _, mode := range []string{"redis", "pg", "pgtx"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cfg, eff := backend(t, mode)
			px := startProxy(t, hostPort(t, cfg.storeURL))
			cfg.storeURL = replaceHost(t, cfg.storeURL, px.addr())
			if mode != "pgtx" {
				// (pgtx: the handler's write in the store's transaction, through the proxy.)
				cfg.effects, cfg.effectsURL, eff = "memory", "", nil
			}
			cfg.lease, cfg.storeTimeout = lease, storeTimeout
			runFault(t, cfg, eff, "hung", px.freeze, px.thaw)
		})
	}
}

func hostPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u.Host
}

func replaceHost(t *testing.T, raw, host string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	u.Host = host
	return u.String()
}

// outcome is one load request: its key and what the client saw.
type outcome struct {
	key string
	response
}

// load sends requests with fresh keys from a few workers, round-robin over
// the processes, until stopped.
type load struct {
	c       *cluster
	mu      sync.Mutex
	results []outcome
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startLoad(c *cluster, workers int) *load {
	l := &load{c: c, stop: make(chan struct{})}
	prefix := randomName("load-")
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				key := fmt.Sprintf("%s-%d-%d", prefix, w, n)
				r := c.send(context.Background(), c.procs[(w+n)%len(c.procs)], "/nowait", key, nil)
				l.mu.Lock()
				l.results = append(l.results, outcome{key, r})
				l.mu.Unlock()
				// Pace the load: a failing store answers fast.
				pause := 5 * time.Millisecond
				if r.status != 201 {
					pause = 25 * time.Millisecond
				}
				time.Sleep(pause)
			}
		}()
	}
	return l
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

func (l *load) snapshot() []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]outcome(nil), l.results...)
}

// waitUntil waits until cond holds for the results so far.
func (l *load) waitUntil(t *testing.T, what string, timeout time.Duration, cond func([]outcome) bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(l.snapshot()) {
		require.True(t, time.Now().Before(deadline), "waited %v for %s", timeout, what)
		time.Sleep(10 * time.Millisecond)
	}
	return time.Now()
}

// runFault runs load through two server processes, breaks the store with
// fail (stopped or hung), checks that requests fail closed and that no
// handler runs, then mends it and checks that service resumes.
//
// eff, when not nil, is where the handlers' side effects are (transactional
// mode: in the store's transaction), checked for the refused keys.
func runFault(t *testing.T, cfg config, eff effects, how string, fail, mend func()) {
	c := startCluster(t, cfg, 2)
	ctx := context.Background()
	l := startLoad(c, 4)
	defer func() {
		select {
		case <-l.stop:
		default:
			l.end()
		}
	}()
	created := func(since time.Time, n int) func([]outcome) bool {
		return func(rs []outcome) bool {
			run := 0 // the last n answers started after since are all 201
			for _, r := range rs {
				if r.start.Before(since) {
					continue
				}
				if r.status == 201 {
					run++
				} else {
					run = 0
				}
			}
			return run >= n
		}
	}
	l.waitUntil(t, "the first answers", 60*time.Second, created(time.Time{}, 20))

	// Requests in flight when the store fails: their handlers have made
	// their side effect (in transactional mode, in the transaction) and
	// wait; released once the store has failed, they finish into it.
	var inflight sync.WaitGroup
	inflightRes := make([]response, 4)
	inflightKeys := make([]string, len(inflightRes))
	for i := range inflightRes {
		key, res := c.hold(ctx, c.procs[i%2], "/nowait", "inflight-", "after")
		inflightKeys[i] = key
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			inflightRes[i] = <-res
		}()
	}

	// Handler starts per key, from before the failure to the end of the
	// outage: a handler may start in between only for a load request sent
	// before the store had failed, whose claim may have succeeded just
	// before (checked below, once the load has ended).
	keysFrom, _ := c.stats(ctx)
	failedAt := time.Now()
	fail()
	failDone := time.Now()
	for _, k := range inflightKeys {
		c.release(k)
	}
	released := time.Now()
	// The outage is on once requests fail; a request whose claim had
	// just succeeded may still be starting its handler.
	l.waitUntil(t, "a request to fail closed", 60*time.Second, func(rs []outcome) bool {
		for _, r := range rs {
			if r.start.After(failedAt) && r.status == 503 {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond)
	outageFrom := time.Now()
	time.Sleep(2 * time.Second)
	// The requests in flight end while the store is still down: their
	// Finish (or commit) is bounded by the store timeout.
	inflightDone := make(chan struct{})
	go func() { inflight.Wait(); close(inflightDone) }()
	select {
	case <-inflightDone:
	case <-time.After(60 * time.Second):
		t.Fatalf("the requests in flight when the store failed did not end while it was %s", how)
	}
	keysTo, _ := c.stats(ctx)
	outageTo := time.Now()

	mend()
	mendedAt := time.Now()
	// After PoolSize dials in a row have failed, go-redis refuses new
	// connections at once (with the last dial error) and probes the server
	// once a second until a probe succeeds: for up to about a second after
	// Redis is back, a request that needs a new connection is refused fast
	// (503, nothing executed) while those served by pooled connections
	// succeed. Such refusals are tolerated, within one probe interval and a
	// loaded machine's slack, and their keys retried below with the refused
	// ones. pgx has no such breaker.
	dialBreaker := func(r response) bool {
		return cfg.store == "redis" && r.status == 503 && r.problemCode() == idem.CodeStoreUnavailable &&
			r.start.Before(mendedAt.Add(2*time.Second))
	}
	recovered := l.waitUntil(t, "service to resume", 60*time.Second, created(mendedAt, 20))
	time.Sleep(500 * time.Millisecond)
	l.end()
	results := l.snapshot()

	// No handler may start while the store is down or hung, except for a
	// load request sent before the store had failed whose claim may have
	// succeeded just before: without transactions it was answered 201 (a
	// failed Finish leaves the client its answer); in transactional mode
	// the commit may have failed (503). Exact per key, however late a
	// loaded machine starts such a handler.
	sent := make(map[string]outcome, len(results))
	for _, r := range results {
		sent[r.key] = r
	}
	startedDuring := 0
	for key, n := range keysTo {
		if n == keysFrom[key] {
			continue
		}
		r, ok := sent[key]
		if ok && r.start.Before(failDone) && (r.status == 201 || cfg.store == "pgtx") {
			startedDuring++
			continue
		}
		assert.Fail(t, "a handler started while the store was "+how,
			"key %s: %d handler starts before the failure, %d at the end of the outage (its load request: %v, sent %v after the store had failed)",
			key, keysFrom[key], n, ok, r.start.Sub(failDone).Round(time.Millisecond))
	}

	// While the store was down: every answer fails closed, in bounded time.
	var during, maxDuring time.Duration
	var rejected []string       // refused with 503, inside the outage first
	inside := map[string]bool{} // refused wholly inside the outage
	var edge []string           // refused as the store failed or came back
	nDuring := 0
	for _, r := range results {
		if r.start.Before(outageFrom) || r.end.After(outageTo) {
			if r.status == 503 && r.problemCode() == idem.CodeStoreUnavailable {
				edge = append(edge, r.key)
			}
			continue
		}
		nDuring++
		d := r.end.Sub(r.start)
		during += d
		maxDuring = max(maxDuring, d)
		if assert.Equal(t, 503, r.status, "while the store is %s: %s", how, r.response) {
			rejected = append(rejected, r.key)
			inside[r.key] = true
			assert.Equal(t, "application/problem+json", r.ctype)
			assert.Equal(t, idem.CodeStoreUnavailable, r.problemCode())
			assert.Equal(t, "1", r.retryAfter)
		}
		assert.Less(t, d, failBound, "a request while the store is %s took %v", how, d)
	}
	require.Positive(t, nDuring, "no request ran entirely during the outage")
	rejected = append(rejected, edge...)

	// The requests in flight when the store failed ended in bounded time
	// (their Finish, or commit then release of the key, each bounded by the
	// store timeout). Without transactions the client has its answer (the
	// response was on its way); in transactional mode the response waits
	// for the commit, which failed: 503, nothing kept.
	var inflightMax time.Duration
	for _, r := range inflightRes {
		d := r.end.Sub(released)
		inflightMax = max(inflightMax, d)
		assert.Less(t, d, storeTimeout+failBound, "a request in flight when the store failed ended %v after its release", d)
		if cfg.store == "pgtx" {
			assert.Equal(t, 503, r.status, "a request in flight when the store failed: %s", r)
			assert.Equal(t, idem.CodeStoreUnavailable, r.problemCode())
		} else {
			assert.Equal(t, 201, r.status, "a request in flight when the store failed: %s", r)
		}
	}

	// After recovery: everything succeeds, except that on a loaded machine
	// the store may, now and then, answer slower than the engine's store
	// timeout: such a request fails closed (503 after the whole timeout,
	// never sooner) and is retried below with the refused ones. A few of
	// those are tolerated; a store that keeps failing, or a 503 that did
	// not wait for the store, is not.
	nAfter, slowAfter, breakerAfter := 0, 0, 0
	// toFront moves a key refused after recovery to the front of the keys
	// retried below. It is there already, with the refusals at the edges
	// of the outage (every 503 that ended after it): each key is retried
	// once, or its second retry would be a replay.
	toFront := func(key string) {
		rejected = append([]string{key}, slices.DeleteFunc(rejected, func(k string) bool { return k == key })...)
	}
	for _, r := range results {
		if !r.start.After(recovered) {
			continue
		}
		nAfter++
		if dialBreaker(r.response) && r.end.Sub(r.start) < storeTimeout {
			breakerAfter++
			toFront(r.key)
			t.Logf("%v after the store came back, the client's dial breaker refused a request (%v): %s", r.start.Sub(mendedAt).Round(time.Millisecond), r.end.Sub(r.start).Round(time.Millisecond), r.response)
			continue
		}
		if r.status == 503 && r.problemCode() == idem.CodeStoreUnavailable && r.end.Sub(r.start) >= storeTimeout {
			slowAfter++
			toFront(r.key)
			t.Logf("after the store came back, a store call outlived the store timeout (%v): %s", r.end.Sub(r.start).Round(time.Millisecond), r.response)
			continue
		}
		assert.Equal(t, 201, r.status, "after the store came back (%v): %s", r.end.Sub(r.start).Round(time.Millisecond), r.response)
	}
	assert.LessOrEqual(t, slowAfter, max(2, nAfter/10), "after the store came back, %d of %d requests timed out on the store", slowAfter, nAfter)

	// The keys refused while the store was down were never executed: their
	// retry runs the handler, once. (In transactional mode a request refused
	// as the store failed may have run its handler, whose transaction then
	// failed to commit: nothing of it was kept, and the retry runs it again,
	// so its side effect happens once.) A refusal after a timeout is ambiguous,
	// though: the claim may have reached the store after the engine gave up
	// on it (a hung store works off its backlog when it resumes). Such an
	// orphaned claim holds the key like a crashed holder's, until its lease
	// runs out: the retry gets 409 IDEMPOTENCY_KEY_IN_USE meanwhile, then
	// takes the key over. Either way, the handler runs once.
	//
	// In transactional mode, a request refused as the store failed or came
	// back may have run its handler: its commit failed (nothing was kept,
	// and the retry runs it again), or the store failed during the COMMIT
	// itself, which may have taken effect after all (the retry replays it).
	//
	// The retries meet a store that came back, but on a loaded machine it
	// may still answer slower than the store timeout now and then, as for
	// the requests after recovery above: such a retry fails closed (503
	// after the whole timeout) and is sent again, as a client would. Without
	// transactions the refused attempt ran no handler (a Finish that times
	// out leaves the client its answer). In transactional mode its commit
	// may have timed out after the handler ran: rolled back, or committed
	// late (the next attempt replays). For those keys the handler runs are
	// not known; their side effect, in the transaction, still happens once.
	slowRetries, breakerRetries := 0, 0
	ambiguous := map[string]bool{} // transactional: a retry was refused after the store timeout
	retry := func(p *proc, key string) (response, int) {
		inUse := 0
		for slow := 0; ; slow++ {
			r, n := c.sendUntilDone(ctx, p, "/nowait", key, nil)
			inUse += n
			if slow < 5 && dialBreaker(r) && r.end.Sub(r.start) < storeTimeout {
				breakerRetries++
				t.Logf("a retry of %s was refused by the client's dial breaker: %s", key, r)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			if slow >= 5 || r.status != 503 || r.problemCode() != idem.CodeStoreUnavailable || r.end.Sub(r.start) < storeTimeout {
				return r, inUse
			}
			slowRetries++
			if cfg.store == "pgtx" {
				ambiguous[key] = true
			}
			t.Logf("a retry of %s outlived the store timeout (%v): %s", key, r.end.Sub(r.start).Round(time.Millisecond), r)
		}
	}
	retried, orphans, rolledBack, committed := 0, 0, 0, 0
	for i, key := range rejected {
		if i >= 50 {
			break
		}
		r, inUse := retry(c.procs[i%2], key)
		if inUse > 0 {
			orphans++
		}
		if assert.Equal(t, 201, r.status, "the retry of a refused request: %s", r) && r.replayed {
			committed++
			assert.True(t, cfg.store == "pgtx" && (!inside[key] || ambiguous[key]),
				"the retry of a request refused while the store was %s is a replay: %s", how, r)
		}
		retried++
	}
	keys, _ := c.stats(ctx)
	for _, key := range rejected[:retried] {
		if ambiguous[key] {
			assert.Positive(t, keys[key], "key %s: handler runs", key)
		} else if inside[key] || cfg.store != "pgtx" {
			assert.Equal(t, 1, keys[key], "key %s refused during the outage: handler runs", key)
		} else if keys[key] == 2 {
			rolledBack++
		} else {
			assert.Equal(t, 1, keys[key], "key %s refused as the store failed: handler runs", key)
		}
	}
	// The requests in flight when the store failed ran their handler, but
	// their record could not be finished: it stays PENDING until its lease
	// runs out, and a retry then executes again. Without transactions that
	// is a second execution (the first one's client had its answer, so only
	// a client that lost it retries); in transactional mode the first
	// execution's commit failed and nothing of it was kept.
	//
	// Unless the finish reached the store after all: a hung store works off
	// its backlog when it resumes, and a Finish (or a COMMIT) the engine had
	// given up on may take effect then; and the engine tries a failed Finish
	// again in the background for a lease (Options.FinishRetryFor), which
	// succeeds if the store is back by then. The retry then gets the replay.
	lateFinish := 0
	inflightReplayed := map[string]bool{}
	for i, key := range inflightKeys {
		r, _ := retry(c.procs[i%2], key)
		assert.Equal(t, 201, r.status, "the retry of a request in flight when the store failed: %s", r)
		if r.replayed {
			lateFinish++
			inflightReplayed[key] = true
		}
	}
	keys, _ = c.stats(ctx)
	for _, key := range inflightKeys {
		want := 2
		if inflightReplayed[key] {
			want = 1
		}
		if ambiguous[key] {
			assert.GreaterOrEqual(t, keys[key], 1, "key %s: handler runs", key)
			continue
		}
		assert.Equal(t, want, keys[key], "key %s, in flight when the store failed, then retried (replayed: %v): handler runs", key, inflightReplayed[key])
	}
	// A few slow refusals are tolerated, as after recovery above; a store
	// that keeps failing the retries is not.
	assert.LessOrEqual(t, slowRetries, max(2, (retried+len(inflightKeys))/10), "retries refused after the store timeout")
	if eff != nil {
		got := eff.pids(ctx, t)
		for _, key := range append(rejected[:retried], inflightKeys...) {
			assert.Len(t, got[key], 1, "key %s: side effects", key)
		}
	}
	t.Logf("store %s for %v (%d requests wholly inside, all 503 in %v on average, at most %v; handlers started after the failure only for %d requests sent before it); "+
		"service resumed %v after the store came back; %d requests after (%d refused by the client's dial breaker); %d refused keys retried, each executed once (%d claimed late by the store: 409 until their lease ran out; %d had run with a commit that failed; %d had committed after all; %d retries refused after the store timeout, sent again; %d refused by the dial breaker, sent again); "+
		"%d requests in flight at the failure ended within %v, retried: %d replayed (their finish reached the store late), the others executed again",
		how, outageTo.Sub(outageFrom).Round(time.Millisecond), nDuring, (during / time.Duration(max(nDuring, 1))).Round(time.Millisecond),
		maxDuring.Round(time.Millisecond), startedDuring, recovered.Sub(mendedAt).Round(time.Millisecond), nAfter, breakerAfter, retried, orphans, rolledBack, committed, slowRetries, breakerRetries, len(inflightKeys), inflightMax.Round(time.Millisecond), lateFinish)
}
