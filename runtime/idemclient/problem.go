package idemclient

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// Problem codes of the contract (besides [CodeKeyInUse], [CodeKeyReused]
// and [CodeResponseUnavailable]): every code the server (runtime/idem)
// writes. All but [CodeHandlerFailed] and [CodeHandlerPanicked] are the
// idempotency layer's answers; those two carry the operation's own
// failure, in the contract's problem shape.
const (
	CodeKeyMissing       = "IDEMPOTENCY_KEY_MISSING"
	CodeKeyInvalid       = "IDEMPOTENCY_KEY_INVALID"
	CodeStoreUnavailable = "IDEMPOTENCY_STORE_UNAVAILABLE"
	// CodeRecordUnreadable (500): the server could not decode the record
	// stored for the key. Never retried: a corrupt record does not heal,
	// and every retry with the key would get the same answer.
	CodeRecordUnreadable = "IDEMPOTENCY_RECORD_UNREADABLE"
	// CodeQuotaExceeded (429, with Retry-After): the server's store
	// refused a new key of this caller, who holds too large a share of it;
	// nothing ran. Retried as a 429.
	CodeQuotaExceeded = "IDEMPOTENCY_QUOTA_EXCEEDED"
	// CodeRequestTooLarge (413): the request body is larger than the
	// server fingerprints; nothing ran.
	CodeRequestTooLarge = "IDEMPOTENCY_REQUEST_TOO_LARGE"
	// CodeRequestUnreadable (400): the server could not read the request
	// body; nothing ran.
	CodeRequestUnreadable = "IDEMPOTENCY_REQUEST_UNREADABLE"
	// CodePrincipalUnavailable (500): the server could not tell who the
	// caller is (its principal function failed); nothing ran.
	CodePrincipalUnavailable = "IDEMPOTENCY_PRINCIPAL_UNAVAILABLE"
	// CodeRequestEnded (503, or 499 when the client went away): the
	// request's own context ended while the server checked its key;
	// nothing ran, a retry with the key is safe.
	CodeRequestEnded = "IDEMPOTENCY_REQUEST_ENDED"
	// CodeHandlerPanicked (500): the operation itself panicked; the
	// server freed the key, so a retry with it runs the operation again
	// (which may have done part of its work). Not an idempotency refusal:
	// the operation's own failure.
	CodeHandlerPanicked = "IDEMPOTENCY_HANDLER_PANICKED"
	// CodeHandlerFailed (500): the operation itself returned an error that
	// the service answered with no response of its own (the generated
	// strict servers' default error handler); its text is not sent. Not an
	// idempotency refusal: the operation's own failure. Under the
	// contract's failures: replay it is recorded and replayed (with
	// Idempotent-Replayed: true) to every retry with the key for the whole
	// window; under failures: retry the key is freed and a retry runs the
	// operation again.
	CodeHandlerFailed = "IDEMPOTENCY_HANDLER_FAILED"
)

// ProblemError is a response that ended a call with one of the contract's
// RFC 9457 problems (its code starts with IDEMPOTENCY_), as [Call.Check]
// reports it. Retrying the same call cannot change 400s (a missing or
// invalid key: a client bug) nor [CodeKeyReused] (the key was used for
// another request: a different body, or a resumed call whose body changed)
// nor [CodeResponseUnavailable] (the request ran, but its response was not
// stored) nor [CodeRecordUnreadable] (the server cannot read the key's
// record);
// [CodeKeyInUse] and [CodeStoreUnavailable] mean the attempts (or the
// deadline) ran out while the server could not answer yet: resume the call
// later with [WithKey](Key). When the deadline ran out, the [Doer] returns
// no response but an [*Error] whose Problem is this error (errors.As finds
// either).
type ProblemError struct {
	Status int    // the response status
	Code   string // the problem's code, e.g. IDEMPOTENCY_KEY_REUSED
	// Title and Detail are the problem's title and detail members ("" when
	// the body had none).
	Title, Detail string
	// RetryAfter is the wait the response asked for (0 if none).
	RetryAfter time.Duration
	// Key is the call's idempotency key.
	Key string
	// Attempts is the number of attempts the call made, the last (which
	// got this problem) included.
	Attempts int
	// OriginalStatus is the problem's original_status member: for
	// [CodeResponseUnavailable], the status the request ran with (0 when
	// the problem has none, or it is not an integer).
	OriginalStatus int
}

