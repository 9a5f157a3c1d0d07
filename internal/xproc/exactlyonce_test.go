package xproc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestExactlyOnceAcrossProcesses runs three server processes on one shared
// store, for each store: Redis, PostgreSQL, and PostgreSQL in transactional
// mode (the handler's own write in the store's transaction).
func TestExactlyOnceAcrossProcesses(t *testing.T) {
	for _, mode := range []string{"redis", "pg", "pgtx"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cfg, eff := backend(t, mode)
			// The default lease (30s), so that a live holder on a loaded
			// machine is not taken over (with a 1s lease it happened once in
			// transactional mode: its heartbeats did not land in time, and
			// its commit was fenced). The crash tests use /short.
			cfg.lease = idem.DefaultLease
			// A store timeout well above the default 5s but below the
			// lease: on a loaded machine a store call (a connection being
			// dialled into the pool) took 6.5s; a Finish that times out
			// leaves its record PENDING until the lease runs out, and a
			// duplicate then takes it over and runs the handler again, as
			// docs/runtime.md says it may. Below the lease, a slow Finish
			// still lands before anyone can take the key over.
			cfg.storeTimeout = 20 * time.Second
			c := startCluster(t, cfg, 3)
			t.Run("Duplicates", func(t *testing.T) { testDuplicates(t, c, eff) })
			for _, hold := range []string{"before", "after"} {
				t.Run("Crash/"+hold+"Effect", func(t *testing.T) { testCrash(t, c, eff, mode, hold) })
			}
			t.Run("Pause", func(t *testing.T) { testPause(t, c, eff, mode) })
		})
	}
}

// TestMemstoreIsPerProcess is the negative control of the harness: with the
// in-memory store, each process keeps its own records, so duplicates sent to
// different processes each execute. (memstore is for one process.)
func TestMemstoreIsPerProcess(t *testing.T) {
	t.Parallel()
	const keys = 20
	c := startCluster(t, config{store: "mem", effects: "memory", lease: lease}, 3)
	ctx := context.Background()
	prefix := randomName("mem-") + "-"
	var wg sync.WaitGroup
	for i := range keys {
		for _, p := range c.procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := c.send(ctx, p, "/wait", fmt.Sprintf("%s%02d", prefix, i), nil)
				assert.Equal(t, 201, r.status, "%s", r)
				assert.False(t, r.replayed, "every process executes")
			}()
		}
	}
	wg.Wait()
	starts, _ := c.stats(ctx)
	for i := range keys {
		assert.Equal(t, len(c.procs), starts[fmt.Sprintf("%s%02d", prefix, i)], "each process ran the handler once")
	}
}

// sendUntilDone sends a request and, while the answer is 409
// IDEMPOTENCY_KEY_IN_USE (a duplicate of a request in flight), sends it
// again after a short pause, as a client following Retry-After would (faster:
// this is a test). It returns the final answer and the number of 409s.
func (c *cluster) sendUntilDone(ctx context.Context, p *proc, route, key string, header map[string]string) (response, int) {
	deadline := time.Now().Add(90 * time.Second)
	for n := 0; ; n++ {
		r := c.send(ctx, p, route, key, header)
		if r.status != 409 || r.problemCode() != idem.CodeKeyInUse || time.Now().After(deadline) {
			return r, n
		}
		if r.retryAfter == "" {
			return r, n // a 409 without Retry-After is an error the caller reports
		}
		time.Sleep(time.Duration(10+rand.IntN(30)) * time.Millisecond)
	}
}

