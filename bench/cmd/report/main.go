// Command report runs the bench module's benchmarks and correctness tests
// and rewrites the tables of docs/benchmarks.md between their markers
// (<!-- BEGIN report:NAME --> … <!-- END report:NAME -->). scripts/bench
// runs it from the bench module's directory after starting Redis and
// PostgreSQL; nothing in the tables is typed by hand.
//
//	go run ./cmd/report [-count 6] [-benchtime 1s] [-only REGEXP] [-doc ../docs/benchmarks.md] [-raw results] [-gopotency]
//
// Every benchmark runs -count times (the whole package once per round, so
// that the rounds interleave); the tables show medians with the 95%
// confidence interval of the median (as benchstat computes it, with
// golang.org/x/perf/benchmath). The raw `go test` outputs are kept in -raw,
// in the benchfmt format benchstat reads.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type section struct {
	name string
	run  func(r *runner) (string, error)
}

var sections = []section{
	{"middleware", (*runner).middleware},
	{"stores", (*runner).stores},
	{"correctness", (*runner).correctness},
	{"generator", (*runner).generator},
	{"fingerprint", (*runner).fingerprint},
}

type runner struct {
	count     int
	benchtime string
	raw       string
	stderr    io.Writer
	// buildFlags go before the other arguments of every go test (-tags
	// and -overlay of a peer built from source: see gopotency.go).
	buildFlags []string
	// gopotencySource names the gopotency source measured, if any.
	gopotencySource string
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	count := flag.Int("count", 6, "rounds of each benchmark (medians are reported; 6 or more give a 95% confidence interval)")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime of the request benchmarks")
	only := flag.String("only", "", "run only the sections matching this `regexp` (machine, middleware, stores, correctness, generator, fingerprint)")
	doc := flag.String("doc", "../docs/benchmarks.md", "the document to rewrite")
	raw := flag.String("raw", "results", "directory for the raw go test outputs")
	gopotency := flag.Bool("gopotency", false, "also measure github.com/fco-gt/gopotency, built from the source a Go workspace (GOWORK) provides (see gopotency.go)")
	flag.Parse()
	var re *regexp.Regexp
	if *only != "" {
		re = regexp.MustCompile(*only)
	}
	text, err := os.ReadFile(*doc)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(*raw, 0o755); err != nil {
		log.Fatal(err)
	}
	r := &runner{count: *count, benchtime: *benchtime, raw: *raw, stderr: os.Stderr}
	if *gopotency {
		if err := r.enableGopotency(); err != nil {
			log.Fatal(err)
		}
	}
	start := time.Now()
	load0 := loadAvg()
	tree := treeDescription() // before anything is written: the tree measured
	out := string(text)
	failed := false
	for _, s := range sections {
		if re != nil && !re.MatchString(s.name) {
			continue
		}
		t0 := time.Now()
		log.Printf("%s …", s.name)
		table, err := s.run(r)
		var skip skipped
		switch {
		case errors.As(err, &skip):
			log.Printf("%s: skipped: %v", s.name, err)
			table = fmt.Sprintf("*Not measured in this tree: %s.*\n", err)
		case err != nil:
			log.Printf("%s: %v", s.name, err)
			failed = true
			table = fmt.Sprintf("*Not regenerated: %s.*\n", oneLine(err.Error()))
		}
		log.Printf("%s done in %s", s.name, time.Since(t0).Round(time.Second))
		if out, err = replace(out, s.name, table); err != nil {
			log.Fatal(err)
		}
	}
	if re == nil || re.MatchString("machine") {
		m := machine(tree, start, time.Since(start), load0, loadAvg(), *count, *benchtime)
		if out, err = replace(out, "machine", m); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(*doc, []byte(out), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s in %s", *doc, time.Since(start).Round(time.Second))
	if failed {
		os.Exit(1)
	}
}

// skipped is a section whose code is not in this tree (yet): reported, not a failure.
type skipped string

func (s skipped) Error() string { return string(s) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// replace puts body between the markers of name.
func replace(doc, name, body string) (string, error) {
	begin, end := "<!-- BEGIN report:"+name+" -->", "<!-- END report:"+name+" -->"
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no markers %q … %q in the document", begin, end)
	}
	return doc[:i+len(begin)] + "\n" + strings.TrimRight(body, "\n") + "\n" + doc[j:], nil
}

// goTest runs go test in the bench module and returns stdout; the output is
// also saved as raw/<name>.txt when name is set.
func (r *runner) goTest(name string, args ...string) ([]byte, error) {
	args = append(append([]string{}, r.buildFlags...), args...)
	cmd := exec.Command("go", append([]string{"test"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, r.stderr)
	log.Printf("  go test %s", strings.Join(args, " "))
	err := cmd.Run()
	if name != "" {
		if werr := os.WriteFile(filepath.Join(r.raw, name+".txt"), stdout.Bytes(), 0o644); werr != nil {
			return nil, werr
		}
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("go test %s: %v\n%s%s", strings.Join(args, " "), err, tail(stdout.String(), 20), stderr.String())
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// bench runs the benchmarks of pkg r.count times, each time all of them
// once (go test -count 1), rather than each benchmark r.count times in a
// row: on a shared machine, load comes and goes, and interleaved runs spread
// it over every benchmark instead of burdening whichever ran at a bad time.
func (r *runner) bench(name, pkg, pattern, benchtime string, extra ...string) (results, error) {
	args := append([]string{"-run", "^$", "-bench", pattern, "-benchmem",
		"-count", "1", "-benchtime", benchtime, "-timeout", "20m"}, extra...)
	args = append(args, pkg)
	var all []byte
	for i := range r.count {
		log.Printf("  run %d of %d", i+1, r.count)
		out, err := r.goTest("", args...)
		all = append(all, out...)
		if err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(r.raw, name+".txt"), all, 0o644); err != nil {
		return nil, err
	}
	return parse(all)
}