func (e *ProblemError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "idemclient: %s (%d %s)", e.Code, e.Status, http.StatusText(e.Status))
	if e.Key != "" {
		fmt.Fprintf(&b, " key=%s", e.Key)
	}
	if e.Attempts != 0 {
		fmt.Fprintf(&b, " attempts=%d", e.Attempts)
	}
	if e.RetryAfter != 0 {
		fmt.Fprintf(&b, " retry-after=%v", e.RetryAfter)
	}
	if e.OriginalStatus != 0 {
		fmt.Fprintf(&b, " original-status=%d", e.OriginalStatus)
	}
	if d := cmp.Or(e.Detail, e.Title); d != "" {
		fmt.Fprintf(&b, ": %s", d)
	}
	return b.String()
}

// ParseProblem returns the contract's problem a response carries (a JSON
// or problem+json body whose code starts with IDEMPOTENCY_), nil for any
// other response. Key and Attempts are left zero. A Retry-After given as a
// date is measured from time.Now ([Call.Check] uses the Doer's clock).
func ParseProblem(status int, h http.Header, body []byte) *ProblemError {
	return parseProblem(status, h, body, false, time.Now())
}

// parseProblem is ParseProblem of a body that is, when cut is set, only the
// start of a longer one (see decodeProblem).
func parseProblem(status int, h http.Header, body []byte, cut bool, now time.Time) *ProblemError {
	if status < 400 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mt != "application/problem+json" && mt != "application/json" {
		return nil
	}
	p, ok := decodeProblem(body, cut)
	return problemError(status, h, p, ok, now)
}

// problemError is parseProblem of the members p of the JSON body of an
// error status, decoded already (ok: decodeProblem's).
func problemError(status int, h http.Header, p problemMembers, ok bool, now time.Time) *ProblemError {
	if !ok || !strings.HasPrefix(p.Code, "IDEMPOTENCY_") {
		return nil
	}
	pe := &ProblemError{Status: status, Code: p.Code, Title: p.Title, Detail: p.Detail, OriginalStatus: int(p.OriginalStatus)}
	if ra, ok := ParseRetryAfter(h, now); ok {
		pe.RetryAfter = ra
	}
	return pe
}

// problemMembers are the members of a problem body the client reads.
type problemMembers struct {
	Code           string     `json:"code"`
	Title          string     `json:"title"`
	Detail         string     `json:"detail"`
	OriginalStatus lenientInt `json:"original_status"`
}

// lenientInt is an integer member that decodes to 0 when it is anything
// else, so that it never spoils the problem's code.
type lenientInt int

func (n *lenientInt) UnmarshalJSON(b []byte) error {
	var v int
	if json.Unmarshal(b, &v) == nil {
		*n = lenientInt(v)
	} else {
		*n = 0
	}
	return nil
}

// decodeProblem decodes the members of a JSON problem body, as
// json.Unmarshal does (member names matched case-insensitively, the last
// of a name winning, a member of another type spoiling the whole). When
// cut is set, b is only the start of a longer body (the part read within
// the attempt): a JSON text cut short there keeps the top-level members it
// holds whole, so the code of a problem whose detail or extension members
// run past the cut is still found. A body that is not JSON up to the cut
// decodes to nothing.
func decodeProblem(b []byte, cut bool) (problemMembers, bool) {
	var p problemMembers
	err := json.Unmarshal(b, &p)
	if err == nil {
		return p, true
	}
	if !cut {
		return problemMembers{}, false
	}
	p = problemMembers{}
	truncated := func(err error) bool { return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) }
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return problemMembers{}, false
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			if truncated(err) {
				break
			}
			return problemMembers{}, false
		}
		name, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if truncated(err) {
				break
			}
			return problemMembers{}, false
		}
		var dst *string
		switch {
		case strings.EqualFold(name, "code"):
			dst = &p.Code
		case strings.EqualFold(name, "title"):
			dst = &p.Title
		case strings.EqualFold(name, "detail"):
			dst = &p.Detail
		}
		if dst != nil && json.Unmarshal(raw, dst) != nil {
			return problemMembers{}, false
		}
		if strings.EqualFold(name, "original_status") {
			_ = p.OriginalStatus.UnmarshalJSON(raw)
		}
	}
	return p, true
}
