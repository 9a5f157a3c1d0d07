package idemclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors, matched with errors.Is on what a [Doer] returns.
var (
	// ErrInvalidPolicy: a Policy failed [Policy.Validate].
	ErrInvalidPolicy = errors.New("idemclient: invalid policy")
	// ErrAttemptsExhausted: every attempt failed with a retryable connection
	// error, or (under [WithErrorOnExhausted] only) the attempts ran out on
	// an answer the policy retries, which the [Error] keeps (its Status,
	// Problem and Response). A call allowed one attempt (MaxAttempts 1, an
	// ambiguous request, WithoutKey without KeylessDedupe, a body that
	// cannot be resent) runs out after it: Attempts is then 1.
	ErrAttemptsExhausted = errors.New("idemclient: attempts exhausted")
	// ErrNotRetryable: an attempt failed with an error that is not retried
	// (see [Classify]); the cause is wrapped too.
	ErrNotRetryable = errors.New("idemclient: error not retryable")
	// ErrRetryAfterTooLong: the server asked to wait longer than the remaining
	// deadline (or the Doer's Retry-After limit) allows; the helper stopped
	// instead of sleeping past it. The [Error]'s Err says which bound the
	// wait passed: the context deadline (then the error matches
	// context.DeadlineExceeded too, as [ErrNoTimeLeft] does), or the limit
	// ([WithRetryAfterLimit]).
	ErrRetryAfterTooLong = errors.New("idemclient: server asked to wait too long")
	// ErrInUseWaitExhausted: the server kept answering IDEMPOTENCY_KEY_IN_USE
	// until the next wait would end more than the policy's InUseWait
	// ([Policy]) after the call's first such answer; the helper stopped. The [Error]
	// carries the last answer's problem ([Error].Problem, IDEMPOTENCY_KEY_IN_USE).
	ErrInUseWaitExhausted = errors.New("idemclient: key still in use when the in-use wait ran out")
	// ErrNoTimeLeft: the next backoff delay would end past the context
	// deadline; the helper stopped early. It also matches context.DeadlineExceeded.
	ErrNoTimeLeft error = noTimeLeft{}
	// ErrBodyNotReplayable: the request body has no GetBody and is larger
	// than the Doer's buffering limit, so it cannot be re-sent identically.
	ErrBodyNotReplayable = errors.New("idemclient: request body cannot be replayed")
	// ErrKeyConflict: the request already carries a key that differs from the
	// one supplied with [WithKey], or carries two different keys (query
	// parameters of the key's name).
	ErrKeyConflict = errors.New("idemclient: request carries a different idempotency key")
	// ErrInvalidKey: the call's key is longer than the policy's
	// KeyMaxLength, or not in its KeyFormat under EnforceKeyFormat (see
	// [Policy]), which the server would refuse with a 400; nothing was
	// sent. The Error's Err says which.
	ErrInvalidKey = errors.New("idemclient: invalid idempotency key")
	// ErrBadKeyCarrier: the key cannot be placed where the policy says (for
	// example a body that is not a JSON object at the pointer's parent).
	ErrBadKeyCarrier = errors.New("idemclient: cannot place the idempotency key")
	// ErrKeyGenerator: the call's key generator ([WithKeyGenerator],
	// [WithDoerKeyGenerator]) failed or returned ""; nothing was sent.
	ErrKeyGenerator = errors.New("idemclient: the key generator made no key")
	// ErrRequestNotBuilt: a request editor given to the call with
	// [WithRequestEditors] failed; nothing was sent. The Error's Err is
	// the cause. (A failure of the client's own editors, oapi-codegen's
	// WithRequestEditorFn, or of encoding the body comes back as
	// oapi-codegen returns it, not as an [*Error].)
	ErrRequestNotBuilt = errors.New("idemclient: the request could not be built")
	// ErrKeyNotRecorded: the function given with [WithKeyRecorder] failed
	// to persist the call's key; nothing was sent (the Error's Err is its
	// error).
	ErrKeyNotRecorded = errors.New("idemclient: the key was not recorded")
	// ErrCallReused: a [Call] was used for a second request; one Call is one
	// logical call (start a new one, with [WithKey] to resume).
	ErrCallReused = errors.New("idemclient: call already used for a request")
	// ErrNotManaged: a call's request did not go through a Doer (reported
	// by [Call.Check]), so it was sent once, without the call's retries.
	ErrNotManaged = errors.New("idemclient: the request did not go through an idemclient.Doer")
)

