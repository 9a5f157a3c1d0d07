// Package idem is idemgen's request-time idempotency engine: it makes a
// retried HTTP request safe by running it once and answering every retry
// with the first answer.
//
// # Model
//
// Each protected operation has a Policy, compiled once from a Spec (the
// generated code emits one Spec literal per operation of the OpenAPI
// x-idempotency contract). For each request the Engine:
//
//  1. reads the idempotency key (header, query parameter or a member of the
//     JSON body) and validates it: bare or an RFC 8941 sf-string ("abc",
//     with \" and \\ escapes); format token (visible ASCII), uuid (any RFC
//     9562 version, canonical form, either case, compared case-insensitively),
//     uuidv4 or uuidv7; at most MaxLength (≤ 255) characters. Missing when
//     required: 400 IDEMPOTENCY_KEY_MISSING; malformed: 400
//     IDEMPOTENCY_KEY_INVALID;
//  2. reads the body, never more than Request.MaxBytes (413
//     IDEMPOTENCY_REQUEST_TOO_LARGE beyond), and fingerprints the request
//     (package fingerprint: method, operation, path, canonical body
//     without the volatile members, query, named headers; a body of a
//     media type Request.MediaTypes does not declare byte for byte; in the version
//     Options.FingerprintVersion names, and a record whose fingerprint is of
//     another version is compared in that version; a keyed request whose
//     record has another fingerprint is compared again under the fingerprint
//     settings of another release, the one before or the one after, that
//     Spec.CompatibleFingerprints lists);
//  3. encodes the scope (principal from Options.Principal, operation, key)
//     injectively into the store key, so one principal never sees another's
//     response and no key can collide with another scope (under
//     ScopeShared the principal is left out: all callers share the keys;
//     an Engine without Options.Principal refuses the requests of the
//     other scope, ScopePrincipal, the default: ErrNoPrincipal);
//  4. claims the key in the Store with a fresh random fencing token and a
//     lease, and acts on what the store reports.
//
// What the store reports decides the answer:
//
//   - no record (or an expired one): execute the handler;
//   - COMPLETED (or FAILED with a stored response): replay it, with
//     Idempotent-Replayed: true; under Strict semantics a different
//     fingerprint gets ConflictStatus (422 or 409) IDEMPOTENCY_KEY_REUSED;
//     under Loose and Window the replay happens anyway and the Observer gets
//     EventLooseMismatch;
//   - PENDING (in flight): InFlight.Status (409) with Retry-After and
//     IDEMPOTENCY_KEY_IN_USE, or, with InFlight.Wait > 0, wait for the first
//     request to finish (woken by the store's Watcher when it has one, else
//     polling with a jittered exponential backoff) and replay its answer;
//   - PENDING with an expired lease: its holder crashed or is stuck; take it
//     over (EventLeaseTakeover) with a new token, so the old holder's late
//     completion is fenced (ErrFenced, EventFenced): rejected, logged, never
//     written. Under strict semantics only a request of the same
//     fingerprint takes it over; another is a conflict, as while the lease
//     runs.
//
// Semantics, per the contract:
//
//	semantics  key       same fingerprint  other fingerprint        after the window
//	strict     required  replay            conflict (KEY_REUSED)    new request
//	loose      required  replay            replay + observer event  new request
//	window     optional  replay            replay                   new request
//
// Under Window, a request without a key is keyed by principal + operation +
// fingerprint. Under Strict or Loose with Key.Required = Optional, a request
// without a key runs unprotected.
//
// # Recording and replay
//
// The handler writes through a recording http.ResponseWriter that tees to
// the client as it writes, and records the status, the headers on
// Response.Headers plus Content-Type and Content-Encoding (Set-Cookie and
// hop-by-hop headers are never stored), and the body up to
// Response.MaxBytes. Trailers are not recorded: a replay has none. Flush is passed
// through (http.Flusher and http.ResponseController both work; the client
// sees streamed data at once), and a replay sends the recorded body in one
// piece. Hijacking a recorded response is not supported: Hijack, directly or
// through http.ResponseController, fails with an error that wraps
// http.ErrNotSupported (what is written on a hijacked connection cannot be
// recorded).
//
// When the client goes away mid-response, the write that fails and every
// later one go to the record only and succeed, so a retry gets the whole
// response the handler produced, not the part the client received; past
// Response.MaxBytes (stored as not replayable) they return the connection's
// error. Writes the response's framing refuses (http.ErrBodyNotAllowed,
// http.ErrContentLength) are returned to the handler and not recorded.
//
// What the record becomes:
//
//   - a status below 500 (but 408, 425 and 429): COMPLETED, replayed;
//   - 408, 425, 429 (the request was not processed): the key is freed;
//   - nothing written (not even a status): net/http's implicit 200, an
//     empty 200, COMPLETED and replayed, even when the handler's context had
//     ended (the client went away, a deadline passed): the handler may have
//     done its work, and a retry must not run it again. A handler that gives
//     up because its client left writes an error status (503) to free the
//     key. Only in transactional mode (the handler's writes roll back) does
//     nothing written after the context ended free the key;
//   - a status >= 500, a handler panic (re-raised, http.ErrAbortHandler
//     included), or a strict handler's error: with Failures = FailuresRetry
//     (default) the key is freed (FAILED without a response), so a retry
//     runs again (under Strict only with the same fingerprint); with
//     FailuresReplay a 5xx response is stored and replayed (a panic still
//     frees the key, and so does a strict handler's error marked
//     HandlerNothingDone: see Call.HandlerFailed; Options.DetachHandler keeps a
//     client that goes away from stopping the handler half-way). A panic before anything of the response was sent is
//     answered, before it goes on, with a complete 500
//     IDEMPOTENCY_HANDLER_PANICKED (see Call.End), since a connection
//     dropped without an answer makes Go's Transport send a keyed request
//     again at once, on every idle connection it holds (a request that
//     carries a key and runs unprotected, FailOpen's, is answered so too,
//     as is one without a key that carries an Idempotency-Key or
//     X-Idempotency-Key header, which the Transport resends all the same;
//     any other is passed through); when a
//     ResponseWriter in front of the engine cannot flush that answer
//     (http.TimeoutHandler's), the engine logs the panic and ends it, so
//     that the answer is sent. Under GODEBUG=panicnil=1, recover gives
//     nil for a panic(nil), which Call.End then cannot tell from a
//     handler that returned without finishing (or called runtime.Goexit):
//     its recover stops the panic, the key is freed, no 500 is written,
//     and net/http sends what the handler wrote (an empty 200 if
//     nothing);
//   - a body larger than Response.MaxBytes: the client still gets all of it;
//     the record is completed as "not replayable" (status and headers kept),
//     so the work is never executed twice, and a duplicate gets 409
//     IDEMPOTENCY_RESPONSE_UNAVAILABLE with "original_status" and the
//     allowlisted headers (e.g. Location): final, not worth retrying.
//
// The stored response is an engine-owned compact binary encoding (version,
// flags, status, header fields, body), opaque to stores; decoding checks
// every length and never panics (a corrupt record answers 500
// IDEMPOTENCY_RECORD_UNREADABLE).
//
// # Leases
//
// A claim holds for InFlight.Lease. When the store implements LeaseExtender,
// the engine extends the lease while the handler runs (unless
// Options.DisableHeartbeat), so only a crashed or wedged holder is taken over:
// a handler that outlives a sixth of its lease gets a first extension
// Lease/3 after the start of the claim's Begin (the lease counts from
// there; at once after a claim that took longer), then one every Lease/3
// after the start of the last that got through. A quicker
// handler costs no timer: one engine goroutine, running only while claims
// are held, finds the slow ones.
//
// # Timeouts
//
// Every store call is bounded by Options.StoreTimeout (default 5s; an
// earlier deadline of the request's context still applies): each Begin,
// Finish (which also runs when the client has gone away), a transaction's
// begin and commit (the transaction's context has no deadline, since it
// lives as long as the handler: a timer cancels it only while the engine
// waits for the store), and a waiting duplicate's Watch (bounded by
// InFlight.Wait). A lease extension is bounded by the shorter of
// StoreTimeout and Lease/3, so a heartbeat never outlives the next one. A
// store that accepts connections but never answers thus makes requests fail
// closed with 503 within StoreTimeout instead of holding them.
//
// # Errors
//
// Every refusal is an RFC 9457 application/problem+json document
// {type, title, status, detail, code} with a stable code (the Code
// constants). Store failures fail closed: 503 IDEMPOTENCY_STORE_UNAVAILABLE
// with Retry-After, and nothing runs; Options.FailOpen runs the handler
// unprotected instead (reported as EventFailOpen). A store failure after the
// handler ran is logged and reported; the client already has its answer. A
// store call that fails because the request's own context ended (its client
// went away, or a timeout middleware's deadline passed) is no store failure:
// the request is refused with IDEMPOTENCY_REQUEST_ENDED (499, or 503 for a
// deadline), reported as EventRejected, logged at Info, and never run by
// FailOpen (see CodeRequestEnded). Nor is a store's refusal of one caller,
// who holds too large a share of it (ErrQuotaExceeded: memstore's
// Options.MaxPrincipalShare): 429 IDEMPOTENCY_QUOTA_EXCEEDED with
// Retry-After, reported as EventRejected, logged at most once a minute,
// and never run by FailOpen.
//
// # Transactions
//
// With Options.Transactional and a store implementing Transactor (the
// PostgreSQL store), the handler runs inside the store's transaction
// (Call.Context carries it; the store's package takes it out, e.g.
// pgstore.Tx(ctx)); the response is buffered, nothing reaches the client
// (Flush is a no-op), the record is committed in the same transaction as the
// handler's own writes, and only then is the response written. On a 5xx,
// a panic or an error the transaction is rolled back and the key freed; a
// fenced commit answers IDEMPOTENCY_KEY_IN_USE (the other attempt's result
// can be fetched by retrying), a failed commit 503. The whole response is
// buffered in memory in this mode.
//
// # Integration
//
// net/http: Engine.Middleware(policy) or Engine.Handler(policy, h).
//
// oapi-codegen strict servers: generated strict middleware calls the
// lower-level API, Engine.Begin → Call, which the net/http middleware is a
// thin user of:
//
//	c := eng.Begin(r, policy, idem.KeyFromPtr(request.Params.IdempotencyKey))
//	defer c.End()
//	if c.Decision() != idem.Execute {
//		c.Respond(w)      // replay or problem, written
//		return nil, nil   // nothing left for the strict handler to write
//	}
//	resp, err := next(c.Context(), w, r, request)
//	if err != nil || resp == nil {
//		return resp, err  // End frees the key
//	}
//	return nil, c.Complete(w, resp.(XResponseObject).VisitXResponse)
//
// The strict handler decodes the body before any strict middleware runs, so
// wrap the router with CaptureBody: it tees the body as it is decoded and
// Begin fingerprints the same bytes. Without it, Begin notices a body
// shorter than its Content-Length and answers 400
// IDEMPOTENCY_REQUEST_UNREADABLE rather than fingerprint nothing.
//
// # Observability
//
// Options.Logger (log/slog, default slog.Default()) gets warnings and
// errors. Options.Observer gets an Event, by value, for every decision:
// executed, replayed, conflict, in-flight, loose-mismatch, lease-takeover,
// fenced, store-error, fail-open, rejected, not-replayable, heartbeat-failed,
// finish-abandoned.
// A nil Observer costs nothing.
//
// # Performance
//
// Through Engine.Handler over a ContextBound store (memstore), a replay or
// a refusal costs one small allocation (the response's own header value
// slices, Idempotent-Replayed's or the problem's among them) beside
// the store's work, and a first request one (what its handler is handed,
// the Writer and the request body, which may outlive a careless handler):
// the Call is recycled, the scope key lives in it, and the deadline of each
// store call lives in it too, its clock read (monotonic only) when the
// store first looks at it; a store that watches the context (as network
// stores do, on every command) costs one channel, queued by its deadline
// where one timer serves the store calls in flight, instead of a
// context.WithTimeout. Over any other store the Call is recycled too, and
// what its store calls are handed (contexts, the BeginRequest, the scope
// key) is the request's own, since such a store may keep it: one
// allocation for a request that claims, and for a replay read first one
// too (only its Get's context and the scope key), but two when that read
// finds no settled record and the request goes on to claim. A
// Call whose heartbeat ran is not recycled, nor is one from Begin. Buffers
// are pooled, problem documents are written without fmt or maps, a retry
// with the same bytes is not
// canonicalized again (the engine keeps a small cache of fingerprints by a
// keyed digest of the request), and header values of a replay alias the
// stored record. Over a ReadFirst store (redisstore, pgstore), a retry of a
// key whose record this Engine completed or replayed before, within the
// record's window, is read with the store's Get (a plain read by key)
// rather than claimed with Begin (a script or function on the server);
// every other request claims at once, so a first request costs no extra
// round trip (but for a key whose record the store dropped before its
// window ended). See the benchmarks
// in bench_test.go (go test -bench . -benchmem) and docs/benchmarks.md.
package idem
