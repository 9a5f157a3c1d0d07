package cli

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/initspec"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
)

// DefaultConfig is the config file check -generated reads when -config is not given.
const DefaultConfig = "idemgen.yaml"

// checkGeneratedAll runs checkGenerated for each config file of configs
// (none: DefaultConfig) in turn, reporting on every one, and returns the
// worst exit code.
func checkGeneratedAll(fs *flag.FlagSet, configs, overlays []string, ignores []diag.Ignore, strict bool, format string, stdout, stderr io.Writer) int {
	if len(configs) == 0 {
		configs = []string{DefaultConfig}
	}
	if len(configs) > 1 && (fs.NArg() > 0 || len(overlays) > 0) {
		return usageError(fs, "with several -config, SPEC and -overlay are not allowed (each config names its own)")
	}
	r := &reporter{format: format, out: stdout, stderr: stderr}
	// The files each config of the run produces are no other config's
	// orphans, nor another config's output to warn about.
	var produced map[string]bool
	if len(configs) > 1 {
		produced = map[string]bool{}
		for _, c := range configs {
			for _, p := range producedFiles(fs, c, ignores, strict) {
				produced[p] = true
			}
		}
	}
	code := ExitOK
	for _, c := range configs {
		code = max(code, checkGenerated(fs, c, configs, produced, overlays, ignores, strict, r, stderr))
	}
	r.flush()
	return code
}

// producedFiles returns the files (absolute paths) that configPath
// generates now, as checkGenerated would compare them; none when it
// cannot say (checkGenerated reports why).
func producedFiles(fs *flag.FlagSet, configPath string, ignores []diag.Ignore, strict bool) []string {
	cfg, err := LoadConfig(configPath)
	if err != nil {
		return nil
	}
	names := sortedTrue(cfg.Generate)
	if cfg.Spec == "" || len(names) == 0 || cfg.Output == "-" {
		return nil
	}
	params, err := cfg.emitterSettings(names, cfg.Options)
	if err != nil {
		return nil
	}
	spec, diags, _ := diagnose(cfg, strict, ignores, cfg.noReplayedHeader(fs), nil, false)
	if diags.HasErrors() {
		return nil
	}
	files, err := emitter.Run(names, spec, cfg.emitterOptions(params))
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range files {
		out = append(out, absPath(filepath.Join(cfg.Output, f.Path)))
	}
	return out
}

