package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// gopotency is github.com/fco-gt/gopotency, which the Go module proxy
// refuses (403 for every version): it cannot be a dependency of
// bench/go.mod. Its benchmarks and correctness scenarios live in
// bench/_gopotency (a directory the go command ignores, so that `go mod
// tidy`, which reads every build-tagged file, never sees its import) and
// join packages middleware and stores through the overlay there, with
// -tags gopotency. With -gopotency, report builds them in a Go workspace
// that the maintainer provides (GOWORK naming a go.work that uses this
// bench module and a checkout of gopotency's source); nothing here
// downloads or builds gopotency otherwise.
const (
	gopotencyModule  = "github.com/fco-gt/gopotency"
	gopotencyOverlay = "_gopotency/overlay.json"
	gormPostgres     = "gorm.io/driver/postgres"
)

// enableGopotency checks the workspace, then adds gopotency's rows to the
// middleware and stores tables and its build flags to every go test.
func (r *runner) enableGopotency() error {
	work := strings.TrimSpace(output("go", "env", "GOWORK"))
	if work == "" || work == "?" || work == "off" {
		return fmt.Errorf("-gopotency: GOWORK must name a go.work that uses this bench module and a checkout of %s (see docs/benchmarks.md, \"Peers that could not be measured\")", gopotencyModule)
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", gopotencyModule).CombinedOutput()
	if err != nil {
		return fmt.Errorf("-gopotency: the workspace %s does not provide %s: %s", work, gopotencyModule, strings.TrimSpace(string(dir)))
	}
	// The GORM storage's rows need GORM's PostgreSQL driver, which neither
	// gopotency nor bench requires: a module of the workspace must.
	if out, err := exec.Command("go", "list", "-m", gormPostgres).CombinedOutput(); err != nil {
		return fmt.Errorf("-gopotency: the workspace %s does not provide %s (a module of the workspace must require it): %s", work, gormPostgres, strings.TrimSpace(string(out)))
	}
	overlay, err := filepath.Abs(gopotencyOverlay)
	if err != nil {
		return err
	}
	if _, err := os.Stat(overlay); err != nil {
		return fmt.Errorf("-gopotency: run report from the bench module's directory: %v", err)
	}
	r.buildFlags = append(r.buildFlags, "-tags", "gopotency", "-overlay", overlay)
	src := strings.TrimSpace(string(dir))
	r.gopotencySource = gopotencyModule + " " + output("git", "-C", src, "describe", "--tags", "--always")
	for i := range stacks {
		if stacks[i].bench == "NetHTTP" {
			stacks[i].impls = append(stacks[i].impls, implDef{"gopotency", "gopotency v1.0.0 (net/http middleware + memory storage)"})
		}
	}
	storeImpls = append(storeImpls,
		storeImpl{"gopotency", "gopotency v1.0.0 (its Redis or database/sql storage)", "", false},
		storeImpl{"gopotency-gorm", "gopotency v1.0.0 (its GORM storage, GORM's defaults)", "Postgres", false})
	return nil
}

// gopotencyNote says where the gopotency rows come from, or why there are none.
func (r *runner) gopotencyNote() string {
	if r.gopotencySource == "" {
		return "\n*No gopotency rows: this run was made without `-gopotency` (see \"Peers that could not be measured\").*\n"
	}
	return fmt.Sprintf("\n*The gopotency rows were built from the source of %s, provided through a Go workspace (see \"Peers that could not be measured\").*\n", r.gopotencySource)
}

// absentPeer reports whether impl is a gopotency row that server does not
// have (its GORM storage is measured on PostgreSQL only): the stores
// table leaves such rows out rather than marking them missing.
func absentPeer(rs results, server, impl string) bool {
	if !strings.HasPrefix(impl, "gopotency") {
		return false
	}
	for _, row := range storeRows {
		if _, ok := rs.median(server+"/"+impl+"/"+row.name, "ns/op"); ok {
			return false
		}
	}
	return true
}
