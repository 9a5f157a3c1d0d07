// Package testenv tells tests where the real servers they need are.
//
// scripts/services starts redis-server, a Redis Cluster, a Redis Sentinel setup
// and a PostgreSQL cluster on loopback and exports IDEMGEN_REDIS_URL,
// IDEMGEN_REDIS_CLUSTER_ADDRS, IDEMGEN_REDIS_SENTINEL_ADDRS (with
// IDEMGEN_REDIS_SENTINEL_MASTER) and IDEMGEN_POSTGRES_URL; scripts/test (the README's
// test command, run by CI) also sets IDEMGEN_REQUIRE_SERVICES=1, so there a
// missing server fails the test instead of skipping it. Run locally without the
// variables, a test skips with a message naming the missing server.
//
// Tests that stop, restart or otherwise disturb a server start a private one
// instead (StartRedis, StartPostgres): on a free loopback port, with its files
// in a temporary directory, gone after the test.
package testenv

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RedisURL returns the URL of a running Redis server, or skips (fails in CI).
func RedisURL(t testing.TB) string {
	t.Helper()
	return need(t, "IDEMGEN_REDIS_URL", "Redis (redis-server)")
}

// RedisClusterAddrs returns the seed addresses (host:port) of a running Redis
// Cluster, or skips (fails in CI).
func RedisClusterAddrs(t testing.TB) []string {
	t.Helper()
	return needAddrs(t, "IDEMGEN_REDIS_CLUSTER_ADDRS", "A Redis Cluster")
}

// RedisSentinel returns the addresses of the sentinels of a running Redis
// Sentinel setup and the name of the master they watch, or skips (fails in CI).
func RedisSentinel(t testing.TB) (addrs []string, master string) {
	t.Helper()
	addrs = needAddrs(t, "IDEMGEN_REDIS_SENTINEL_ADDRS", "A Redis Sentinel setup")
	if addrs == nil {
		return nil, ""
	}
	master = os.Getenv("IDEMGEN_REDIS_SENTINEL_MASTER")
	if master == "" {
		missing(t, "A Redis Sentinel setup is not available: IDEMGEN_REDIS_SENTINEL_MASTER is not set (start one with: eval \"$(scripts/services start)\")")
		return nil, ""
	}
	return addrs, master
}

// PostgresURL returns the URL of a running PostgreSQL server, or skips (fails in CI).
func PostgresURL(t testing.TB) string {
	t.Helper()
	return need(t, "IDEMGEN_POSTGRES_URL", "PostgreSQL")
}

// Required reports whether missing servers must fail tests (CI).
func Required() bool { return os.Getenv("IDEMGEN_REQUIRE_SERVICES") == "1" }

func need(t testing.TB, env, what string) string {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		missing(t, "%s is not available: %s is not set (start one with: eval \"$(scripts/services start)\")", what, env)
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s=%q: %v", env, raw, err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		missing(t, "%s is not reachable at %s (%s): %v (start one with: eval \"$(scripts/services start)\")", what, u.Host, env, err)
		return ""
	}
	conn.Close()
	return raw
}

// needAddrs reads a comma-separated list of host:port from env and checks
// that each accepts connections.
func needAddrs(t testing.TB, env, what string) []string {
	t.Helper()
	raw := os.Getenv(env)
	if raw == "" {
		missing(t, "%s is not available: %s is not set (start one with: eval \"$(scripts/services start)\")", what, env)
		return nil
	}
	addrs := strings.Split(raw, ",")
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			missing(t, "%s is not reachable at %s (%s): %v (start one with: eval \"$(scripts/services start)\")", what, a, env, err)
			return nil
		}
		conn.Close()
	}
	return addrs
}

func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// RepoRoot returns the root of the idemgen module (the directory holding its go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/idemgen/idemgen\n") {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no github.com/idemgen/idemgen go.mod above %s", wd)
		}
	}
}

// SpecsDir returns testdata/specs: the real public specs the tests run against
// (copied unmodified, see its README).
func SpecsDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(RepoRoot(t), "testdata", "specs")
}

// SkipUnderRace skips a slow test that exercises no concurrency when the race
// detector is on; scripts/test runs such tests again without -race
// (its "race-free pass"), so CI still runs them.
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if RaceEnabled {
		t.Skipf("%s: slow under -race and exercises no concurrency; runs in scripts/test's race-free pass", why)
	}
}
