package idem_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

type codedError struct{ code int }

func (e *codedError) Error() string { return "coded" }

// strictServer is what oapi-codegen's std-http strict server and the
// generated wrapper do with an operation that returns err: Begin, run,
// HandlerFailed, End (deferred), then, after the wrapper returned, the
// strict server's error handler (answer, nil: none installed), all inside
// CaptureBody unless bare. got receives what the wrapper returned.
func strictServer(f *fixture, p *idem.Policy, opErr error, answer func(w http.ResponseWriter, err error), bare bool, got *error) http.Handler {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := func() error {
			c := f.eng.Begin(r, p, idem.RequestKey)
			defer c.End()
			if c.Decision() != idem.Execute {
				c.Respond(w)
				return nil
			}
			c.Writer(w)
			f.calls.Add(1)
			if r.Body != nil {
				_, _ = io.Copy(io.Discard, r.Body)
			}
			return c.HandlerFailed(opErr)
		}()
		if got != nil {
			*got = err
		}
		if err == nil {
			return
		}
		if answer == nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // oapi-codegen's default, not wrapped
			return
		}
		idem.AnswerHandlerError(w, r, err, answer)
	}))
	if bare {
		return h
	}
	return idem.CaptureBody(0)(h)
}

func post(h http.Handler, key string, body bool) *httptest.ResponseRecorder {
	var b io.Reader
	if body {
		b = strings.NewReader(`{"item":"x"}`)
	}
	r := httptest.NewRequest(http.MethodPost, "/orders", b)
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func replaySpec() idem.Spec {
	s := strictSpec()
	s.Failures = idem.FailuresReplay
	return s
}

// HandlerFailed returns the operation's error unchanged (errors.Is,
// errors.As, a type assertion and == see it as it is), and
// AnswerHandlerError hands the answer the error it is given.
func TestHandlerErrorUnchanged(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	opErr := &codedError{code: 7}
	wrapped := errors.Join(errors.New("context"), opErr)
	var got, answered error
	h := strictServer(f, p, wrapped, func(w http.ResponseWriter, err error) {
		answered = err
		http.Error(w, err.Error(), http.StatusBadGateway)
	}, false, &got)
	first := post(h, "k1", true)
	assert.Equal(t, http.StatusBadGateway, first.Code)
	assert.True(t, got == wrapped, "HandlerFailed returns err itself")
	assert.True(t, answered == wrapped, "the answer gets the error it is given")
	again := post(h, "k1", true)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
}

// Under failures: replay, the error handler's answer is recorded and
// replayed, for a request with a body and one without; the operation runs
// once and its Call ends once (one EventExecuted).
func TestHandlerErrorAnswerIsReplayed(t *testing.T) {
	for _, body := range []bool{true, false} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		p := mustCompile(t, replaySpec())
		h := strictServer(f, p, errors.New("boom"), func(w http.ResponseWriter, err error) {
			http.Error(w, "mapped: "+err.Error(), http.StatusServiceUnavailable)
		}, false, nil)
		first := post(h, "k1", body)
		again := post(h, "k1", body)
		assert.Equal(t, http.StatusServiceUnavailable, first.Code)
		assert.Equal(t, "mapped: boom\n", first.Body.String())
		assert.Equal(t, http.StatusServiceUnavailable, again.Code, "body %v", body)
		assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"), "body %v", body)
		assert.Equal(t, first.Body.String(), again.Body.String())
		assert.Equal(t, int32(1), f.calls.Load(), "body %v", body)
		assert.Equal(t, 1, count(f.obs.kinds(), idem.EventExecuted), "body %v", body)
	}
}

func count(ks []idem.EventKind, k idem.EventKind) (n int) {
	for _, x := range ks {
		if x == k {
			n++
		}
	}
	return n
}

