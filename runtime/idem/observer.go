package idem

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// EventKind names what happened to a request.
//
// Stability: the kinds and their names (String: "executed", "replayed",
// ...) are part of the API, like the problem codes: a kind is never
// renamed nor given another meaning, and new kinds may be added (an
// Observer should ignore, or count apart, a kind it does not know). The
// same holds for the fields of Event and the names of State. Which kinds
// end a request and which come in addition is tabled in docs/runtime.md.
type EventKind uint8

const (
	// EventExecuted: the handler ran and its record was finished (State says
	// how: StateCompleted, or StateFailed with or without a stored response).
	// Also reported for unprotected executions (Protected false, State 0),
	// whether or not the handler finished (Call.Finish or only Call.End).
	EventExecuted EventKind = iota + 1
	// EventReplayed: a stored response was replayed.
	EventReplayed
	// EventConflict: strict semantics, same key, other fingerprint (CodeKeyReused).
	EventConflict
	// EventInFlight: a duplicate of a request still in flight was refused (CodeKeyInUse).
	EventInFlight
	// EventLooseMismatch: loose or window semantics replayed a response to a
	// request with another fingerprint.
	EventLooseMismatch
	// EventLeaseTakeover: a PENDING record whose lease had expired was taken
	// over (its holder crashed or is stuck).
	//
	// A takeover is known from BeginResult.Prior, so one whose Begin ran
	// twice in the store (its reply lost, the call sent again: go-redis
	// does, up to its MaxRetries) is reported only by a store that keeps
	// the state a claim replaced in its record: pgstore does (prior_state);
	// redisstore does not (its record has no field for it that the decoders
	// of older processes would accept), so there such a takeover is
	// reported as a claim of a new key: no EventLeaseTakeover, no warning
	// log, and Prior 0 in the request's EventExecuted. memstore keeps none
	// either, but its calls are function calls, never sent twice. The same
	// holds for a reclaim of a FAILED record (Prior StateFailed).
	EventLeaseTakeover
	// EventFenced: a holder's late completion was rejected (ErrFenced): its
	// lease had been taken over or its record had expired. Nothing was written.
	EventFenced
	// EventStoreError: a store call failed (Err); the request failed closed
	// with CodeStoreUnavailable unless FailOpen ran it (then EventFailOpen
	// follows). A store call that failed because the request's own context
	// had ended is not one (see EventRejected).
	EventStoreError
	// EventFailOpen: Options.FailOpen ran the handler without protection after a store error.
	EventFailOpen
	// EventRejected: the request was refused before reaching the store
	// (missing or invalid key, body too large or unreadable, Options.Principal
	// failed or, for a policy scoped per principal, is not set; Code says
	// which), or its stored record could not be read
	// (CodeRecordUnreadable), or its own context ended (the client went
	// away, or a deadline set for it passed) while the engine checked its
	// key, so that a store call failed with it (CodeRequestEnded: no store
	// failure, and FailOpen does not run it), or the store refused its
	// new key for its caller's share (CodeQuotaExceeded, 429; Err is the
	// store's ErrQuotaExceeded; FailOpen does not run it either).
	// Engine.Refuse reports one for a refusal the router made (a key
	// parameter it rejected).
	EventRejected
	// EventNotReplayable: the response exceeded Response.MaxBytes (or a
	// strict Visit failed after the status was sent: see Call.Complete); the
	// record was stored with it as not replayable (COMPLETED, or FAILED with a 5xx
	// under FailuresReplay; duplicates get CodeResponseUnavailable). State is
	// the record's.
	EventNotReplayable
	// EventHeartbeatFailed: a heartbeat's lease extension failed while the
	// handler ran (Err). ErrFenced means the lease is lost (taken over by a
	// duplicate, or the record expired): the heartbeats stop, and a
	// completion after a takeover is fenced (EventFenced). Any other error is the store's:
	// the heartbeat tries again every twelfth of the lease (at once after
	// one that timed out) while the lease lasts, then every third of it,
	// one event per failed attempt. Reported from the heartbeat's goroutine, with
	// the request's context values, while the handler runs.
	EventHeartbeatFailed
	// EventFinishAbandoned: the engine gave up finishing the record of a
	// handler that ran: its Finish failed on the store (EventStoreError)
	// and was not stored by a later attempt either (Options.FinishRetryFor
	// passed, Engine.Drain gave up on it, or the Finish was not retried:
	// FinishRetryFor negative, MaxFinishRetries or MaxFinishRetryBytes
	// reached). The record stays
	// PENDING until its lease runs out, and a retry then runs the handler
	// again. State and Status are what the record was to hold (the
	// handler's status), Err the last failure. It is the only event of such
	// a run besides EventStoreError: count handler runs as EventExecuted
	// plus EventFenced plus EventFinishAbandoned. Reported from the
	// goroutine that retried the Finish, with a context of its own, or,
	// when it was not retried, from the request's, after its
	// EventStoreError.
	EventFinishAbandoned
	// EventClaimReleased: the engine released in the background a claim
	// that a Begin which failed (as its context ended, or with an error its
	// store did not mark ErrNothingDone: a reply lost) had made all the
	// same (logged "idem: key released: ..."): its 503 went out, and the
	// key is free for the retry. Err is the Begin's failure, State
	// StateFailed (what the claim was finished as). Reported from the
	// goroutine that released it, with a context of its own. It comes in
	// addition to the request's events (its EventStoreError or
	// EventRejected).
	EventClaimReleased
	// EventReleaseAbandoned: the engine gave up releasing in the
	// background a claim that runs nothing (one a failed Begin may have
	// made, one held through FailOpen's unprotected run, one whose
	// transaction could not begin or whose commit failed; see
	// MaxClaimReleases): its ClaimReleaseAttempts attempts failed, or it
	// was not tried (the releases' budget full), or Engine.Drain gave up
	// on it. The key (if that claim was made) stays in flight until its
	// lease runs out: retries get CodeKeyInUse meanwhile, nothing runs
	// twice. Err is the last failure. Reported from the goroutine that
	// tried it (or Drain's, or the request's when it was not tried), with
	// a context of its own.
	EventReleaseAbandoned
)

