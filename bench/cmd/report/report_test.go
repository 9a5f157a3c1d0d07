package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/bench/internal/workload"
)

func TestReplace(t *testing.T) {
	doc := "a\n<!-- BEGIN report:x -->\nold\n<!-- END report:x -->\nb\n"
	got, err := replace(doc, "x", "new\n\n")
	require.NoError(t, err)
	assert.Equal(t, "a\n<!-- BEGIN report:x -->\nnew\n<!-- END report:x -->\nb\n", got)
	_, err = replace(doc, "y", "z")
	assert.Error(t, err)
}

const sample = `goos: linux
goarch: amd64
pkg: github.com/idemgen/idemgen/bench/middleware
BenchmarkNetHTTP/floor/serial-2    1000  100.0 ns/op  90.0 cpu-ns/op  32 B/op  2 allocs/op
BenchmarkNetHTTP/floor/serial-2    1000  110.0 ns/op  91.0 cpu-ns/op  32 B/op  2 allocs/op
BenchmarkNetHTTP/floor/serial-2    1000  120.0 ns/op  92.0 cpu-ns/op  32 B/op  2 allocs/op
BenchmarkNetHTTP/bare/serial-2     1000  10000 ns/op  9000 cpu-ns/op  4000 B/op  40 allocs/op
BenchmarkNetHTTP/idemgen/first-2   1000  13000 ns/op  12000 cpu-ns/op  0.0125 faults/op  5000 B/op  45 allocs/op
BenchmarkNetHTTP/idemgen/nostore-first-cached-2   1000  10000 ns/op  10000 cpu-ns/op  4000 B/op  42 allocs/op
BenchmarkNetHTTP/idemgen/nostore-first-2   1000  10000 ns/op  11000 cpu-ns/op  4000 B/op  42 allocs/op
BenchmarkNetHTTP/idemgen/replay-2  1000  900 ns/op  800 cpu-ns/op  96 B/op  2 allocs/op
BenchmarkNetHTTP/idemgen/replay-parallel-2  1000  500 ns/op  1000 cpu-ns/op  96 B/op  2 allocs/op
PASS
`

func TestParseAndStats(t *testing.T) {
	rs, err := parse([]byte(sample))
	require.NoError(t, err)
	s := rs.stat("NetHTTP/floor/serial", "ns/op")
	require.True(t, s.ok)
	assert.InDelta(t, 110, s.Center, 1e-9, "median")
	assert.Equal(t, 3, s.n)
	it, ok := rs.median("NetHTTP/floor/serial", "iters")
	require.True(t, ok)
	assert.InDelta(t, 1000, it, 1e-9, "iterations are kept")
	m, ok := rs.median("NetHTTP/floor/serial", "cpu-ns/op")
	require.True(t, ok)
	assert.InDelta(t, 91, m, 1e-9)
	_, ok = rs.median("NetHTTP/nope", "ns/op")
	assert.False(t, ok)
	_, err = parse([]byte("PASS\n"))
	assert.Error(t, err)
}

func TestRenderMiddleware(t *testing.T) {
	rs, err := parse([]byte(sample))
	require.NoError(t, err)
	out := renderMiddleware(rs)
	// first request: 12000 - 9000 CPU over bare, 45 - 40 allocs.
	assert.Contains(t, out, "| first request | 13.0 µs | 12.0 µs | 5000 B | 45 | 0.013 | +11.9 µs, +43 | +3.00 µs, +5 | 118.2× |")
	assert.Contains(t, out, "| replay, the same request every time | 900 ns | 800 ns | 96 B | 2 |  | +709 ns, +0 |")
	assert.Contains(t, out, "*missing*", "fiber rows are absent from the sample")
	assert.True(t, strings.Contains(out, "| replay, the same request every time (over floor) | CPU | +709 ns |"), out)
	// breakdown: engine 10000-9000, fingerprint 11000-10000, memstore 12000-11000.
	assert.Contains(t, out, "fingerprint cached, minus the bare handler | +1.00 µs | n/a (too few rounds) |")
	assert.Contains(t, out, "minus the cached one | +1.00 µs |")
	assert.Contains(t, out, "minus engine over the store that keeps nothing | +1.00 µs |")
	assert.Contains(t, out, "| total | engine over memstore, minus the bare handler | +3.00 µs |")
}

