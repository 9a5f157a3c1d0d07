package generator

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/util"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/cli"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/internal/testenv"
)

func paths(tb testing.TB) (spec, overlay string) {
	root := testenv.RepoRoot(tb)
	return filepath.Join(root, "testdata", "specs", "modern-treasury.yaml"),
		filepath.Join(root, "testdata", "overlays", "modern-treasury.overlay.yaml")
}

// idemgenArgs runs every registered emitter, writing the files to out: the
// command's whole work.
func idemgenArgs(spec, overlay, out string) []string {
	args := []string{"generate", "-overlay", overlay, "-o", out, "-package", "api"}
	for _, n := range emitter.Names() {
		args = append(args, "-emit", n)
	}
	return append(args, spec)
}

// generateIdemgen runs idemgen generate into out.
func generateIdemgen(tb testing.TB, spec, overlay, out string) {
	var stdout, stderr bytes.Buffer
	if code := cli.Main(idemgenArgs(spec, overlay, out), &stdout, &stderr); code != cli.ExitOK {
		tb.Fatalf("idemgen generate: exit %d: %s", code, stderr.String())
	}
}

// dirBytes is the size of the files in dir.
func dirBytes(tb testing.TB, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// oapiConfig is oapi-codegen's configuration for the code idemgen's server
// emitter plugs into.
var oapiConfig = codegen.Configuration{
	PackageName: "api",
	Generate:    codegen.GenerateOptions{Models: true, Strict: true, StdHTTPServer: true, Client: true},
}

func generateOapi(tb testing.TB, spec, overlay string) string {
	doc, err := util.LoadSwaggerWithOverlay(spec, util.LoadSwaggerWithOverlayOpts{Path: overlay, Strict: true})
	if err != nil {
		tb.Fatalf("oapi-codegen: load: %v", err)
	}
	code, err := codegen.Generate(doc, oapiConfig)
	if err != nil {
		tb.Fatalf("oapi-codegen: generate: %v", err)
	}
	return code
}

// BenchmarkGenerate/idemgen: `idemgen generate` with every registered
// emitter; BenchmarkGenerate/oapi-codegen: load + generate (formatted, as
// its command does).
func BenchmarkGenerate(b *testing.B) {
	spec, overlay := paths(b)
	b.Run("idemgen", func(b *testing.B) {
		out := b.TempDir()
		b.ReportAllocs()
		for b.Loop() {
			generateIdemgen(b, spec, overlay, out)
		}
		b.ReportMetric(float64(len(emitter.Names())), "emitters")
	})
	b.Run("oapi-codegen", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			generateOapi(b, spec, overlay)
		}
	})
}

func TestGenerate(t *testing.T) {
	spec, overlay := paths(t)
	out := t.TempDir()
	generateIdemgen(t, spec, overlay, out)
	n := dirBytes(t, out)
	require.Positive(t, n)
	t.Logf("idemgen: emitters %v, %d bytes", emitter.Names(), n)
	if testenv.RaceEnabled || testing.Short() {
		t.Skip("oapi-codegen on the largest spec is slow under -race or -short")
	}
	code := generateOapi(t, spec, overlay)
	require.Contains(t, code, "StrictServerInterface")
}
