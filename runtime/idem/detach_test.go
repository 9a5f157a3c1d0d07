package idem_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// slowStrict is a strict-server operation (through the generated
// wrapper's steps and the generated error handler, inside CaptureBody)
// that takes work to complete and honours its context: when it ends
// first, the operation returns ctx.Err() (the trial's createPayment).
// Each run sends its context's cause on ended, once it returned.
func slowStrict(f *fixture, p *idem.Policy, work time.Duration, ended chan<- error) http.Handler {
	return idem.CaptureBody(0)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cause error
		err := func() error {
			c := f.eng.Begin(r, p, idem.RequestKey)
			defer c.End()
			if c.Decision() != idem.Execute {
				c.Respond(w)
				return nil
			}
			c.Writer(w)
			f.calls.Add(1)
			ctx := c.Context()
			select {
			case <-time.After(work):
			case <-ctx.Done():
				cause = context.Cause(ctx)
				return c.HandlerFailed(ctx.Err())
			}
			return c.Complete(w, func(w http.ResponseWriter) error {
				w.WriteHeader(http.StatusCreated)
				_, err := io.WriteString(w, `{"id":"pay_1"}`)
				return err
			})
		}()
		if err != nil {
			idem.AnswerHandlerError(w, r, err, func(w http.ResponseWriter, err error) {
				f.eng.WriteHandlerError(w, r, err)
			})
		}
		if ended != nil {
			ended <- cause
		}
	}))
}

// detachPost sends a keyed POST with client c.
func detachPost(c *http.Client, url, key string) (*http.Response, error) {
	r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":1000}`))
	r.Header.Set("Idempotency-Key", key)
	return c.Do(r)
}

// HIGH-1 (the trial's TestAttemptTimeoutCtxHonouringHandler): under
// failures: replay, a client whose attempt times out cancels the request's
// context. By default the handler that honours it gives up, and its 500 is
// stored and replayed (the engine cannot know how far it got), with a
// warning that names Options.DetachHandler. With DetachHandler the
// handler's context outlives the client's going away: the operation
// completes once, its 201 is recorded, and the resume with the key gets it
// replayed.
func TestDetachHandlerClientTimeout(t *testing.T) {
	for _, detach := range []time.Duration{0, 10 * time.Second} {
		t.Run(map[bool]string{false: "default", true: "detached"}[detach > 0], func(t *testing.T) {
			logs := &lockedBuffer{}
			f := newFixture(t, idem.Options{DetachHandler: detach, Logger: slog.New(slog.NewTextHandler(logs, nil))})
			p := mustCompile(t, replaySpec())
			ended := make(chan error, 4)
			srv := httptest.NewServer(slowStrict(f, p, 400*time.Millisecond, ended))
			defer srv.Close()

			_, err := detachPost(&http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/orders", "k1")
			require.Error(t, err, "the attempt times out")
			cause := <-ended // the first run returned

			resp, err := detachPost(srv.Client(), srv.URL+"/orders", "k1")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			assert.Equal(t, int32(1), f.calls.Load(), "the operation runs once")
			if detach == 0 {
				assert.ErrorIs(t, cause, context.Canceled, "the client's going away ended the handler")
				assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "its failure is stored and replayed: %s", body)
				assert.Contains(t, logs.String(), "Options.DetachHandler")
				return
			}
			assert.NoError(t, cause, "the handler's context outlived its client")
			assert.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
			assert.Equal(t, `{"id":"pay_1"}`, string(body))
			assert.NotContains(t, logs.String(), "Options.DetachHandler")
		})
	}
}

// A retry that comes while the detached run goes on is answered in flight,
// not run: the operation runs once.
func TestDetachHandlerRetryInFlight(t *testing.T) {
	f := newFixture(t, idem.Options{DetachHandler: 10 * time.Second})
	p := mustCompile(t, replaySpec())
	ended := make(chan error, 4)
	srv := httptest.NewServer(slowStrict(f, p, 400*time.Millisecond, ended))
	defer srv.Close()
	_, err := detachPost(&http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/orders", "k1")
	require.Error(t, err)
	resp, err := detachPost(srv.Client(), srv.URL+"/orders", "k1")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "in flight")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	<-ended // the first run
	<-ended // the in-flight answer
	assert.Equal(t, int32(1), f.calls.Load())
}

// DetachHandler bounds how long a handler goes on for a client that went
// away: its context ends that long after, with a cause that says so, and
// under failures: replay the answer of the handler that gives up then is
// stored as any failure's.
func TestDetachHandlerGraceEnds(t *testing.T) {
	f := newFixture(t, idem.Options{DetachHandler: 100 * time.Millisecond})
	p := mustCompile(t, replaySpec())
	ended := make(chan error, 4)
	srv := httptest.NewServer(slowStrict(f, p, 10*time.Second, ended))
	defer srv.Close()
	start := time.Now()
	_, err := detachPost(&http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/orders", "k1")
	require.Error(t, err)
	cause := <-ended
	took := time.Since(start)
	require.Error(t, cause)
	assert.False(t, errors.Is(cause, context.Canceled), "a cause of its own: %v", cause)
	assert.Contains(t, cause.Error(), "DetachHandler")
	assert.GreaterOrEqual(t, took, 150*time.Millisecond, "the attempt's 50ms, then the grace")
	assert.Less(t, took, 5*time.Second)
}

// The request's deadline (a timeout middleware in front of the engine) is
// the server's own bound: it ends a detached handler's context as it would
// the request's (DeadlineExceeded), and the handler's context keeps the
// request's values.
func TestDetachHandlerKeepsDeadlineAndValues(t *testing.T) {
	type vk struct{}
	f := newFixture(t, idem.Options{DetachHandler: 10 * time.Second})
	p := mustCompile(t, replaySpec())
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
	r.Header.Set("Idempotency-Key", "k1")
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), vk{}, "v"), 50*time.Millisecond)
	defer cancel()
	r = r.WithContext(ctx)
	c := f.eng.Begin(r, p, idem.RequestKey)
	defer c.End()
	require.Equal(t, idem.Execute, c.Decision())
	hctx := c.Context()
	assert.NotEqual(t, ctx, hctx, "detached")
	assert.Equal(t, "v", hctx.Value(vk{}))
	dl, ok := hctx.Deadline()
	want, _ := ctx.Deadline()
	assert.True(t, ok)
	assert.Equal(t, want, dl)
	assert.Equal(t, hctx, c.Request().Context())
	select {
	case <-hctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the request's deadline did not end the handler's context")
	}
	assert.ErrorIs(t, hctx.Err(), context.DeadlineExceeded)
}

// A run that is not protected (no key under an optional key) keeps the
// request's own context, and so does every run without DetachHandler.
func TestDetachHandlerOnlyProtected(t *testing.T) {
	s := replaySpec()
	s.Key.Required = idem.Optional
	p := mustCompile(t, s)
	for _, tc := range []struct {
		detach time.Duration
		key    string
		same   bool
	}{{0, "k1", true}, {time.Second, "", true}, {time.Second, "k1", false}} {
		f := newFixture(t, idem.Options{DetachHandler: tc.detach})
		r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
		if tc.key != "" {
			r.Header.Set("Idempotency-Key", tc.key)
		}
		c := f.eng.Begin(r, p, idem.RequestKey)
		require.Equal(t, idem.Execute, c.Decision())
		assert.Equal(t, tc.same, c.Context() == r.Context(), "%+v", tc)
		c.End()
	}
}
