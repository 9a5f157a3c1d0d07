// Package faultnet injects network faults between an HTTP client and a
// server, for tests of idempotent APIs: it loses responses after the server
// handled the request, resets connections before the request is sent, delays
// requests, truncates response bodies, and answers 503 or 409 (in flight)
// without forwarding.
//
// Faults come from a [Plan]: [Script] (fixed order), [Random] (seeded
// draws) or any [PlanFunc]. Two injectors share the plans:
//
//   - [Transport], an http.RoundTripper: in-process and fast; its connection
//     faults are synthetic errors wrapping the errors a real socket would
//     give (ECONNRESET, io.ErrUnexpectedEOF), marked with [ErrInjected];
//   - [Proxy], an http.Handler to run in front of the server (for example
//     in an httptest.Server): its connection faults are real (a TCP reset
//     after hijacking the client's connection), so the client's own
//     transport produces the errors it would produce in production.
//
// Both are safe for concurrent use and count what they did ([Stats]).
package faultnet

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Kind is a kind of fault.
type Kind uint8

const (
	// Pass forwards the request and returns the response untouched.
	Pass Kind = iota
	// Reset fails the request before it reaches the server (the connection is reset).
	Reset
	// Drop forwards the request, lets the server handle it, then loses the
	// response: the client sees its connection reset.
	Drop
	// Delay waits Fault.Delay (or until the request's context ends), then forwards.
	Delay
	// Unavailable answers 503 with Retry-After and a problem+json body
	// (code IDEMPOTENCY_STORE_UNAVAILABLE) without forwarding.
	Unavailable
	// InFlight answers 409 with Retry-After and a problem+json body (code
	// IDEMPOTENCY_KEY_IN_USE) without forwarding, as a server does while
	// the same key is being handled.
	InFlight
	// Truncate forwards the request, then cuts the response body in half:
	// the client sees an unexpected EOF while reading it.
	Truncate
	numKinds
)

var kindNames = [numKinds]string{"pass", "reset", "drop", "delay", "unavailable", "in-flight", "truncate"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Fault is what to do with one request.
type Fault struct {
	Kind Kind
	// Delay is the wait of a Delay fault.
	Delay time.Duration
	// RetryAfter is the Retry-After value of Unavailable and InFlight faults
	// (default "1"); "-" sends none.
	RetryAfter string
}

// Faults of each kind, for scripts.
var (
	PassFault        = Fault{Kind: Pass}
	ResetFault       = Fault{Kind: Reset}
	DropFault        = Fault{Kind: Drop}
	TruncateFault    = Fault{Kind: Truncate}
	UnavailableFault = Fault{Kind: Unavailable}
	InFlightFault    = Fault{Kind: InFlight}
)

// DelayFault returns a Delay fault of d.
func DelayFault(d time.Duration) Fault { return Fault{Kind: Delay, Delay: d} }

func (f Fault) retryAfter() string {
	if f.RetryAfter == "" {
		return "1"
	}
	return f.RetryAfter
}

// Plan decides the fault for each request. Implementations must be safe for
// concurrent use.
type Plan interface {
	Next(req *http.Request) Fault
}

// PlanFunc adapts a function to a Plan.
type PlanFunc func(req *http.Request) Fault

// Next calls f.
func (f PlanFunc) Next(req *http.Request) Fault { return f(req) }

// Script returns a Plan that gives the i-th request (in arrival order)
// faults[i], and Pass once the script is used up.
func Script(faults ...Fault) Plan {
	s := &script{faults: faults}
	return s
}

type script struct {
	mu     sync.Mutex
	faults []Fault
	i      int
}

func (s *script) Next(*http.Request) Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.i >= len(s.faults) {
		return PassFault
	}
	f := s.faults[s.i]
	s.i++
	return f
}

// Rates are the probabilities of each fault, per request; what is left up
// to 1 passes. Delay faults wait Delay; Unavailable and InFlight answers
// carry RetryAfter (default "1").
type Rates struct {
	Reset, Drop, Delay, Unavailable, InFlight, Truncate float64
	DelayFor                                            time.Duration
	RetryAfter                                          string
}