// rounds makes a benchmark line per round for each of the values.
func rounds(name, unit string, vals ...float64) string {
	var b strings.Builder
	for _, v := range vals {
		fmt.Fprintf(&b, "Benchmark%s-2 1000 %g %s\n", name, v, unit)
	}
	return b.String()
}

// The overhead cells print the statistic the verdict compares: the median
// of the per-round differences, not the difference of the medians.
func TestOverheadIsPaired(t *testing.T) {
	// medians: a = 13, ref = 10 (difference 3); per-round differences
	// 1, 1, 1, 10, 10: median 1.
	rs, err := parse([]byte(rounds("x/a", "cpu-ns/op", 11, 12, 13, 20, 21) + rounds("x/ref", "cpu-ns/op", 10, 11, 12, 10, 11)))
	require.NoError(t, err)
	for _, c := range []struct {
		name, ref string
		want      float64
		ok        bool
	}{
		{"x/a", "x/ref", 1, true},
		{"x/a", "x/none", 0, false},
	} {
		got, ok := rs.overhead(c.name, c.ref, "cpu-ns/op")
		assert.Equal(t, c.ok, ok, c.ref)
		if ok {
			assert.InDelta(t, c.want, got, 1e-9, c.ref)
		}
	}
	// Unpaired (unequal rounds): the difference of the medians.
	rs, err = parse([]byte(rounds("x/a", "cpu-ns/op", 11, 13, 20) + rounds("x/ref", "cpu-ns/op", 10, 11)))
	require.NoError(t, err)
	got, ok := rs.overhead("x/a", "x/ref", "cpu-ns/op")
	require.True(t, ok)
	assert.InDelta(t, 13-10.5, got, 1e-9)
}

func TestRatioIsPaired(t *testing.T) {
	rs := results{
		"a":     {"ns/op": {20, 22, 40}},
		"ref":   {"ns/op": {10, 11, 10}},
		"short": {"ns/op": {10, 20}},
		"zero":  {"ns/op": {0, 1, 1}},
	}
	for _, c := range []struct {
		ref  string
		want float64
		ok   bool
	}{
		{"ref", 2, true},           // per-round ratios 2, 2, 4: median 2 (the medians' ratio would be 22/10)
		{"short", 22.0 / 15, true}, // unpaired: the ratio of the medians
		{"zero", 0, false},
		{"none", 0, false},
	} {
		got, ok := rs.ratio("a", c.ref, "ns/op")
		assert.Equal(t, c.ok, ok, c.ref)
		assert.InDelta(t, c.want, got, 1e-9, c.ref)
	}
}

func TestBreakdownPerRoundWithCI(t *testing.T) {
	in := rounds("NetHTTP/bare/serial", "cpu-ns/op", 9000, 9100, 9200, 9000, 9100, 9200) +
		rounds("NetHTTP/idemgen/nostore-first-cached", "cpu-ns/op", 10000, 10100, 10200, 10000, 10100, 10200) +
		rounds("NetHTTP/idemgen/nostore-first", "cpu-ns/op", 11000, 11100, 11200, 11000, 11100, 11200) +
		rounds("NetHTTP/idemgen/first", "cpu-ns/op", 12000, 12100, 12200, 12000, 12100, 12200)
	rs, err := parse([]byte(in))
	require.NoError(t, err)
	out := breakdown(rs)
	assert.Contains(t, out, "minus the bare handler | +1.00 µs | [+1.00 µs, +1.00 µs] |")
	assert.Contains(t, out, "| total | engine over memstore, minus the bare handler | +3.00 µs | [+3.00 µs, +3.00 µs] |")
	assert.Contains(t, out, "need not add up to the total")
}

