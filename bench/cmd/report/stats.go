package main

import (
	"bytes"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// results maps a benchmark name (without "Benchmark" and the -GOMAXPROCS
// suffix) to its samples by unit ("ns/op", "B/op", "allocs/op", custom;
// "iters", the iterations of each run).
type results map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

func parse(out []byte) (results, error) {
	res := results{}
	rd := benchfmt.NewReader(bytes.NewReader(out), "go test")
	for rd.Scan() {
		rec, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		name := procSuffix.ReplaceAllString(string(rec.Name.Full()), "")
		m := res[name]
		if m == nil {
			m = map[string][]float64{}
			res[name] = m
		}
		m["iters"] = append(m["iters"], float64(rec.Iters))
		for _, v := range rec.Values {
			// benchfmt tidies units: back to go test's.
			unit, val := v.Unit, v.Value
			switch {
			case strings.HasSuffix(unit, "sec/op"): // ns/op, cpu-ns/op
				unit, val = strings.TrimSuffix(unit, "sec/op")+"ns/op", val*1e9
			case unit == "B/s":
				unit, val = "MB/s", val/1e6
			}
			m[unit] = append(m[unit], val)
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no benchmark results")
	}
	return res, nil
}

// stat is the median of a sample with its 95% confidence interval.
type stat struct {
	benchmath.Summary
	n  int
	ok bool
}

var thresholds = benchmath.DefaultThresholds

func (rs results) stat(name, unit string) stat {
	vals := rs[name][unit]
	if len(vals) == 0 {
		return stat{}
	}
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(vals, &thresholds), 0.95)
	return stat{Summary: s, n: len(vals), ok: true}
}

func (rs results) median(name, unit string) (float64, bool) {
	s := rs.stat(name, unit)
	return s.Center, s.ok
}

// names returns the benchmark names, sorted.
func (rs results) names() []string {
	var ns []string
	for n := range rs {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// pct is the half-width of the confidence interval relative to the median
// ("±3%"), or "" when there is a single run.
func (s stat) pct() string {
	if s.n < 2 || s.Center == 0 || math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) {
		return ""
	}
	w := math.Max(s.Center-s.Lo, s.Hi-s.Center) / s.Center * 100
	return fmt.Sprintf(" ±%.0f%%", w)
}

// dur renders nanoseconds.
func dur(ns float64) string {
	ns = math.Round(ns*100) / 100 // unit conversions leave 999.9999 for 1000
	a := math.Abs(ns)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case a >= 10e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	case a >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func signedDur(ns float64) string {
	if ns >= 0 {
		return "+" + dur(ns)
	}
	return "−" + dur(-ns)
}

func bytesStr(b float64) string {
	switch {
	case b >= 10<<20:
		return fmt.Sprintf("%.0f MB", b/(1<<20))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MB", b/(1<<20))
	case b >= 10<<10:
		return fmt.Sprintf("%.0f KB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func count(n float64) string {
	if n >= 10000 {
		return fmt.Sprintf("%.0fk", n/1000)
	}
	return fmt.Sprintf("%.0f", n)
}

func signedCount(n float64) string {
	if n >= 0 {
		return "+" + count(n)
	}
	return "−" + count(-n)
}

// diff returns the per-round samples of name minus ref in unit, paired by
// round: every round runs each benchmark once, in order, so the i-th
// samples of two benchmarks come from the same round. Samples of unequal
// counts cannot be paired: diff returns none (verdict leaves them out).
func (rs results) diff(name, ref, unit string) []float64 {
	a, b := rs[name][unit], rs[ref][unit]
	if len(a) != len(b) {
		return nil
	}
	n := len(a)
	out := make([]float64, n)
	for i := range n {
		out[i] = a[i] - b[i]
	}
	return out
}

// candidate is one column of a verdict: its label and its samples.
type candidate struct {
	label string
	vals  []float64
}

// verdictAlpha is the significance level of verdict (benchstat's default).
const verdictAlpha = 0.05

// verdict names the candidate whose median is lowest when that is lower
// than every other's by a difference benchstat would call significant
// (benchmath.AssumeNothing.Compare: a Mann-Whitney U test, p < 0.05);
// otherwise it answers "tie:" with the candidates that cannot be told
// apart from it and the largest p. Candidates without samples are left
// out.
func verdict(cs []candidate) string {
	var in []candidate
	for _, c := range cs {
		if len(c.vals) > 0 {
			in = append(in, c)
		}
	}
	if len(in) == 0 {
		return ""
	}
	sample := func(c candidate) *benchmath.Sample { return benchmath.NewSample(c.vals, &thresholds) }
	center := func(c candidate) float64 { return benchmath.AssumeNothing.Summary(sample(c), 0.95).Center }
	best := in[0]
	for _, c := range in[1:] {
		if center(c) < center(best) {
			best = c
		}
	}
	tied, maxP := []string{best.label}, 0.0
	for _, c := range in {
		if c.label == best.label {
			continue
		}
		if p := benchmath.AssumeNothing.Compare(sample(best), sample(c)).P; p >= verdictAlpha || center(c) == center(best) {
			tied = append(tied, c.label)
			maxP = math.Max(maxP, p)
		}
	}
	if len(tied) == 1 {
		return best.label
	}
	return fmt.Sprintf("tie: %s (p = %.2f)", strings.Join(tied, ", "), maxP)
}

// overhead is the median of the per-round differences of name minus ref
// (diff), the statistic verdict compares; when the rounds cannot be
// paired, the difference of the medians.
func (rs results) overhead(name, ref, unit string) (float64, bool) {
	if d := rs.diff(name, ref, unit); len(d) > 0 {
		return center(d), true
	}
	a, ok1 := rs.median(name, unit)
	b, ok2 := rs.median(ref, unit)
	return a - b, ok1 && ok2
}

// center is the median of a sample (as benchstat computes it).
func center(vals []float64) float64 {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(vals, &thresholds), 0.95).Center
}

// ci renders the 95% confidence interval of the median of vals with f, or
// "n/a" when there are too few samples for one (benchmath needs 6).
func ci(vals []float64, f func(float64) string) string {
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(vals, &thresholds), 0.95)
	if len(vals) < 2 || math.IsInf(s.Lo, 0) || math.IsInf(s.Hi, 0) || math.IsNaN(s.Lo) || math.IsNaN(s.Hi) {
		return "n/a (too few rounds)"
	}
	return "[" + f(s.Lo) + ", " + f(s.Hi) + "]"
}

func signedBytes(b float64) string {
	if b >= 0 {
		return "+" + bytesStr(b)
	}
	return "−" + bytesStr(-b)
}

// ratio is the median of the per-round ratios of name over ref (as
// versusFloor computes it); when the rounds cannot be paired, the ratio of
// the medians.
func (rs results) ratio(name, ref, unit string) (float64, bool) {
	a, b := rs[name][unit], rs[ref][unit]
	if len(a) > 0 && len(a) == len(b) {
		r := make([]float64, len(a))
		for i := range a {
			if b[i] == 0 {
				return 0, false
			}
			r[i] = a[i] / b[i]
		}
		return center(r), true
	}
	ma, ok1 := rs.median(name, unit)
	mb, ok2 := rs.median(ref, unit)
	if !ok1 || !ok2 || mb == 0 {
		return 0, false
	}
	return ma / mb, true
}
