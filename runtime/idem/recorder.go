package idem

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// recorder is the http.ResponseWriter a handler writes to under a claim. In
// tee mode every write goes to the client at once and is recorded (status,
// allowlisted headers, body up to Response.MaxBytes); in buffered
// (transactional) mode nothing reaches the client until flushTo.
//
// The record is encoded as the response streams (see record.go): the head at
// WriteHeader, the body appended after it.
//
// A write that fails because the client went away (tee mode) does not cut
// the record short: a retry must get the response the handler produced, not
// the part the client received. From then on the handler's writes succeed
// and go to the record only, as in buffered mode, until the response exceeds
// Response.MaxBytes (it is then stored as not replayable, and writes and
// flushes return the connection's error so the handler can stop). Errors
// that are the handler's own doing (http.ErrBodyNotAllowed,
// http.ErrContentLength, http.ErrHijacked) are returned as they are, and
// only what the client accepted is recorded, since that is the response.
type recorder struct {
	w        http.ResponseWriter
	allow    []string
	max      int
	buffered bool
	active   bool
	done     bool

	header      http.Header // buffered mode
	wroteHeader bool
	status      int
	enc         *[]byte // pooled: head + body (up to max)
	headLen     int
	loss        bodyLoss
	full        *[]byte // buffered mode: the whole body
	gone        error   // tee mode: the client's connection failed with it
}

// bodyLoss says whether a record is without its body, and why: a record
// without its body is not replayable.
type bodyLoss uint8

const (
	bodyKept     bodyLoss = iota // the body is recorded
	bodyTooLarge                 // the response exceeded Response.MaxBytes
	bodyCutShort                 // the response failed after its status was sent (cutShort)
)

var errWriteAfterEnd = errors.New("idem: write to a response after its handler returned")

func (r *recorder) init(w http.ResponseWriter, p *Policy, buffered bool) {
	*r = recorder{w: w, allow: p.respHeaders, max: p.respMax, buffered: buffered, active: true}
	r.enc = getBuf()
	if buffered {
		r.full = getBuf()
	}
}

// Header implements http.ResponseWriter.
func (r *recorder) Header() http.Header {
	if r.buffered || r.w == nil {
		if r.header == nil {
			r.header = make(http.Header)
		}
		return r.header
	}
	return r.w.Header()
}

