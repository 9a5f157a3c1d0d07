package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/initspec"
	"github.com/idemgen/idemgen/generator/internal/english"
)

// DefaultConfig is the config file check -generated reads when -config is not given.
const DefaultConfig = "idemgen.yaml"

// checkGenerated regenerates every configured output in memory and
// compares it with the files on disk.
func checkGenerated(fs *flag.FlagSet, configPath string, overlays []string, ignores []diag.Ignore, strict bool, format string, stdout, stderr io.Writer) int {
	if configPath == "" {
		configPath = DefaultConfig
	}
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
	spec, diags, note := diagnose(cfg, strict, ignores, cfg.noReplayedHeader(fs))
	if note != "" {
		fmt.Fprintf(stderr, "idemgen check: %s\n", note)
	}
	report(diags, format, stdout, stderr)
	if diags.HasErrors() {
		fmt.Fprintln(stderr, "idemgen check: the spec has errors; cannot compare the generated files")
		return ExitError
	}
	files, err := emitter.Run(names, spec, cfg.emitterOptions(params))
	if err != nil {
		fmt.Fprintf(stderr, "idemgen check: %v\n", err)
		return ExitError
	}
	bad := 0
	for _, f := range files {
		path := filepath.Join(cfg.Output, f.Path)
		have, err := os.ReadFile(path)
		switch {
		case errors.Is(err, iofs.ErrNotExist):
			fmt.Fprintf(stderr, "%s: missing (emitter output not generated)\n", path)
			bad++
		case err != nil:
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			bad++
		case !bytes.Equal(have, f.Data):
			fmt.Fprintf(stderr, "%s:%d: stale (differs from what idemgen generates from line %d on)\n", path, firstDiff(have, f.Data), firstDiff(have, f.Data))
			bad++
		}
	}
	if bad > 0 {
		if slices.ContainsFunc(diags, func(d diag.Diagnostic) bool { return d.Rule == augment.RuleSpecStale }) {
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
				redo = "idemgen spec (as you ran it for the overlaid spec)"
			}
			fmt.Fprintf(stderr, "idemgen check: %d of %s stale or missing, and the spec is behind its contracts [spec-stale]; run: %s, then oapi-codegen, then idemgen generate -config %s\n", bad, staleOf(bad, len(files)), redo, configPath)
			return ExitError
		}
		fmt.Fprintf(stderr, "idemgen check: %d of %s stale or missing; run: idemgen generate -config %s\n", bad, staleOf(bad, len(files)), configPath)
		return ExitError
	}
	fmt.Fprintf(stderr, "idemgen check: %s up to date\n", english.Count(len(files), "generated file is", "generated files are"))
	return ExitOK
}

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
	configPath := fs.String("config", "", "read replayed-header and ignore: from this idemgen.yaml `FILE` (default: the idemgen.yaml beside SPEC, unless its spec: is another file)")
	replayedHeaderFlag(fs)
	var ignores ignoreFlag
	fs.Var(&ignores, "ignore", ignoreFlagUsage)
	format := formatFlag(fs)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, "want exactly one SPEC file")
	}
	cfg, _, err := checkConfig(*configPath, fs.Args(), nil)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
		return ExitUsage
	}
	res, diags := augment.Augment(fs.Arg(0), augment.Options{
		Overlays:         overlays,
		NoReplayedHeader: cfg.noReplayedHeader(fs),
		Ignore:           append(slices.Clone(cfg.ignores), ignores...),
		IgnoreDiags:      cfg.ignoreDiags,
	})
	report(diags, *format, stdout, stderr)
	if res == nil {
		return ExitError
	}
	data := res.Spec
	if *asOverlay {
		data = res.Overlay
	}
	if err := writeOut(*out, data, stdout); err != nil {
		fmt.Fprintf(stderr, "idemgen spec: %v\n", err)
		return ExitError
	}
	if *out != "-" {
		fmt.Fprintf(stderr, "%s: %s\n", *out, english.Count(res.Actions, "change"))
	}
	return ExitOK
}

// applyToHint tells how to opt in the unsafe operations of spec that
// declare no key (methods): apply-to at the document root, in an overlay;
// idemgen spec then declares the key.
func applyToHint(spec string, methods []string) string {
	ov := initspec.DefaultOverlayPath
	return fmt.Sprintf(`To make the %s operations idempotent although they declare no key, opt them in with
apply-to at the document root (or write an x-idempotency block on each), e.g. in an overlay:
  cat > %s <<'EOF'
  overlay: 1.0.0
  info: {title: Idempotency contracts, version: 1.0.0}
  actions:
    - target: $
      update: {x-idempotency: {semantics: strict, window: 24h, apply-to: [%s]}}
  EOF
  idemgen check -overlay %s %s
idemgen spec -overlay %s %s then declares the Idempotency-Key header they take.
See %s#where-a-block-may-be-written-and-how-blocks-merge
`, strings.ToUpper(strings.Join(methods, ", ")), ov, strings.Join(methods, ", "), ov, spec, ov, spec, initspec.ContractDocs)
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
none either: init then prints an overlay that opts them in with apply-to
at the document root (POST and PATCH; not PUT or DELETE, idempotent by
HTTP semantics). An existing -o file is not overwritten
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
		fmt.Fprintf(stderr, "%s: note: %s %s declares the key %s %s, but %s\n", fs.Arg(0), n.Method, n.Path, n.Key.Carrier, n.Key.Name, n.Reason)
	}
	if len(p.Candidates) == 0 {
		fmt.Fprintf(stderr, "%s: no operation without a contract declares an idempotency key; nothing to propose\n", fs.Arg(0))
		if len(p.Unkeyed) > 0 {
			fmt.Fprint(stderr, applyToHint(fs.Arg(0), p.Unkeyed))
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
	return ExitOK
}
