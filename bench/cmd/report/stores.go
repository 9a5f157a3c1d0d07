package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/perf/benchmath"
)

var servers = []struct{ bench, label string }{
	{"Redis", "Redis"},
	{"Postgres", "PostgreSQL"},
}

// storeImpls are the implementations of the table, in its order; a server
// limits one to the server it exists for (fiber's storage has no PostgreSQL
// version at a version the module proxy serves); replaysOnly leaves out
// the first-request row.
type storeImpl struct {
	name, label, server string
	replaysOnly         bool
}

var storeImpls = []storeImpl{
	{"idemgen", "**idemgen** (engine + store)", "", false},
	{"idemgen-claim", "**idemgen**, another instance's record (claimed: Begin, not read first)", "", true},
	{"fiber", "fiber v2 middleware/idempotency (storage/redis/v3, on fiber)", "Redis", false},
	{"raw", "raw client, minimum commands", "", false},
}

func (r *runner) stores() (string, error) {
	if !haveStores() {
		return "", skipped("the Redis and PostgreSQL stores (runtime/redisstore, runtime/pgstore) are not in this tree yet")
	}
	rs, err := r.bench("stores", "./stores", ".", r.benchtime)
	if err != nil {
		return "", err
	}
	return renderStores(rs) + storesFastest(rs) + r.gopotencyNote(), nil
}

// storesFastest compares idemgen with the peers on each server, row by
// row, in wall time and in this process's CPU time (see verdict): the raw
// client is the limit, not a contender, and idemgen's replay of another
// instance's record is shown beside its own but is not a contender either
// (its peers' replays read every time).
func storesFastest(rs results) string {
	var b strings.Builder
	b.WriteString("\nidemgen and the peers on each server, row by row (medians; lower is better):\n\n")
	var cols []storeImpl
	for _, im := range storeImpls {
		if im.name != "raw" {
			cols = append(cols, im)
		}
	}
	b.WriteString("| server | request | metric |")
	for _, im := range cols {
		b.WriteString(" " + strings.ReplaceAll(im.label, "*", "") + " |")
	}
	b.WriteString(" fastest | idemgen vs the raw client |\n|---|---|---|" + strings.Repeat("---:|", len(cols)) + "---|---|\n")
	for _, s := range servers {
		for _, row := range rows {
			for _, metric := range []struct{ unit, label string }{{"ns/op", "time"}, {"cpu-ns/op", "CPU"}} {
				fmt.Fprintf(&b, "| %s | %s | %s |", s.label, row.label, metric.label)
				var cands []candidate
				for _, im := range cols {
					name := s.bench + "/" + im.name + "/" + row.name
					v, ok := rs.median(name, metric.unit)
					if !ok {
						b.WriteString(" |")
						continue
					}
					fmt.Fprintf(&b, " %s |", dur(v))
					if !im.replaysOnly {
						cands = append(cands, candidate{im.name, rs[name][metric.unit]})
					}
				}
				raw := s.bench + "/raw/" + row.name
				fmt.Fprintf(&b, " %s | %s |\n", verdict(cands),
					versusFloor(rs[s.bench+"/idemgen/"+row.name][metric.unit], rs[raw][metric.unit]))
			}
		}
	}
	b.WriteString(verdictNote + floorNote)
	return b.String()
}

// floorNote explains the last column of storesFastest.
const floorNote = "*idemgen vs the raw client*: idemgen's median over the raw client's (the minimum commands of the " +
	"same protocol, which no store can undercut), and whether the same test tells the two apart; \"at the floor\" " +
	"when it cannot.\n"

// versusFloor compares idemgen's samples with the raw client's: the ratio
// of their medians, and "at the floor" when the rounds cannot tell them
// apart (the test of verdict).
func versusFloor(idemgen, raw []float64) string {
	if len(idemgen) == 0 || len(raw) == 0 {
		return ""
	}
	a := benchmath.NewSample(idemgen, &thresholds)
	r := benchmath.NewSample(raw, &thresholds)
	ca := benchmath.AssumeNothing.Summary(a, 0.95).Center
	cr := benchmath.AssumeNothing.Summary(r, 0.95).Center
	p := benchmath.AssumeNothing.Compare(a, r).P
	ratio := fmt.Sprintf("%.2f×", ca/cr)
	if p >= verdictAlpha || ca == cr {
		return fmt.Sprintf("%s, at the floor (p = %.2f)", ratio, p)
	}
	return fmt.Sprintf("%s (p = %.2f)", ratio, p)
}

// haveStores reports whether the stores bench/stores measures are in the tree.
func haveStores() bool {
	_, err := os.Stat("../runtime/redisstore")
	return err == nil
}

func renderStores(rs results) string {
	var b strings.Builder
	b.WriteString("| server | implementation | request | time/op | CPU/op (this process) | B/op | allocs/op | round trips | statements | time vs raw |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range servers {
		for _, im := range storeImpls {
			if (im.server != "" && im.server != s.bench) || absentPeer(rs, s.bench, im.name) {
				continue
			}
			for _, row := range rows {
				if im.replaysOnly && row.name == "first" {
					continue
				}
				name := s.bench + "/" + im.name + "/" + row.name
				t := rs.stat(name, "ns/op")
				if !t.ok {
					fmt.Fprintf(&b, "| %s | %s | %s | *missing* | | | | | | |\n", s.label, im.label, row.label)
					continue
				}
				c := rs.stat(name, "cpu-ns/op")
				by, _ := rs.median(name, "B/op")
				al, _ := rs.median(name, "allocs/op")
				rt, _ := rs.median(name, "roundtrips/op")
				st := ""
				if v, ok := rs.median(name, "statements/op"); ok {
					st = fmt.Sprintf("%.0f", v)
				} else {
					st = fmt.Sprintf("%.0f", rt)
				}
				vs := ""
				if im.name != "raw" {
					if raw, ok := rs.median(s.bench+"/raw/"+row.name, "ns/op"); ok && raw > 0 {
						vs = fmt.Sprintf("%.2f×", t.Center/raw)
					}
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s%s | %s%s | %s | %s | %.2f | %s | %s |\n", s.label, im.label, row.label,
					dur(t.Center), t.pct(), dur(c.Center), c.pct(), bytesStr(by), count(al), rt, st, vs)
			}
		}
	}
	return b.String()
}
