// Package idemclient is the client half of the x-idempotency contract: it
// makes retries of unsafe HTTP calls safe by sending one idempotency key per
// logical call, the same key and the same body bytes on every attempt, and
// by retrying only what the operation's contract says, within the caller's
// deadline.
//
// # Pieces
//
//   - [Policy]: the operation's `retry` and `key` blocks (attempts, backoff,
//     which failures to retry, key format and carrier) and its in-flight
//     block's lease and wait ([Policy].InUseWait, InFlightWait). Zero fields take the
//     contract defaults; [Policy.LongestSpan] is the bound the generator
//     checks against the server's window, and the Doer against
//     [Policy].Window, which generated policies carry, for the policy a
//     call really uses (after [WithPolicyOverride]).
//   - [Doer]: wraps any HTTP client with oapi-codegen's HttpRequestDoer
//     interface (Do(*http.Request)), so a generated ClientWithResponses gets
//     retries by `WithHTTPClient(idemclient.NewDoer(httpClient, policy))`.
//   - [Start] and [Call]: mark one logical call in a context, carry the
//     caller's options (its own key with [WithKey], a [WithKeyObserver] to
//     persist the key, a per-operation [WithPolicy] or [WithPolicyOverride],
//     a [WithKeyGenerator], per-call [WithRequestEditors] for a generated
//     helper to pass on) and report the key and the number of attempts
//     afterwards.
//   - [RouteTable]: the API's routes by method and path, each with its
//     policy or none; its [RouteTable.Match] and [RouteTable.Matcher] are
//     [Matcher]s that manage requests without a Call, the generated
//     NewIdempotentDoer's and IdempotentMatcher's.
//   - [ParseRetryAfter], [Classify], [NewKey], [ParseProblem]: the
//     decisions, exported for reuse and tests.
//
// Package faultnet (a subpackage) injects the faults these retries are for.
//
// # Use from generated code
//
// idemgen's client emitter (docs/client.md) writes a typed helper per
// operation: it starts a Call under the operation's policy and calls the
// oapi-codegen method, whose client was built over a Doer:
//
//	func (c *IdempotentClient) CreateOrder(ctx context.Context, body CreateOrderJSONRequestBody,
//		opts ...idemclient.CallOption) (*CreateOrderResponse, string, error) {
//		ctx, call := createOrderPolicy.Start(ctx, opts...) // an idemclient.Policy literal
//		resp, err := c.CreateOrderWithResponse(ctx, body, editors(call)...) // call.RequestEditors()
//		if err != nil {
//			return nil, call.Key(), err
//		}
//		return resp, call.Key(), call.Check(resp.HTTPResponse, resp.Body)
//	}
//
// When the key travels in a typed parameter of oapi-codegen's <Op>Params,
// the helper fixes it first ([Call.FixKey]) and writes it there; [Call.Check]
// turns a final IDEMPOTENCY_* problem into a [*ProblemError]. The caller
// passes idemclient.WithKeyObserver(save) to persist the key before the
// first attempt, and idemclient.WithKey(saved) to resume after its own
// crash: the server then replays the first outcome instead of executing
// again. Requests without a Call (GETs, other operations) pass through
// untouched, sent once; [WithMatcher] can manage requests by method and
// path instead (the generated NewIdempotentDoer does, for every idempotent
// operation), and [WithSafeRetries] retries the requests of safe methods
// (GET, HEAD, OPTIONS, TRACE) that nothing else manages, without a key.
// The generated With<type>HTTPClient option gives the generated client's
// Doer its [Option]s; [WithErrorOnExhausted], one of them, makes a call
// whose attempts ran out on a retryable status end with an error
// ([ErrAttemptsExhausted]) instead of that last response.
//
// # What never changes between attempts
//
// The fingerprint a server computes must be the same for every attempt, so
// a Doer re-sends the body from req.GetBody (or from its one buffered copy),
// never re-encodes it, puts the key in place once before the first attempt
// (for a body carrier, by splicing the encoded bytes), and adds no header
// that varies: an attempt counter only with [WithAttemptHeader], which the
// server must then leave out of its fingerprint. Note that net/http's
// Transport itself sends a request carrying an Idempotency-Key header again
// when the connection it used closes before any response arrives (a reused
// keep-alive connection that turns out dead, but also a server that drops
// the connection, as net/http does when a handler panics), at once and
// without backoff, on each idle connection it holds in turn. The key makes
// that safe only while the first attempt's record is in flight or final: a
// server that frees the key and then drops the connection runs the
// operation once per attempt. idemgen's engine therefore answers a handler
// panic with a complete 500 IDEMPOTENCY_HANDLER_PANICKED before the panic
// goes on (see idem.CodeHandlerPanicked), so the Transport does not send it
// again, and a Doer retries it with its backoff.
//
// # Backoff
//
// The exponential sequence (growth, cap, overflow guard) is
// github.com/cenkalti/backoff/v5's ExponentialBackOff with a zero
// randomization factor; the jitter is applied on top ([Backoff.Delay]).
// The library's own jitter and retry loop are not used because they do
// not fit the contract: its jitter is symmetric around the interval
// (interval × [1-f, 1+f]) and may exceed MaxInterval, where the contract's
// full jitter is [0, ceiling] and equal jitter [ceiling/2, ceiling];
// backoff.Retry takes no injectable timer (tests would sleep), replaces the
// delay by a RetryAfterError instead of taking the larger of the two, bounds
// time by MaxElapsedTime rather than by the context deadline, and its
// Notify sees neither the attempt number nor the response. The loop here is
// a few lines over the library's sequence; BenchmarkDelay compares the cost.
package idemclient