func TestKept(t *testing.T) {
	rs, err := parse([]byte(`BenchmarkNetHTTP/idemgen/first-2 1000 100 ns/op 2 heap-B/rec 466 offheap-B/rec 2500 rss-B/rec
BenchmarkFastHTTP/fiber-idempotency/first-2 1000 100 ns/op 428 heap-B/rec 0 offheap-B/rec 650 rss-B/rec
`))
	require.NoError(t, err)
	out := kept(rs)
	assert.Contains(t, out, "| idemgen (engine + memstore) | 1000 | +2 B | +466 B | +2500 B |")
	assert.Contains(t, out, "| fiber v2.52.15 middleware/idempotency | 1000 | +428 B | +0 B | +650 B |")
	assert.Equal(t, "", kept(results{"NetHTTP/idemgen/first": {"ns/op": {1}}}), "no memory metrics: no table")
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		ns   float64
		want string
	}{{950, "950 ns"}, {1500, "1.50 µs"}, {15000, "15.0 µs"}, {2.5e6, "2.5 ms"}, {3.2e9, "3.20 s"}} {
		assert.Equal(t, c.want, dur(c.ns))
	}
	assert.Equal(t, "−1.50 µs", signedDur(-1500))
	assert.Equal(t, "5000 B", bytesStr(5000))
	assert.Equal(t, "20 KB", bytesStr(20480))
	assert.Equal(t, "110 MB", bytesStr(115e6))
	assert.Equal(t, "693k", count(693369))
}

func TestHalfTime(t *testing.T) {
	assert.Equal(t, "500ms", halfTime("1s"))
	assert.Equal(t, "100x", halfTime("100x"))
	// The machine table says what the fingerprint section ran.
	assert.Equal(t, "| runs | 6 rounds of every benchmark, interleaved; -benchtime 1s (fingerprint: 500ms; generator: 1 iteration a round) |\n", runsLine(6, "1s"))
}

const storesSample = `pkg: github.com/idemgen/idemgen/bench/stores
BenchmarkRedis/idemgen/first-2    1000  120000 ns/op  80000 cpu-ns/op  6000 B/op  80 allocs/op  2.000 roundtrips/op
BenchmarkRedis/idemgen/replay-2   1000  90000 ns/op  45000 cpu-ns/op  1400 B/op  23 allocs/op  1.000 roundtrips/op
BenchmarkRedis/idemgen-claim/replay-2   1000  95000 ns/op  47000 cpu-ns/op  1400 B/op  23 allocs/op  1.000 roundtrips/op
BenchmarkRedis/fiber/first-2      1000  240000 ns/op  90000 cpu-ns/op  9000 B/op  99 allocs/op  3.000 roundtrips/op
BenchmarkRedis/fiber/replay-2     1000  60000 ns/op  30000 cpu-ns/op  900 B/op  12 allocs/op  1.000 roundtrips/op
BenchmarkRedis/raw/first-2        1000  120000 ns/op  90000 cpu-ns/op  6000 B/op  95 allocs/op  2.000 roundtrips/op
BenchmarkRedis/raw/replay-2       1000  50000 ns/op  27000 cpu-ns/op  520 B/op  10 allocs/op  1.000 roundtrips/op
BenchmarkPostgres/idemgen/replay-2  1000  100000 ns/op  50000 cpu-ns/op  2000 B/op  50 allocs/op  1.000 roundtrips/op  1.000 statements/op
BenchmarkPostgres/raw/replay-2    1000  50000 ns/op  30000 cpu-ns/op  700 B/op  11 allocs/op  1.000 roundtrips/op  1.000 statements/op
PASS
`

func TestRenderStores(t *testing.T) {
	rs, err := parse([]byte(storesSample))
	require.NoError(t, err)
	out := renderStores(rs)
	assert.Contains(t, out, "| Redis | fiber v2 middleware/idempotency (storage/redis/v3, on fiber) | first request | 240.0 µs | 90.0 µs | 9000 B | 99 | 3.00 | 3 | 2.00× |")
	assert.Contains(t, out, "| Redis | fiber v2 middleware/idempotency (storage/redis/v3, on fiber) | replay | 60.0 µs | 30.0 µs | 900 B | 12 | 1.00 | 1 | 1.20× |")
	assert.Contains(t, out, "| Redis | fiber v2 middleware/idempotency (storage/redis/v3, on fiber) | parallel replay | *missing* |")
	assert.Contains(t, out, "| PostgreSQL | **idemgen** (engine + store) | replay | 100.0 µs | 50.0 µs | 2000 B | 50 | 1.00 | 1 | 2.00× |")
	assert.Contains(t, out, "| Redis | **idemgen**, another instance's record (claimed: Begin, not read first) | replay | 95.0 µs | 47.0 µs | 1400 B | 23 | 1.00 | 1 | 1.90× |")
	assert.NotContains(t, out, "| PostgreSQL | fiber", "no fiber row for PostgreSQL")
	assert.NotContains(t, out, "not read first) | first request", "no first request replayed")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Len(t, lines, 2+3*3+2*2+2*3+2, "header; Redis: idemgen, idemgen-claim (replays), fiber, raw; PostgreSQL: idemgen, idemgen-claim, raw; a blank line and the note")
}

