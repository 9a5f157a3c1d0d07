package middleware

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/fiberwork"
	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

func idemgenTarget(wait time.Duration) check.New {
	return func(tb testing.TB, ops *check.Ops) check.Target {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		tb.Cleanup(func() { _ = s.Close() })
		spec := workload.Spec()
		spec.InFlight.Wait = wait
		eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
		return check.NetHTTP{H: eng.Handler(idem.MustCompile(spec), check.Handler(ops))}
	}
}

// TestCorrectnessIdemgen: one execution for 50 simultaneous duplicates (the
// others told 409 IDEMPOTENCY_KEY_IN_USE, or, with InFlight.Wait, all
// replayed), a conflict for another body, a replay for a resend that differs
// only in member order and a volatile member, a new execution after a 500.
func TestCorrectnessIdemgen(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		r := check.Run(t, "idemgen (memstore)", idemgenTarget(0))
		r.Concurrent.AssertExactlyOnce(t)
		assert.Equal(t, check.Outcome{Status: 422, Code: "IDEMPOTENCY_KEY_REUSED"}, r.OtherBody)
		assert.Equal(t, check.ResentOutcome(), r.Resent, "canonical fingerprint: %v", check.ResentIsSame())
		assert.Equal(t, check.Outcome{Status: 201, Executed: true}, r.After500)
	})
	t.Run("memstore-wait", func(t *testing.T) {
		r := check.Run(t, "idemgen (memstore, in-flight wait 2s)", idemgenTarget(2*time.Second))
		assert.Equal(t, 1, r.Concurrent.Executions)
		assert.Equal(t, map[string]int{"201": check.Duplicates}, r.Concurrent.Statuses)
	})
}

// TestCorrectnessFiber records what fiber's idempotency middleware does; it
// asserts only what the harness relies on (every request answered).
func TestCorrectnessFiber(t *testing.T) {
	r := check.Run(t, "fiber v2 middleware/idempotency (memory)", func(_ testing.TB, ops *check.Ops) check.Target {
		return fiberwork.Target{H: fiberwork.App(true, nil, fiberwork.OpsHandler(ops)).Handler()}
	})
	r.Concurrent.AssertAnswered(t)
}

// The benchmark targets answer what they should (a benchmark only checks statuses).
func TestBenchTargets(t *testing.T) {
	c := workload.NewClient(workload.Payload)
	c.W.Keep = true
	h := idemgenHandler(t, workload.Handler())
	require.Equal(t, http.StatusCreated, c.Do(h))
	assert.Equal(t, string(workload.Response), string(c.W.Body))
	require.Equal(t, http.StatusCreated, c.Do(h))
	assert.Equal(t, "true", c.W.H.Get("Idempotent-Replayed"))
	assert.Equal(t, workload.Location, c.W.H.Get("Location"))
	assert.Equal(t, string(workload.Response), string(c.W.Body))

	fc := fiberwork.NewClient(workload.Key, workload.Payload)
	app := fiberwork.App(true, nil, fiberwork.Handler(nil)).Handler()
	for range 2 {
		require.Equal(t, http.StatusCreated, fc.Do(app))
		assert.Equal(t, string(workload.Response), string(fc.Response().Body()))
		assert.Equal(t, workload.Location, string(fc.Response().Header.Peek("Location")))
	}
	require.Equal(t, http.StatusCreated, fc.Do(fiberwork.Floor))
	var v map[string]any
	require.NoError(t, json.Unmarshal(fc.Response().Body(), &v))
}