// checkGenerated regenerates every output configPath configures in memory
// and compares it with the files on disk, and looks for files idemgen
// generated that it no longer produces (orphans; others: the configs of
// the run, which may write to the same directories; produced: the files,
// absolute, that they generate, never orphans).
func checkGenerated(fs *flag.FlagSet, configPath string, others []string, produced map[string]bool, overlays []string, ignores []diag.Ignore, strict bool, r *reporter, stderr io.Writer) int {
	cfg, err := LoadConfig(configPath)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen check: %v\n", err)
		return ExitUsage
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "idemgen check: want at most one SPEC file with -generated")
		return ExitUsage
	}
	if fs.NArg() == 1 {
		cfg.Spec = fs.Arg(0)
	}
	if len(overlays) > 0 {
		cfg.Overlays = overlays
	}
	names := sortedTrue(cfg.Generate)
	if cfg.Spec == "" || len(names) == 0 || cfg.Output == "-" {
		fmt.Fprintf(stderr, "idemgen check: %s must name a spec, an output directory and at least one emitter (generate:)\n", configPath)
		return ExitUsage
	}
	params, err := cfg.emitterSettings(names, cfg.Options)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen check: %v\n", err)
		return ExitUsage
	}
	spec, diags, note := diagnose(cfg, strict, ignores, cfg.noReplayedHeader(fs), nil, false)
	printNote(stderr, note)
	r.report(diags)
	if diags.HasErrors() {
		fmt.Fprintf(stderr, "idemgen check: %s: the spec has errors; cannot compare the generated files\n", configPath)
		return ExitError
	}
	files, err := emitter.Run(names, spec, cfg.emitterOptions(params))
	if err != nil {
		fmt.Fprintf(stderr, "idemgen check: %v\n", err)
		return ExitError
	}
	specStale := slices.ContainsFunc(diags, func(d diag.Diagnostic) bool { return d.Rule == augment.RuleSpecStale })
	var drift diag.List
	var crlf []string // up to date but for their line endings
	for _, f := range files {
		path := filepath.Join(cfg.Output, f.Path)
		have, err := os.ReadFile(path)
		switch {
		case errors.Is(err, iofs.ErrNotExist):
			drift.Errorf(ir.Pos{File: path}, ruleGeneratedMissing, "missing (emitter output not generated)")
		case err != nil:
			drift.Errorf(ir.Pos{File: path}, ruleGeneratedMissing, "cannot read: %v", err)
		case bytes.Equal(have, f.Data):
		case isText(path) && bytes.Equal(toLF(have), toLF(f.Data)):
			// A checkout that converts line endings (core.autocrlf=true):
			// the file is what idemgen writes but for them.
			fmt.Fprintf(stderr, "%s: up to date but for its line endings (CRLF here, LF generated: a checkout with git's core.autocrlf=true?)\n", path)
			crlf = append(crlf, path)
		default:
			want := f.Data
			if isText(path) {
				// The first difference past line endings.
				have, want = toLF(have), toLF(want)
			}
			line := firstDiff(have, want)
			pos := ir.Pos{File: path, Line: line, Col: 1}
			if fileV, runV, ok := versionOnly(have, want); ok {
				drift.Errorf(pos, ruleGeneratedStale, "stale, but only the idemgen version line differs (file %s, running %s): generated by another build of idemgen (go install vs go tool?)", fileV, runV)
			} else {
				hint := ""
				if !specStale && handEdited(path, have, want, line) {
					// The spec behind its contracts says why already.
					hint = "; its generated header is intact: edited by hand? (or generated before the contracts changed)"
				}
				fileText, genText := lineTexts(have, want, line)
				drift.Errorf(pos, ruleGeneratedStale, "stale (differs from what idemgen generates from line %d on: the file has %s, idemgen generates %s%s)", line, fileText, genText, hint)
			}
		}
	}
	if len(crlf) > 0 {
		fmt.Fprint(stderr, eolHint(crlf))
	}
	r.report(drift)
	bad := len(drift)
	orphaned := orphans(configPath, cfg, files, others, produced)
	r.report(orphaned)
	nOrphans, _ := orphaned.Count()
	also := ""
	if nOrphans > 0 {
		also = "; and " + orphanSummary(nOrphans)
	}
	if bad > 0 {
		if specStale {
			// The spec itself is behind its contracts: regenerating from it
			// alone would keep oapi-codegen's types behind too.
			redo := fmt.Sprintf("idemgen spec -o %s %s", cfg.Spec, cfg.Spec)
			switch {
			case flagSet(fs, "replayed-header"):
				redo = fmt.Sprintf("idemgen spec -replayed-header=%t -o %s %s", !cfg.noReplayedHeader(fs), cfg.Spec, cfg.Spec)
			case cfg.ReplayedHeader != nil:
				redo = fmt.Sprintf("idemgen spec -config %s -o %s %s", configPath, cfg.Spec, cfg.Spec)
			}
			if len(cfg.Overlays) > 0 {
				// The overlays may fix what oapi-codegen generates (the
				// contracts then in the spec, which the spec command
				// rewrites without them) or hold the contracts.
				redo += fmt.Sprintf(" (when the contracts are in %s; the overlays: then apply as before; when an overlay holds them, idemgen spec -as-overlay with the overlays, as you ran it)", cfg.Spec)
			}
			fmt.Fprintf(stderr, "idemgen check: %d of %s stale or missing, and the spec is behind its contracts [spec-stale]; run: %s, then oapi-codegen, then idemgen generate -config %s%s\n", bad, staleOf(bad, len(files)), redo, configPath, also)
			return ExitError
		}
		redo := "idemgen generate -config " + configPath
		if cfg.OapiCodegenConfig != "" {
			// A new operation or parameter changes oapi-codegen's output
			// too, which idemgen's files refer to: idemgen generate alone
			// would leave the build broken.
			redo = fmt.Sprintf("go generate (oapi-codegen -config %s, then idemgen generate -config %s)", cfg.OapiCodegenConfig, configPath)
		}
		fmt.Fprintf(stderr, "idemgen check: %d of %s stale or missing; run: %s%s\n", bad, staleOf(bad, len(files)), redo, also)
		return ExitError
	}
	if nOrphans > 0 {
		fmt.Fprintf(stderr, "idemgen check: %s up to date, but %s (%s)\n", english.Count(len(files), "generated file is", "generated files are"), orphanSummary(nOrphans), configPath)
		return ExitError
	}
	fmt.Fprintf(stderr, "idemgen check: %s up to date (%s)\n", english.Count(len(files), "generated file is", "generated files are"), configPath)
	return ExitOK
}