func TestFingerprintTargets(t *testing.T) {
	rs, err := parse([]byte(`BenchmarkFingerprint/order/1KB-2 	 100	 2000 ns/op	 0 B/op	 0 allocs/op
BenchmarkFingerprint/dense/1KB-2 	 100	 3000 ns/op	 0 B/op	 0 allocs/op
BenchmarkSHA256/order/1KB-2 	 100	 700 ns/op	 0 B/op	 0 allocs/op
BenchmarkSHA256/dense/1KB-2 	 100	 700 ns/op	 0 B/op	 0 allocs/op
BenchmarkJSONTextCanonicalize/order/1KB-2 	 100	 7000 ns/op	 96 B/op	 1 allocs/op
BenchmarkJSONTextCanonicalize/dense/1KB-2 	 100	 8000 ns/op	 96 B/op	 1 allocs/op
`))
	require.NoError(t, err)
	out := fingerprintTargets(rs)
	assert.Contains(t, out, "| order/1KB | 0.35 | 3.5× | 0 | yes |")
	assert.Contains(t, out, "| dense/1KB | 0.23 | 2.7× | 0 | **no** |")
}

func TestVerdict(t *testing.T) {
	fast := []float64{10, 11, 10.5, 10.2, 10.8, 10.1}
	slow := []float64{20, 21, 20.5, 20.2, 20.8, 20.1}
	overlap := []float64{10.4, 11.2, 9.9, 10.6, 10.3, 11.0}
	assert.Equal(t, "a", verdict([]candidate{{"b", slow}, {"a", fast}}))
	assert.Equal(t, "a", verdict([]candidate{{"a", fast}, {"empty", nil}}), "no samples: left out")
	v := verdict([]candidate{{"a", fast}, {"b", slow}, {"c", overlap}})
	assert.Contains(t, v, "tie: ")
	assert.Contains(t, v, "a, c")
	assert.NotContains(t, v, "b")
	assert.Equal(t, "tie: a, b (p = 1.00)", verdict([]candidate{{"a", []float64{10}}, {"b", []float64{11}}}), "one round tells nothing apart")
	assert.Equal(t, "", verdict(nil))
}

func TestDiffPairsRounds(t *testing.T) {
	rs := results{"x": {"ns/op": {5, 7, 9}}, "base": {"ns/op": {1, 2, 4}}, "short": {"ns/op": {1, 2}}}
	assert.Equal(t, []float64{4, 5, 5}, rs.diff("x", "base", "ns/op"))
	assert.Nil(t, rs.diff("x", "short", "ns/op"), "rounds that cannot be paired")
}

func TestVersusFloor(t *testing.T) {
	raw := []float64{10, 11, 10.5, 10.2, 10.8, 10.1}
	slow := []float64{20, 21, 20.5, 20.2, 20.8, 20.1}
	near := []float64{10.4, 11.2, 9.9, 10.6, 10.3, 11.0}
	for _, c := range []struct {
		name         string
		idemgen, raw []float64
		want         string
	}{
		{"told apart: the per-round ratio with its CI", slow, raw, "1.97× [1.91, 2.00] (p = 0.00)"},
		{"not told apart: indistinguishable, never \"at the floor\"", near, raw, "1.02× [0.99, 1.02], indistinguishable (p = 0.62)"},
		{"unpaired rounds: the ratio of the medians, no CI", slow[:5], raw, "1.95× (p = 0.00)"},
		{"too few rounds for a CI", []float64{20}, []float64{10}, "2.00×, indistinguishable (p = 1.00)"},
		{"no samples", nil, raw, ""},
	} {
		got := versusFloor(c.idemgen, c.raw)
		if c.want == "" {
			assert.Equal(t, "", got, c.name)
			continue
		}
		assert.True(t, strings.HasPrefix(got, c.want), "%s: %q", c.name, got)
		assert.NotContains(t, got, "floor", c.name)
	}
}

