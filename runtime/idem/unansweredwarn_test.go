package idem_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// A strict-server wrapper's handler that returns an error ends the Call
// without Finish: the key is freed under either policy (a retry runs the
// operation again). Under failures: replay, which promises that a failure
// is not run again, the engine warns once per operation, naming the policy
// and what to do; under failures: retry it does not.
func TestUnansweredUnderReplayWarnsOncePerOperation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures idem.FailurePolicy
		warn     bool
	}{{"failures replay", idem.FailuresReplay, true}, {"failures retry", idem.FailuresRetry, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			f := newFixture(t, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			spec := strictSpec()
			spec.Failures = tc.failures
			p := mustCompile(t, spec)
			other := strictSpec()
			other.Operation, other.Path, other.Failures = "createInvoice", "/invoices", tc.failures
			q := mustCompile(t, other)
			// What the generated strict wrapper does when the operation
			// returns an error: End without Complete.
			run := func(p *idem.Policy, key string) idem.Decision {
				r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
				r.Header.Set("Idempotency-Key", key)
				c := f.eng.Begin(r, p, idem.RequestKey)
				defer c.End()
				if c.Decision() != idem.Execute {
					return c.Decision()
				}
				c.Writer(httptest.NewRecorder())
				f.calls.Add(1)
				return idem.Execute // the operation returned an error: no Complete
			}
			for range 3 {
				require.Equal(t, idem.Execute, run(p, "k1"), "the key is freed: the retry runs again")
			}
			// The same operation compiled again (a Policy per version, say)
			// is the same operation: no second warning.
			require.Equal(t, idem.Execute, run(mustCompile(t, spec), "k2"))
			require.Equal(t, idem.Execute, run(q, "k1"))
			assert.Equal(t, int32(5), f.calls.Load())
			got := logs.String()
			n := strings.Count(got, "under failures: replay, a handler that returns an error")
			if !tc.warn {
				assert.Zero(t, n, got)
				return
			}
			assert.Equal(t, 2, n, "once per operation:\n%s", got)
			assert.Contains(t, got, "level=WARN msg=\"idem: under failures: replay")
			assert.Contains(t, got, "operation=createOrder")
			assert.Contains(t, got, "operation=createInvoice")
			assert.Contains(t, got, "return a typed 5xx response")
		})
	}
}
