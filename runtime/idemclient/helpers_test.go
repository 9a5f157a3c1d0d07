package idemclient

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock sleeps by moving its own time forward at once.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	onLoop func() // called in Sleep, before returning
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onLoop != nil {
		c.onLoop()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

// Advance moves the clock's time forward by d, as time taken elsewhere
// (a server that holds a request).
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// seen is a request as the server received it.
type seen struct {
	Method, Path, RawQuery string
	Key                    string
	Body                   string
	Header                 http.Header
}

// recServer records every request and answers with reply(n, r) (n from 1).
type recServer struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []seen
	conns atomic.Int32
}

type reply struct {
	status int
	header map[string]string
	body   string
}

// unavailableOnce answers a recServer's first request 503 and every other
// one with status: a call that succeeds on its first retry.
func unavailableOnce(status int) func(n int, r *http.Request) reply {
	return func(n int, _ *http.Request) reply {
		if n == 1 {
			return reply{status: 503}
		}
		return reply{status: status}
	}
}

func newRecServer(t testing.TB, answer func(n int, r *http.Request) reply) *recServer {
	s := &recServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Idempotency-Key"), string(body), r.Header.Clone()})
		n := len(s.reqs)
		s.mu.Unlock()
		rep := reply{status: http.StatusCreated, body: fmt.Sprintf(`{"n":%d}`, n)}
		if answer != nil {
			rep = answer(n, r)
		}
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *recServer) Seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func problemReply(status int, code string, header map[string]string) reply {
	if header == nil {
		header = map[string]string{}
	}
	header["Content-Type"] = "application/problem+json"
	return reply{status: status, header: header, body: fmt.Sprintf(`{"title":"x","status":%d,"code":%q}`, status, code)}
}

// hookLog collects attempts.
type hookLog struct {
	mu sync.Mutex
	at []Attempt
}

func (h *hookLog) hook(_ context.Context, a Attempt) {
	h.mu.Lock()
	h.at = append(h.at, a)
	h.mu.Unlock()
}

func (h *hookLog) attempts() []Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Attempt(nil), h.at...)
}

// fastPolicy has deterministic ceilings 100ms, 200ms, 400ms, 800ms, 1s, 1s...
func fastPolicy(attempts int) Policy {
	return Policy{MaxAttempts: attempts, Backoff: Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: JitterNone}}
}