// The stores verdicts: one with idemgen's read-first replay, one with its
// claim (another instance's record), each against the peers; a first
// request claims in both.
func TestStoresVerdicts(t *testing.T) {
	fast := []float64{10, 11, 10.5, 10.2, 10.8, 10.1}
	mid := []float64{15, 16, 15.5, 15.2, 15.8, 15.1}
	slow := []float64{20, 21, 20.5, 20.2, 20.8, 20.1}
	var in strings.Builder
	add := func(name string, vals []float64) {
		for _, u := range []string{"ns/op", "cpu-ns/op"} {
			in.WriteString(rounds(name, u, vals...))
		}
	}
	add("Redis/idemgen/first", fast)
	add("Redis/fiber/first", slow)
	add("Redis/raw/first", fast)
	add("Redis/idemgen/replay", fast)       // reads first: beats fiber
	add("Redis/idemgen-claim/replay", slow) // claims: fiber beats it
	add("Redis/fiber/replay", mid)
	add("Redis/raw/replay", fast)
	add("Postgres/idemgen/replay", fast)
	rs, err := parse([]byte(in.String()))
	require.NoError(t, err)
	out := storesFastest(rs, 4096)
	assert.Contains(t, out, "among the last 4096 it completed or replayed", "the note says how many keys an Engine remembers")
	assert.Contains(t, storesFastest(rs, 0), "among the last keys it completed")
	for _, c := range []struct{ row, want string }{
		{"| Redis | first request | time |", "| idemgen | idemgen | 1.00× [1.00, 1.00], indistinguishable (p = 1.00) | 1.00× [1.00, 1.00], indistinguishable (p = 1.00) |"},
		{"| Redis | replay | time |", "| idemgen | fiber | 1.00× [1.00, 1.00], indistinguishable (p = 1.00) | 1.97× [1.91, 2.00] (p = 0.00) |"},
	} {
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, c.row) {
				line = l
			}
		}
		require.NotEmpty(t, line, c.row)
		assert.True(t, strings.HasSuffix(line, c.want), "%s\n got %s", c.row, line)
	}
	assert.Contains(t, out, "fastest, idemgen claiming (another instance's record)")
	assert.Contains(t, out, "| PostgreSQL | replay | time | 10 ns | | | no peer measured |  |", "no verdict of one; no claim samples, no verdict")
	assert.NotContains(t, out, "no store can undercut")
	assert.NotContains(t, out, "at the floor")
}

func TestEngineCaches(t *testing.T) {
	fp, recent := engineCaches("../../..") // the tree's root, from bench/cmd/report
	assert.Positive(t, fp, "fpCacheSlots found in runtime/idem/fpcache.go")
	assert.Positive(t, recent, "recentSlots found in runtime/idem/recent.go")
	_, none := engineCaches(t.TempDir())
	assert.Zero(t, none, "no runtime/idem: not found")
	for _, c := range []struct {
		fp, recent int
		want       string
	}{
		{1024, 4096, "its last 1024 requests at most (a direct-mapped table: fewer when they collide) and remembers the last 4096 keys"},
		{0, 4096, "its last (not found in runtime/idem) requests"},
		{0, 0, ""},
	} {
		got := cachesLine(c.fp, c.recent)
		if c.want == "" {
			assert.Equal(t, "", got)
			continue
		}
		assert.Contains(t, got, c.want)
		assert.Contains(t, got, fmt.Sprintf("cycle through %d distinct bodies", workload.FirstBodies))
		assert.Contains(t, got, fmt.Sprintf("through %d requests", workload.Rotation))
	}
	// The first-request rows must not be answered by the fingerprint
	// cache, nor the rotating replays by either cache.
	assert.Greater(t, workload.FirstBodies, 2*fp, "first-request bodies against the fingerprint cache's slots")
	assert.Greater(t, workload.Rotation, max(fp, recent), "rotating replays against the engine's caches")
}