// Random returns a Plan drawing each request's fault from rates with a PCG
// generator seeded by seed. The sequence of draws is fixed by the seed;
// which concurrent request gets which draw depends on arrival order (use
// [RandomPerKey] for determinism under concurrency).
func Random(seed uint64, rates Rates) Plan {
	return &random{rates: rates, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

type random struct {
	rates Rates
	mu    sync.Mutex
	rng   *rand.Rand
}

func (r *random) Next(*http.Request) Fault {
	r.mu.Lock()
	u := r.rng.Float64()
	r.mu.Unlock()
	return r.rates.pick(u)
}

// RandomPerKey returns a Plan in which the fault of the n-th request with
// the same keyOf(req) is a function of (seed, keyOf(req), n) alone, so a
// test with fixed keys gets the same faults whatever the scheduling of its
// goroutines. keyOf typically reads the Idempotency-Key header (see [HeaderKey]).
func RandomPerKey(seed uint64, rates Rates, keyOf func(*http.Request) string) Plan {
	return &perKey{seed: seed, rates: rates, keyOf: keyOf, seen: map[string]uint64{}}
}

// HeaderKey returns a key function reading request header name.
func HeaderKey(name string) func(*http.Request) string {
	return func(r *http.Request) string { return r.Header.Get(name) }
}

type perKey struct {
	seed  uint64
	rates Rates
	keyOf func(*http.Request) string
	mu    sync.Mutex
	seen  map[string]uint64
}

func (p *perKey) Next(req *http.Request) Fault {
	k := p.keyOf(req)
	p.mu.Lock()
	n := p.seen[k]
	p.seen[k] = n + 1
	p.mu.Unlock()
	h := fnv.New64a()
	_, _ = h.Write([]byte(k))
	rng := rand.New(rand.NewPCG(p.seed^h.Sum64(), n))
	return p.rates.pick(rng.Float64())
}

func (r Rates) pick(u float64) Fault {
	for _, c := range []struct {
		p float64
		f Fault
	}{
		{r.Reset, ResetFault},
		{r.Drop, DropFault},
		{r.Delay, Fault{Kind: Delay, Delay: r.DelayFor}},
		{r.Unavailable, Fault{Kind: Unavailable, RetryAfter: r.RetryAfter}},
		{r.InFlight, Fault{Kind: InFlight, RetryAfter: r.RetryAfter}},
		{r.Truncate, TruncateFault},
	} {
		if u < c.p {
			return c.f
		}
		u -= c.p
	}
	return PassFault
}

// Stats counts requests by the fault applied, and how many reached the server.
type Stats struct {
	Requests  int
	Forwarded int // requests the server received (Pass, Drop, Delay, Truncate)
	ByKind    [numKinds]int
}

// Count returns the number of requests that got fault kind k.
func (s Stats) Count(k Kind) int {
	if k >= numKinds {
		return 0
	}
	return s.ByKind[k]
}

type counter struct {
	mu sync.Mutex
	s  Stats
}

func (c *counter) add(k Kind, forwarded bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.Requests++
	if k < numKinds {
		c.s.ByKind[k]++
	}
	if forwarded {
		c.s.Forwarded++
	}
}

func (c *counter) get() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// ErrInjected marks every error a [Transport] makes up.
var ErrInjected = errors.New("faultnet: injected fault")

// problem writes the JSON problem body of an answered fault.
func problem(status int, code string) []byte {
	return fmt.Appendf(nil, `{"type":"about:blank","title":%q,"status":%d,"code":%q,"detail":"injected by faultnet"}`,
		http.StatusText(status), status, code)
}

func answer(f Fault) (status int, h http.Header, body []byte) {
	h = http.Header{}
	h.Set("Content-Type", "application/problem+json")
	if ra := f.retryAfter(); ra != "-" {
		h.Set("Retry-After", ra)
	}
	if f.Kind == InFlight {
		return http.StatusConflict, h, problem(http.StatusConflict, "IDEMPOTENCY_KEY_IN_USE")
	}
	return http.StatusServiceUnavailable, h, problem(http.StatusServiceUnavailable, "IDEMPOTENCY_STORE_UNAVAILABLE")
}