// The rules of check -generated's findings: a generated file that
// differs from what idemgen generates now, one that is not there.
const (
	ruleGeneratedStale   = "generated-stale"
	ruleGeneratedMissing = "generated-missing"
)

// staleOf spells "3 generated files are" for "1 of 3 generated files is
// stale": the verb agrees with bad, the noun with total.
func staleOf(bad, total int) string {
	return english.Count(total, "generated file") + " " + english.Noun(bad, "is", "are")
}

// flagSet reports whether the flag name was given on fs's command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// versionLine starts the header line of the Go files that names
// idemgen's version.
const versionLine = "// " + emitter.VersionComment

// versionOnly reports whether have and want differ only in their
// idemgen version lines, and the versions they name.
func versionOnly(have, want []byte) (haveV, wantV string, ok bool) {
	h, w := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	if len(h) != len(w) {
		return "", "", false
	}
	for i := range h {
		if h[i] == w[i] {
			continue
		}
		if !strings.HasPrefix(h[i], versionLine) || !strings.HasPrefix(w[i], versionLine) || haveV != "" {
			return "", "", false
		}
		haveV, wantV = strings.TrimPrefix(h[i], versionLine), strings.TrimPrefix(w[i], versionLine)
	}
	return haveV, wantV, haveV != ""
}

// maxLineText is how much of a line a stale message quotes.
const maxLineText = 120

// lineTexts returns line n (1-based) of have and of want quoted (or
// "nothing (end of file)" past the end), cut to maxLineText runes: from the
// start, or when the lines differ further on, from a little before where
// they differ ("…" marking what is left out), so the difference shows.
func lineTexts(have, want []byte, n int) (string, string) {
	h, hok := lineAt(have, n)
	w, wok := lineAt(want, n)
	hr, wr := []rune(h), []rune(w)
	at := 0
	for at < len(hr) && at < len(wr) && hr[at] == wr[at] {
		at++
	}
	from := 0
	if at > maxLineText-maxLineText/4 {
		from = at - maxLineText/4
	}
	quote := func(r []rune, ok bool) string {
		if !ok {
			return "nothing (end of file)"
		}
		var b strings.Builder
		if from > 0 {
			b.WriteString("…")
		}
		end := min(len(r), from+maxLineText)
		b.WriteString(string(r[min(from, len(r)):end]))
		if end < len(r) {
			b.WriteString("…")
		}
		return strconv.Quote(b.String())
	}
	return quote(hr, hok), quote(wr, wok)
}

// lineAt returns line n (1-based) of data, without its newline, and
// whether data has it.
func lineAt(data []byte, n int) (string, bool) {
	lines := strings.SplitAfter(string(data), "\n")
	if n > len(lines) || lines[n-1] == "" {
		return "", false
	}
	return strings.TrimSuffix(lines[n-1], "\n"), true
}

// handEdited reports whether the Go file path, have on disk, idemgen
// generating want, differs from line on, past an intact generated header
// (the comment lines it starts with, the same in both): its body was
// edited, by hand or from other contracts.
func handEdited(path string, have, want []byte, line int) bool {
	if !strings.HasSuffix(path, ".go") || !bytes.HasPrefix(have, []byte(goGeneratedHeader+"\n")) {
		return false
	}
	header := 0
	for _, l := range strings.Split(string(want), "\n") {
		if !strings.HasPrefix(l, "//") {
			break
		}
		header++
	}
	return line > header
}