var eventNames = [...]string{
	EventExecuted:         "executed",
	EventReplayed:         "replayed",
	EventConflict:         "conflict",
	EventInFlight:         "in-flight",
	EventLooseMismatch:    "loose-mismatch",
	EventLeaseTakeover:    "lease-takeover",
	EventFenced:           "fenced",
	EventStoreError:       "store-error",
	EventFailOpen:         "fail-open",
	EventRejected:         "rejected",
	EventNotReplayable:    "not-replayable",
	EventHeartbeatFailed:  "heartbeat-failed",
	EventFinishAbandoned:  "finish-abandoned",
	EventClaimReleased:    "claim-released",
	EventReleaseAbandoned: "release-abandoned",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event describes one thing that happened to one request. It is passed by
// value: observing costs no allocation.
type Event struct {
	// Kind is what happened.
	Kind EventKind
	// Operation is the policy's operation (its operationId).
	Operation string
	// Principal is the caller's principal as Options.Principal returned it:
	// "" under Anonymous or no Options.Principal (or when it returned ""), and in an
	// EventRejected of a request refused before it was asked (a missing or
	// invalid key, a body too large or unreadable) or whose
	// Options.Principal failed.
	Principal string
	// Key is the client's idempotency key as normalized ("" when the request had none).
	Key string
	// Protected is false when the request ran without a record (optional key
	// left out under strict/loose, or FailOpen).
	Protected bool
	// State: for EventExecuted the record's final state; for EventReplayed the replayed record's state.
	State State
	// Prior: the state the claim replaced (StatePending for a takeover,
	// StateFailed for a reclaim; 0 where the store lost it to a re-run of
	// the claim's Begin: see EventLeaseTakeover).
	Prior State
	// Status is the HTTP status sent to the client (or, for EventExecuted,
	// produced by the handler, protected or not: net/http's implicit 200 when
	// it wrote nothing). It is 0 where no answer exists yet when the event is
	// reported: EventLeaseTakeover, EventHeartbeatFailed, EventFailOpen and the EventStoreError
	// before it (the EventExecuted that follows carries the handler's
	// status), the EventExecuted (FAILED when protected: Call.End freed the
	// key) or EventStoreError of a handler that did not finish, and the
	// EventExecuted (FAILED) of a transactional handler that wrote nothing
	// once its context had ended (see Call.Finish).
	Status int
	// Code is the problem code sent with Status, for refusals (including a
	// replay of a response that was not stored: CodeResponseUnavailable, and
	// a transactional commit that failed or was fenced); "" otherwise.
	Code string
	// Err is the cause, for EventStoreError, EventFenced, EventHeartbeatFailed, EventFailOpen,
	// EventFinishAbandoned, for
	// an EventRejected caused by an error (an unreadable body or record,
	// Options.Principal's, the store call that failed as the request ended),
	// for the EventExecuted (FAILED, CodeRequestEnded) of a transaction
	// whose commit failed as the request ended, and for the EventExecuted
	// (FAILED) of a handler whose panic the engine answered but could not
	// flush, and so ended instead of raising it again (see Call.End): the
	// panic, which it unwraps to when the panic's value is an error.
	Err error
	// Duration is how long the handler ran (EventExecuted, protected or not)
	// or the duplicate waited (EventReplayed, EventInFlight, 0 when it did not wait).
	Duration time.Duration
	// Misconfigured is set on an event whose Err is marked ErrMisconfigured
	// (errors.Is): a setup that will not fix itself, unlike an outage. An
	// EventStoreError whose store marked it so (a privilege, a missing
	// table, refused credentials), answered as for any store error, and
	// the EventRejected (CodePrincipalUnavailable, Err ErrNoPrincipal) of a
	// request refused because the Engine has no Options.Principal; also a
	// later event of such a store error (EventFinishAbandoned, say). Alert
	// on it apart.
	Misconfigured bool
}

// LogValue implements slog.LogValuer: an Event passed to a log/slog
// logger (slog.Any("event", e)) is logged as a group of its non-zero
// fields: kind, operation, principal, key, protected, state, prior,
// status, code, err, duration and misconfigured, with the names of Kind and the states
// (prior=NONE for a claim of a new key).
func (e Event) LogValue() slog.Value {
	as := make([]slog.Attr, 0, 12)
	as = append(as, slog.String("kind", e.Kind.String()))
	if e.Operation != "" {
		as = append(as, slog.String("operation", e.Operation))
	}
	if e.Principal != "" {
		as = append(as, slog.String("principal", e.Principal))
	}
	if e.Key != "" {
		as = append(as, slog.String("key", e.Key))
	}
	as = append(as, slog.Bool("protected", e.Protected))
	if e.State != StateNone {
		as = append(as, slog.String("state", e.State.String()))
	}
	if e.Kind == EventExecuted && e.Protected || e.Kind == EventLeaseTakeover || e.Prior != StateNone {
		as = append(as, slog.String("prior", e.Prior.String()))
	}
	if e.Status != 0 {
		as = append(as, slog.Int("status", e.Status))
	}
	if e.Code != "" {
		as = append(as, slog.String("code", e.Code))
	}
	if e.Err != nil {
		as = append(as, slog.String("err", clip(e.Err.Error())))
	}
	if e.Duration != 0 {
		as = append(as, slog.Duration("duration", e.Duration))
	}
	if e.Misconfigured {
		as = append(as, slog.Bool("misconfigured", true))
	}
	return slog.GroupValue(as...)
}

// Observer receives events (metrics, traces). It is called synchronously on
// the request's goroutine, so it must be fast and safe for concurrent use;
// the EventExecuted (and EventNotReplayable), EventFenced or
// EventFinishAbandoned of a Finish tried again in the background (Options.FinishRetryFor), after its
// EventStoreError, and EventClaimReleased and EventReleaseAbandoned, come
// from the goroutine that retried it (or from Engine.Drain's, when it gave
// up on it), with a context of its own: the request is over, and none of its context values are
// passed on (a router may have reused them). EventHeartbeatFailed comes from
// the heartbeat's goroutine while the handler runs, with the request's
// context values but not its cancellation (the Call's Finish or End waits
// for Observe to return, so a slow Observe of this event holds the
// response back: keep it fast, as every Observe should be).
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// statusWriter is what the handler of an unprotected run writes to when
// there is an Observer, or when End answers its panic (a request that
// carries a key, or an Idempotency-Key or X-Idempotency-Key header): w
// itself, noting the status for EventExecuted and for End (unsent).
type statusWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool // the handler took the connection over
	outerCE  bool // w had a Content-Encoding when the handler was handed it (a middleware's in front)
}

