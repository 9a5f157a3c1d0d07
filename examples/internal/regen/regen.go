// Package regen tests that an example's committed generated code is exactly
// what its go:generate directives produce, so `go generate` on a fresh clone
// rewrites the committed files identically.
//
// Check runs the directives for real: each is `go tool NAME ARGS...`, run
// with the binary `go tool -n NAME` names (the version the main module's
// go.mod tool directive selects, built from this checkout for idemgen
// itself) in a temporary copy of the example's inputs, and every file the
// tools write is compared, byte for byte, with the committed one.
package regen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Directive is one //go:generate line: a tool of the main module and its arguments.
type Directive struct {
	Tool string
	Args []string
}

// Directives returns the //go:generate directives of file, in order. Each
// must be `go tool NAME ARGS...` with plain arguments (no quotes, no
// variables): the form the examples use.
func Directives(file string) ([]Directive, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ds []Directive
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		rest, ok := strings.CutPrefix(sc.Text(), "//go:generate ")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 3 || fields[0] != "go" || fields[1] != "tool" || strings.ContainsAny(rest, "\"'`$") {
			return nil, fmt.Errorf("%s:%d: want //go:generate go tool NAME ARGS... with plain arguments, have %q", file, line, rest)
		}
		ds = append(ds, Directive{Tool: fields[2], Args: fields[3:]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("%s: no //go:generate directive", file)
	}
	return ds, nil
}

var (
	toolsMu sync.Mutex
	tools   = map[string]string{}
)

// Tool returns the path of the binary `go tool NAME` runs in dir, building
// it if needed (the go command caches it).
func Tool(t testing.TB, dir, name string) string {
	t.Helper()
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if p, ok := tools[name]; ok {
		return p
	}
	cmd := exec.Command("go", "tool", "-n", name)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go tool -n %s in %s: %v\n%s", name, dir, err, stderr)
	}
	p := strings.TrimSpace(string(out))
	tools[name] = p
	return p
}

// Check runs the //go:generate directives of dir/generate.go in a temporary
// copy of dir's top-level files other than Go sources (the spec and the
// tools' configuration files), then compares every file they wrote with the
// one committed in dir, byte for byte. A committed *.gen.go file in an
// output directory that the tools did not write fails too (stale).
func Check(t testing.TB, dir string) {
	t.Helper()
	ds, err := Directives(filepath.Join(dir, "generate.go"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	inputs := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs[e.Name()] = true
	}
	for _, d := range ds {
		cmd := exec.Command(Tool(t, dir, d.Tool), d.Args...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go tool %s %s: %v\n%s", d.Tool, strings.Join(d.Args, " "), err, out)
		}
	}

	var generated []string
	err = filepath.WalkDir(tmp, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(tmp, path)
		if err != nil {
			return err
		}
		if !inputs[rel] {
			generated = append(generated, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(generated) == 0 {
		t.Fatalf("the go:generate directives of %s wrote no file", dir)
	}
	outDirs := map[string]bool{}
	for _, rel := range generated {
		outDirs[filepath.Dir(rel)] = true
		want, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Errorf("%s: %v (run go generate and commit it)", filepath.Join(dir, rel), err)
			continue
		}
		got, err := os.ReadFile(filepath.Join(tmp, rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s differs from what go generate writes (run go generate and commit it):\n%s", filepath.Join(dir, rel), firstDiff(want, got))
		}
	}
	for d := range outDirs {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			rel := filepath.ToSlash(filepath.Join(d, e.Name()))
			if strings.HasSuffix(e.Name(), ".gen.go") && !slices.Contains(generated, rel) {
				t.Errorf("%s is not generated any more: delete it", filepath.Join(dir, rel))
			}
		}
	}
	t.Logf("compared the %d files go generate writes with the committed ones: %s", len(generated), strings.Join(generated, ", "))
}

// Idemgen runs `go tool idemgen ARGS...` in dir and returns its exit code
// and combined output.
func Idemgen(t testing.TB, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(Tool(t, dir, "idemgen"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return ee.ExitCode(), string(out)
		}
		t.Fatalf("idemgen %s: %v", strings.Join(args, " "), err)
	}
	return 0, string(out)
}

// firstDiff shows the first differing line of two files.
func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d:\n  committed: %q\n  generated: %q", i+1, w, g)
		}
	}
	return "(no difference)"
}
