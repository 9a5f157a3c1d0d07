package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/examples/coupons/api"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
	"github.com/idemgen/idemgen/runtime/redisstore"
)

// The guards a run can put in front of the coupon service.
const (
	guardNaive   = "naive"   // the hand-written guard of naive.go
	guardIdemgen = "idemgen" // the generated wrapper (api.Idempotency)
)

const (
	couponID    = "FULL300-50"
	couponTitle = "50 off orders of 300 or more (members only)"
)

// config is one story: the flags of the command.
type config struct {
	Store     string // memory or redis: the idemgen run's record store
	RedisURL  string
	Seed      uint64  // the network's faults: the same seed, the same faults per member and request
	Members   int     // members claiming at once
	Coupons   int     // the stock
	FaultRate float64 // share of requests that meet a fault
	TimeScale float64 // the client's waits (backoff, Retry-After) are multiplied by it
}

// result is what one run did.
type result struct {
	Guard    string
	Requests int // HTTP requests the app sent, retries included
	Lost     int // responses lost after the server handled the request
	Resets   int // connections reset before the request reached the server
	Busy     int // 503s with Retry-After, answered before the server

	Claims         int // coupons issued (the service's ledger)
	Duplicates     int // coupons issued beyond one per member
	MembersWithTwo int // members holding two coupons or more
	Conflicts      int // answers "this key was used for another request"
	FalseConflicts int // ... to a retry that differed only in client_time, retry_count or trace_id
	Replays        int // stored responses returned again
	Refused        int // idemgen: requests refused unrun, the store failing at Begin (503) or the key in flight (409)
	ToldFailed     int // members the app told "claim failed" at least once
	WithCoupon     int // members holding at least one coupon
	NoAnswer       int // members whose claim ended with neither a coupon nor "sold out"
	Elapsed        time.Duration

	outcomes []memberOutcome
}

// runStory runs the story once, with guard in front of the coupon service:
// cfg.Members members claim at the same moment, over real HTTP (an
// httptest server on loopback) through faultnet.
// The idemgen run keeps its records in store (nil: in memory).
func runStory(ctx context.Context, cfg config, guard string, store idem.Store) (result, error) {
	res := result{Guard: guard}
	svc := newCouponService(couponID, couponTitle, cfg.Coupons)
	audit := &conflictAudit{first: map[string][]byte{}}

	var handler http.Handler
	var replays func() int
	refusals := func() int { return 0 }
	switch guard {
	case guardNaive:
		// The service as oapi-codegen serves it, behind the hand-written guard.
		g := newNaiveGuard(api.HandlerWithOptions(api.NewStrictHandler(svc, nil), api.StdHTTPServerOptions{}))
		handler = g
		replays = func() int { return g.Stats().Replays }
	case guardIdemgen:
		var n, refused atomic.Int64
		x := api.NewIdempotency(store, idem.Options{
			Principal: principal, // keys are per member
			Observer: idem.ObserverFunc(func(_ context.Context, e idem.Event) {
				switch {
				case e.Kind == idem.EventReplayed:
					n.Add(1)
				case e.Kind == idem.EventInFlight, e.Kind == idem.EventStoreError && !e.Protected:
					refused.Add(1)
				}
			}),
		})
		defer x.Close()
		// The one line of docs/server.md: the strict handler with the
		// generated middleware, body capture and error handler added.
		handler = x.StrictHandler(svc, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})
		replays = func() int { return int(n.Load()) }
		refusals = func() int { return int(refused.Load()) }
	default:
		return res, fmt.Errorf("unknown guard %q", guard)
	}
	srv := httptest.NewServer(authenticate(audit.wrap(handler)))
	defer srv.Close()

	// The network between the members' phones and the service.
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = cfg.Members
	defer base.CloseIdleConnections()
	lossy := faultnet.NewTransport(base, faultnet.RandomPerKey(cfg.Seed, faultnet.Rates{
		Drop:        cfg.FaultRate / 2, // the incident's fault: the server handled the claim, the answer never arrived
		Reset:       cfg.FaultRate / 4,
		Unavailable: cfg.FaultRate / 4,
		RetryAfter:  "1",
	}, faultnet.HeaderKey("Authorization"))) // the faults of a member's n-th request depend on the seed alone
	doer := api.NewIdempotentDoer(
		&http.Client{Transport: stampClientTime{next: lossy, now: time.Now}},
		idemclient.WithClock(scaledClock{scale: cfg.TimeScale}))

	members := make([]*member, cfg.Members)
	for i := range members {
		m, err := newMember(fmt.Sprintf("m%04d", i+1), srv.URL, couponID, doer)
		if err != nil {
			return res, err
		}
		members[i] = m
	}
	start := time.Now()
	res.outcomes = make([]memberOutcome, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() { res.outcomes[i] = m.claim(ctx) })
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	if err := ctx.Err(); err != nil {
		return res, err
	}

	st := lossy.Stats()
	res.Requests, res.Lost, res.Resets, res.Busy = st.Requests, st.Count(faultnet.Drop), st.Count(faultnet.Reset), st.Count(faultnet.Unavailable)
	res.Conflicts, res.FalseConflicts = audit.counts()
	res.Replays, res.Refused = replays(), refusals()
	perMember := map[string]int{}
	for _, c := range svc.ledger(couponID) {
		perMember[c.Member]++
		res.Claims++
	}
	for _, n := range perMember {
		res.WithCoupon++
		if n > 1 {
			res.Duplicates += n - 1
			res.MembersWithTwo++
		}
	}
	for _, o := range res.outcomes {
		if o.ToldFailed > 0 {
			res.ToldFailed++
		}
		if !o.Claimed && !o.SoldOut {
			res.NoAnswer++
		}
	}
	return res, nil
}