// Every other case ends the Call once and frees the key: the error handler
// is not the generated one (CaptureBody ends the Call once the strict
// server returned), it writes nothing (AnswerHandlerError ends it), the
// request is not bounded by CaptureBody, the policy is failures: retry.
// Under failures: replay the engine warns once per operation, naming the
// generated error handler.
func TestHandlerErrorFreesKeyOtherwise(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, error)
		bare   bool
		retry  bool
	}{
		{name: "not installed"},
		{name: "writes nothing", answer: func(http.ResponseWriter, error) {}},
		{name: "no CaptureBody", answer: func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) }, bare: true},
		{name: "failures retry", answer: func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) }, retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, body := range []bool{true, false} {
				var logs bytes.Buffer
				f := newFixture(t, idem.Options{Principal: idem.Anonymous, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				spec := replaySpec()
				if tc.retry {
					spec.Failures = idem.FailuresRetry
				}
				p := mustCompile(t, spec)
				opErr := errors.New("boom")
				var got error
				h := strictServer(f, p, opErr, tc.answer, tc.bare, &got)
				for range 3 {
					w := post(h, "k1", body)
					assert.Empty(t, w.Header().Get("Idempotent-Replayed"))
					assert.True(t, got == opErr, "body %v: HandlerFailed returns err itself", body)
				}
				assert.Equal(t, int32(3), f.calls.Load(), "body %v: the key is freed", body)
				assert.Equal(t, 3, count(f.obs.kinds(), idem.EventExecuted), "body %v: each Call ends once", body)
				n := strings.Count(logs.String(), "under failures: replay, a handler that returns an error")
				if tc.retry {
					assert.Zero(t, n, logs.String())
					continue
				}
				assert.Equal(t, 1, n, logs.String())
				if tc.bare {
					assert.Contains(t, logs.String(), "not bounded by CaptureBody")
					continue
				}
				assert.Contains(t, logs.String(), "ResponseErrorHandler")
			}
		})
	}
}

// In transactional mode the error rolls back and frees the key, as before:
// HandlerFailed returns the error itself.
func TestHandlerErrorTransactional(t *testing.T) {
	f, ft := newTxFixture(t)
	p := mustCompile(t, replaySpec())
	var got error
	h := strictServer(f, p, errors.New("boom"), func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), 500) }, false, &got)
	for range 2 {
		post(h, "k1", true)
		assert.EqualError(t, got, "boom")
	}
	assert.Equal(t, int32(2), f.calls.Load())
	assert.Equal(t, 2, ft.rollbacks)
}

// End called again, and HandlerFailed called twice, change nothing: the
// Call is handed on once and ended once.
func TestHandlerErrorEndsOnce(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	var second error
	h := idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := f.eng.Begin(r, p, idem.RequestKey)
		if c.Decision() != idem.Execute {
			c.Respond(w)
			c.End()
			return
		}
		c.Writer(w)
		err := c.HandlerFailed(errors.New("boom"))
		second = c.HandlerFailed(errors.New("again"))
		c.End()
		c.End()
		idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) { http.Error(w, err.Error(), http.StatusBadGateway) })
		// Its Call ended, the error goes to the answer as it is, and
		// nothing more is recorded.
		idem.AnswerHandlerError(w, r, err, func(got http.ResponseWriter, gotErr error) {
			assert.Equal(t, err, gotErr)
			assert.Equal(t, w, got, "not the Call's recorder")
		})
		c.End()
	}))
	first, again := post(h, "k1", true), post(h, "k1", true)
	assert.Equal(t, http.StatusBadGateway, first.Code)
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.EqualError(t, second, "again", "the second HandlerFailed is not handed on")
	assert.Equal(t, 1, count(f.obs.kinds(), idem.EventExecuted))
}

// CaptureBody bounds a request without a body with one small allocation
// (an empty body of its own, not pooled: a goroutine that outlives
// CaptureBody under a timeout middleware may still hold it), left in
// place.
func TestCaptureBodyBodilessAllocs(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/orders", nil)
	var seen io.ReadCloser
	h := idem.CaptureBody(0)(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = r.Body }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.NotEqual(t, http.NoBody, seen, "bounded")
	n, err := seen.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, seen, r.Body, "left in place")
	r.Body = http.NoBody
	assert.Equal(t, 1.0, testing.AllocsPerRun(200, func() { r.Body = http.NoBody; h.ServeHTTP(w, r) }))
}

// An error handler that panics is a handler that panics: End (deferred by
// AnswerHandlerError) answers and frees the key, the panic goes on, and
// CaptureBody, unwinding, ends nothing twice.
func TestHandlerErrorAnswerPanics(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	p := mustCompile(t, replaySpec())
	h := strictServer(f, p, errors.New("boom"), func(http.ResponseWriter, error) { panic("mapping failed") }, false, nil)
	for range 2 {
		func() {
			defer func() { assert.Equal(t, "mapping failed", recover()) }()
			post(h, "k1", true)
		}()
	}
	assert.Equal(t, int32(2), f.calls.Load(), "the key is freed")
	assert.Equal(t, 2, count(f.obs.kinds(), idem.EventExecuted))
}
