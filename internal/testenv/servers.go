package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file starts private servers for tests that stop, restart or otherwise
// disturb them, so the shared servers of scripts/services are left alone.
// Each listens on a free loopback port and keeps its files in a temporary
// directory; both are gone after the test. Where the binaries are missing a
// test skips with a message naming them (fails in CI, see Required).

// Redis is a private redis-server.
type Redis struct {
	// Addr is host:port; URL is redis://Addr/0.
	Addr, URL string

	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// StartRedis starts a private redis-server, stopped at the end of the test.
// Extra arguments are passed to redis-server (e.g. "--appendonly", "yes");
// by default it keeps nothing on disk.
func StartRedis(t testing.TB, args ...string) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server is not installed (a private Redis server is needed): %v", err)
		return nil
	}
	r := &Redis{Addr: FreeAddr(t), dir: t.TempDir()}
	r.URL = "redis://" + r.Addr + "/0"
	_, port, _ := net.SplitHostPort(r.Addr)
	r.args = append([]string{bin, "--bind", "127.0.0.1", "--port", port, "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(r.dir, "log")}, args...)
	t.Cleanup(r.Stop)
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Start starts the server again after Stop (on the same port, with the same
// files) and waits until it answers.
func (r *Redis) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.Dir = r.dir
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start redis-server: %w", err)
	}
	r.cmd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		if redisPing(r.Addr) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(r.dir, "log"))
			return fmt.Errorf("testenv: redis-server on %s did not answer within 30s; log:\n%s", r.Addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: no shutdown, no final save) and waits for it.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Signal sends sig to the server (e.g. SIGSTOP and SIGCONT, to hang it and
// let it go on); it fails when the server is stopped.
func (r *Redis) Signal(sig os.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return errors.New("testenv: redis-server is not running")
	}
	return r.cmd.Process.Signal(sig)
}

// redisPing sends PING and expects +PONG.
func redisPing(addr string) error {
	out, err := redisCommand(addr, "PING")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(out, "+PONG") {
		return fmt.Errorf("PING answered %q", out)
	}
	return nil
}

// Postgres is a private PostgreSQL cluster.
type Postgres struct {
	// Addr is host:port; URL connects as the superuser postgres to the
	// database postgres, without TLS.
	Addr, URL string

	bin, dir, data string
	asPostgres     bool
	mu             sync.Mutex
	running        bool
}

// PostgresBinDir returns the directory of initdb and pg_ctl: the newest
// /usr/lib/postgresql/*/bin, else the one on PATH.
func PostgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("initdb not found in /usr/lib/postgresql/*/bin or on PATH")
	}
	return filepath.Dir(p), nil
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartPostgres creates a private cluster (initdb) in a temporary directory
// and starts it; it is stopped and removed at the end of the test. As root,
// the cluster runs as the postgres user (initdb refuses root), as
// scripts/services does. Creating a cluster takes a second or two.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, err := PostgresBinDir()
	if err != nil {
		missing(t, "PostgreSQL is not installed (a private cluster needs initdb and pg_ctl): %v", err)
		return nil
	}
	p := &Postgres{bin: bin, Addr: FreeAddr(t)}
	p.URL = "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
	p.asPostgres = os.Geteuid() == 0
	// Not t.TempDir: its parents are private to root, and the server runs as postgres.
	p.dir, err = os.MkdirTemp("", "idemgen-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(p.dir) })
	p.data = filepath.Join(p.dir, "data")
	if err := os.Mkdir(p.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if p.asPostgres {
		u, err := user.Lookup("postgres")
		if err != nil {
			missing(t, "running as root, a private PostgreSQL cluster needs the postgres user: %v", err)
			return nil
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{p.dir, p.data} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out, err := p.run("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("testenv: initdb: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *Postgres) run(tool string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	if p.asPostgres {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, tool)}, args...)...)
	} else {
		cmd = exec.Command(filepath.Join(p.bin, tool), args...)
	}
	cmd.Dir = p.dir
	return cmd.CombinedOutput()
}

// Start starts the cluster (again, after Stop; with crash recovery after an
// immediate stop) and waits until it accepts connections.
func (p *Postgres) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return nil
	}
	_, port, _ := net.SplitHostPort(p.Addr)
	opts := "-c listen_addresses=127.0.0.1 -p " + port + " -c unix_socket_directories='' -c fsync=off" +
		" -c full_page_writes=off -c max_connections=100 -c shared_buffers=32MB"
	if out, err := p.run("pg_ctl", "-D", p.data, "-l", filepath.Join(p.dir, "log"), "-w", "-t", "60", "-o", opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "log"))
		return fmt.Errorf("testenv: pg_ctl start: %v\n%s\nlog:\n%s", err, out, log)
	}
	p.running = true
	return nil
}

// Stop stops the cluster with pg_ctl's immediate mode: every server process
// quits at once, without a checkpoint, as after a crash.
func (p *Postgres) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	out, err := p.run("pg_ctl", "-D", p.data, "-m", "immediate", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("testenv: pg_ctl stop: %v\n%s", err, out)
	}
	p.running = false
	return nil
}

// FreeAddr returns a loopback address with a port nobody listens on (it was
// free a moment ago).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Sentinel is a private Redis Sentinel setup: a primary, a replica of it,
// and one sentinel (quorum 1) watching them under the master name Master.
type Sentinel struct {
	// Addr is the sentinel's host:port.
	Addr, Master     string
	Primary, Replica *Redis
}

// StartSentinel starts a private primary, its replica and a sentinel, all
// stopped at the end of the test, and waits until the sentinel knows the
// primary and its replica (so that SENTINEL FAILOVER can promote it).
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	primary := StartRedis(t)
	if primary == nil {
		return nil
	}
	_, pport, _ := net.SplitHostPort(primary.Addr)
	replica := StartRedis(t, "--replicaof", "127.0.0.1", pport)
	s := &Sentinel{Addr: FreeAddr(t), Master: "private", Primary: primary, Replica: replica}
	_, rport, _ := net.SplitHostPort(replica.Addr)
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(s.Addr)
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte("bind 127.0.0.1\nport "+port+"\ndir "+dir+"\n"+
		"sentinel monitor "+s.Master+" 127.0.0.1 "+pport+" 1\n"+
		"sentinel down-after-milliseconds "+s.Master+" 60000\n"+
		"sentinel failover-timeout "+s.Master+" 60000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, _ := exec.LookPath("redis-server")
	cmd := exec.Command(bin, conf, "--sentinel", "--logfile", filepath.Join(dir, "log"))
	cmd.Dir = dir
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("testenv: start the sentinel: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The sentinel finds the replica in the primary's INFO.
		out, err := redisCommand(s.Addr, "SENTINEL", "REPLICAS", s.Master)
		if err == nil && strings.Contains(out, rport) &&
			!strings.Contains(out, "disconnected") && !strings.Contains(out, "s_down") {
			return s
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Fatalf("testenv: the sentinel did not find the replica within 30s (%v, %q); log:\n%s", err, out, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redisCommand sends one command in RESP and returns the raw reply (as much
// as one read returns), without a client library.
func redisCommand(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	if n > 0 && buf[0] == '-' {
		return "", fmt.Errorf("%s", strings.TrimSpace(string(buf[1:n])))
	}
	return string(buf[:n]), nil
}
