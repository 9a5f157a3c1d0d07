package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
)

// oapiOverlayWarning returns a warning when oapi-codegen's configuration
// (path, read as oapi) applies an overlay (output-options.overlay.path)
// that c's overlays: does not list ("" when it lists it, or there is
// none): oapi-codegen then generates from another spec than idemgen, and
// check -generated, which reads idemgen's spec and overlays, cannot see
// a change the overlay makes. configPath is c's file. oapi-codegen reads
// the overlay's path relative to where it runs: go generate runs it in
// the configuration's directory, as besideOapiCodegenConfig assumes too.
func (c *Config) oapiOverlayWarning(configPath, path string, oapi *oapiFile) string {
	if oapi == nil || oapi.OutputOptions.Overlay.Path == "" {
		return ""
	}
	ov := oapi.OutputOptions.Overlay.Path
	if !filepath.IsAbs(ov) {
		ov = filepath.Join(filepath.Dir(path), ov)
	}
	if slices.ContainsFunc(c.Overlays, func(o string) bool { return filepath.Clean(o) == filepath.Clean(ov) || sameFile(o, ov) }) {
		return ""
	}
	return fmt.Sprintf("%s: warning: %s applies the overlay %s (output-options.overlay.path), which overlays: does not list: oapi-codegen generates from another spec than idemgen, and check -generated cannot see what the overlay changes; add it to overlays: (after the contract overlays, if any)", configPath, path, oapi.OutputOptions.Overlay.Path)
}

// warnConfig writes to w what c's file is warned about (oapiOverlay).
func (c *Config) warnConfig(w io.Writer) {
	if c.oapiOverlay != "" {
		fmt.Fprintln(w, c.oapiOverlay)
	}
}
