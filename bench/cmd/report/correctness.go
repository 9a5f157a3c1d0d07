package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/idemgen/idemgen/bench/internal/check"
)

// testEvent is a line of go test -json (test2json).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type outcome struct {
	check.Result
	test, pkg string
	passed    bool
}

func (r *runner) correctness() (string, error) {
	out, err := r.goTest("correctness", "-race", "-count", "1", "-json", "-run", "Correctness", "./...")
	if err != nil && len(out) == 0 {
		return "", err // the build failed; a failing test is reported in the table
	}
	var results []*outcome
	byTest := map[string][]*outcome{}
	status := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev testEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
			continue
		}
		id := ev.Package + " " + ev.Test
		switch ev.Action {
		case "output":
			if _, js, ok := strings.Cut(ev.Output, "RESULT "); ok {
				o := &outcome{test: ev.Test, pkg: ev.Package}
				if err := json.Unmarshal([]byte(strings.TrimSpace(js)), &o.Result); err != nil {
					return "", fmt.Errorf("%s: bad RESULT line: %v", ev.Test, err)
				}
				results = append(results, o)
				byTest[id] = append(byTest[id], o)
			}
		case "pass", "fail", "skip":
			status[id] = ev.Action
		}
	}
	if len(results) == 0 {
		return "", fmt.Errorf("no RESULT lines in go test output: %v", err)
	}
	for id, os := range byTest {
		for _, o := range os {
			o.passed = status[id] == "pass"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| implementation | %d simultaneous duplicates: handler runs | their answers | same key, another body | same request resent (members reordered, volatile `sent_at` changed) | retry after a 500 | test under `-race` |\n", check.Duplicates)
	b.WriteString("|---|---:|---|---|---|---|---|\n")
	for _, o := range results {
		pass := "pass"
		if !o.passed {
			pass = "**FAIL** (" + o.test + ")"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s |\n", o.Impl, o.Concurrent.Executions, o.Concurrent,
			o.OtherBody, o.Resent, o.After500, pass)
	}
	var failed []string
	for id, s := range status {
		// Top-level tests only (a subtest's failure fails its parent); id is
		// "package test".
		if _, test, _ := strings.Cut(id, " "); s == "fail" && !strings.Contains(test, "/") {
			failed = append(failed, id)
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nFailed: %s (see results/correctness.txt).\n", strings.Join(failed, ", "))
	}
	b.WriteString(r.gopotencyNote())
	return b.String(), nil
}
