package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func output(name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// treeDescription names the tree measured: IDEMGEN_BENCH_TREE when set (a
// tree that is not a git checkout), else git describe.
func treeDescription() string {
	if tree := os.Getenv("IDEMGEN_BENCH_TREE"); tree != "" {
		return tree
	}
	return output("git", "describe", "--always", "--dirty")
}

func machine(tree string, start time.Time, took time.Duration, load0, load1 string, count int, benchtime string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s (%d cores visible to Go, GOMAXPROCS %d) |\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "| OS | %s/%s, kernel %s |\n", runtime.GOOS, runtime.GOARCH, output("uname", "-r"))
	fmt.Fprintf(&b, "| Go | %s |\n", output("go", "env", "GOVERSION"))
	fmt.Fprintf(&b, "| Redis | %s |\n", serverVersion("redis-server", "--version"))
	fmt.Fprintf(&b, "| PostgreSQL | %s |\n", pgVersion())
	fmt.Fprintf(&b, "| tree | %s |\n", tree)
	fmt.Fprintf(&b, "| date | %s (took %s) |\n", start.UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	b.WriteString(runsLine(count, benchtime))
	fmt.Fprintf(&b, "| load average | %s at the start, %s at the end (1, 5, 15 min) |\n", load0, load1)
	return b.String()
}

// runsLine is the machine table's line on the rounds and the -benchtime of
// each section (the fingerprint section runs half of it: see fingerprint).
func runsLine(count int, benchtime string) string {
	return fmt.Sprintf("| runs | %d rounds of every benchmark, interleaved; -benchtime %s (fingerprint: %s; generator: 1 iteration a round) |\n",
		count, benchtime, halfTime(benchtime))
}

func serverVersion(name string, args ...string) string {
	s := output(name, args...)
	for _, f := range strings.Fields(s) {
		if strings.HasPrefix(f, "v=") {
			return strings.TrimPrefix(f, "v=")
		}
	}
	return s
}

func pgVersion() string {
	for _, dir := range globs("/usr/lib/postgresql/*/bin/postgres") {
		if s := output(dir, "--version"); s != "?" {
			return strings.TrimPrefix(s, "postgres (PostgreSQL) ")
		}
	}
	return output("postgres", "--version")
}

func globs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}