// WriteHeader implements http.ResponseWriter. 1xx informational responses
// pass through (tee mode) and are not recorded.
func (r *recorder) WriteHeader(code int) {
	if r.done {
		return
	}
	if r.wroteHeader {
		if !r.buffered && r.w != nil {
			r.w.WriteHeader(code) // let net/http report the superfluous call
		}
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 {
		if !r.buffered && r.w != nil {
			r.w.WriteHeader(code)
		}
		return
	}
	r.wroteHeader = true
	r.status = code
	*r.enc = appendRecordHead((*r.enc)[:0], code, r.Header(), r.allow)
	r.headLen = len(*r.enc)
	if !r.buffered && r.w != nil {
		r.w.WriteHeader(code)
	}
}

// Write implements http.ResponseWriter.
func (r *recorder) Write(p []byte) (int, error) {
	if r.done {
		return 0, errWriteAfterEnd
	}
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if r.buffered {
		*r.full = append(*r.full, p...)
		r.keep(p)
		return len(p), nil
	}
	n := 0 // what reached the client
	if r.w != nil && r.gone == nil {
		var err error
		if n, err = r.w.Write(p); err != nil {
			if handlerWriteError(err) {
				// Refused for the response's own framing: the record
				// holds what the client accepted, and the handler hears.
				r.keep(p[:n])
				return n, err
			}
			r.gone = err // the client went away: from now on, the record only
		}
	}
	r.keep(p)
	switch {
	case r.gone == nil && r.w != nil:
		return n, nil
	case r.gone != nil && r.loss != bodyKept:
		return n, r.gone // no longer recorded either: the handler may stop
	}
	return len(p), nil // recorded
}

// handlerWriteError reports whether a failed write to the client's
// ResponseWriter is the handler's own doing (the response's framing forbids
// the bytes) rather than the connection's.
func handlerWriteError(err error) bool {
	return errors.Is(err, http.ErrBodyNotAllowed) || errors.Is(err, http.ErrContentLength) ||
		errors.Is(err, http.ErrHijacked)
}

// WriteString implements io.StringWriter.
func (r *recorder) WriteString(s string) (int, error) {
	if r.done {
		return 0, errWriteAfterEnd
	}
	bp := getBuf()
	*bp = append((*bp)[:0], s...)
	n, err := r.Write(*bp)
	putBuf(bp)
	return n, err
}

func (r *recorder) keep(p []byte) {
	if r.loss != bodyKept {
		return
	}
	if len(*r.enc)-r.headLen+len(p) > r.max {
		r.loss = bodyTooLarge
		*r.enc = (*r.enc)[:r.headLen]
		return
	}
	*r.enc = append(*r.enc, p...)
}

// Flush implements http.Flusher (see FlushError).
func (r *recorder) Flush() { _ = r.FlushError() }

// FlushError sends what was written so far to the client (tee mode); in
// buffered mode it does nothing, since nothing may reach the client before
// the commit. http.ResponseController.Flush uses it. Once the client went
// away it does nothing either (see recorder), and fails only when the
// response is no longer recorded.
func (r *recorder) FlushError() error {
	if r.done {
		return errWriteAfterEnd
	}
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if r.buffered || r.w == nil {
		return nil
	}
	if r.gone == nil {
		err := http.NewResponseController(r.w).Flush()
		if err == nil || errors.Is(err, http.ErrNotSupported) || handlerWriteError(err) {
			return err
		}
		r.gone = err
	}
	if r.loss != bodyKept {
		return r.gone
	}
	return nil
}

// Unwrap returns the client's ResponseWriter, for http.ResponseController
// (deadlines, full duplex). Hijacking a recorded response is not supported:
// see Hijack.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// errHijack is what Hijack returns; errors.Is(err, http.ErrNotSupported).
var errHijack = fmt.Errorf("idem: hijacking a recorded response: %w", http.ErrNotSupported)

// Hijack refuses: what a handler writes on a hijacked connection cannot be
// recorded, so a retry would replay a response the client never got.
// http.ResponseController looks for Hijack before Unwrap, so this keeps it
// from reaching the connection through Unwrap.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, errHijack }

// finalize settles the status when the handler wrote nothing (200, as net/http).
func (r *recorder) finalize() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
}

// cutShort marks a response whose writer failed (a strict Visit that
// returned an error) after its status was sent to the client (tee mode): the
// handler ran and the client got the status and perhaps part of the body, so
// the record is kept, without its body and not replayable (as a response
// above Response.MaxBytes). It reports false, changing nothing, when nothing
// reached the client (buffered mode, or no status written yet).
func (r *recorder) cutShort() bool {
	if !r.active || r.done || r.buffered || r.w == nil || !r.wroteHeader {
		return false
	}
	r.loss = bodyCutShort
	*r.enc = (*r.enc)[:r.headLen]
	return true
}

// record returns the encoded record (aliasing the pooled buffer; valid until end).
func (r *recorder) record() []byte {
	b := *r.enc
	if r.loss != bodyKept {
		b[1] |= flagNotReplayable
	}
	return b
}

// tag appends t to the record (see recordTag) and returns it, as record.
func (r *recorder) tag(t *recordTag) []byte {
	*r.enc = appendRecordTag(*r.enc, t)
	return *r.enc
}

// flushTo writes a buffered response to the client.
func (r *recorder) flushTo() {
	if !r.buffered || r.w == nil {
		return
	}
	dst := r.w.Header()
	for k, v := range r.header {
		dst[k] = v
	}
	r.w.WriteHeader(r.status)
	if len(*r.full) > 0 {
		_, _ = r.w.Write(*r.full)
	}
}

// end returns the buffers; later writes fail.
func (r *recorder) end() {
	r.done = true
	if r.enc != nil {
		putBuf(r.enc)
		r.enc = nil
	}
	if r.full != nil {
		putBuf(r.full)
		r.full = nil
	}
}