// openStore returns the idemgen run's record store: nil for the in-memory
// store the generated NewIdempotency makes, or a Redis store.
func openStore(ctx context.Context, cfg config) (idem.Store, func(), error) {
	switch cfg.Store {
	case "memory":
		return nil, func() {}, nil
	case "redis":
		if cfg.RedisURL == "" {
			return nil, nil, errors.New("-store redis needs a Redis server: pass -redis-url or set IDEMGEN_REDIS_URL (scripts/services start prints it)")
		}
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return nil, nil, fmt.Errorf("-redis-url %q: %w", cfg.RedisURL, err)
		}
		conn, err := net.DialTimeout("tcp", opt.Addr, 2*time.Second)
		if err != nil {
			return nil, nil, fmt.Errorf("the Redis server at %s is not reachable: %w (start one with: eval \"$(scripts/services start)\")", opt.Addr, err)
		}
		conn.Close()
		opt.ContextTimeoutEnabled = true // redisstore requires it: the request's deadline bounds each call
		opt.PoolSize = max(opt.PoolSize, 64)
		client := redis.NewClient(opt)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := client.Ping(pctx).Err(); err != nil {
			client.Close()
			return nil, nil, fmt.Errorf("the Redis server at %s does not answer: %w", opt.Addr, err)
		}
		store, err := redisstore.New(client, redisstore.Options{Prefix: "idemgen:example:coupons:"})
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		return store, func() { client.Close() }, nil
	}
	return nil, nil, fmt.Errorf("-store must be memory or redis, not %q", cfg.Store)
}

// conflictAudit sits in front of either guard and counts the answers that
// refuse a retry as a different request, and among them the false ones: a
// retry whose body equals the first body of its key once client_time,
// retry_count and trace_id are left out. It is the report's ground truth and
// takes no part in any decision.
type conflictAudit struct {
	mu               sync.Mutex
	first            map[string][]byte // member + key -> the first body
	conflicts, false int
}

func (a *conflictAudit) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if r.Method != http.MethodPost || key == "" {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		id := r.Header.Get("Authorization") + " " + key
		a.mu.Lock()
		first, seen := a.first[id]
		if !seen {
			a.first[id] = body
		}
		a.mu.Unlock()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if isConflictBody(rec.status, rec.body.Bytes()) {
			a.mu.Lock()
			a.conflicts++
			if seen && sameApartFromVolatile(first, body) {
				a.false++
			}
			a.mu.Unlock()
		}
	})
}

func (a *conflictAudit) counts() (conflicts, falseOnes int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conflicts, a.false
}

// isConflictBody reports whether an answer says the key was used for a
// different request: idemgen's 422 IDEMPOTENCY_KEY_REUSED or the naive
// guard's 409 IDEMPOTENCY_KEY_CONFLICT.
func isConflictBody(status int, body []byte) bool {
	if status != http.StatusConflict && status != http.StatusUnprocessableEntity {
		return false
	}
	var p struct{ Code string }
	_ = json.Unmarshal(body, &p)
	return p.Code == "IDEMPOTENCY_KEY_REUSED" || p.Code == "IDEMPOTENCY_KEY_CONFLICT"
}

// statusRecorder passes a response through and keeps its status and, for
// 409 and 422, its body.
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if s.status == http.StatusConflict || s.status == http.StatusUnprocessableEntity {
		s.body.Write(b)
	}
	return s.ResponseWriter.Write(b)
}

// sameApartFromVolatile reports whether two claim bodies are the same claim:
// equal once the members the app changes between attempts are left out.
func sameApartFromVolatile(a, b []byte) bool {
	var x, y map[string]any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	for _, m := range []map[string]any{x, y} {
		delete(m, "client_time")
		delete(m, "retry_count")
		delete(m, "trace_id")
	}
	return reflect.DeepEqual(x, y)
}
