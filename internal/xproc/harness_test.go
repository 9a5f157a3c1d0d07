package xproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

func TestMain(m *testing.M) {
	if os.Getenv(envServer) == "1" {
		os.Exit(serverMain())
	}
	os.Exit(m.Run())
}

// config is what a cluster's server processes are started with.
type config struct {
	store        string // redis | pg | pgtx
	storeURL     string
	ns           string
	effects      string // redis | pg | memory
	effectsURL   string
	lease        time.Duration
	storeTimeout time.Duration
	markers      string
}

func (c config) env() []string {
	env := append(os.Environ(),
		envServer+"=1",
		envStore+"="+c.store,
		envStoreURL+"="+c.storeURL,
		envNS+"="+c.ns,
		envEffects+"="+c.effects,
		envEffectsURL+"="+c.effectsURL,
		envLease+"="+c.lease.String(),
		envMarkers+"="+c.markers,
		// A data race in a server process ends it at once (exit status 66),
		// which the test reports.
		// (atexit_sleep_ms=0: no second of sleep at exit.)
		"GORACE=halt_on_error=1 atexit_sleep_ms=0",
	)
	if c.storeTimeout > 0 {
		env = append(env, envStoreTimeout+"="+c.storeTimeout.String())
	}
	return env
}

// proc is one server process.
type proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	addr   string
	pid    int
	stderr *bytes.Buffer // guarded by mu
	mu     *sync.Mutex
	done   chan struct{} // closed when the process has exited
	err    error         // its exit, after done
	killed bool
}

// clientTimeout bounds a test request, and how long a server waits for a
// request's header.
const clientTimeout = 2 * time.Minute

// cluster is a set of server processes sharing one store.
type cluster struct {
	t     testing.TB
	cfg   config
	procs []*proc
	http  *http.Client
}

// startCluster starts n server processes with cfg. They are stopped with
// SIGTERM at the end of the test, and each must then exit cleanly (a data
// race or a panic fails the test).
func startCluster(t testing.TB, cfg config, n int) *cluster {
	t.Helper()
	if cfg.markers == "" {
		cfg.markers = t.TempDir()
	}
	c := &cluster{t: t, cfg: cfg, http: &http.Client{
		Timeout:   clientTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute},
	}}
	t.Cleanup(c.stop)
	// Start them concurrently: each takes a moment under the race detector.
	c.procs = make([]*proc, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.procs[i], errs[i] = c.spawn(fmt.Sprintf("p%d", i))
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return c
}

func (c *cluster) spawn(name string) (*proc, error) {
	t := c.t
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = c.cfg.env()
	testenv.DieWithParent(cmd)
	p := &proc{t: t, name: name, cmd: cmd, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	cmd.Stderr = lockedWriter{p.mu, p.stderr}
	lines := make(chan string, 1)
	cmd.Stdout = &listenWatcher{addr: lines}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case p.addr = <-lines:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("server %s exited before listening: %v\n%s", name, p.err, p.log())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("server %s did not listen within 60s\n%s", name, p.log())
	}
}

// listenWatcher is a server's stdout: it reports the address of the
// "LISTEN host:port" line.
type listenWatcher struct {
	buf  []byte
	addr chan string
	sent bool
}

