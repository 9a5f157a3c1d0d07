package idemclient

import (
	"errors"
	"sync"
)

// ErrRetryBudgetExhausted: the Doer's retry budget ([WithRetryBudget]) had
// too few tokens left for the next retry; the call stopped instead. The
// Error carries the last answer, as for the other stops.
var ErrRetryBudgetExhausted = errors.New("idemclient: retry budget exhausted")

// Costs of the default [RetryBudget], those of the AWS SDKs' standard
// retryer.
const (
	DefaultRetryBudgetCapacity = 500 // tokens in a full bucket
	DefaultRetryCost           = 5   // a retry after an error status or a connection error
	DefaultRetryTimeoutCost    = 10  // a retry after an attempt that timed out
	DefaultRetrySuccessReward  = 1   // a call that succeeds at its first attempt
)

// RetryBudget is a token bucket shared by the calls of one or more Doers
// ([WithRetryBudget]), as the AWS SDKs' standard retryer has: every retry
// takes tokens (Cost, TimeoutCost after an attempt that timed out), a call
// that succeeds gives back what its last retry took, or Reward when it
// succeeded at its first attempt, up to Capacity. When the bucket cannot
// pay for a retry, the call stops ([ErrRetryBudgetExhausted]): a server
// that fails most requests is not hit with every one's retries on top.
// Waiting out IDEMPOTENCY_KEY_IN_USE answers costs nothing: the server is
// not failing, another request holds the key. Safe for concurrent use.
type RetryBudget struct {
	mu                               sync.Mutex
	tokens                           int
	capacity, cost, timeoutCost, won int
}

// NewRetryBudget returns a full bucket of capacity tokens (<= 0:
// [DefaultRetryBudgetCapacity]) with the default costs.
func NewRetryBudget(capacity int) *RetryBudget {
	if capacity <= 0 {
		capacity = DefaultRetryBudgetCapacity
	}
	return &RetryBudget{tokens: capacity, capacity: capacity, cost: DefaultRetryCost, timeoutCost: DefaultRetryTimeoutCost, won: DefaultRetrySuccessReward}
}

// Tokens returns the tokens left.
func (b *RetryBudget) Tokens() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}

// take takes the cost of a retry (timeout: after an attempt that timed
// out) and returns it, or 0 when the bucket cannot pay.
func (b *RetryBudget) take(timeout bool) int {
	c := b.cost
	if timeout {
		c = b.timeoutCost
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < c {
		return 0
	}
	b.tokens -= c
	return c
}

// succeeded gives back paid, the cost of the call's last retry, or the
// reward when the call made no retry (paid 0).
func (b *RetryBudget) succeeded(paid int) {
	if paid == 0 {
		paid = b.won
	}
	b.mu.Lock()
	b.tokens = min(b.tokens+paid, b.capacity)
	b.mu.Unlock()
}
