// Package testenv tells tests where the real servers they need are.
//
// scripts/services starts redis-server and a PostgreSQL cluster on loopback and
// exports IDEMGEN_REDIS_URL and IDEMGEN_POSTGRES_URL; scripts/test (the README's
// test command, run by CI) also sets IDEMGEN_REQUIRE_SERVICES=1, so there a
// missing server fails the test instead of skipping it. Run locally without the
// variables, a test skips with a message naming the missing server.
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
