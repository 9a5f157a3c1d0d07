//go:build gopotency

// This file is package middleware's gopotency peer. It is not in the
// package's directory: github.com/fco-gt/gopotency cannot be a dependency
// of bench/go.mod (the Go module proxy refuses it), and `go mod tidy`
// considers every build-tagged file, so a file importing it there would
// break tidy. It is added to the package by the overlay next to it, with
// -tags gopotency, in a Go workspace that provides the module (see
// docs/benchmarks.md, "Peers that could not be measured").

package middleware

import (
	"net/http"
	"testing"

	idempotency "github.com/fco-gt/gopotency"
	"github.com/fco-gt/gopotency/key"
	httpmw "github.com/fco-gt/gopotency/middleware/http"
	"github.com/fco-gt/gopotency/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/workload"
)

// gopotencyHandler is gopotency v1.0.0's net/http middleware over its
// memory storage as its README shows: the Idempotency-Key header (required,
// as idemgen's policy requires a key too), the default request hasher (SHA-256 of the raw body), the
// default TTL (24 h) and lock timeout (5 min).
func gopotencyHandler(tb testing.TB, h http.Handler) http.Handler {
	m, err := idempotency.NewManager(idempotency.Config{
		Storage:     memory.NewMemoryStorage(),
		KeyStrategy: key.HeaderBased("Idempotency-Key"),
		RequireKey:  true,
	})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.Close() })
	return httpmw.Idempotency(m)(h)
}

func init() {
	netHTTPPeers = append(netHTTPPeers, peer{"gopotency", benchGopotency})
}

func benchGopotency(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		calls := 0
		bare := workload.Handler()
		h := gopotencyHandler(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			bare.ServeHTTP(w, r)
		}))
		c := workload.NewClient(workload.Payload)
		workload.Kept(b, nil, func() {
			workload.Keyed(b, c.Set, func() int { return c.Do(h) })
		})
		if calls != b.N {
			b.Fatalf("the handler ran %d times for %d first requests", calls, b.N)
		}
	})
	b.Run("replay", func(b *testing.B) {
		h := gopotencyHandler(b, workload.Handler())
		c := workload.NewClient(workload.Payload)
		c.Do(h)
		workload.Serial(b, func() int { return c.Do(h) })
		if c.W.H.Get("X-Idempotent-Replayed") != "true" {
			b.Fatal("not a replay")
		}
	})
	b.Run("replay-parallel", func(b *testing.B) {
		h := gopotencyHandler(b, workload.Handler())
		workload.NewClient(workload.Payload).Do(h)
		workload.Parallel(b, func() func() int {
			c := workload.NewClient(workload.Payload)
			return func() int { return c.Do(h) }
		})
	})
	netHTTPRotating(b, func(tb testing.TB) http.Handler { return gopotencyHandler(tb, workload.Handler()) },
		func(c *workload.Client) bool { return c.W.H.Get("X-Idempotent-Replayed") == "true" })
}

// TestCorrectnessGopotency records what gopotency does; it asserts only
// what the harness relies on (every request answered).
func TestCorrectnessGopotency(t *testing.T) {
	r := check.Run(t, "gopotency v1.0.0 net/http (memory)", func(tb testing.TB, ops *check.Ops) check.Target {
		return check.NetHTTP{H: gopotencyHandler(tb, check.Handler(ops))}
	})
	r.Concurrent.AssertAnswered(t)
}

// The benchmark target answers what it should (a benchmark only checks statuses).
func TestBenchTargetGopotency(t *testing.T) {
	c := workload.NewClient(workload.Payload)
	c.W.Keep = true
	h := gopotencyHandler(t, workload.Handler())
	for i := range 2 {
		require.Equal(t, http.StatusCreated, c.Do(h))
		assert.Equal(t, string(workload.Response), string(c.W.Body))
		assert.Equal(t, workload.Location, c.W.H.Get("Location"))
		assert.Equal(t, i == 1, c.W.H.Get("X-Idempotent-Replayed") == "true", "request %d", i)
	}
}