func (w *listenWatcher) Write(b []byte) (int, error) {
	if w.sent {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if addr, ok := strings.CutPrefix(line, "LISTEN "); ok {
			w.addr <- addr
			w.sent = true
			return len(b), nil
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// kill sends SIGKILL (the process dies mid-request) and waits for it.
func (p *proc) kill() {
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop ends the process with SIGTERM (graceful shutdown) and checks that it
// exited cleanly.
func (p *proc) stop() {
	if p.killed {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // in case a test left it paused
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		p.t.Errorf("server %s (pid %d) did not shut down within 30s\n%s", p.name, p.pid, p.log())
		return
	}
	if p.err != nil {
		p.t.Errorf("server %s (pid %d) exited with %v\n%s", p.name, p.pid, p.err, p.log())
	}
}

// stop stops the processes (see proc.stop). The client's idle connections
// are closed first: the server's graceful shutdown would otherwise wait 5s
// for a connection the client dialed but never used.
func (c *cluster) stop() {
	c.http.CloseIdleConnections()
	var wg sync.WaitGroup
	for _, p := range c.procs {
		if p != nil {
			wg.Add(1)
			go func() { defer wg.Done(); p.stop() }()
		}
	}
	wg.Wait()
	if c.t.Failed() {
		// What the servers logged (store errors, at warning level) says
		// why a request failed.
		for _, p := range c.procs {
			if p != nil {
				c.t.Logf("server %s (pid %d) logged:\n%s", p.name, p.pid, p.log())
			}
		}
	}
}

// replace kills nothing: it starts a new process in slot i (after a kill).
func (c *cluster) replace(i int) {
	c.t.Helper()
	p, err := c.spawn(c.procs[i].name + "'")
	require.NoError(c.t, err)
	c.procs[i] = p
}

// response is what a client saw.
type response struct {
	status     int
	replayed   bool
	retryAfter string
	ctype      string
	servedBy   string // the pid of the process that answered (X-Served-By)
	body       []byte
	err        error
	start, end time.Time
}

func (r response) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return fmt.Sprintf("%d %s replayed=%v served by pid %s at %s after %v: %s", r.status, r.ctype, r.replayed, r.servedBy,
		r.end.Format("15:04:05.000"), r.end.Sub(r.start).Round(time.Millisecond), bytes.TrimSpace(r.body))
}

// problemCode returns the problem's code for an application/problem+json answer.
func (r response) problemCode() string {
	if r.ctype != "application/problem+json" {
		return ""
	}
	var pb struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(r.body, &pb)
	return pb.Code
}

// pid returns the pid in a 201 answer's body.
func (r response) pid() int {
	var b struct {
		PID int `json:"pid"`
	}
	_ = json.Unmarshal(r.body, &b)
	return b.PID
}

// send POSTs a request with key to p's route; header adds X-Hold, X-Delay.
func (c *cluster) send(ctx context.Context, p *proc, route, key string, header map[string]string) response {
	res := response{start: time.Now()}
	defer func() { res.end = time.Now() }()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+p.addr+route, strings.NewReader(`{"amount":100}`))
	if err != nil {
		res.err = err
		return res
	}
	// One send, one attempt: net/http's Transport sends a request with an
	// Idempotency-Key again on its own when a reused connection fails
	// while it waits for the answer (the request counts as replayable),
	// so the server may get it twice, and the client sees only the second
	// answer. Without GetBody it is not replayable: the tests count what
	// the server got.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		res.err = err
		res.end = time.Now()
		return res
	}
	defer resp.Body.Close()
	res.body, res.err = io.ReadAll(resp.Body)
	res.status = resp.StatusCode
	res.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	res.retryAfter = resp.Header.Get("Retry-After")
	res.ctype = resp.Header.Get("Content-Type")
	res.servedBy = resp.Header.Get(headerServedBy)
	res.end = time.Now()
	return res
}

// stats returns the handler starts per key summed over the running processes
// (killed ones are gone with their counts) and their total.
func (c *cluster) stats(ctx context.Context) (map[string]int, int64) {
	c.t.Helper()
	keys := map[string]int{}
	var total int64
	for _, p := range c.procs {
		if p.killed {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+p.addr+"/stats", nil)
		resp, err := c.http.Do(req)
		require.NoError(c.t, err)
		var st stats
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		require.NoError(c.t, err)
		total += st.Starts
		for k, n := range st.Keys {
			keys[k] += n
		}
	}
	return keys, total
}

// hold sends a request to p's route whose handler holds at its hold point
// ("before" or "after" its side effect) until released, and returns once the
// handler is there: the request's key (prefix and a random suffix) and a
// channel that receives its response.
//
// On a loaded machine the store may answer the claim slower than the
// engine's store timeout: the request then fails closed (503
// IDEMPOTENCY_STORE_UNAVAILABLE) before any handler runs. That is the
// engine doing its job, not what the caller wants to hold: hold sends again
// with a fresh key (the refused key is abandoned; a claim that reached the
// store late holds only that key).
func (c *cluster) hold(ctx context.Context, p *proc, route, prefix, point string) (string, <-chan response) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		key := randomName(prefix)
		res := make(chan response, 1)
		go func() { res <- c.send(ctx, p, route, key, map[string]string{"X-Hold": point}) }()
		for refused := false; !refused; {
			if _, err := os.Stat(filepath.Join(c.cfg.markers, key)); err == nil {
				return key, res
			}
			select {
			case r := <-res:
				require.True(c.t, r.status == 503 && r.problemCode() == idem.CodeStoreUnavailable && r.end.Sub(r.start) >= c.cfg.storeTimeout,
					"the request for %s ended before its handler reached its hold point (only a refusal after the whole store timeout is sent again): %s", key, r)
				c.t.Logf("hold: attempt %d for %s refused before its handler ran (the store answered late): %s", attempt, key, r)
				refused = true // send again
			case <-time.After(5 * time.Millisecond):
			}
			require.True(c.t, time.Now().Before(deadline), "the handler for %s never reached its hold point", key)
		}
	}
}

func (c *cluster) release(key string) {
	c.t.Helper()
	require.NoError(c.t, os.WriteFile(filepath.Join(c.cfg.markers, key+".release"), nil, 0o644))
}

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// effects counts the side effects per key where the handlers made them.
type effects interface {
	// count returns the pids that made each key's side effect.
	pids(ctx context.Context, t testing.TB) map[string][]int
}