// unsent reports whether nothing of the response was sent yet: the
// handler was handed the writer, sent no status, and did not hijack.
func (s *statusWriter) unsent() bool {
	return s.ResponseWriter != nil && s.status == 0 && !s.hijacked
}

// sent is the status the handler sent: net/http's implicit 200 when it
// wrote nothing, 0 when it was never handed the writer.
func (s *statusWriter) sent() int {
	if s.status == 0 && s.ResponseWriter != nil {
		return http.StatusOK
	}
	return s.status
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 && code <= 999 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// WriteString passes through (io.StringWriter).
func (s *statusWriter) WriteString(str string) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return io.WriteString(s.ResponseWriter, str)
}

// ReadFrom passes through (io.ReaderFrom: net/http's sendfile).
func (s *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{s.ResponseWriter}, r)
}

// writerOnly hides a writer's ReadFrom from io.Copy.
type writerOnly struct{ io.Writer }

// Flush passes through (http.Flusher; FlushError for
// http.ResponseController), as do Hijack and, for http.ResponseController,
// Unwrap.
func (s *statusWriter) Flush() { _ = s.FlushError() }

// FlushError flushes w, and returns its error (http.ErrNotSupported when
// it cannot flush). A flush before any write sends net/http's implicit 200
// (a server-sent events stream does so): it is noted as sent, so that End
// does not answer a later panic into that response; unless w cannot flush
// (nothing was sent).
func (s *statusWriter) FlushError() error {
	err := http.NewResponseController(s.ResponseWriter).Flush()
	if s.status == 0 && !errors.Is(err, http.ErrNotSupported) {
		s.status = http.StatusOK
	}
	return err
}

// Hijack hijacks w's connection (http.Hijacker) when w supports it.
func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err == nil {
		s.hijacked = true
	}
	return c, rw, err
}

// Unwrap returns w (http.ResponseController).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