// testDuplicates: 200 keys, five concurrent duplicates of each spread over
// the processes (each duplicate to another process than the one before);
// half the keys on a route where duplicates wait for the first request, half
// where they get 409 and retry. The side effect must happen once per key.
func testDuplicates(t *testing.T, c *cluster, eff effects) {
	const keys, dups, wave = 200, 5, 25
	ctx := context.Background()
	prefix := randomName("dup-") + "-"
	// The handler takes a little while, so that duplicates find it in flight.
	slow := map[string]string{"X-Delay": "20ms"}
	results := make([][]response, keys)
	inUse := make([][]int, keys)
	start := time.Now()
	for w := 0; w < keys; w += wave {
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := w; i < min(w+wave, keys); i++ {
			results[i], inUse[i] = make([]response, dups), make([]int, dups)
			route := "/wait"
			if i%2 == 1 {
				route = "/nowait"
			}
			key := fmt.Sprintf("%s%03d", prefix, i)
			for j := range dups {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					results[i][j], inUse[i][j] = c.sendUntilDone(ctx, c.procs[(i+j)%len(c.procs)], route, key, slow)
				}()
			}
		}
		close(gate)
		wg.Wait()
	}
	took := time.Since(start)

	executedBy := map[int]int{}      // pid -> keys
	answer := make([]response, keys) // per key, the first 201
	var replays, retries409 int
	for i := range keys {
		key := fmt.Sprintf("%s%03d", prefix, i)
		originals := 0
		first := -1 // the first duplicate answered 201: the others get its answer
		for j, r := range results[i] {
			retries409 += inUse[i][j]
			if !assert.Equal(t, 201, r.status, "key %s duplicate %d: %s", key, j, r) {
				continue
			}
			if first < 0 {
				first, answer[i] = j, r
			}
			assert.Equal(t, string(results[i][first].body), string(r.body),
				"key %s: every duplicate gets the same answer: duplicate %d got %s (after %d answers 409 IN_USE); duplicate %d got %s (after %d)",
				key, first, results[i][first], inUse[i][first], j, r, inUse[i][j])
			if r.replayed {
				replays++
			} else {
				originals++
				executedBy[r.pid()]++
			}
		}
		assert.Equal(t, 1, originals, "key %s: exactly one answer is not a replay:\n%s", key, describe(results[i], inUse[i]))
	}

	got := eff.pids(ctx, t)
	total := 0
	for i := range keys {
		key := fmt.Sprintf("%s%03d", prefix, i)
		pids := got[key]
		total += len(pids)
		assert.Len(t, pids, 1, "key %s: side effects by pids %v", key, pids)
		if len(pids) == 1 {
			assert.Equal(t, answer[i].pid(), pids[0], "key %s: the side effect was made by the process whose answer everyone got: %s", key, answer[i])
		}
	}
	assert.Equal(t, keys, total, "side effects in all")
	starts, _ := c.stats(ctx)
	handlerRuns := 0
	for i := range keys {
		handlerRuns += starts[fmt.Sprintf("%s%03d", prefix, i)]
	}
	assert.Equal(t, keys, handlerRuns, "handler runs over all processes")
	if t.Failed() {
		// The servers log store failures and takeovers (Warn and up).
		for _, p := range c.procs {
			t.Logf("%s (pid %d) log:\n%s", p.name, p.pid, p.log())
		}
	}
	t.Logf("%d keys x %d duplicates over %d processes in %v: %d side effects, %d handler runs, %d replays, %d answers 409 IN_USE retried; executions per process %v",
		keys, dups, len(c.procs), took.Round(time.Millisecond), total, handlerRuns, replays, retries409, executedBy)
}

// describe lists the answers the duplicates of one key got, one a line.
func describe(rs []response, inUse []int) string {
	var b strings.Builder
	for j, r := range rs {
		fmt.Fprintf(&b, "\tduplicate %d (after %d answers 409 IN_USE): %s\n", j, inUse[j], r)
	}
	return b.String()
}

