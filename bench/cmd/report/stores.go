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
	_, recent := engineCaches("..")
	return renderStores(rs) + storesFastest(rs, recent) + r.gopotencyNote(), nil
}

// storesFastest compares idemgen with the peers on each server, row by
// row, in wall time and in this process's CPU time (see verdict), twice:
// with idemgen's replay reading first (the idemgen rows: the key is among
// the last recentSlots this Engine saw final) and with its replay claiming
// (the idemgen-claim rows: another instance's record, or a key this Engine
// has forgotten), which is the general case. A first request claims in
// both. The raw client is the limit, not a contender: the last columns
// compare each idemgen case with it.
func storesFastest(rs results, recentSlots int) string {
	var b strings.Builder
	b.WriteString("\nidemgen and the peers on each server, row by row (medians; lower is better):\n\n")
	var cols, peers []storeImpl
	for _, im := range storeImpls {
		if im.name != "raw" {
			cols = append(cols, im)
		}
		if im.name != "raw" && !strings.HasPrefix(im.name, "idemgen") {
			peers = append(peers, im)
		}
	}
	b.WriteString("| server | request | metric |")
	for _, im := range cols {
		b.WriteString(" " + strings.ReplaceAll(im.label, "*", "") + " |")
	}
	b.WriteString(" fastest, idemgen reading first | fastest, idemgen claiming (another instance's record) |" +
		" idemgen reading first vs the raw client | idemgen claiming vs the raw client |\n|---|---|---|" +
		strings.Repeat("---:|", len(cols)) + "---|---|---|---|\n")
	for _, s := range servers {
		for _, row := range storeRows {
			for _, metric := range []struct{ unit, label string }{{"ns/op", "time"}, {"cpu-ns/op", "CPU"}} {
				fmt.Fprintf(&b, "| %s | %s | %s |", s.label, row.label, metric.label)
				for _, im := range cols {
					v, ok := rs.median(s.bench+"/"+im.name+"/"+row.name, metric.unit)
					if !ok {
						b.WriteString(" |")
						continue
					}
					fmt.Fprintf(&b, " %s |", dur(v))
				}
				samples := func(impl string) []float64 { return rs[s.bench+"/"+impl+"/"+row.name][metric.unit] }
				claim := "idemgen-claim"
				if row.name == "first" {
					claim = "idemgen" // a first request claims either way
				}
				var peerCands []candidate
				for _, im := range peers {
					peerCands = append(peerCands, candidate{im.name, samples(im.name)})
				}
				vs := func(idemgen []float64) string {
					return versusPeers(candidate{"idemgen", idemgen}, peerCands)
				}
				raw := samples("raw")
				fmt.Fprintf(&b, " %s | %s | %s | %s |\n", vs(samples("idemgen")), vs(samples(claim)),
					versusFloor(samples("idemgen"), raw), versusFloor(samples(claim), raw))
			}
		}
	}
	b.WriteString(verdictNote + claimNote(recentSlots) + floorNote)
	return b.String()
}

// versusPeers is the verdict between idemgen and the peers, or "no peer
// measured" when no peer has samples (a verdict of one would name it).
func versusPeers(idemgen candidate, peers []candidate) string {
	for _, p := range peers {
		if len(p.vals) > 0 {
			return verdict(append([]candidate{idemgen}, peers...))
		}
	}
	if len(idemgen.vals) == 0 {
		return ""
	}
	return "no peer measured"
}

// claimNote explains the two verdict columns of storesFastest; recentSlots
// is how many keys an Engine remembers final (engineCaches; 0: unknown).
func claimNote(recentSlots int) string {
	among := "among the last keys it"
	if recentSlots > 0 {
		among = fmt.Sprintf("among the last %d it", recentSlots)
	}
	return "*reading first*: idemgen's replay of a key its Engine recently saw final (" + among + " " +
		"completed or replayed), one plain read; *claiming*: the replay of a record another instance made (or of a key " +
		"this Engine no longer remembers), its claim. A first request claims in both (the same samples).\n"
}

// floorNote explains the last columns of storesFastest.
const floorNote = "*vs the raw client*: the median of the rounds' ratios of idemgen over the raw client (the minimum " +
	"commands of the same protocol, no fingerprint, no record format, no leases), with its 95% confidence interval, " +
	"and the p of the same test as the verdicts; \"indistinguishable\" when the test cannot tell the two apart, " +
	"which is not evidence that they cost the same.\n"

// versusFloor compares idemgen's samples with the raw client's: the median
// of the per-round ratios (the rounds interleave, so the i-th samples of
// both come from the same round) with its 95% confidence interval, or the
// ratio of the medians when the rounds cannot be paired, and the p of
// verdict's test; "indistinguishable" when that test cannot tell them
// apart.
func versusFloor(idemgen, raw []float64) string {
	if len(idemgen) == 0 || len(raw) == 0 {
		return ""
	}
	a := benchmath.NewSample(idemgen, &thresholds)
	r := benchmath.NewSample(raw, &thresholds)
	ca := benchmath.AssumeNothing.Summary(a, 0.95).Center
	cr := benchmath.AssumeNothing.Summary(r, 0.95).Center
	p := benchmath.AssumeNothing.Compare(a, r).P
	x := func(v float64) string { return fmt.Sprintf("%.2f×", v) }
	ratio := x(ca / cr)
	if len(idemgen) == len(raw) {
		rs := make([]float64, len(raw))
		for i := range raw {
			rs[i] = idemgen[i] / raw[i]
		}
		ratio = x(center(rs))
		if c := ci(rs, func(v float64) string { return fmt.Sprintf("%.2f", v) }); !strings.HasPrefix(c, "n/a") {
			ratio += " " + c
		}
	}
	if p >= verdictAlpha || ca == cr {
		return fmt.Sprintf("%s, indistinguishable (p = %.2f)", ratio, p)
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
			for _, row := range storeRows {
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
					if r, ok := rs.ratio(name, s.bench+"/raw/"+row.name, "ns/op"); ok {
						vs = fmt.Sprintf("%.2f×", r)
					}
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s%s | %s%s | %s | %s | %.2f | %s | %s |\n", s.label, im.label, row.label,
					dur(t.Center), t.pct(), dur(c.Center), c.pct(), bytesStr(by), count(al), rt, st, vs)
			}
		}
	}
	b.WriteString("\n*time vs raw*: the median of the rounds' ratios of the row's time over the raw client's in the same round.\n")
	return b.String()
}
