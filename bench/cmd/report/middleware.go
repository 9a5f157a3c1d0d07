package main

import (
	"fmt"
	"strings"

	"github.com/idemgen/idemgen/bench/internal/check"
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

var rows = []struct{ name, label, base string }{
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
			bc, ok1 := rs.median(base, "cpu-ns/op")
			ba, ok2 := rs.median(base, "allocs/op")
			if !ok1 || !ok2 {
				return "?"
			}
			return fmt.Sprintf("%s, %s", signedDur(c.Center-bc), signedCount(al-ba))
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
			for _, row := range rows {
				floor, bare := s.bench+"/floor/"+row.base, s.bench+"/"+s.bare+"/"+row.base
				line(s.label, im.label, row.label, s.bench+"/"+im.name+"/"+row.name, floor, bare)
			}
		}
	}
	b.WriteString(fastest(rs))
	b.WriteString(breakdown(rs))
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
	for _, row := range rows {
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
					t, ok1 := rs.median(s.bench+"/"+im.name+"/"+row.name, metric.unit)
					r, ok2 := rs.median(ref, metric.unit)
					if !ok1 || !ok2 {
						b.WriteString(" ? |")
						continue
					}
					d := t - r
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
	b.WriteString(verdictNote + "Overheads are compared round by round: each round's request minus the same round's floor or bare handler.\n")
	return b.String()
}

// verdictNote explains the "fastest" column of the comparison tables.
const verdictNote = "\n*fastest*: the lowest median, named when a Mann-Whitney U test over the rounds " +
	"(benchstat's test, p < 0.05) tells it apart from every other; otherwise a tie between it and those it " +
	"cannot be told apart from, with the largest p.\n"

// breakdown splits idemgen's first-request overhead (CPU) into the engine,
// the canonical fingerprint and memstore, from the engine over a store that
// keeps nothing, with the fingerprint cached or computed.
func breakdown(rs results) string {
	get := func(n string) (float64, bool) { return rs.median("NetHTTP/"+n, "cpu-ns/op") }
	bare, ok1 := get("bare/serial")
	cached, ok2 := get("idemgen/nostore-first-cached")
	nostore, ok3 := get("idemgen/nostore-first")
	full, ok4 := get("idemgen/first")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nWhere idemgen's first-request overhead goes (CPU over the bare handler):\n\n")
	b.WriteString("| part | measured as | CPU |\n|---|---|---:|\n")
	fmt.Fprintf(&b, "| engine (key, body, scope, claim and record logic, heartbeat registration) | engine over a store that keeps nothing, fingerprint cached | %s |\n", signedDur(cached-bare))
	fmt.Fprintf(&b, "| canonical fingerprint of the 1 KB body | the same, fingerprint computed for every request | %s |\n", signedDur(nostore-cached))
	fmt.Fprintf(&b, "| memstore (claim, finish, a record kept per request, its garbage-collection cost) | engine over memstore | %s |\n", signedDur(full-nostore))
	fmt.Fprintf(&b, "| total | | %s |\n", signedDur(full-bare))
	return b.String()
}
