package idem

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unsafe"
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
//
// In tee mode the handler gets the client's header map, where a middleware
// in front of the engine may have set headers before calling it. The record
// holds what the handler produced: a representation header (Content-Type,
// Content-Encoding) that was there when the handler got the recorder and
// that it left as it was is not recorded (see outer). A compressor in front
// of the engine sets Content-Encoding, then compresses what the recorder
// passes on: the record holds the plain body, and a replay through the same
// middleware is compressed again, or not, as that request asks. Other
// allowlisted headers are recorded as the handler's response carries them.
type recorder struct {
	w        http.ResponseWriter
	p        *Policy // its respHeaders are recorded, up to respMax body bytes
	buffered bool
	active   bool
	done     bool
	http1    bool     // the request came over HTTP/1 (see noteSniffing)
	sniff    sniffing // what the record still needs for the replay's Content-Type

	wroteHeader bool
	loss        bodyLoss

	// outerLen, outerVal, outerData and outerN say, in tee mode, which
	// representation headers (in the order of representationHeaders, the
	// first of the policy's respHeaders) the client's header map had when
	// the handler got the recorder, set by a middleware in front of the
	// engine: in 4 bits each, 1 + the number of values (0 for none, or more
	// than 14), the first value's address, and its string's data and
	// length (see outerSet). With p in place of the policy's header list
	// and body limit, the recorder stays 128 bytes, and what holds it
	// (allocated per request) keeps its size class.
	outerLen  uint8
	outerVal  [alwaysStored]*string
	outerData [alwaysStored]*byte
	outerN    [alwaysStored]uint32

	header  http.Header // buffered mode
	status  int
	enc     *[]byte // pooled: head + body (up to max)
	headLen int
	full    *[]byte // buffered mode: the whole body
	gone    error   // tee mode: the client's connection failed with it
}

// sniffing says what the recorder still has to do so that a replay is
// served with the Content-Type the client got (see noteSniffing).
type sniffing uint8

const (
	sniffSettled sniffing = iota // the record gets it as it is
	sniffOnFlush                 // net/http sniffs the response and its replay alike, unless a Flush sends less than 512 bytes first
	sniffRecord                  // net/http sniffs the response, not its replay: the record must say what it sent
)

// bodyLoss says whether a record is without its body, and why: a record
// without its body is not replayable.
type bodyLoss uint8

const (
	bodyKept     bodyLoss = iota // the body is recorded
	bodyTooLarge                 // the response exceeded Response.MaxBytes
	bodyCutShort                 // the response failed after its status was sent (cutShort)
)

var errWriteAfterEnd = errors.New("idem: write to a response after its handler returned")

func (r *recorder) init(w http.ResponseWriter, p *Policy, buffered, http1 bool) {
	*r = recorder{w: w, p: p, buffered: buffered, http1: http1, active: true}
	r.enc = getBuf()
	if buffered {
		r.full = getBuf()
	} else if w != nil {
		h := w.Header()
		found := 0
		for i, name := range representationHeaders {
			if vs, ok := h[name]; ok {
				found++
				r.noteOuter(i, vs)
			}
		}
		if found < alwaysStored && len(h) > found {
			// A name set in another case (h["content-encoding"]), which
			// the record would store under its canonical name: skipped
			// when every name in h is a canonical one found.
			for k, vs := range h {
				if i := foldedIndex(k); i >= 0 && r.outerLen>>(4*i)&0xf == 0 {
					if _, ok := h[representationHeaders[i]]; !ok {
						r.noteOuter(i, vs)
					}
				}
			}
		}
	}
}

// noteOuter notes that representationHeaders[i] is vs when the handler gets
// the recorder (see outerLen).
func (r *recorder) noteOuter(i int, vs []string) {
	if len(vs) >= 15 || len(vs) > 0 && uint64(len(vs[0])) > math.MaxUint32 {
		return // not noted: recorded as the handler's
	}
	r.outerLen |= uint8(1+len(vs)) << (4 * i)
	if len(vs) > 0 {
		r.outerVal[i] = &vs[0]
		r.outerData[i] = unsafe.StringData(vs[0])
		r.outerN[i] = uint32(len(vs[0]))
	}
}

// isOuter reports whether vs is representationHeaders[i] as noted (n is
// 1 + its number of values then).
func (r *recorder) isOuter(i, n int, vs []string) bool {
	return len(vs) == n-1 && (len(vs) == 0 || &vs[0] == r.outerVal[i] &&
		unsafe.StringData(vs[0]) == r.outerData[i] && uint32(len(vs[0])) == r.outerN[i])
}

// foldedIndex returns the index in representationHeaders of the name k
// spells in another case, or -1.
func foldedIndex(k string) int {
	for i, name := range representationHeaders {
		if len(k) == len(name) && k != name && strings.EqualFold(k, name) {
			return i
		}
	}
	return -1
}

// outerSet returns the representation headers of h that are as a
// middleware in front of the engine set them (bit i for
// representationHeaders[i], the first of the policy's respHeaders): the record leaves them
// out. As they were means the same values, not equal ones: Header.Set
// makes new ones, Header.Add longer ones, and a value changed in place
// (h[name][0] = v, or append(h[name][:0], v)) is another string (a v with
// the very same bytes, the same constant, is the same value).
func (r *recorder) outerSet(h http.Header) uint8 {
	var set uint8
	for i := range r.outerVal {
		n := int(r.outerLen>>(4*i)) & 0xf
		if n == 0 {
			continue
		}
		vs, ok := h[representationHeaders[i]]
		if !ok {
			// Noted under another spelling, or deleted.
			for k, vs := range h {
				if foldedIndex(k) == i && r.isOuter(i, n, vs) {
					set |= 1 << i
					break
				}
			}
			continue
		}
		if r.isOuter(i, n, vs) {
			set |= 1 << i
		}
	}
	return set
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
	h := r.Header()
	outer := r.outerSet(h)
	*r.enc = appendRecordHeadExcept((*r.enc)[:0], code, h, r.p.respHeaders, outer)
	r.headLen = len(*r.enc)
	r.noteSniffing(code, h, outer&contentEncodingBit != 0)
	if !r.buffered && r.w != nil {
		r.w.WriteHeader(code)
	}
}

