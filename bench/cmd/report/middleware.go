package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/bench/internal/check"
	"github.com/idemgen/idemgen/bench/internal/workload"
)

// stackDef describes one HTTP stack of package middleware.
type stackDef struct {
	bench, label string
	bare         string // the bare handler's implementation name
	impls        []implDef
}

type implDef struct{ name, label string }

// short names the implementation in the fastest column: its label's first
// word (idemgen, fiber, gopotency), as the stores table names them.
func (im implDef) short() string {
	return strings.Fields(strings.ReplaceAll(im.label, "*", ""))[0]
}

var stacks = []stackDef{
	{"NetHTTP", "net/http (minimal ResponseWriter)", "bare", []implDef{
		{"idemgen", "**idemgen** (engine + memstore)"},
	}},
	{"FastHTTP", "fasthttp (reused RequestCtx, fiber's app.Handler())", "fiber", []implDef{
		{"fiber-idempotency", "fiber v2.52.15 middleware/idempotency"},
	}},
}

type rowDef struct{ name, label, base string }

// mwRows are the middleware table's rows: base is the floor's or bare
// handler's row they are compared with. The replays of the same request
// every time find it in any cache an implementation has (idemgen's
// fingerprint cache); the rotating ones cycle through more requests than
// any cache holds (workload.Rotation), as retries that come after
// thousands of other requests do.
var mwRows = []rowDef{
	{"first", "first request", "serial"},
	{"replay", "replay, the same request every time", "serial"},
	{"replay-rotating", fmt.Sprintf("replay, %d requests in rotation", workload.Rotation), "serial"},
	{"replay-parallel", "parallel replay, the same request every time", "parallel"},
	{"replay-rotating-parallel", fmt.Sprintf("parallel replay, %d requests in rotation", workload.Rotation), "parallel"},
}

// storeRows are the stores table's rows.
var storeRows = []rowDef{
	{"first", "first request", "serial"},
	{"replay", "replay", "serial"},
	{"replay-parallel", "parallel replay", "parallel"},
}

func (r *runner) middleware() (string, error) {
	rs, err := r.bench("middleware", "./middleware", ".", r.benchtime)
	if err != nil {
		return "", err
	}
	return renderMiddleware(rs) + r.gopotencyNote(), nil
}

func renderMiddleware(rs results) string {
	var b strings.Builder
	b.WriteString("| stack | implementation | request | time/op | CPU/op | B/op | allocs/op | page faults/op | over floor (CPU, allocs) | over bare (CPU, allocs) | time × floor |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	line := func(stack, impl, row, name, floor, bare string) {
		t := rs.stat(name, "ns/op")
		if !t.ok {
			fmt.Fprintf(&b, "| %s | %s | %s | *missing* | | | | | | | |\n", stack, impl, row)
			return
		}
		c := rs.stat(name, "cpu-ns/op")
		by, _ := rs.median(name, "B/op")
		al, _ := rs.median(name, "allocs/op")
		faults := ""
		if f, ok := rs.median(name, "faults/op"); ok {
			faults = fmt.Sprintf("%.3f", f)
		}
		over := func(base string) string {
			if base == "" || base == name {
				return ""
			}
			dc, ok1 := rs.overhead(name, base, "cpu-ns/op")
			da, ok2 := rs.overhead(name, base, "allocs/op")
			if !ok1 || !ok2 {
				return "?"
			}
			return fmt.Sprintf("%s, %s", signedDur(dc), signedCount(da))
		}
		times := ""
		if ft, ok := rs.median(floor, "ns/op"); ok && ft > 0 {
			times = fmt.Sprintf("%.1f×", t.Center/ft)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s%s | %s%s | %s | %s | %s | %s | %s | %s |\n", stack, impl, row,
			dur(t.Center), t.pct(), dur(c.Center), c.pct(), bytesStr(by), count(al), faults, over(floor), over(bare), times)
	}
	for _, s := range stacks {
		for _, mode := range []string{"serial", "parallel"} {
			floor, bare := s.bench+"/floor/"+mode, s.bench+"/"+s.bare+"/"+mode
			line(s.label, "floor (response write only)", mode, floor, floor, "")
			bareLabel := "bare handler"
			if s.bare == "fiber" {
				bareLabel = "bare fiber handler"
			}
			line(s.label, bareLabel, mode, bare, floor, bare)
		}
		for _, im := range s.impls {
			for _, row := range mwRows {
				floor, bare := s.bench+"/floor/"+row.base, s.bench+"/"+s.bare+"/"+row.base
				line(s.label, im.label, row.label, s.bench+"/"+im.name+"/"+row.name, floor, bare)
			}
		}
	}
	b.WriteString(overNote)
	b.WriteString(fastest(rs))
	b.WriteString(breakdown(rs))
	b.WriteString(kept(rs))
	b.WriteString(cachesLine(engineCaches("..")))
	if !check.ResentIsSame() {
		b.WriteString("\n**This build's fingerprint is not canonical** (the runtime/fingerprint placeholder hashes the raw body): " +
			"idemgen's numbers above understate the cost of canonicalization on first requests.\n")
	}
	return b.String()
}

