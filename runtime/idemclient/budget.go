package idemclient

import (
	"errors"
	"sync"
)

// ErrRetryBudgetExhausted: the Doer's retry budget ([WithRetryBudget]) had
// too few tokens left for the next retry; the call stopped instead. The
// Error carries the last answer, as for the other stops.
var ErrRetryBudgetExhausted = errors.New("idemclient: retry budget exhausted")

// The [RetryBudget]'s default capacity and its costs (fixed), those of
// the AWS SDKs' standard retryer.
const (
	DefaultRetryBudgetCapacity = 500 // tokens in a full bucket
	DefaultRetryCost           = 5   // a retry after an error status or a connection error
	DefaultRetryTimeoutCost    = 10  // a retry after an attempt that timed out
	DefaultRetrySuccessReward  = 1   // a call that succeeds at its first attempt
)

// RetryBudget is a token bucket shared by the calls of one or more Doers
// ([WithRetryBudget]), as the AWS SDKs' standard retryer has: every retry
// takes [DefaultRetryCost] tokens ([DefaultRetryTimeoutCost] after an
// attempt that the Doer's own attempt timeout, [WithAttemptTimeout], cut
// short; a timeout of the caller's context ends the call instead), and a
// call that succeeds (its final answer a 2xx or 3xx response) gives back
// what its last retry took, or [DefaultRetrySuccessReward] when it
// succeeded at its first attempt, up to the capacity. A call that ends
// with an error status (a 400, or a 503 after its last attempt) or an
// error gives nothing back. The costs are fixed; the capacity is
// [NewRetryBudget]'s. When the bucket cannot pay for a retry, the call
// stops ([ErrRetryBudgetExhausted]): a server that fails most requests is
// not hit with every one's retries on top. Waiting out
// IDEMPOTENCY_KEY_IN_USE answers costs nothing: the server is not
// failing, another request holds the key. The zero RetryBudget is a full
// bucket of [DefaultRetryBudgetCapacity] tokens, as NewRetryBudget(0)
// returns. Safe for concurrent use.
type RetryBudget struct {
	mu               sync.Mutex
	tokens, capacity int
}

// NewRetryBudget returns a full bucket of capacity tokens (<= 0:
// [DefaultRetryBudgetCapacity]) with the default costs.
func NewRetryBudget(capacity int) *RetryBudget {
	b := &RetryBudget{}
	b.init(capacity) // nobody else sees b yet
	return b
}

// init fills a zero bucket (capacity 0: not made by NewRetryBudget) with
// capacity tokens (<= 0: the default); b.mu is held. The costs are the
// Default* constants.
func (b *RetryBudget) init(capacity int) {
	if b.capacity > 0 {
		return
	}
	if capacity <= 0 {
		capacity = DefaultRetryBudgetCapacity
	}
	b.tokens, b.capacity = capacity, capacity
}

// Tokens returns the tokens left.
func (b *RetryBudget) Tokens() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init(0)
	return b.tokens
}

// take takes the cost of a retry (timeout: after an attempt that the
// Doer's attempt timeout cut short) and returns it, or 0 when the bucket
// cannot pay.
func (b *RetryBudget) take(timeout bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init(0)
	c := DefaultRetryCost
	if timeout {
		c = DefaultRetryTimeoutCost
	}
	if b.tokens < c {
		return 0
	}
	b.tokens -= c
	return c
}

// succeeded gives back paid, the cost of the last retry of a call that
// succeeded, or the reward when the call made no retry (paid 0).
func (b *RetryBudget) succeeded(paid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init(0)
	if paid == 0 {
		paid = DefaultRetrySuccessReward
	}
	b.tokens = min(b.tokens+paid, b.capacity)
}