type noTimeLeft struct{}

func (noTimeLeft) Error() string {
	return "idemclient: no time left before the deadline for another attempt"
}

func (noTimeLeft) Is(target error) bool { return target == context.DeadlineExceeded }

// Error is the error a [Doer] returns for an idempotent call that did not
// end with a response. It names the call's key so that the caller can log
// or persist it and resume later with [WithKey].
type Error struct {
	// URL is redacted as [Attempt].URL is; so is the URL of the inner
	// client's *url.Error in Err's message (when the inner client wrapped
	// that *url.Error in errors of its own, the original stays in Err's
	// chain for errors.As, with the URL it had).
	Method, URL string
	// Key is the call's idempotency key: the one every attempt carried. When
	// the call failed before the Doer fixed it (a key conflict, a body that
	// cannot be replayed, an invalid key or policy: no attempt was sent), it
	// is the key the call would have used, the one supplied with [WithKey]
	// or fixed by [Call.FixKey] (the key a generated helper returns), so
	// that a caller who logs it resumes with the key it meant; "" when the
	// call had none yet (the Doer would have created one).
	Key string
	// Attempts is the number of attempts sent, those answered
	// IDEMPOTENCY_KEY_IN_USE included (which do not count toward the
	// policy's MaxAttempts); 0 for [ErrCallReused] (the refused request
	// sent nothing).
	Attempts int
	// Status is the last response status (0 if the last attempt got no response).
	Status int
	// RetryAfter is the wait the server asked for last (0 if none).
	RetryAfter time.Duration
	// Problem is the contract's problem the last response carried (its
	// code IDEMPOTENCY_*), nil if none: a call that stopped at the deadline
	// or at the end of its in-use wait while the key was still in use
	// (IDEMPOTENCY_KEY_IN_USE), or at the deadline while the store was
	// unavailable, says so here, and errors.As finds it as a *ProblemError.
	Problem *ProblemError
	// Response is the last response of a call that ended with an error on
	// an answer the policy retries, under [WithErrorOnExhausted] (nil
	// otherwise): its attempts ran out ([ErrAttemptsExhausted]), or it
	// stopped before the next retry ([ErrRetryAfterTooLong],
	// [ErrNoTimeLeft], [ErrRetryBudgetExhausted], [ErrInUseWaitExhausted]).
	// Its body is in memory (up to the Doer's response buffer, at least
	// 64 KiB of it), readable and needing no Close.
	Response *http.Response
	// Reason is one of the sentinel errors of this package, or the context's
	// error (context.Canceled, context.DeadlineExceeded) when the caller stopped.
	Reason error
	// Err is the underlying error (nil when the reason says it all).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	reason := e.Reason.Error()
	if (e.Reason == context.Canceled || e.Reason == context.DeadlineExceeded) &&
		e.Err != nil && strings.Contains(e.Err.Error(), reason) {
		// The cause says it already (Post "...": context deadline exceeded): once.
		reason = "idemclient: call stopped by its context"
	}
	b.WriteString(reason)
	if e.Method != "" || e.URL != "" { // "": the call failed before its request was built
		fmt.Fprintf(&b, ": %s %s", e.Method, e.URL)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, " key=%s", e.Key)
	}
	fmt.Fprintf(&b, " attempts=%d", e.Attempts)
	if e.Status != 0 {
		fmt.Fprintf(&b, " last-status=%d", e.Status)
	}
	if e.Problem != nil {
		fmt.Fprintf(&b, " code=%s", e.Problem.Code)
	}
	if e.RetryAfter != 0 {
		fmt.Fprintf(&b, " retry-after=%v", e.RetryAfter)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the reason, the cause and the problem, so errors.Is
// matches the first two and errors.As finds the *ProblemError.
func (e *Error) Unwrap() []error {
	errs := []error{e.Reason}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Problem != nil {
		errs = append(errs, e.Problem)
	}
	return errs
}
