package redisstore

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// lossyProxy forwards TCP connections to a Redis server. It lets the
// EVALSHA commands chosen by loseReplies through to the server, swallows
// the server's reply and closes the connection: the script ran, and the
// client sees the connection drop. go-redis then sends the command again on
// a new connection (its MaxRetries, 3 by default), so the script runs twice.
type lossyProxy struct {
	ln      net.Listener
	dropped atomic.Int32 // replies swallowed
	hold    atomic.Int64 // how long a lost reply's connection stays open, silent, before it is closed (ns)
	// refuse closes every connection the proxy accepts at once (the
	// client's reconnects fail), and refuseOnLoss sets it when a reply is
	// lost, before that reply's connection is closed; closeOnLoss closes
	// the proxy's listener then instead (the client's dials are refused).
	refuse, refuseOnLoss, closeOnLoss atomic.Bool

	mu      sync.Mutex
	evals   int32                 // EVALSHA commands forwarded
	lose    map[int32]bool        // the numbers (evals counts from 1) of those whose reply is lost
	answers map[int32]proxyAnswer // the numbers of those the proxy answers itself
	conns   []net.Conn
}

// proxyAnswer is an error reply the proxy gives an EVALSHA instead of the
// server's: after it forwarded the command (the server's reply is
// swallowed; a proxy that failed after forwarding), or without forwarding
// it (a refusal: the server did not run it).
type proxyAnswer struct {
	reply   string // RESP, e.g. "-ERR upstream failure\r\n"
	forward bool
}

// answer has the proxy answer the next EVALSHA commands itself: the
// first answer the next one, the second the one after, and so on; a zero
// proxyAnswer leaves its command to the server (or to loseReplies).
func (p *lossyProxy) answer(as ...proxyAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers = make(map[int32]proxyAnswer)
	for i, a := range as {
		if a != (proxyAnswer{}) {
			p.answers[p.evals+int32(i)+1] = a
		}
	}
}

// loseReplies has the replies of the next EVALSHA commands lost: 1 the
// next one, 2 the one after, and so on.
func (p *lossyProxy) loseReplies(next ...int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lose = make(map[int32]bool)
	for _, n := range next {
		p.lose[p.evals+n] = true
	}
}

// evalsha counts an EVALSHA command and reports whether its reply is
// lost, or answered by the proxy (ans).
func (p *lossyProxy) evalsha() (lose bool, ans *proxyAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evals++
	if a, ok := p.answers[p.evals]; ok {
		ans = &a
	}
	return p.lose[p.evals], ans
}

func (p *lossyProxy) evalCount() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evals
}

func newLossyProxy(t *testing.T, upstream string) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lossyProxy{ln: ln}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refuse.Load() {
				_ = c.Close()
				continue
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go p.serve(c, u)
		}
	}()
	return p
}

