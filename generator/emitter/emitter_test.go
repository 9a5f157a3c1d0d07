package emitter_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
)

func init() {
	emitter.Register("test-ok", func(s *ir.Spec, o emitter.Options) ([]emitter.File, error) {
		return []emitter.File{{Path: "sub/" + o.Package + ".txt", Data: []byte(s.Title)}}, nil
	})
	emitter.Register("test-fail", func(*ir.Spec, emitter.Options) ([]emitter.File, error) {
		return nil, errors.New("boom")
	})
	emitter.Register("test-dup", func(*ir.Spec, emitter.Options) ([]emitter.File, error) {
		return []emitter.File{{Path: emitter.IRFile}}, nil
	})
	for _, name := range []string{"test-diag-a", "test-diag-b"} {
		emitter.Register(name, func(*ir.Spec, emitter.Options) ([]emitter.File, error) {
			var l diag.List
			l.Errorf(ir.Pos{File: "x.yaml", Line: 1, Col: 1}, "go-name-collision", "%s collides", name)
			return nil, &diag.ErrorList{List: l}
		})
	}
}

// Every failing emitter's diagnostics are reported, not only the first's.
func TestRunJoinsDiagnostics(t *testing.T) {
	spec := &ir.Spec{Title: "T", Operations: []*ir.Operation{}}
	files, err := emitter.Run([]string{"test-diag-a", "ir", "test-diag-b"}, spec, emitter.Options{})
	assert.Nil(t, files)
	var el *diag.ErrorList
	require.ErrorAs(t, err, &el)
	require.Len(t, el.List, 2)
	assert.Equal(t, "test-diag-a collides", el.List[0].Message)
	assert.Equal(t, "test-diag-b collides", el.List[1].Message)
	_, err = emitter.Run([]string{"test-diag-a", "test-fail"}, spec, emitter.Options{})
	assert.ErrorContains(t, err, "emitter test-fail: boom")
}

func TestRunAndWrite(t *testing.T) {
	spec := &ir.Spec{Title: "T", Operations: []*ir.Operation{}}
	files, err := emitter.Run([]string{"ir", "test-ok"}, spec, emitter.Options{Package: "api"})
	require.NoError(t, err)
	require.Len(t, files, 2)
	dir := t.TempDir()
	require.NoError(t, emitter.Write(dir, files))
	got, err := os.ReadFile(filepath.Join(dir, "sub", "api.txt"))
	require.NoError(t, err)
	assert.Equal(t, "T", string(got))
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	assert.Len(t, entries, 1, "no temporary file left behind")

	_, err = emitter.Run([]string{"ir", "test-fail"}, spec, emitter.Options{})
	assert.ErrorContains(t, err, "emitter test-fail: boom")
	_, err = emitter.Run([]string{"ir", "test-dup"}, spec, emitter.Options{})
	assert.ErrorContains(t, err, "produced twice")
	_, err = emitter.Run([]string{"nope"}, spec, emitter.Options{})
	assert.ErrorContains(t, err, `no emitter "nope"`)
	assert.Contains(t, emitter.Names(), "ir")
	assert.Panics(t, func() { emitter.Register("ir", nil) })
}

func TestCheckParams(t *testing.T) {
	emitter.NewOption("test.known")
	assert.NoError(t, emitter.CheckParams(nil))
	assert.NoError(t, emitter.CheckParams(map[string]string{"test.known": "1"}))
	err := emitter.CheckParams(map[string]string{"test.known": "1", "test.knwon": "1"})
	require.Error(t, err)
	assert.EqualError(t, err, `unknown option "test.knwon" (did you mean test.known?)`)
	err = emitter.CheckParams(map[string]string{"nothing.like.it": "1"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown option "nothing.like.it" (known: `)
	assert.Contains(t, err.Error(), "test.known")
}

func TestCheckPackage(t *testing.T) {
	for _, ok := range []string{"", "api", "api_v2", "π"} {
		assert.NoError(t, emitter.CheckPackage(ok), ok)
	}
	for _, bad := range []string{"1bad", "type", "my-pkg", "_", "a.b"} {
		assert.Error(t, emitter.CheckPackage(bad), bad)
	}
}