// isText reports whether the generated file path is text (Go, Markdown,
// YAML, JSON), compared with CRLF line endings read as LF.
func isText(path string) bool {
	switch filepath.Ext(path) {
	case ".go", ".md", ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// eolHint says how to check out the generated files paths with LF line
// endings: a .gitattributes line for each (the Go files of a directory
// by their .gen.go suffix), its pattern relative to the repository's root
// (the directory with .git above them), to add to the .gitattributes
// there; outside a repository, relative to the directory of the first,
// for a .gitattributes there. Never a pattern that matches every file
// (* text eol=lf would turn binaries into text).
func eolHint(paths []string) string {
	base := repoRoot(filepath.Dir(absPath(paths[0])))
	where := "the repository's root, " + base
	if base == "" {
		base = filepath.Dir(absPath(paths[0]))
		where = base
	}
	var lines []string
	for _, p := range paths {
		rel, err := filepath.Rel(base, absPath(p))
		if err != nil {
			rel = absPath(p)
		}
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(rel, ".gen.go") {
			rel = path.Join(path.Dir(rel), "*.gen.go")
		}
		if !strings.Contains(rel, "/") {
			rel = "/" + rel // this directory's only, not every one's below
		}
		if strings.ContainsAny(rel, " \t\"") {
			rel = strconv.Quote(rel)
		}
		if line := rel + " text eol=lf"; !slices.Contains(lines, line) {
			lines = append(lines, line)
		}
	}
	return fmt.Sprintf("idemgen check: to check out the generated files with LF line endings, add to the .gitattributes in %s:\n\t%s\n", where, strings.Join(lines, "\n\t"))
}

// repoRoot returns the directory, dir or one above it, that holds .git
// (a directory, or a file in a worktree); "" when none does.
func repoRoot(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// toLF returns data with its CRLF line endings turned into LF.
func toLF(data []byte) []byte {
	return bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
}

// firstDiff returns the 1-based line of the first difference of a and b.
func firstDiff(a, b []byte) int {
	line := 1
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return line
		}
		if a[i] == '\n' {
			line++
		}
	}
	return line
}

const specExamples = `  idemgen spec -o openapi.yaml openapi.yaml                # augment in place
  idemgen spec -overlay idempotency.overlay.yaml vendor/openapi.json > api.json
  idemgen spec -as-overlay -o declarations.overlay.yaml -overlay idempotency.overlay.yaml vendor/openapi.json
  idemgen spec -replayed-header=false -o openapi.yaml openapi.yaml   # keep oapi-codegen's response types as they are

Writes the spec with what its x-idempotency contracts imply declared: the
key parameter, the problem+json responses (400, 409, 422, 503) with
Retry-After, Idempotent-Replayed on replayable responses, and a contract
summary in each operation's description. Declarations already in the spec
are kept; running it again changes nothing. YAML stays YAML, JSON stays
JSON, and CRLF line endings stay CRLF. With -as-overlay it writes the same changes as an OpenAPI Overlay
1.0 document instead, to apply after the contract overlays, so the source
spec is never rewritten.

Errors are printed in full; warnings as a count by rule, with the idemgen
check command that lists them (-warnings prints each; -format json has
them all).

A response that gains a header (Idempotent-Replayed on every replayable
response) gets a Headers field in oapi-codegen's strict server:
"return api.AddPet200JSONResponse(pet), nil" becomes
"return api.AddPet200JSONResponse{Body: pet}, nil". With
-replayed-header=false (or replayed-header: false in the idemgen.yaml
beside SPEC, or -config's) the header is not declared, and the
declarations an earlier run wrote are removed; the runtime sends it on
replays either way, and check (reading the same setting) reports them as
[spec-stale] until then. Exit status: 0 written, 1 errors, 2 usage.
`

func specCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("spec", specExamples, stderr)
	var overlays listFlag
	fs.Var(&overlays, "overlay", "apply this OpenAPI Overlay 1.0 `FILE` first (repeatable, applied in order)")
	out := fs.String("o", "-", "write to `OUT` (- is stdout; the spec's own path rewrites it)")
	asOverlay := fs.Bool("as-overlay", false, "write the changes as an Overlay 1.0 document instead of the augmented spec")
	var configs listFlag
	fs.Var(&configs, "config", "read replayed-header and ignore: from this idemgen.yaml `FILE` (default: the idemgen.yaml beside SPEC, unless its spec: is another file)")
	replayedHeaderFlag(fs)
	var ignores ignoreFlag
	fs.Var(&ignores, "ignore", ignoreFlagUsage)
	format := formatFlag(fs)
	warnings := fs.Bool("warnings", false, "print each warning (by default the text format prints the errors, and the warnings as a count by rule with the check command that lists them)")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, "want exactly one SPEC file")
	}
	configPath, ok := singleConfig(fs, configs)
	if !ok {
		return ExitUsage
	}
	cfg, _, err := checkConfig(configPath, fs.Args(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
		return ExitUsage
	}
	res, diags := augment.Augment(fs.Arg(0), augment.Options{
		Overlays:         overlays,
		NoReplayedHeader: cfg.noReplayedHeader(fs),
		Ignore:           specIgnores(append(slices.Clone(cfg.ignores), ignores...)),
		IgnoreDiags:      cfg.ignoreDiags,
	})
	if *format == "text" && !*warnings {
		shown, hidden := splitWarnings(diags)
		report(shown, *format, stdout, stderr)
		if len(hidden) > 0 {
			fmt.Fprintf(stderr, "%s: %s not shown (%s): %s lists them (or add -warnings)\n", fs.Arg(0), english.Count(len(hidden), "warning"), countByRule(hidden), checkCommand(fs, configs, overlays, ignores))
		}
	} else {
		report(diags, *format, stdout, stderr)
	}
	if res == nil {
		return ExitError
	}
	data := res.Spec
	if *asOverlay {
		data = res.Overlay
	} else if *out != "-" && !sameDir(*out, fs.Arg(0)) {
		// The spec's relative $refs resolve against its own directory:
		// written elsewhere, it would name files that are not there.
		if refs := relativeRefs(data); len(refs) > 0 {
			fmt.Fprintf(stderr, "idemgen spec: %s refers to other files by relative $ref (%s), which would not resolve from %s: write the augmented spec into %s (or to stdout, -o -), or use -as-overlay and apply the overlay where the spec is\n",
				fs.Arg(0), refList(refs), filepath.Dir(*out), filepath.Dir(fs.Arg(0)))
			return ExitError
		}
	}
	if err := writeOut(*out, data, stdout); err != nil {
		fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
		return ExitError
	}
	if *out != "-" {
		// The count is of idemgen's changes: with -overlay, the spec
		// written also has the overlays' own (not with -as-overlay,
		// whose document holds idemgen's changes only).
		if len(overlays) > 0 && !*asOverlay {
			fmt.Fprintf(stderr, "%s: the spec with %s applied (%s), and %s to declare what the contracts imply\n", *out, english.Noun(len(overlays), "the overlay", "the overlays"), strings.Join(overlays, ", "), english.Count(res.Actions, "change"))
		} else {
			fmt.Fprintf(stderr, "%s: %s\n", *out, english.Count(res.Actions, "change"))
		}
	}
	return ExitOK
}

