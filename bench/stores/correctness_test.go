package stores

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/idem"
)

func target(s idem.Store, ops *check.Ops) check.Target {
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
	return check.NetHTTP{H: eng.Handler(idem.MustCompile(workload.Spec()), check.Handler(ops))}
}

// assertContract is what idemgen promises on every store.
func assertContract(t *testing.T, r check.Result) {
	r.Concurrent.AssertExactlyOnce(t)
	assert.Equal(t, check.Outcome{Status: 422, Code: "IDEMPOTENCY_KEY_REUSED"}, r.OtherBody)
	assert.Equal(t, check.ResentOutcome(), r.Resent, "canonical fingerprint: %v", check.ResentIsSame())
	assert.Equal(t, check.Outcome{Status: 201, Executed: true}, r.After500)
}

func TestCorrectnessIdemgenRedis(t *testing.T) {
	r := check.Run(t, "idemgen (redisstore)", func(tb testing.TB, ops *check.Ops) check.Target {
		c, _, prefix := redisClient(tb)
		return target(redisStore(tb, c, prefix), ops)
	})
	assertContract(t, r)
}

func TestCorrectnessIdemgenPostgres(t *testing.T) {
	r := check.Run(t, "idemgen (pgstore)", func(tb testing.TB, ops *check.Ops) check.Target {
		pool, _, schema := pgPool(tb)
		return target(pgStore(tb, pool, schema), ops)
	})
	assertContract(t, r)
}
