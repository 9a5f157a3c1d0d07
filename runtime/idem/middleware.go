package idem

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Middleware returns net/http middleware that protects a handler with policy
// p. It is Handler in the shape routers expect.
func (e *Engine) Middleware(p *Policy) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler { return e.Handler(p, h) }
}

// Handler protects h with policy p: the first request with a key executes h
// (its response is recorded as it streams to the client), duplicates get the
// replay or a problem. It is a thin user of Begin/Call. It calls Serves(p).
// A request the engine already records in front of it (a doubled wiring:
// see Nested) goes straight to h.
func (e *Engine) Handler(p *Policy, h http.Handler) http.Handler {
	if p == nil || h == nil {
		panic("idem: Handler with a nil policy or handler")
	}
	e.Serves(p)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.Nested(w, p) {
			// The engine in front records this request already (see
			// Nested).
			h.ServeHTTP(w, r)
			return
		}
		c := callPool.Get().(*Call)
		c.initPooled(e, p, r)
		c.viaHandler = true
		c.begin(RequestKey)
		if c.decision != Execute {
			// Nothing of this Call reached the handler, and the replayed
			// header values were copied out of it: it can be used again.
			c.Respond(w)
			c.endPooled()
			return
		}
		// What the handler is handed may outlive it (a careless handler
		// that keeps its ResponseWriter): it lives apart from the Call.
		c.h = new(handout)
		defer c.endPooled()
		h.ServeHTTP(c.Writer(w), c.Request())
		c.Finish()
	})
}

// CaptureBody returns net/http middleware that lets Begin fingerprint a
// request body that something else decodes first: oapi-codegen's
// strict-server handlers decode the JSON body before any strict middleware
// runs, so wrap the router (the http.Handler from HandlerFromMux or
// HandlerWithOptions) with it.
//
// It reads nothing by itself: it tees r.Body, keeping up to maxBytes (default
// 1 MiB; set it to at least the largest Request.MaxBytes) of what the
// decoder reads, and Begin reads the rest. Routes without an idempotency
// policy are not affected (a larger body just stops being kept). Requests
// with the methods GET, HEAD, OPTIONS and TRACE pass untouched. A request
// of another method without a body gets an empty body of its own (it reads
// io.EOF, as http.NoBody, but is not http.NoBody; one small allocation),
// left in place when CaptureBody returns: it bounds the request for a
// strict handler's returned error (see Call.HandlerFailed).
//
// A middleware inside it may replace r.Body (gzip decompression,
// http.MaxBytesReader, chi's RequestSize). Engine.Handler then reads the
// replacement, as it would without CaptureBody (nothing downstream has read
// it yet), and fingerprints the body the handler sees. Begin called after a
// strict-server decoder read the body through the replacement fingerprints
// the bytes that came on the wire instead, all of them, and leaves r.Body,
// the replacement, to the handler: it reads the rest of the wire body into
// the capture's kept bytes, and the capture serves the replacement's later
// reads from them, so a replacement that reads lazily or ahead (a gzip or
// zstd reader) still reads every byte. On that path the wire bytes are
// hashed as they are when they are not JSON (a compressed body: another
// compression level is another request, and volatile members are not left
// out). A key is then taken from the wire bytes only when Begin is given
// RequestKey for a body-carried key: idemgen's strict-server wrappers pass
// the key from the typed request instead (a header or query parameter, and
// a body key that is a top-level string member of an application/json-only
// body, taken from the decoded body); any other body key (a nested member,
// a member of another type, a body with several content types) is read from
// the wire bytes, and a compressed body, which is not JSON, is refused with
// 400 IDEMPOTENCY_KEY_INVALID.
//
// CaptureBody does not bound the body on the wire: what reads it (a
// strict server's decoder) reads all of it, and only then is a request of
// an idempotent operation refused with 413. CaptureBodyFor does.
func CaptureBody(maxBytes int64) func(http.Handler) http.Handler {
	return CaptureBodyFor(maxBytes, nil)
}