// testCrash: a process is killed (SIGKILL) while its handler runs, before or
// after the handler's side effect. The client's retry, sent to another
// process, waits until the dead holder's lease runs out, takes the key over
// and executes.
//
// What the side effect count then is depends on where the kill landed and on
// the mode:
//   - killed before the side effect: exactly once, in every mode;
//   - killed after the side effect, but before the record was finished: with
//     Redis or plain PostgreSQL the side effect already happened out of band
//     of the record store, and the retry executes again: twice (at least
//     once). Only the transactional mode closes this window: the handler's
//     write was in the killed process's transaction, which never committed,
//     so exactly once.
func testCrash(t *testing.T, c *cluster, eff effects, mode, hold string) {
	ctx := context.Background()
	victim, heir, other := c.procs[0], c.procs[1], c.procs[2]
	key, held := c.hold(ctx, victim, "/short", "crash-"+hold+"-", hold)
	killed := time.Now()
	victim.kill()
	r := <-held
	require.Error(t, r.err, "the killed process's client gets no answer: %s", r)

	retry := c.send(ctx, heir, "/short", key, nil)
	took := time.Since(killed)
	require.Equal(t, 201, retry.status, "the retry: %s", retry)
	assert.False(t, retry.replayed, "the retry executes")
	assert.Equal(t, heir.pid, retry.pid(), "the retry is served by the other process")
	dup := c.send(ctx, other, "/short", key, nil)
	require.Equal(t, 201, dup.status, "a later duplicate: %s", dup)
	assert.True(t, dup.replayed, "a later duplicate is a replay")
	assert.Equal(t, string(retry.body), string(dup.body))

	pids := eff.pids(ctx, t)[key]
	switch {
	case hold == "before":
		assert.Equal(t, []int{heir.pid}, pids, "killed before the side effect: exactly once")
	case mode == "pgtx":
		assert.Equal(t, []int{heir.pid}, pids, "transactional: the killed holder's write never committed")
	default:
		assert.Equal(t, []int{victim.pid, heir.pid}, pids,
			"killed after an out-of-band side effect, before Finish: the retry executes again (at least once)")
	}
	t.Logf("killed %s (pid %d) holding %s %s its side effect; retry served by pid %d %v after the kill (lease %v); side effects by %v",
		victim.name, victim.pid, key, hold, heir.pid, took.Round(time.Millisecond), shortLease, pids)
	c.replace(0)
}

// testPause: a process stalls (SIGSTOP: a long GC pause, a frozen VM) while
// its handler runs, before its side effect, longer than its lease. Another
// process takes the key over and completes it; then the stalled process
// resumes and finishes its handler. Its completion is fenced, so the record
// keeps the other process's answer. In transactional mode its side effect,
// made in its transaction, is rolled back with the fenced commit (its client
// gets 409 IDEMPOTENCY_KEY_IN_USE, and a retry gets the other's answer):
// exactly once. Otherwise its side effect happens, a second time: the lease
// bounds how long a holder is trusted, not how long it runs.
func testPause(t *testing.T, c *cluster, eff effects, mode string) {
	ctx := context.Background()
	holder, heir, other := c.procs[0], c.procs[1], c.procs[2]
	key, held := c.hold(ctx, holder, "/short", "pause-", "before")
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGSTOP))
	paused := time.Now()
	retry := c.send(ctx, heir, "/short", key, nil)
	took := time.Since(paused)
	c.release(key)
	require.NoError(t, holder.cmd.Process.Signal(syscall.SIGCONT))
	require.Equal(t, 201, retry.status, "the retry: %s", retry)
	assert.False(t, retry.replayed)
	assert.Equal(t, heir.pid, retry.pid())

	late := <-held
	require.NoError(t, late.err)
	pids := eff.pids(ctx, t)[key]
	if mode == "pgtx" {
		assert.Equal(t, 409, late.status, "the stalled holder's fenced commit: %s", late)
		assert.Equal(t, idem.CodeKeyInUse, late.problemCode())
		assert.Equal(t, []int{heir.pid}, pids, "transactional: the fenced holder's write was rolled back")
	} else {
		assert.Equal(t, 201, late.status, "the stalled holder's client gets its own answer: %s", late)
		assert.Equal(t, holder.pid, late.pid())
		assert.Equal(t, []int{heir.pid, holder.pid}, pids,
			"an out-of-band side effect of a holder stalled past its lease happens again")
	}
	dup := c.send(ctx, other, "/short", key, nil)
	require.Equal(t, 201, dup.status, "%s", dup)
	assert.True(t, dup.replayed)
	assert.Equal(t, string(retry.body), string(dup.body), "the late completion never overwrote the record")
	assert.Eventually(t, func() bool { return strings.Contains(holder.log(), "late completion rejected") },
		10*time.Second, 20*time.Millisecond, "the stalled holder logs its fenced completion; its log:\n%s", holder.log())
	t.Logf("paused pid %d holding %s; takeover by pid %d %v after the pause; the late holder got %d; side effects by %v",
		holder.pid, key, heir.pid, took.Round(time.Millisecond), late.status, pids)
}