// fastest compares the middlewares' overheads over their own stack's floor
// (replays) or bare handler (first requests), row by row, in wall time and
// in CPU time.
func fastest(rs results) string {
	var b strings.Builder
	b.WriteString("\nOverhead of each middleware over its own stack, row by row (lower is better):\n\n| request | metric |")
	var cols []string
	for _, s := range stacks {
		for _, im := range s.impls {
			cols = append(cols, strings.ReplaceAll(im.label, "*", ""))
		}
	}
	b.WriteString(" " + strings.Join(cols, " | ") + " | fastest |\n|---|---|" + strings.Repeat("---:|", len(cols)) + "---|\n")
	// The verdict compares per-round samples of each overhead (see diff
	// and verdict): a lower median that the rounds' spread cannot tell
	// from another's is a tie.
	for _, row := range mwRows {
		base := "bare"
		if row.name != "first" {
			base = "floor"
		}
		for _, metric := range []struct{ unit, label string }{{"ns/op", "time"}, {"cpu-ns/op", "CPU"}, {"allocs/op", "allocs"}} {
			fmt.Fprintf(&b, "| %s (over %s) | %s |", row.label, base, metric.label)
			var cands []candidate
			for _, s := range stacks {
				ref := s.bench + "/" + s.bare + "/" + row.base
				if base == "floor" {
					ref = s.bench + "/floor/" + row.base
				}
				for _, im := range s.impls {
					d, ok := rs.overhead(s.bench+"/"+im.name+"/"+row.name, ref, metric.unit)
					if !ok {
						b.WriteString(" ? |")
						continue
					}
					if metric.unit == "allocs/op" {
						fmt.Fprintf(&b, " %s |", signedCount(d))
					} else {
						fmt.Fprintf(&b, " %s |", signedDur(d))
					}
					cands = append(cands, candidate{im.short(),
						rs.diff(s.bench+"/"+im.name+"/"+row.name, ref, metric.unit)})
				}
			}
			fmt.Fprintf(&b, " %s |\n", verdict(cands))
		}
	}
	b.WriteString(verdictNote + "Overheads are compared round by round: each cell is the median of the rounds' differences " +
		"(each round's request minus the same round's floor or bare handler), the samples the verdict compares.\n")
	return b.String()
}

// verdictNote explains the "fastest" column of the comparison tables.
const verdictNote = "\n*fastest*: the lowest median, named when a Mann-Whitney U test over the rounds " +
	"(benchstat's test, p < 0.05) tells it apart from every other; otherwise a tie between it and those it " +
	"cannot be told apart from, with the largest p.\n"

// overNote explains the overhead columns of the middleware table.
const overNote = "\n*over floor*, *over bare*: the median of the rounds' differences (each round's row minus the same " +
	"round's floor or bare handler), as the verdicts below compare them.\n"