// CaptureBodyFor is CaptureBody that bounds the body of the requests of
// idempotent operations on the wire: route returns the policy of the
// operation a request is for (nil for any other request, which it serves
// as CaptureBody(maxBytes) does: not bounded). The body of a request of
// policy p is kept up to p's Request.MaxBytes, and once more than that
// came, reading it returns an *http.MaxBytesError and the wire is read no
// further: a strict server's decoder stops there, and its error handler
// answers the error with Engine.RefuseTooLarge (the 413
// IDEMPOTENCY_REQUEST_TOO_LARGE problem the engine answers such a body
// with itself). idemgen's generated CaptureBody is CaptureBodyFor with
// route the generated route matcher, so a CaptureBody around the whole
// router bounds only the operations with a contract, each by its own
// request.max-bytes.
//
// route runs for every request of a method that may carry a body, before
// the request reaches the router (keep it cheap).
func CaptureBodyFor(maxBytes int64, route func(*http.Request) *Policy) func(http.Handler) http.Handler {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxRequestBytes
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
				next.ServeHTTP(w, r)
				return
			}
			if r.Body == nil || r.Body == http.NoBody {
				// A request without a body is bounded all the same (see
				// Call.HandlerFailed), by an empty body of its own set in
				// place (one small allocation; not pooled, as a
				// goroutine that outlives CaptureBody, under a timeout
				// middleware, may still hold it), and left there: such a
				// goroutine may read r.Body.
				nb := new(noBody)
				r.Body = nb
				defer nb.close()
				next.ServeHTTP(w, r)
				return
			}
			cp := &capture{Context: r.Context(), rc: r.Body, max: maxBytes, buf: getBuf()}
			if route != nil {
				if p := route(r); p != nil {
					cp.policy, cp.max = p, p.reqMax
				}
			}
			cp.holders.Store(1)
			r2 := r.WithContext(cp)
			r2.Body = cp
			defer cp.release()
			next.ServeHTTP(w, r2)
		})
	}
}

type captureKey struct{}

// noBody is the body of a request without one while CaptureBody serves
// it: empty, as http.NoBody, and the request's bound.
type noBody struct{ bound }

func (*noBody) Read([]byte) (int, error) { return 0, io.EOF }
func (*noBody) Close() error             { return nil }

// isNoBody reports whether b is a request's empty body: nil, http.NoBody or
// CaptureBody's noBody.
func isNoBody(b io.ReadCloser) bool {
	if b == nil || b == http.NoBody {
		return true
	}
	_, ok := b.(*noBody)
	return ok
}

// capture is both the request body (a tee of the original) and the request
// context that leads Begin to it, in one allocation.
//
// Before drain, every byte read from rc is handed to the reader and kept
// (unless overflow). drain reads the rest of rc into buf; from then on Read
// serves the kept bytes not yet handed out (buf[served:]).
type capture struct {
	context.Context
	// mu serializes Read, drain and release: a replacement may read the
	// capture from a goroutine of its own (a read-ahead decompressor)
	// while Begin drains it. Read holds it across rc.Read; release, which
	// may run while such a goroutine is still blocked there, only tries it
	// (the buffer then goes to the garbage collector, not the pool).
	mu       sync.Mutex
	released atomic.Bool
	// holders: CaptureBody, and each Call whose body aliases buf (drain
	// holds it for the Call, Call.end drops it). The last drop pools buf:
	// under a timeout middleware inside CaptureBody, a Call may outlive it.
	holders  atomic.Int32
	rc       io.ReadCloser
	buf      *[]byte
	max      int64
	served   int // bytes of buf handed out by Read, once drained
	overflow bool
	eof      bool
	drained  bool
	err      error
	read     bool // something read from it
	// policy, under CaptureBodyFor, is the policy of the request's
	// operation: the body is bounded on the wire at max, its
	// Request.MaxBytes (Read returns an *http.MaxBytesError past it).
	policy *Policy
	bound  // the Call a strict wrapper left open (HandlerFailed)
}

func (c *capture) Value(key any) any {
	if _, ok := key.(captureKey); ok {
		return c
	}
	return c.Context.Value(key)
}

