package cli

import (
	"path/filepath"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
)

// Rules of what idemgen finds in oapi-codegen's configuration: warnings,
// reported with the spec's diagnostics (diagnose), so that ignore:
// silences them and -format json carries them. -strict leaves them
// warnings: they are about oapi-codegen's output, not the spec.
const (
	// ruleOapiOverlayUnlisted: oapi-codegen applies an overlay that
	// idemgen.yaml's overlays: does not list (oapiOverlayDiags).
	ruleOapiOverlayUnlisted = "oapi-overlay-unlisted"
	// ruleServeMuxConflict: net/http's ServeMux would panic on the routes
	// of oapi-codegen's std-http-server (muxConflicts).
	ruleServeMuxConflict = "servemux-conflict"
	// rulePathFallback: the plain one-line wiring protects an operation
	// by path, not by operation (pathFallbacks).
	rulePathFallback = "path-fallback"
)

// configRules are the rules of oapi-codegen's configuration: the
// commands that read no such configuration (spec) do not check them.
var configRules = []string{ruleOapiOverlayUnlisted, ruleServeMuxConflict}

// oapiOverlayDiags returns a warning [oapi-overlay-unlisted] when
// oapi-codegen's configuration (path, read as oapi) applies an overlay
// (output-options.overlay.path) that c's overlays: does not list (none
// when it lists it, or there is none): oapi-codegen then generates from
// another spec than idemgen, and check -generated, which reads idemgen's
// spec and overlays, cannot see a change the overlay makes. configPath is
// c's file. The warning is at the overlay's path in oapi's file, where
// oapi-codegen reads it relative to where it runs: go generate runs it in
// the configuration's directory, as besideOapiCodegenConfig assumes too.
func (c *Config) oapiOverlayDiags(configPath, path string, oapi *oapiFile) diag.List {
	if oapi == nil || oapi.OutputOptions.Overlay.Path == "" {
		return nil
	}
	ov := oapi.OutputOptions.Overlay.Path
	if !filepath.IsAbs(ov) {
		ov = filepath.Join(filepath.Dir(path), ov)
	}
	if slices.ContainsFunc(c.Overlays, func(o string) bool { return filepath.Clean(o) == filepath.Clean(ov) || sameFile(o, ov) }) {
		return nil
	}
	var l diag.List
	l.Warnf(oapi.overlayPos, ruleOapiOverlayUnlisted, "oapi-codegen applies the overlay %s (output-options.overlay.path), which the overlays: of %s does not list: oapi-codegen generates from another spec than idemgen, and check -generated cannot see what the overlay changes; add it to overlays: (after the contract overlays, if any)", oapi.OutputOptions.Overlay.Path, configPath)
	return l
}

// nodePos returns the position, in file, of the value at keys (mapping
// keys, from the document root) of the YAML document doc; the file alone
// when there is none.
func nodePos(file string, doc *yaml.Node, keys ...string) ir.Pos {
	_, v := yamlAt(doc, keys...)
	return posOf(file, v)
}

// keyPos is nodePos for the last of keys itself, not its value.
func keyPos(file string, doc *yaml.Node, keys ...string) ir.Pos {
	k, _ := yamlAt(doc, keys...)
	return posOf(file, k)
}

// yamlAt returns the key and the value at keys (mapping keys, from the
// document root) of the YAML document doc, nil and nil when there are
// none (the last of a key repeated).
func yamlAt(doc *yaml.Node, keys ...string) (key, value *yaml.Node) {
	n := doc
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil, nil
		}
		key = nil
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				key, next = n.Content[i], n.Content[i+1]
			}
		}
		n = next
	}
	if n == nil {
		return nil, nil
	}
	return key, n
}

// posOf is the position of n in file; the file alone when n is nil.
func posOf(file string, n *yaml.Node) ir.Pos {
	if n == nil {
		return ir.Pos{File: file}
	}
	return ir.Pos{File: file, Line: n.Line, Col: n.Column}
}