// breakdown splits idemgen's first-request overhead (CPU) into the engine,
// the canonical fingerprint and memstore, from the engine over a store that
// keeps nothing, with the fingerprint cached or computed. Each part is the
// median of the rounds' differences between two benchmarks of the same
// round, with its 95% confidence interval: the parts are measured apart,
// so they need not add up to the total.
func breakdown(rs results) string {
	n := func(s string) string { return "NetHTTP/" + s }
	parts := []struct{ part, measured, a, b string }{
		{"engine (key, body, scope, claim and record logic, heartbeat registration)",
			"engine over a store that keeps nothing, fingerprint cached, minus the bare handler", "idemgen/nostore-first-cached", "bare/serial"},
		{"canonical fingerprint of the 1 KB body",
			"the same with the fingerprint computed for every request, minus the cached one", "idemgen/nostore-first", "idemgen/nostore-first-cached"},
		{"memstore (claim, finish, a record kept per request, its memory's cost)",
			"engine over memstore, minus engine over the store that keeps nothing", "idemgen/first", "idemgen/nostore-first"},
		{"total", "engine over memstore, minus the bare handler", "idemgen/first", "bare/serial"},
	}
	var b strings.Builder
	b.WriteString("\nWhere idemgen's first-request overhead goes (CPU over the bare handler; the median of the rounds' differences, with its 95% confidence interval):\n\n")
	b.WriteString("| part | measured as | CPU | 95% CI |\n|---|---|---:|---|\n")
	for _, p := range parts {
		d := rs.diff(n(p.a), n(p.b), "cpu-ns/op")
		if len(d) == 0 {
			return ""
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", p.part, p.measured, signedDur(center(d)), ci(d, signedDur))
	}
	b.WriteString("\nEach part is the difference of two benchmarks, taken round by round; the parts are measured apart, " +
		"so they need not add up to the total, and a wide interval means the rounds disagree (a disturbed round shows here first).\n")
	return b.String()
}

// kept is the table of the memory the first-request rows' records keep,
// per record: in the Go heap, outside it (memstore's own accounting of its
// mapped memory) and the process's resident memory.
func kept(rs results) string {
	var b strings.Builder
	started := false
	for _, s := range stacks {
		for _, im := range s.impls {
			name := s.bench + "/" + im.name + "/first"
			h, ok := rs.median(name, "heap-B/rec")
			if !ok {
				continue
			}
			if !started {
				b.WriteString("\nMemory kept per record by the first-request rows (medians of the rounds; B/op above counts only what the request allocates on the Go heap):\n\n")
				b.WriteString("| implementation | records per run | live Go heap / record | outside the Go heap / record | resident memory (RSS) growth / record |\n|---|---:|---:|---:|---:|\n")
				started = true
			}
			o, _ := rs.median(name, "offheap-B/rec")
			rss := ""
			if v, ok := rs.median(name, "rss-B/rec"); ok {
				rss = signedBytes(v)
			}
			n, _ := rs.median(name, "iters")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", strings.ReplaceAll(im.label, "*", ""), count(n), signedBytes(h), signedBytes(o), rss)
		}
	}
	if started {
		b.WriteString("\nThe live heap's growth is measured after a collection before and after the benchmark, over its records alone; " +
			"memstore keeps records in memory mapped outside the Go heap, counted by its own accounting (`Stats().Bytes`: keys, " +
			"responses and a fixed overhead per entry, not its index or the slack of its chunks); resident memory counts both, " +
			"the heap's headroom up to the collector's goal and whole pages, and is the noisiest (pages kept from an earlier " +
			"benchmark absorb growth; a huge page is 2 MiB at once). Fixed costs (a store's first chunks and index) are spread " +
			"over the run's records: the fewer records, the more they weigh per record.\n")
	}
	return b.String()
}

// engineCaches reads the sizes of idem.Engine's caches from the runtime's
// source in the tree at root (".." from bench/, where the report runs): the
// fingerprint cache's slots and the table of recently finished keys; 0 for
// a size not found.
func engineCaches(root string) (fpSlots, recentSlots int) {
	find := func(file, name string) int {
		b, err := os.ReadFile(filepath.Join(root, "runtime", "idem", file))
		if err != nil {
			return 0
		}
		m := regexp.MustCompile(`const ` + name + ` = (\d+)`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return find("fpcache.go", "fpCacheSlots"), find("recent.go", "recentSlots")
}

// cachesLine says how big idemgen's caches are in the tree measured, next
// to the rotation of the rotating replays.
func cachesLine(fpSlots, recentSlots int) string {
	if fpSlots == 0 && recentSlots == 0 {
		return ""
	}
	size := func(n int) string {
		if n == 0 {
			return "(not found in runtime/idem)"
		}
		return strconv.Itoa(n)
	}
	return fmt.Sprintf("\nIn the tree measured, an idem.Engine caches the fingerprints of its last %s requests at most "+
		"(a direct-mapped table: fewer when they collide) and remembers the last %s keys it saw final (over a store "+
		"that reads first: see *Stores*); the first-request rows cycle through %d distinct bodies, the rotating replays "+
		"through %d requests.\n",
		size(fpSlots), size(recentSlots), workload.FirstBodies, workload.Rotation)
}