func (c *capture) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	c.read = true
	if c.drained {
		if c.served < len(*c.buf) {
			n := copy(p, (*c.buf)[c.served:])
			c.served += n
			return n, nil
		}
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	if c.policy != nil {
		if c.overflow {
			return 0, &http.MaxBytesError{Limit: c.max}
		}
		// At most one byte past the bound is read from the wire: it
		// tells a body of exactly max bytes from a longer one.
		if room := c.max - int64(len(*c.buf)) + 1; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := c.rc.Read(p)
	c.keep(p[:n])
	if c.policy != nil && c.overflow {
		// keep dropped the bytes kept: the request is refused (drain
		// reports errTooLarge), nothing is handed out past the bound.
		return 0, &http.MaxBytesError{Limit: c.max}
	}
	if err == io.EOF {
		c.eof = true
	} else if err != nil {
		c.err = err
	}
	return n, err
}

func (c *capture) keep(p []byte) {
	if c.overflow || len(p) == 0 {
		return
	}
	if int64(len(*c.buf)+len(p)) > c.max {
		c.overflow = true
		*c.buf = (*c.buf)[:0]
		return
	}
	*c.buf = append(*c.buf, p...)
}

func (c *capture) Close() error { return c.rc.Close() }

// drain reads the rest of the body and returns all of it, aliasing the
// capture's buffer, which it holds for the caller (see hold) when it
// returns no error: the caller drops it once nothing of it aliases the
// bytes. Later Reads of the capture serve the bytes drain read (see
// capture).
func (c *capture) drain(limit int64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released.Load() {
		return nil, errBodyConsumed
	}
	if !c.drained && !c.overflow {
		// Every kept byte so far was handed out by Read.
		c.served = len(*c.buf)
	}
	c.drained = true
	for !c.eof && c.err == nil && !c.overflow {
		b := *c.buf
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		// At most one byte past the bound (the capture's or the
		// operation's, the smaller) is read from the wire: it tells a
		// body of exactly the bound from a longer one, and the spare
		// capacity of a large buffer is not filled past it.
		room := min(c.max, limit) - int64(len(b))
		if room < 0 { // Reads before drain kept more than limit
			return nil, errTooLarge
		}
		dst := b[len(b):cap(b)]
		if int64(len(dst))-1 > room {
			dst = dst[:room+1]
		}
		n, err := c.rc.Read(dst)
		*c.buf = b[:len(b)+n]
		if int64(len(*c.buf)) > c.max {
			c.overflow = true
		}
		if int64(len(*c.buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			c.eof = true
		} else if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			c.overflow = true // a bound under the capture (another capture's, a MaxBytesReader's)
		} else if err != nil {
			c.err = err
		}
	}
	switch {
	case c.overflow:
		return nil, errTooLarge
	case c.err != nil:
		if mbe := (*http.MaxBytesError)(nil); errors.As(c.err, &mbe) {
			return nil, errTooLarge // a bound under the capture, met by a Read before drain (a decoder's)
		}
		return nil, c.err
	case int64(len(*c.buf)) > limit:
		return nil, errTooLarge
	}
	// Held under mu, found unreleased above: pooling buf takes mu, so
	// no drop pools it before this hold. A release that dropped to zero
	// meanwhile failed its TryLock: the caller's drop, the last, pools
	// it.
	c.hold()
	return *c.buf, nil
}

// wasRead reports whether anything read the capture.
func (c *capture) wasRead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

func (c *capture) release() {
	c.bound.close()
	c.released.Store(true)
	c.drop()
}

// hold keeps buf from the pool until the matching drop: a Call whose body
// aliases it (drain) may outlive CaptureBody under a timeout middleware.
// Called by drain, under mu, once it found the capture unreleased.
func (c *capture) hold() { c.holders.Add(1) }

// drop lets go of buf; the last holder pools it (unless a Read or drain
// holds mu: the buffer then goes to the garbage collector). Once buf is
// pooled, released is set, so no drain holds it again.
func (c *capture) drop() {
	if c.holders.Add(-1) != 0 {
		return
	}
	if c.mu.TryLock() {
		putBuf(c.buf)
		c.buf = nil
		c.mu.Unlock()
	}
}

// findCapture returns the request's capture, if CaptureBody wrapped it, and
// whether r.Body is still the capture. When a middleware inside CaptureBody
// replaced r.Body (a decompressing reader, http.MaxBytesReader), the capture
// is still returned: Begin fingerprints the wire bytes it holds (see
// Call.readBody), whether or not something read them already.
func findCapture(r *http.Request) (cp *capture, isBody bool) {
	if cp, ok := r.Body.(*capture); ok {
		return cp, true
	}
	if cp, ok := r.Context().Value(captureKey{}).(*capture); ok {
		return cp, false
	}
	return nil, false
}
