package idem_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A Drain whose context ends before the store answers gives up on the
// retries under way: each Finish of a handler that ran is reported as
// EventFinishAbandoned (so executed + fenced + finish-abandoned still
// counts every run), each claim release as EventReleaseAbandoned, one
// ERROR gives the counts, and the error says how many (matching the
// context's error). Those retries stop: a store back afterwards gets no
// attempt, and nothing is reported twice.
func TestDrainGivesUp(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	hs := &outageBeginStore{Store: claimsAnyway{Store: ms}}
	hs.failFinish.Store(true)
	logs := &lockedBuffer{}
	f := newFixtureStore(t, ms, hs, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true, FinishRetryFor: time.Hour,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	idem.SetLateBackoff(f.eng, time.Hour, time.Hour) // only a Drain wakes them
	spec := strictSpec()
	spec.InFlight.Lease = time.Hour
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	require.Equal(t, 201, send(h, req{key: "ran", body: `{"item":1}`}).Code) // its Finish fails
	sendCtx(h, endedCtx(false), req{key: "claimed", body: `{"item":1}`})     // its claim's release fails
	require.Equal(t, int64(1), hs.finishes.Load(), "the release waits out its first pause")

	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	err := f.eng.Drain(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var de *idem.DrainError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Finishes)
	assert.Equal(t, 1, de.Releases)
	assert.Contains(t, err.Error(), "1 finishes")
	assert.Regexp(t, `level=ERROR msg="idem: Drain gave up.*finishes=1 releases=1`, logs.String())

	ab, ok := f.obs.find(idem.EventFinishAbandoned)
	require.True(t, ok, "the pending finish is reported abandoned")
	assert.Equal(t, "ran", ab.Key)
	assert.Equal(t, idem.StateCompleted, ab.State)
	assert.Equal(t, 201, ab.Status)
	assert.ErrorIs(t, ab.Err, context.DeadlineExceeded)
	rel, ok := f.obs.find(idem.EventReleaseAbandoned)
	require.True(t, ok, "the pending release is reported abandoned")
	assert.Equal(t, "claimed", rel.Key)
	assert.Equal(t, "release-abandoned", idem.EventReleaseAbandoned.String())

	hs.failFinish.Store(false)
	drain(t, f.eng, "the retries Drain gave up on have stopped")
	n := hs.finishes.Load()
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, n, hs.finishes.Load(), "no attempt after Drain gave up")
	assert.Equal(t, 1, f.obs.count(idem.EventFinishAbandoned), "reported once")
	assert.Equal(t, 1, f.obs.count(idem.EventReleaseAbandoned), "reported once")
	assert.Zero(t, f.obs.count(idem.EventExecuted))

	// Nothing under way: a Drain with a done context returns nil.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	assert.NoError(t, f.eng.Drain(done))
}

// Drains called while another waits (a shutdown hook each) wake a retry
// at most once per first backoff (100ms): the store is not hammered with
// one attempt per Drain; they all return once the store is back.
func TestConcurrentDrainsKeepBackoff(t *testing.T) {
	f, fs, _ := newFlaky(t, idem.Options{FinishRetryFor: time.Hour})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	begun := time.Now()
	require.Equal(t, 201, send(h, req{key: "k", body: `{"item":1}`}).Code)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	drains := 0
	for time.Since(begun) < time.Second {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- f.eng.Drain(ctx) }()
		drains++
		time.Sleep(2 * time.Millisecond)
	}
	n := fs.finishes.Load()
	bound := 2 + int32(time.Since(begun)/(100*time.Millisecond))
	assert.LessOrEqual(t, n, bound, "%d Drains", drains)
	assert.Greater(t, n, int32(1), "tried again")
	fs.down.Store(false)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	_, ok := f.obs.find(idem.EventExecuted)
	assert.True(t, ok, "the record was finished before Drain returned")
}
