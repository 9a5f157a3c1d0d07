package xproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
	"github.com/idemgen/idemgen/runtime/pgstore"
	"github.com/idemgen/idemgen/runtime/redisstore"
)

// The server program. The test binary runs it when started with
// envServer=1 (see TestMain): every scenario runs several of these
// processes against one store. Its configuration comes from the environment:
//
//	IDEMGEN_XPROC_STORE          redis | pg | pgtx (pg with Options.Transactional) | mem (memstore, per process)
//	IDEMGEN_XPROC_STORE_URL      the store's server
//	IDEMGEN_XPROC_NS             the Redis key prefix, or the PostgreSQL schema
//	IDEMGEN_XPROC_EFFECTS        redis | pg | memory: where the handler's side effect goes
//	IDEMGEN_XPROC_EFFECTS_URL    the effects' server (redis, pg; in pgtx mode the store's transaction)
//	IDEMGEN_XPROC_LEASE          the in-flight lease of /wait and /nowait
//	IDEMGEN_XPROC_STORE_TIMEOUT  idem.Options.StoreTimeout
//	IDEMGEN_XPROC_MARKERS        the directory of hold markers
//
// It prints "LISTEN host:port" on stdout once it serves, and shuts down
// gracefully on SIGTERM (exit status 0).
//
// Routes (all POST, Idempotency-Key required, strict semantics):
//
//	/wait    a duplicate of a request in flight waits for it (InFlight.Wait 30s)
//	/nowait  a duplicate of a request in flight gets 409 IDEMPOTENCY_KEY_IN_USE
//	/short   as /wait, with a lease of one second (crash tests: a dead
//	         holder is taken over quickly)
//	GET /stats  {"pid", "starts", "keys": {key: handler starts}} of this process
//
// Every answer carries X-Served-By: the pid of the process that answered
// (set in front of the engine, so a replay or a problem carries it too),
// whereas a 201's body names the process whose handler ran.
//
// The handler counts its start, performs the side effect (one row in
// <ns>.effects (key, pid), or RPUSH <ns>effects:<key> pid), then answers 201
// {"key", "pid"}. Request headers steer it (they are not fingerprinted):
//
//	X-Delay: 30ms        sleep after the side effect
//	X-Hold: before|after create <markers>/<key> before or after the side
//	                     effect, then wait until <markers>/<key>.release exists
//	                     (the test kills or pauses the process meanwhile)
const (
	envServer       = "IDEMGEN_XPROC_SERVER"
	envStore        = "IDEMGEN_XPROC_STORE"
	envStoreURL     = "IDEMGEN_XPROC_STORE_URL"
	envNS           = "IDEMGEN_XPROC_NS"
	envEffects      = "IDEMGEN_XPROC_EFFECTS"
	envEffectsURL   = "IDEMGEN_XPROC_EFFECTS_URL"
	envLease        = "IDEMGEN_XPROC_LEASE"
	envStoreTimeout = "IDEMGEN_XPROC_STORE_TIMEOUT"
	envMarkers      = "IDEMGEN_XPROC_MARKERS"
)

// headerServedBy names the process that answered a request (its pid).
const headerServedBy = "X-Served-By"

// shortLease is the lease of /short.
const shortLease = time.Second

type server struct {
	pid     int
	markers string
	effect  func(ctx context.Context, key string) error

	starts atomic.Int64
	mu     sync.Mutex
	keys   map[string]int
}

// serverMain runs the server program; it returns the exit status.
func serverMain() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := serve(log); err != nil {
		log.Error("xproc server failed", "error", err)
		return 1
	}
	return 0
}

