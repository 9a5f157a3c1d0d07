package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// fingerprint runs the fp engineer's bench/fingerprint benchmarks (canonical
// fingerprint vs jsontext) and renders them as they come.
func (r *runner) fingerprint() (string, error) {
	if _, err := os.Stat("fingerprint"); errors.Is(err, os.ErrNotExist) {
		return "", skipped("bench/fingerprint is not in this tree yet")
	}
	// 18 benchmarks: half the -benchtime keeps the whole command within minutes.
	rs, err := r.bench("fingerprint", "./fingerprint", ".", halfTime(r.benchtime))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| benchmark | time/op | MB/s | B/op | allocs/op |\n|---|---:|---:|---:|---:|\n")
	for _, n := range rs.names() {
		t := rs.stat(n, "ns/op")
		mbs := ""
		if v, ok := rs.median(n, "MB/s"); ok {
			mbs = fmt.Sprintf("%.0f", v)
		}
		by, _ := rs.median(n, "B/op")
		al, _ := rs.median(n, "allocs/op")
		fmt.Fprintf(&b, "| %s | %s%s | %s | %s | %s |\n", n, dur(t.Center), t.pct(), mbs, bytesStr(by), count(al))
	}
	b.WriteString(fingerprintTargets(rs))
	return b.String(), nil
}

// fingerprintTargets is the table of the runtime's throughput targets, body
// by body: the canonical fingerprint's throughput as a share of SHA-256's
// over the same bytes (target: at least 1/3) and as a multiple of the
// jsontext canonicalization + SHA-256 (target: at least 3x), from the
// medians of the same run.
func fingerprintTargets(rs results) string {
	var bodies []string
	for _, n := range rs.names() {
		if body, ok := strings.CutPrefix(n, "Fingerprint/"); ok {
			bodies = append(bodies, body)
		}
	}
	if len(bodies) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nTargets, body by body (throughput ratios of the medians above):\n\n")
	b.WriteString("| body | fingerprint ÷ SHA-256 (target ≥ 0.33) | fingerprint ÷ jsontext + SHA-256 (target ≥ 3×) | fingerprint allocs/op (target 0) | all met |\n|---|---:|---:|---:|---|\n")
	for _, body := range bodies {
		fp, ok1 := rs.median("Fingerprint/"+body, "ns/op")
		sha, ok2 := rs.median("SHA256/"+body, "ns/op")
		jt, ok3 := rs.median("JSONTextCanonicalize/"+body, "ns/op")
		al, _ := rs.median("Fingerprint/"+body, "allocs/op")
		if !ok1 || !ok2 || !ok3 || fp == 0 {
			fmt.Fprintf(&b, "| %s | *missing* | | | |\n", body)
			continue
		}
		vsSHA, vsJT := sha/fp, jt/fp
		met := "yes"
		if vsSHA < 1.0/3 || vsJT < 3 || al != 0 {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.1f× | %s | %s |\n", body, vsSHA, vsJT, count(al), met)
	}
	return b.String()
}

// halfTime halves a -benchtime duration ("1s" -> "500ms"); other forms pass as they are.
func halfTime(bt string) string {
	d, err := time.ParseDuration(bt)
	if err != nil {
		return bt
	}
	return (d / 2).String()
}