// splitWarnings returns the errors of diags and its warnings.
func splitWarnings(diags diag.List) (errs, warnings diag.List) {
	for _, d := range diags {
		if d.Severity == diag.Error {
			errs = append(errs, d)
		} else {
			warnings = append(warnings, d)
		}
	}
	return errs, warnings
}

// countByRule counts diags by rule, "36 key-without-contract, 2
// raw-body-strict": the most frequent first, then by rule.
func countByRule(diags diag.List) string {
	n := map[string]int{}
	for _, d := range diags {
		n[d.Rule]++
	}
	rules := slices.Collect(maps.Keys(n))
	slices.SortFunc(rules, func(a, b string) int { return cmp.Or(cmp.Compare(n[b], n[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = fmt.Sprintf("%d %s", n[r], r)
	}
	return strings.Join(parts, ", ")
}

// checkCommand is the idemgen check command that reads what the spec
// command of fs read: its -config, -overlay, -ignore and -replayed-header,
// and SPEC, quoted for a POSIX shell where needed.
func checkCommand(fs *flag.FlagSet, configs, overlays []string, ignores ignoreFlag) string {
	args := []string{"idemgen", "check"}
	for _, c := range configs {
		args = append(args, "-config", c)
	}
	for _, o := range overlays {
		args = append(args, "-overlay", o)
	}
	for _, ig := range ignores {
		args = append(args, "-ignore", strings.TrimPrefix(ig.Name, "-ignore "))
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "replayed-header" {
			args = append(args, "-replayed-header="+f.Value.String())
		}
	})
	args = append(args, fs.Arg(0))
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and -_./=:,@+%.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// applyToHint tells how to opt in the unsafe operations of spec that
// declare no key (methods): apply-to at the document root, in an overlay
// written to ov, applied after the overlays init read (prior); idemgen
// spec then declares the key.
func applyToHint(spec string, methods []string, ov string, prior []string) string {
	var flags string
	for _, o := range append(slices.Clone(prior), ov) {
		flags += "-overlay " + o + " "
	}
	return fmt.Sprintf(`To make the %s operations idempotent although they declare no key, opt them in with
apply-to at the document root (or write an x-idempotency block on each), e.g. in an overlay:
  cat > %s <<'EOF'
  overlay: 1.0.0
  info: {title: Idempotency contracts, version: 1.0.0}
  actions:
    - target: $
      update: {x-idempotency: {semantics: strict, window: 24h, apply-to: [%s]}}
  EOF
  idemgen check %s%s
idemgen spec %s%s then declares the Idempotency-Key header they take.
See %s#where-a-block-may-be-written-and-how-blocks-merge
`, strings.ToUpper(strings.Join(methods, ", ")), ov, strings.Join(methods, ", "), flags, spec, flags, spec, initspec.ContractDocs)
}

// applyToPath returns the file applyToHint proposes to write: out (init's
// -o; "-": idempotency.overlay.yaml), unless it exists or is one of the
// overlays init read, which the proposal's "cat >" would overwrite; then
// apply-to.overlay.yaml beside it (apply-to.2.overlay.yaml, ... when that
// is taken too).
func applyToPath(out string, overlays []string) string {
	ov := out
	if ov == "-" {
		ov = initspec.DefaultOverlayPath
	}
	taken := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil || slices.ContainsFunc(overlays, func(o string) bool { return filepath.Clean(o) == filepath.Clean(p) })
	}
	if !taken(ov) {
		return ov
	}
	dir := filepath.Dir(ov)
	for i := 1; ; i++ {
		name := "apply-to.overlay.yaml"
		if i > 1 {
			name = fmt.Sprintf("apply-to.%d.overlay.yaml", i)
		}
		if p := filepath.Join(dir, name); !taken(p) {
			return p
		}
	}
}

// writeOut writes data to stdout ("-") or atomically to path.
func writeOut(path string, data []byte, stdout io.Writer) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	return emitter.Write(filepath.Dir(path), []emitter.File{{Path: filepath.Base(path), Data: data}})
}

const initExamples = `  idemgen init openapi.yaml > idempotency.overlay.yaml
  idemgen init -o idempotency.overlay.yaml vendor/openapi.json

Proposes an x-idempotency contract, as an OpenAPI Overlay 1.0 document, for
every unsafe operation that already declares an idempotency key (an
Idempotency-Key header, inline or through a $ref; a PayPal-Request-Id-style
header; an idempotency_key body member), with the key exactly as the spec
declares it. The semantics, the window and the volatile and unordered
members are proposals marked "# TODO(idemgen)": idemgen check reports each
[unconfirmed] until the mark is deleted. Operations that declare a key but
get no contract (GET and other safe methods) are listed on stderr and in
the overlay's header comment. Unsafe operations that declare no key get
none either (POST and PATCH; not PUT or DELETE, idempotent by HTTP
semantics): init lists them on stderr, where each is written, with the
overlay actions that opt them in (when no other operation got a contract,
one overlay with apply-to at the document root). An existing -o file is not overwritten
without -force. Exit status: 0 written (or nothing to propose), 1 errors, 2 usage.
`

func initCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("init", initExamples, stderr)
	var overlays listFlag
	fs.Var(&overlays, "overlay", "apply this OpenAPI Overlay 1.0 `FILE` first (repeatable)")
	out := fs.String("o", "-", "write the overlay to `FILE` (- is stdout)")
	force := fs.Bool("force", false, "overwrite an existing -o file")
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, "want exactly one SPEC file")
	}
	if *out != "-" && !*force {
		if _, err := os.Stat(*out); err == nil {
			fmt.Fprintf(stderr, "idemgen init: %s exists (it may hold confirmed contracts); use -force to overwrite it\n", *out)
			return ExitUsage
		}
	}
	ovName := initspec.DefaultOverlayPath
	if *out != "-" {
		ovName = *out
	}
	p, diags := initspec.Propose(fs.Arg(0), initspec.Options{Overlays: overlays, OverlayPath: ovName})
	_ = diags.WriteText(stderr)
	if p == nil {
		return ExitError
	}
	for _, n := range p.Notes {
		at := fs.Arg(0)
		if n.Pos.Line > 0 {
			at = fmt.Sprintf("%s:%d:%d", cmp.Or(n.Pos.File, at), n.Pos.Line, n.Pos.Col)
		}
		fmt.Fprintf(stderr, "%s: note: %s declares the key %s %s, but %s\n", at, n.Where(), n.Key.Carrier, n.Key.Name, n.Reason)
	}
	if len(p.Candidates) == 0 {
		fmt.Fprintf(stderr, "%s: no operation without a contract declares an idempotency key; nothing to propose\n", fs.Arg(0))
		if len(p.Unkeyed) > 0 {
			fmt.Fprint(stderr, applyToHint(fs.Arg(0), p.Unkeyed, applyToPath(*out, overlays), overlays))
		}
		if len(p.Idempotent) > 0 {
			fmt.Fprintf(stderr, "The %s operations, which declare no key either, get no apply-to: PUT and DELETE are idempotent by HTTP semantics. Opt them in only if a handler has side effects beyond the resource (a payment, a notification), and silence check's [put-delete] there with the reason.\n", strings.ToUpper(strings.Join(p.Idempotent, ", ")))
		}
		return ExitOK
	}
	if err := writeOut(*out, p.Overlay, stdout); err != nil {
		fmt.Fprintf(stderr, "idemgen init: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(stderr, "%s: proposed %s for %s; confirm the values marked TODO(idemgen), then run idemgen check -overlay %s %s\n", fs.Arg(0), english.Noun(len(p.Candidates), "a contract", "contracts"), english.Count(len(p.Candidates), "operation"), ovName, fs.Arg(0))
	if len(p.UnkeyedOps) > 0 {
		fmt.Fprint(stderr, unkeyedNotes(fs.Arg(0), p.UnkeyedOps, ovName))
	}
	return ExitOK
}

// unkeyedNotes lists the unsafe operations of spec that declare no key
// and so got no contract although others did (the root apply-to that
// applyToHint proposes when none did would also reach the operations
// proposed here), each where it is written, and the actions that opt them
// in, to add to the overlay ov.
func unkeyedNotes(spec string, ops []initspec.Operation, ov string) string {
	var b strings.Builder
	for _, op := range ops {
		at := spec
		if op.Pos.Line > 0 {
			at = fmt.Sprintf("%s:%d:%d", cmp.Or(op.Pos.File, spec), op.Pos.Line, op.Pos.Col)
		}
		fmt.Fprintf(&b, "%s: note: %s declares no idempotency key, so no contract is proposed for it\n", at, op.Where())
	}
	fmt.Fprintf(&b, "To make %s idempotent too, with the defaults at the document root, add to the actions of %s:\n", english.Noun(len(ops), "it", "them"), ov)
	for _, op := range ops {
		fmt.Fprintf(&b, "  - target: %s\n    update: {x-idempotency: true}\n", op.Target)
	}
	fmt.Fprintf(&b, "idemgen spec -overlay %s %s then declares the Idempotency-Key header %s.\nSee %s#where-a-block-may-be-written-and-how-blocks-merge\n", ov, spec, english.Noun(len(ops), "it takes", "they take"), initspec.ContractDocs)
	return b.String()
}

// specIgnores returns ignores without those of the rules of oapi-codegen's
// configuration (configRules), which spec does not check: an ignore of
// one in idemgen.yaml, for check and generate, is not unused.
func specIgnores(ignores []diag.Ignore) []diag.Ignore {
	return slices.DeleteFunc(ignores, func(ig diag.Ignore) bool { return slices.Contains(configRules, ig.Rule) })
}