// noteSniffing settles, at WriteHeader, how the record comes to carry the
// Content-Type the client gets. When a handler sets none, net/http (HTTP/1
// and HTTP/2 alike) sends the one http.DetectContentType finds in the first
// piece of the body it sends: the whole body, or a buffer's worth (2048
// bytes, 4096 over HTTP/2), or what the handler wrote before its first
// Flush; none for no piece (a Flush before any write, an empty body). It
// does not sniff when the header h (as it is at WriteHeader: net/http then
// takes a copy) holds a Content-Type, a Content-Encoding that is not blank
// or, over HTTP/1, a Transfer-Encoding (chunkWriter.writeHeader; http2's
// writeChunk ignores it). A replay writes the stored body at once and is
// sniffed from its first 512 bytes (all DetectContentType reads), so the
// two agree and the record is left as it is, unless
//
//   - a Flush sent less than 512 bytes first (sniffOnFlush): the record
//     gets the Content-Type that piece gave, or none (a Content-Type present
//     with no value, which keeps net/http from sniffing the replay);
//   - net/http did not sniff the response but would sniff its replay (a
//     Transfer-Encoding set by the handler, which the record does not keep,
//     stops sniffing over HTTP/1): the record gets a Content-Type present
//     with no value at once;
//   - net/http sniffed the response but would not sniff its replay (a
//     Content-Type or Content-Encoding set under another spelling, which
//     net/http does not look up but the record stores under the canonical
//     name; sniffRecord): the record gets what net/http sent, at the first
//     Flush or when the response ends.
//
// The response itself is never changed: it is what the handler alone would
// have got from net/http. The record grows by a field only in these cases.
//
// A Content-Encoding a middleware in front of the engine set (outerCE; not
// recorded) is taken as absent: the replay gets it again only if that
// middleware sets it again, and the record holds what the handler alone
// would have got. A Content-Type set so is taken as present: the
// middleware sets it on the replay too.
func (r *recorder) noteSniffing(code int, h http.Header, outerCE bool) {
	if !bodyAllowedForStatus(code) {
		return // neither is sniffed
	}
	if _, ok := h["Content-Type"]; ok {
		return // stored (Content-Type is always kept): neither is sniffed
	}
	te := h["Transfer-Encoding"] // as net/http reads it: no other spelling, the first value
	orig := (outerCE || h.Get("Content-Encoding") == "") && (!r.http1 || len(te) == 0 || te[0] == "")
	rep := replaySniffs(*r.enc)
	switch {
	case orig && rep:
		r.sniff = sniffOnFlush
	case orig:
		r.sniff = sniffRecord
	case rep:
		r.recordContentType(nil)
	}
}

// bodyAllowedForStatus is net/http's: no body (and no sniffing) for 1xx, 204 and 304.
func bodyAllowedForStatus(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

// sniffed settles the Content-Type of a response net/http sniffs, now that
// it sends the first piece of the body, all that was written so far (a
// Flush), or the whole body (the response ended).
func (r *recorder) sniffed() {
	s := r.sniff
	r.sniff = sniffSettled
	if s == sniffSettled || r.loss != bodyKept {
		return // a record without its body is not replayed
	}
	body := (*r.enc)[r.headLen:]
	switch {
	case len(body) == 0 && s == sniffOnFlush:
		r.recordContentType(nil) // none sent: none replayed
	case len(body) == 0:
		// None sent, and the replay sniffs none.
	case len(body) < sniffLen || s == sniffRecord:
		r.recordContentType(body)
	}
}

// contentEncodingBit is Content-Encoding's bit in recorder.outerSet.
const contentEncodingBit = 1 << 1

// sniffLen is how much of a body http.DetectContentType reads.
const sniffLen = 512

// recordContentType adds to the record the Content-Type net/http sniffs
// from body (present with no value for a nil body).
func (r *recorder) recordContentType(body []byte) {
	v := ""
	if body != nil {
		v = http.DetectContentType(body)
	}
	*r.enc, r.headLen = insertContentType(*r.enc, r.headLen, v)
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
	if len(*r.enc)-r.headLen+len(p) > r.p.respMax {
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
		if r.sniff != sniffSettled && !errors.Is(err, http.ErrNotSupported) {
			// net/http sniffed what was written so far, even if the
			// flush then failed (as HTTP/2's of a HEAD response does,
			// with io.ErrShortWrite, after sending the header).
			r.sniffed()
		}
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

// finalize settles the status when the handler wrote nothing (200, as
// net/http), and the Content-Type net/http sniffed from the whole body, if
// the replay would not sniff it (sniffRecord).
func (r *recorder) finalize() {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	if r.sniff == sniffRecord {
		r.sniffed()
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

// unsent reports whether nothing of the response reached the client yet,
// though the engine can still answer it: buffered mode (before flushTo), or
// tee mode before a final status was written (1xx responses aside).
func (r *recorder) unsent() bool {
	return r.active && !r.done && r.w != nil && (r.buffered || !r.wroteHeader)
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
