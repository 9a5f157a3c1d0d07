package regen

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDirectives(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Directive
		err       string
	}{
		{"two tools", "package main\n\n//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml\n// a comment\n//go:generate go tool idemgen generate -config idemgen.yaml\n",
			[]Directive{{"oapi-codegen", []string{"-config", "oapi-codegen.yaml", "openapi.yaml"}}, {"idemgen", []string{"generate", "-config", "idemgen.yaml"}}}, ""},
		{"not go tool", "//go:generate oapi-codegen -config x.yaml\n", nil, "want //go:generate go tool NAME"},
		{"go run", "//go:generate go run ./gen\n", nil, "want //go:generate go tool NAME"},
		{"quoted", "//go:generate go tool idemgen generate -config \"a b.yaml\"\n", nil, "plain arguments"},
		{"variable", "//go:generate go tool idemgen generate -o $GOFILE\n", nil, "plain arguments"},
		{"none", "package main\n", nil, "no //go:generate directive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "generate.go")
			require.NoError(t, os.WriteFile(file, []byte(tt.src), 0o644))
			got, err := Directives(file)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("fatal") }

func (r *recorder) Helper() {}

// checkCopy runs Check on a copy of the coupons example changed by edit
// and returns the failures it reported.
func checkCopy(t *testing.T, edit func(dir string)) []string {
	src := filepath.Join("..", "..", "coupons")
	dir := t.TempDir()
	for _, name := range []string{"generate.go", "openapi.yaml", "oapi-codegen.yaml", "idemgen.yaml", "api/api.gen.go", "api/idempotency.gen.go", "api/idempotency_client.gen.go", "api/IDEMPOTENCY.md"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	edit(dir)
	// The copy is outside the module: resolve the tools in the example.
	Tool(t, src, "oapi-codegen")
	Tool(t, src, "idemgen")
	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(rec, dir)
	}()
	<-done
	return rec.errs
}

func TestCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generators")
	}
	t.Run("identical", func(t *testing.T) {
		assert.Empty(t, checkCopy(t, func(string) {}))
	})
	t.Run("edited", func(t *testing.T) {
		errs := checkCopy(t, func(dir string) {
			p := filepath.Join(dir, "api", "idempotency.gen.go")
			data, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, append(data, "// edited by hand\n"...), 0o644))
		})
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0], "differs from what go generate writes")
	})
	t.Run("missing", func(t *testing.T) {
		errs := checkCopy(t, func(dir string) { require.NoError(t, os.Remove(filepath.Join(dir, "api", "IDEMPOTENCY.md"))) })
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0], "run go generate and commit it")
	})
	t.Run("stale", func(t *testing.T) {
		errs := checkCopy(t, func(dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "api", "old.gen.go"), []byte("package api\n"), 0o644))
		})
		require.Len(t, errs, 1)
		assert.Contains(t, errs[0], "not generated any more")
	})
	t.Run("contract changed", func(t *testing.T) {
		errs := checkCopy(t, func(dir string) {
			p := filepath.Join(dir, "openapi.yaml")
			data, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(data), "window: 10m #", "window: 20m #", 1)), 0o644))
		})
		assert.NotEmpty(t, errs)
	})
}
