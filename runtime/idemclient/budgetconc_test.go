package idemclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A budget shared by two Doers and 40 goroutines (run under -race): the
// tokens stay within [0, capacity], a call the budget stops names its
// key, and the bucket refills once the server heals.
func TestRetryBudgetConcurrent(t *testing.T) {
	var healthy atomic.Bool
	srv := newRecServer(t, func(n int, _ *http.Request) reply {
		if !healthy.Load() && n%3 != 0 {
			return reply{status: 503}
		}
		return reply{status: 201}
	})
	const capacity = 100
	b := NewRetryBudget(capacity)
	ds := []*Doer{
		NewDoer(srv.Client(), fastPolicy(4), WithClock(newFakeClock()), WithRetryBudget(b)),
		NewDoer(srv.Client(), fastPolicy(4), WithClock(newFakeClock()), WithRetryBudget(b)),
	}
	run := func() int32 {
		var (
			wg sync.WaitGroup
			ex atomic.Int32
		)
		for i := range 40 {
			wg.Go(func() {
				for range 5 {
					ctx, _ := Start(context.Background())
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(payload))
					resp, err := ds[i%2].Do(req)
					if err != nil {
						if errors.Is(err, ErrRetryBudgetExhausted) {
							ex.Add(1)
							if e, ok := errors.AsType[*Error](err); !ok || e.Key == "" {
								t.Errorf("exhausted without a key: %v", err)
							}
						}
						continue
					}
					resp.Body.Close()
					if tok := b.Tokens(); tok < 0 || tok > capacity {
						t.Errorf("tokens %d", tok)
					}
				}
			})
		}
		wg.Wait()
		return ex.Load()
	}
	assert.Positive(t, run(), "a failing server exhausts the budget")
	low := b.Tokens()
	healthy.Store(true)
	run()
	assert.Greater(t, b.Tokens(), low, "successes refill the bucket")
}