// redisEffects reads the lists <ns>effects:<key>.
type redisEffects struct {
	c  *redis.Client
	ns string
}

func (e redisEffects) pids(ctx context.Context, t testing.TB) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	iter := e.c.Scan(ctx, 0, e.ns+"effects:*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		vals, err := e.c.LRange(ctx, k, 0, -1).Result()
		require.NoError(t, err)
		for _, v := range vals {
			var pid int
			_, err := fmt.Sscan(v, &pid)
			require.NoError(t, err)
			out[strings.TrimPrefix(k, e.ns+"effects:")] = append(out[strings.TrimPrefix(k, e.ns+"effects:")], pid)
		}
	}
	require.NoError(t, iter.Err())
	return out
}

// pgEffects reads the table <ns>.effects.
type pgEffects struct {
	p  *pgxpool.Pool
	ns string
}

func (e pgEffects) pids(ctx context.Context, t testing.TB) map[string][]int {
	t.Helper()
	rows, err := e.p.Query(ctx, `SELECT key, pid FROM `+pgx.Identifier{e.ns, "effects"}.Sanitize()+` ORDER BY id`)
	require.NoError(t, err)
	out := map[string][]int{}
	for rows.Next() {
		var k string
		var pid int
		require.NoError(t, rows.Scan(&k, &pid))
		out[k] = append(out[k], pid)
	}
	require.NoError(t, rows.Err())
	return out
}

// backend prepares a store namespace (a Redis prefix, or a migrated
// PostgreSQL schema with an effects table) on the shared servers, and cleans
// it up afterwards.
func backend(t testing.TB, mode string) (config, effects) {
	t.Helper()
	ctx := context.Background()
	switch mode {
	case "redis":
		url := testenv.RedisURL(t)
		o, err := redis.ParseURL(url)
		require.NoError(t, err)
		c := redis.NewClient(o)
		ns := randomName("xproc:") + ":"
		t.Cleanup(func() {
			iter := c.Scan(ctx, 0, ns+"*", 1000).Iterator()
			var keys []string
			for iter.Next(ctx) {
				keys = append(keys, iter.Val())
			}
			if len(keys) > 0 {
				_ = c.Del(ctx, keys...).Err()
			}
			_ = c.Close()
		})
		return config{store: "redis", storeURL: url, ns: ns, effects: "redis", effectsURL: url}, redisEffects{c: c, ns: ns}
	case "pg", "pgtx":
		url := testenv.PostgresURL(t)
		p, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		ns := randomName("xproc_")
		t.Cleanup(func() {
			_, _ = p.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{ns}.Sanitize()+` CASCADE`)
			p.Close()
		})
		migrate(t, p, ns)
		return config{store: mode, storeURL: url, ns: ns, effects: "pg", effectsURL: url}, pgEffects{p: p, ns: ns}
	}
	t.Fatalf("unknown mode %q", mode)
	return config{}, nil
}

// migrate creates the store's schema objects and the effects table.
func migrate(t testing.TB, p *pgxpool.Pool, ns string) {
	t.Helper()
	ctx := context.Background()
	s, err := pgstore.New(p, pgstore.Options{Schema: ns})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Close())
	_, err = p.Exec(ctx, `CREATE TABLE `+pgx.Identifier{ns, "effects"}.Sanitize()+
		` (id bigserial PRIMARY KEY, key text NOT NULL, pid int NOT NULL)`)
	require.NoError(t, err)
}

// proxy forwards TCP connections to a server and can freeze: while frozen it
// still accepts connections, but forwards nothing in either direction, like
// a server that hangs (a stopped process, a lost network path). Thaw
// resumes forwarding.
type proxy struct {
	l        net.Listener
	upstream string

	mu     sync.Mutex
	open   chan struct{} // closed while forwarding is allowed
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{l: l, upstream: upstream, open: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.gate()
			u, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
			if err != nil {
				p.untrack(c)
				return
			}
			if !p.track(u) {
				return
			}
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(u, c) }()
			go func() { defer wg.Done(); p.pipe(c, u) }()
			wg.Wait()
			p.untrack(c)
			p.untrack(u)
		}()
	}
}

// pipe copies src to dst, holding each chunk while frozen.
func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	// Half-close is not needed here: either side ending ends both.
	_ = dst.Close()
	_ = src.Close()
}

// gate waits while the proxy is frozen.
func (p *proxy) gate() {
	p.mu.Lock()
	ch := p.open
	p.mu.Unlock()
	<-ch
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

func (p *proxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.l.Close()
	p.thaw()
	p.wg.Wait()
}