// serve forwards one connection both ways. The client's commands are read
// whole before they are forwarded (go-redis writes one command per write,
// and these are small), so the flag that marks the command whose reply
// is lost is set before the server can answer it.
func (p *lossyProxy) serve(c, u net.Conn) {
	var lose atomic.Bool
	var replace atomic.Pointer[string] // the reply that replaces the server's next one
	go func() {
		defer u.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				forward := true
				if bytes.Contains(bytes.ToLower(buf[:n]), []byte("evalsha")) {
					l, ans := p.evalsha()
					switch {
					case l:
						lose.Store(true)
					case ans != nil && ans.forward:
						replace.Store(&ans.reply)
					case ans != nil:
						forward = false
						if _, err := io.WriteString(c, ans.reply); err != nil {
							return
						}
					}
				}
				if !forward {
					continue
				}
				if _, err := u.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			if lose.Load() {
				p.dropped.Add(1)
				if p.refuseOnLoss.Load() {
					p.refuse.Store(true)
				}
				if p.closeOnLoss.Load() {
					_ = p.ln.Close()
				}
				time.Sleep(time.Duration(p.hold.Load()))
				_ = u.Close()
				return
			}
			out := buf[:n]
			if r := replace.Swap(nil); r != nil {
				out = []byte(*r)
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// lossyStore returns a Store whose client (go-redis defaults, MaxRetries 3,
// unless the opts change them) reaches the test server through a
// lossyProxy, with its scripts loaded.
func lossyStore(t *testing.T, opts ...func(*redis.Options)) (*Store, *lossyProxy) {
	opt, err := redis.ParseURL(testenv.RedisURL(t))
	require.NoError(t, err)
	p := newLossyProxy(t, opt.Addr)
	opt.Addr = p.ln.Addr().String()
	opt.ContextTimeoutEnabled = true
	for _, o := range opts {
		o(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	s := newStoreOn(t, c, Options{})
	require.NoError(t, s.LoadScripts(ctxTimeout(t, 5*time.Second)))
	return s, p
}

// lose runs f with the reply to its first EVALSHA lost, and checks that the
// script did run twice.
func (p *lossyProxy) loseOnce(t *testing.T, f func()) {
	t.Helper()
	before := p.evalCount()
	p.loseReplies(1)
	f()
	require.Equal(t, int32(1), p.dropped.Swap(0), "replies lost")
	require.Equal(t, int32(2), p.evalCount()-before, "EVALSHA commands sent: the first, and go-redis's retry")
}

// TestLostReply: a script whose reply was lost runs again (go-redis resends
// it), and the second run answers what the first did: Begin its claim,
// Finish and ExtendLease success. Before the scripts recognised their own
// re-run, Begin reported the request's own PENDING record (not acquired:
// the engine answered 409 and the key stayed blocked for the lease) and
// Finish reported ErrFenced for a completion it had written.
func TestLostReply(t *testing.T) {
	s, p := lossyStore(t)
	ctx := ctxTimeout(t, 10*time.Second)
	const tk = idem.Token(0x8000_0000_dead_beef)
	req := &idem.BeginRequest{Key: "k", Token: tk, Fingerprint: fp(1), Lease: 30 * time.Second, TTL: time.Hour}

	p.loseOnce(t, func() {
		res, err := s.Begin(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, idem.BeginResult{Acquired: true}, res, "Begin whose first run claimed the key")
	})
	rec, ok, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, idem.StatePending, rec.State)
	assert.Equal(t, tk, rec.Token)

	p.loseOnce(t, func() {
		assert.NoError(t, s.ExtendLease(ctx, "k", tk, time.Minute), "ExtendLease whose first run extended the lease")
	})

	p.loseOnce(t, func() {
		assert.NoError(t, s.Finish(ctx, "k", tk, idem.StateCompleted, []byte(`{"id":1}`)), "Finish whose first run completed the record")
	})
	rec, _, err = s.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, idem.StateCompleted, rec.State)
	assert.Equal(t, `{"id":1}`, string(rec.Response))

	// A reclaimable failure, finished the same way: the key is free again,
	// not held by a claim nobody runs.
	req.Key, req.Token = "f", tk+1
	p.loseOnce(t, func() {
		r, err := s.Begin(ctx, req)
		require.NoError(t, err)
		assert.True(t, r.Acquired)
	})
	p.loseOnce(t, func() {
		assert.NoError(t, s.Finish(ctx, "f", tk+1, idem.StateFailed, nil))
	})
	r, err := s.Begin(ctx, &idem.BeginRequest{Key: "f", Token: tk + 2, Fingerprint: fp(1), Lease: time.Second, TTL: time.Hour})
	require.NoError(t, err)
	assert.Equal(t, idem.BeginResult{Acquired: true, Prior: idem.StateFailed}, r)
}

// TestLostReplyEngine: through the engine, a request whose Begin and Finish
// replies were lost runs its handler once and answers it, its completion
// is not reported fenced, and a retry replays.
func TestLostReplyEngine(t *testing.T) {
	s, p := lossyStore(t)
	var mu sync.Mutex
	var kinds []idem.EventKind
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous, Observer: idem.ObserverFunc(func(_ context.Context, ev idem.Event) {
		mu.Lock()
		kinds = append(kinds, ev.Kind)
		mu.Unlock()
	})})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict})
	var runs atomic.Int32
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/x", nil)
		req.Header.Set("Idempotency-Key", "0193a8f0-0000-7000-8000-0000000000aa")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	// The first request's Begin (EVALSHA 1, resent as 2), then its Finish
	// (3, resent as 4), each lose their reply.
	p.loseReplies(1, 3)
	first := do()
	assert.Equal(t, http.StatusCreated, first.Code, "first request: %s", first.Body)
	assert.Equal(t, int32(2), p.dropped.Load(), "replies lost")
	second := do()
	assert.Equal(t, http.StatusCreated, second.Code, "retry: %s", second.Body)
	assert.Equal(t, int32(1), runs.Load(), "handler runs")
	mu.Lock()
	defer mu.Unlock()
	assert.NotContains(t, kinds, idem.EventFenced)
	assert.Contains(t, kinds, idem.EventExecuted)
}

// TestLostReplyLate: a claim whose reply is lost on a connection that stays
// silent longer than the lease (go-redis resends the script only when the
// connection drops, or at its ReadTimeout, 3 s by default) is resent after
// its lease ran out. The re-run finds the request's own claim and renews
// its lease: a duplicate that arrives while the handler runs is in flight
// (409), and the handler runs once. Before the begin script renewed the
// lease, the re-run answered acquired with the lease already run out, and
// the duplicate took the claim over at once and ran the handler a second
// time beside the first.
func TestLostReplyLate(t *testing.T) {
	s, p := lossyStore(t)
	const lease = 500 * time.Millisecond
	p.hold.Store(int64(2 * lease))
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true}) // no extension hides the lease the claim got
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: lease}})
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/x", nil)
		req.Header.Set("Idempotency-Key", "0193a8f0-0000-7000-8000-0000000000bb")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	p.loseReplies(1) // the first request's Begin
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- do() }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first request's handler did not start")
	}
	dup := do()
	close(release)
	assert.Equal(t, http.StatusCreated, (<-first).Code)
	assert.Equal(t, int32(1), p.dropped.Load(), "replies lost")
	assert.Equal(t, http.StatusConflict, dup.Code, "the duplicate, while the first runs: %s", dup.Body)
	assert.Equal(t, int32(1), runs.Load(), "handler runs")
}

// TestLostBeginReplyReleased: a Begin whose reply was lost with its
// connection, and whose retries could not reconnect, claimed the key on
// Redis; the engine answers 503 (nothing ran) and releases that claim in
// the background, so the client's retry runs (before: 409
// IDEMPOTENCY_KEY_IN_USE for the whole lease).
func TestLostBeginReplyReleased(t *testing.T) {
	s, p := lossyStore(t)
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: time.Hour}})
	var runs atomic.Int32
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/x", nil)
		req.Header.Set("Idempotency-Key", "0193a8f0-0000-7000-8000-0000000000cc")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	p.refuseOnLoss.Store(true)
	p.loseReplies(1)
	first := do()
	require.Equal(t, http.StatusServiceUnavailable, first.Code, "%s", first.Body)
	require.Equal(t, int32(1), p.dropped.Load())
	p.refuse.Store(false) // Redis is reachable again
	require.NoError(t, eng.Drain(ctxTimeout(t, 20*time.Second)))
	retry := do()
	assert.Equal(t, http.StatusCreated, retry.Code, "the claim was released: %s", retry.Body)
	assert.Equal(t, int32(1), runs.Load())
}
