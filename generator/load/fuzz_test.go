package load_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemgen/idemgen/generator/load"
)

// FuzzLoad: any spec text loads without a panic; a spec that does not load
// says why with an error, in the spec or a file it reaches; one that loads
// has a model and a root.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{
		"openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n",
		"openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    post:\n      x-idempotency: {semantics: strict}\n      responses: {'201': {description: ok}}\n",
		`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"post": {}, "post": {}}}}`,
		"swagger: '2.0'\ninfo: {title: t, version: '1'}\npaths: {}\n",
		"openapi: 3.2.0\npaths: {}\n",
		"openapi: 3.0.3\ninfo: &i {title: t, version: '1'}\nx: *i\npaths:\n  /a: {$ref: 'other.yaml#/a'}\n",
		"openapi: 3.0.3\npaths:\n  /a:\n    post: *nope\n",
		"openapi: 3.0.3\npaths:\n  /a:\n    post:\n      responses:\n        200: {description: a}\n        '200': {description: b}\n",
		"- a\n",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		dir := t.TempDir()
		spec := filepath.Join(dir, "openapi.yaml")
		if err := os.WriteFile(spec, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("a:\n  post: {responses: {'201': {description: ok}}}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		doc, diags := load.Load(spec, load.Options{RemoteTimeout: 100 * time.Millisecond})
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("Load took %v on %q", el, data)
		}
		if doc == nil {
			if !diags.HasErrors() {
				t.Fatalf("no document and no error: %v", diags)
			}
			for _, d := range diags {
				if d.Pos.File == "" {
					t.Fatalf("a diagnostic without a file: %v", d)
				}
			}
			return
		}
		if diags.HasErrors() || doc.T == nil || doc.Root == nil {
			t.Fatalf("a document with errors or without a model: %v", diags)
		}
	})
}
