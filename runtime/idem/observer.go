package idem

import (
	"context"
	"strconv"
	"time"
)

// EventKind names what happened to a request.
type EventKind uint8

const (
	// EventExecuted: the handler ran and its record was finished (State says
	// how: StateCompleted, or StateFailed with or without a stored response).
	// Also reported for unprotected executions (Protected false).
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
	// with CodeStoreUnavailable unless FailOpen ran it (then EventFailOpen follows).
	EventStoreError
	// EventFailOpen: Options.FailOpen ran the handler without protection after a store error.
	EventFailOpen
	// EventRejected: the request was refused before reaching the store
	// (missing or invalid key, body too large or unreadable; Code says which).
	EventRejected
	// EventNotReplayable: the response exceeded Response.MaxBytes; the record
	// was completed as not replayable (duplicates get CodeResponseUnavailable).
	EventNotReplayable
)

var eventNames = [...]string{
	EventExecuted:      "executed",
	EventReplayed:      "replayed",
	EventConflict:      "conflict",
	EventInFlight:      "in-flight",
	EventLooseMismatch: "loose-mismatch",
	EventLeaseTakeover: "lease-takeover",
	EventFenced:        "fenced",
	EventStoreError:    "store-error",
	EventFailOpen:      "fail-open",
	EventRejected:      "rejected",
	EventNotReplayable: "not-replayable",
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
	Kind      EventKind
	Operation string
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
	// Status is the HTTP status sent to the client (or, for EventExecuted, produced by the handler).
	Status int
	// Code is the problem code, for refusals.
	Code string
	// Err is the cause, for EventStoreError, EventFenced, EventFailOpen.
	Err error
	// Duration is how long the handler ran (EventExecuted) or the duplicate waited (EventReplayed, EventInFlight).
	Duration time.Duration
}

// Observer receives events (metrics, traces). It is called synchronously on
// the request's goroutine, so it must be fast and safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }
