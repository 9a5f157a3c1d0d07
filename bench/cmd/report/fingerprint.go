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
	return b.String(), nil
}

// halfTime halves a -benchtime duration ("1s" -> "500ms"); other forms pass as they are.
func halfTime(bt string) string {
	d, err := time.ParseDuration(bt)
	if err != nil {
		return bt
	}
	return (d / 2).String()
}