func durationEnv(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func serve(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	lease, err := durationEnv(envLease, time.Second)
	if err != nil {
		return err
	}
	storeTimeout, err := durationEnv(envStoreTimeout, 0)
	if err != nil {
		return err
	}
	s := &server{pid: os.Getpid(), markers: os.Getenv(envMarkers), keys: map[string]int{}}
	ns := os.Getenv(envNS)
	mode := os.Getenv(envStore)

	var store idem.Store
	switch mode {
	case "redis":
		c, err := redisClient(os.Getenv(envStoreURL))
		if err != nil {
			return err
		}
		defer c.Close()
		rs, err := redisstore.New(c, redisstore.Options{Prefix: ns})
		if err != nil {
			return err
		}
		defer rs.Close()
		store = rs
	case "mem":
		ms := memstore.New(memstore.Options{})
		defer ms.Close()
		store = ms
	case "pg", "pgtx":
		p, err := pgPool(ctx, os.Getenv(envStoreURL))
		if err != nil {
			return err
		}
		defer p.Close()
		ps, err := pgstore.New(p, pgstore.Options{Schema: ns})
		if err != nil {
			return err
		}
		defer ps.Close()
		store = ps
	default:
		return fmt.Errorf("%s=%q: want redis, pg, pgtx or mem", envStore, mode)
	}

	switch kind := os.Getenv(envEffects); kind {
	case "memory":
		s.effect = func(context.Context, string) error { return nil }
	case "redis":
		c, err := redisClient(os.Getenv(envEffectsURL))
		if err != nil {
			return err
		}
		defer c.Close()
		s.effect = func(ctx context.Context, key string) error {
			return c.RPush(ctx, ns+"effects:"+key, s.pid).Err()
		}
	case "pg":
		insert := `INSERT INTO ` + pgx.Identifier{ns, "effects"}.Sanitize() + ` (key, pid) VALUES ($1, $2)`
		if mode == "pgtx" {
			// The handler's own write, in the store's transaction: it commits
			// together with the COMPLETED record or not at all.
			s.effect = func(ctx context.Context, key string) error {
				tx, ok := pgstore.Tx(ctx)
				if !ok {
					return errors.New("no transaction in the handler's context")
				}
				_, err := tx.Exec(ctx, insert, key, s.pid)
				return err
			}
			break
		}
		p, err := pgPool(ctx, os.Getenv(envEffectsURL))
		if err != nil {
			return err
		}
		defer p.Close()
		s.effect = func(ctx context.Context, key string) error {
			_, err := p.Exec(ctx, insert, key, s.pid)
			return err
		}
	default:
		return fmt.Errorf("%s=%q: want memory, redis or pg", envEffects, kind)
	}

	eng := idem.New(store, idem.Options{
		Principal:             idem.Anonymous,
		Logger:                log,
		Transactional:         mode == "pgtx",
		StoreTimeout:          storeTimeout,
		UnavailableRetryAfter: time.Second,
	})
	policy := func(op string, lease, wait time.Duration) *idem.Policy {
		return idem.MustCompile(idem.Spec{
			Operation: op, Method: "POST", Semantics: idem.Strict, Window: time.Hour,
			InFlight: idem.InFlightSpec{Lease: lease, Wait: wait, RetryAfter: time.Second},
		})
	}
	mux := http.NewServeMux()
	mux.Handle("POST /wait", eng.Handler(policy("effectWait", lease, 30*time.Second), s))
	mux.Handle("POST /nowait", eng.Handler(policy("effectNoWait", lease, 0), s))
	mux.Handle("POST /short", eng.Handler(policy("effectShort", shortLease, 30*time.Second), s))
	mux.HandleFunc("GET /stats", s.stats)
	servedBy := strconv.Itoa(s.pid)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// ReadHeaderTimeout counts from the moment a new connection is served
	// (on a reused one, from the first bytes of the next request), so on a
	// loaded machine it also measures how late the test process writes a
	// request on a connection it has just dialled. With 10s, a stall that
	// long made the server close such connections unanswered: the client
	// got EOF ("http: server closed idle connection" when the request was
	// not written yet), which the duplicates test reported as duplicates
	// getting different answers, the handler having run once per key. The
	// client's own timeout bounds a request here.
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(headerServedBy, servedBy)
		mux.ServeHTTP(w, r)
	}), ReadHeaderTimeout: clientTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	fmt.Printf("LISTEN %s\n", l.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func redisClient(url string) (*redis.Client, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true
	o.PoolSize = 32
	return redis.NewClient(o), nil
}

func pgPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	// Transactional handlers hold a connection while they run.
	cfg.MaxConns = 16
	return pgxpool.NewWithConfig(ctx, cfg)
}

// ServeHTTP is the protected handler.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	s.starts.Add(1)
	s.mu.Lock()
	s.keys[key]++
	s.mu.Unlock()
	hold := r.Header.Get("X-Hold")
	if hold == "before" {
		s.hold(r.Context(), key)
	}
	if err := s.effect(r.Context(), key); err != nil {
		http.Error(w, "side effect failed: "+err.Error(), http.StatusInternalServerError) // frees the key
		return
	}
	if hold == "after" {
		s.hold(r.Context(), key)
	}
	if d, err := time.ParseDuration(r.Header.Get("X-Delay")); err == nil {
		time.Sleep(d)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"key": key, "pid": s.pid})
}

// hold announces that the handler reached its hold point, then waits for the
// test to release it (or the request to end).
func (s *server) hold(ctx context.Context, key string) {
	marker := filepath.Join(s.markers, key)
	_ = os.WriteFile(marker, []byte(strconv.Itoa(s.pid)), 0o644)
	for ctx.Err() == nil {
		if _, err := os.Stat(marker + ".release"); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type stats struct {
	PID    int            `json:"pid"`
	Starts int64          `json:"starts"`
	Keys   map[string]int `json:"keys"`
}

func (s *server) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	st := stats{PID: s.pid, Starts: s.starts.Load(), Keys: make(map[string]int, len(s.keys))}
	for k, n := range s.keys {
		st.Keys[k] = n
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// oldReadHeaderTimeout is the ReadHeaderTimeout the servers had, which
// closed connections a request was written on later than that.
const oldReadHeaderTimeout = 10 * time.Second

// TestServerAnswersALateRequest: a server answers a request written long
// after its connection was dialled (a test process stalled on a loaded
// machine). With a ReadHeaderTimeout of oldReadHeaderTimeout the server
// closed such a connection unanswered, and the client got EOF: the
// duplicates test then reported answers lost in transport as duplicates
// answered differently.
func TestServerAnswersALateRequest(t *testing.T) {
	t.Parallel()
	c := startCluster(t, config{store: "mem", effects: "memory", lease: lease}, 1)
	p := c.procs[0]
	conn, err := net.Dial("tcp", p.addr)
	require.NoError(t, err)
	defer conn.Close()
	const late = oldReadHeaderTimeout + time.Second
	time.Sleep(late)
	body := `{"amount":100}`
	_, err = fmt.Fprintf(conn, "POST /wait HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nIdempotency-Key: late\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", p.addr, len(body), body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "the server answers a request written %v after the connection was dialled", late)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, 201, resp.StatusCode, "%s", b)
	assert.Equal(t, strconv.Itoa(p.pid), resp.Header.Get(headerServedBy))
}
