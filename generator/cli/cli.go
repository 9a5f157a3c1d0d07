// Package cli implements the idemgen command line: flags in, exit code out.
//
//	idemgen init [-overlay FILE]... [-o overlay.yaml] [-force] SPEC
//	idemgen check [-config idemgen.yaml] [-overlay FILE]... [-base OLD_SPEC [-base-overlay FILE]... [-base-config FILE]] [-ignore RULE[:OP]]... [-format text|json] [-strict] [-replayed-header=false] SPEC
//	idemgen check -generated [-config idemgen.yaml]... [-ignore RULE[:OP]]... [-format text|json] [-strict] [SPEC]
//	idemgen spec [-config idemgen.yaml] [-overlay FILE]... [-ignore RULE[:OP]]... [-o OUT] [-as-overlay] [-replayed-header=false] [-format text|json] [-warnings] SPEC
//	idemgen generate [-config idemgen.yaml]... [-overlay FILE]... [-emit NAME]... [-o DIR|-] [-package NAME] [-option NAME=VALUE]... [-ignore RULE[:OP]]... [-format text|json] [SPEC]
//	idemgen version
//
// (the lists of docs/contract.md and README.md, and each command's -h;
// TestSynopses keeps them equal). Exit codes: 0 success (warnings allowed), 1 errors
// found, 2 usage.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emit/client"
	_ "github.com/idemgen/idemgen/generator/emit/docs" // registers the emitter "docs"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/initspec"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/generator/naming"
	"github.com/idemgen/idemgen/generator/rollout"
)

// Exit codes.
const (
	ExitOK    = 0 // success; warnings allowed
	ExitError = 1 // the spec has errors, or an output could not be written
	ExitUsage = 2 // bad command line or config file
)

const usage = `idemgen makes HTTP retries safe by contract: it checks the x-idempotency
contracts of an OpenAPI 3 spec and generates code and docs from them.

Usage:
  idemgen init [flags] SPEC        propose contracts (an overlay) for the operations that declare a key
  idemgen check [flags] SPEC       check the contracts and the spec, print diagnostics
  idemgen check -generated         check that the generated files are up to date (CI)
  idemgen spec [flags] SPEC        write the spec with what the contracts imply declared
  idemgen generate [flags] [SPEC]  check, then write the selected outputs
  idemgen version                  print the version

Run "idemgen COMMAND -h" or "idemgen help COMMAND" for a command's flags and examples.
`

// Main runs idemgen with args (without the program name) and returns the exit
// code: 0 success (warnings allowed), 1 errors found, 2 usage.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	if cmd, ok := commands[args[0]]; ok {
		return cmd(args[1:], stdout, stderr)
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) == 1 {
			fmt.Fprint(stdout, usage)
			return ExitOK
		}
		// help COMMAND is COMMAND -h.
		if cmd, ok := commands[args[1]]; ok && len(args) == 2 {
			return cmd([]string{"-h"}, stdout, stderr)
		}
		if len(args) > 2 {
			fmt.Fprintf(stderr, "idemgen %s: takes one COMMAND, got %q\n", args[0], args[1:])
		} else {
			fmt.Fprintf(stderr, "idemgen %s: unknown command %q\n", args[0], args[1])
		}
		fmt.Fprintf(stderr, "Usage: idemgen help [COMMAND] (commands: %s)\nRun 'idemgen -h' for help.\n", commandNames)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "idemgen: unknown command %q\nUsage: idemgen COMMAND [flags] [SPEC] (commands: %s)\nRun 'idemgen -h' for help.\n", args[0], commandNames)
	return ExitUsage
}

// commandList is idemgen's commands, in the order of the help: the one
// list commands, synopses and commandNames are made from (in init: the
// commands' flag sets read synopses).
var commandList = []struct {
	name, synopsis string
	run            func(args []string, stdout, stderr io.Writer) int
}{
	{"init", initSynopsis, initCmd},
	{"check", checkSynopsis + "\n       " + checkGeneratedSynopsis, check},
	{"spec", specSynopsis, specCmd},
	{"generate", generateSynopsis, generate},
	{"version", versionSynopsis, version},
}

var (
	// commands are idemgen's commands by name.
	commands = map[string]func(args []string, stdout, stderr io.Writer) int{}
	// synopses are the commands' synopses, by name (= flag set name).
	synopses = map[string]string{}
	// commandNames lists the commands, in the order of the help.
	commandNames string
)

func init() {
	var names []string
	for _, c := range commandList {
		commands[c.name] = c.run
		synopses[c.name] = c.synopsis
		names = append(names, c.name)
	}
	commandNames = strings.Join(names, ", ")
}

// Synopses of the commands, as docs/contract.md and README.md list them.
const (
	initSynopsis           = "idemgen init [-overlay FILE]... [-o overlay.yaml] [-force] SPEC"
	checkSynopsis          = "idemgen check [-config idemgen.yaml] [-overlay FILE]... [-base OLD_SPEC [-base-overlay FILE]... [-base-config FILE]] [-ignore RULE[:OP]]... [-format text|json] [-strict] [-replayed-header=false] SPEC"
	checkGeneratedSynopsis = "idemgen check -generated [-config idemgen.yaml]... [-ignore RULE[:OP]]... [-format text|json] [-strict] [SPEC]"
	specSynopsis           = "idemgen spec [-config idemgen.yaml] [-overlay FILE]... [-ignore RULE[:OP]]... [-o OUT] [-as-overlay] [-replayed-header=false] [-format text|json] [-warnings] SPEC"
	generateSynopsis       = "idemgen generate [-config idemgen.yaml]... [-overlay FILE]... [-emit NAME]... [-o DIR|-] [-package NAME] [-option NAME=VALUE]... [-ignore RULE[:OP]]... [-format text|json] [SPEC]"
	versionSynopsis        = "idemgen version"
)

// singleConfig returns the one -config of a command that reads one
// (configs as given: "" when none); given more than once, a repeat, which
// would silently read the last file only, is a usage error.
func singleConfig(fs *flag.FlagSet, configs []string) (string, bool) {
	switch len(configs) {
	case 0:
		return "", true
	case 1:
		return configs[0], true
	}
	usageError(fs, "-config given %d times (%s): %s reads one config; check -generated and generate take several", len(configs), strings.Join(configs, ", "), fs.Name())
	return "", false
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// dedupe returns the distinct names of l, in the order first given.
func dedupe(l []string) []string {
	var out []string
	for _, s := range l {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// newFlagSet returns the flag set of command name, whose usage is its
// synopsis, its flags and examples.
func newFlagSet(name, examples string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "Usage: %s\n\nFlags:\n", synopses[name])
		fs.PrintDefaults()
		fmt.Fprintf(out, "\nExamples:\n%s", examples)
	}
	return fs
}

// formatFlag defines the -format flag of the commands that report diagnostics.
func formatFlag(fs *flag.FlagSet) *string {
	return fs.String("format", "text", "diagnostics format: text (stderr) or json (stdout)")
}

// parse parses flags; it returns an exit code when the command must stop.
func parse(fs *flag.FlagSet, args []string, stdout io.Writer) (int, bool) {
	// The flag package prints the usage itself on -h as on an error: held
	// back here, so -h prints it once, on stdout, and an error on stderr.
	stderr := fs.Output()
	var held bytes.Buffer
	fs.SetOutput(&held)
	err := fs.Parse(interleave(fs, args))
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return ExitOK, false
		}
		// The error and how to get help, not the whole help, which
		// buries the one line that matters.
		return usageError(fs, "%v", err), false
	}
	if f := fs.Lookup("format"); f != nil && f.Value.String() != "text" && f.Value.String() != "json" {
		return usageError(fs, "-format must be text or json, not %q", f.Value.String()), false
	}
	return 0, true
}

// usageError reports a usage error of fs's command on its output: the
// message, the command's synopsis and how to get its help (the help
// itself is -h's). It returns ExitUsage.
func usageError(fs *flag.FlagSet, format string, args ...any) int {
	out := fs.Output()
	fmt.Fprintf(out, "idemgen %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	if syn, ok := synopses[fs.Name()]; ok {
		fmt.Fprintf(out, "Usage: %s\n", syn)
	}
	fmt.Fprintf(out, "Run 'idemgen %s -h' for help.\n", fs.Name())
	return ExitUsage
}

// unknownEmitter returns an error naming the first of names that no
// emitter is registered under.
func unknownEmitter(names []string) error {
	for _, n := range names {
		if _, ok := emitter.Lookup(n); !ok {
			return fmt.Errorf("no emitter %q in this build (available: %s)", n, strings.Join(emitter.Names(), ", "))
		}
	}
	return nil
}

// interleave moves flags written after positional arguments before them,
// so "idemgen check spec.yaml -overlay o.yaml" works.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			if f := fs.Lookup(name); f != nil {
				if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
					continue
				}
				if i+1 < len(args) {
					flags = append(flags, args[i+1])
					i++
				}
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, append([]string{"--"}, pos...)...)
}

const checkExamples = `  idemgen check openapi.yaml
  idemgen check -overlay idempotency.overlay.yaml vendor/openapi.json
  idemgen check -format json openapi.yaml | jq '.[] | select(.severity == "error")'
  idemgen check -strict openapi.yaml                 # the spec must declare what the contracts imply
  idemgen check -ignore 'put-delete:DELETE /payments/{id}' openapi.yaml
  idemgen check -config idemgen.yaml                 # its spec and overlays, Go names as it sets them
  idemgen check -generated -config idemgen.yaml      # in CI: committed output is up to date
  idemgen check -base /tmp/base.yaml openapi.yaml    # in CI: contract changes since the last release
  idemgen check -generated -config svc1/idemgen.yaml -config svc2/idemgen.yaml   # each in turn

Diagnostics go to stderr as file:line:col: error|warning: message [rule-id]
(with -format json, a JSON array goes to stdout). Besides the contract
checks, values idemgen init proposed and nobody confirmed are errors
[unconfirmed], and what the spec does not declare although the contracts
imply it is reported [key-param-missing, problem-response-missing,
retry-after-missing], and so is what an earlier idemgen spec wrote that the
contracts have since changed [spec-stale]: warnings, errors with -strict.
So are, with -strict, an overlay target that matches nothing
[overlay-no-match] and an unsafe operation that declares a key but has
no contract [key-without-contract]: a contract meant and not applied.

With -base OLD_SPEC (the last release's spec, -base-overlay applying its
overlays), each operation's contract is compared with the old one's
(matched by operationId, else by method and path with the parameters'
names left out) and each change that breaks retries in flight across a
rolling deploy is reported at its field, with the safe procedure
[rollout-operation-renamed, rollout-scope, rollout-key-format,
rollout-key-moved, rollout-key-required, rollout-fingerprint,
rollout-media-types, rollout-response-headers], and so
is a comparison of nothing [rollout-base-unpaired]: no idempotent operation
pairs, or, with overlays, one spec has no contract (its overlays not
given: -base-overlay, -overlay; SPEC's overlays are not applied to
OLD_SPEC; an OLD_SPEC without contracts and no overlay is the first
release that adopts them, not reported): warnings, errors with -strict; an idempotent operation
without an operationId is reported too [operation-id-missing]. OLD_SPEC's
Go names, which name the records of an operation without operationId, are
SPEC's config's unless -base-config gives the last release's (its
oapi-codegen configuration, or its idemgen.yaml when that names its naming:
name-normalizer, or oapi-codegen-config relative to the file's directory):
a name normalizer changed is seen only then. See ` + initspec.ContractDocs + `#changing-a-contract

A warning is silenced, with a reason, for one operation by a comment in
its x-idempotency block, "# idemgen:ignore RULE -- REASON"; for the spec or
listed operations by ignore: in idemgen.yaml or -ignore RULE[:METHOD /path].
Only warnings can be; an ignore that silenced nothing is a warning
[unused-ignore]. See ` + initspec.ContractDocs + `#silencing-a-warning

Go names are checked for collisions as generate names them: under the
name-normalizer (or oapi-codegen-config) of the -config file, whose spec:
and overlays: are used too unless SPEC and -overlay are given, as generate
does; without -config, of the idemgen.yaml beside SPEC (only its naming
settings, its ignore:, its replayed-header, and its generate:, options:
and package: for the emitters' checks; not if its spec: is another file);
else oapi-codegen's default. The emitters that config enables are run in
memory, nothing written, and report what generate would (go-name-collision,
runtime-policy, client-key-length, client-key-schema); when it enables
none, the server and client emitters' default names are checked for
collisions, as warnings [go-name-collision], and when it lists overlays:
that check SPEC does not apply, its emitters' settings are checked and
their name collisions reported, as warnings.

With -generated, the outputs of every emitter the config file enables are
generated in memory and compared with the files under its output
directory; stale or missing files are listed, as diagnostics at the first
differing line [generated-stale, generated-missing] (with -format json, in
the JSON array on stdout), and the exit status is 1.
So are files idemgen generated that the config no longer produces (an
emitter turned off, output: moved, a file renamed), found by their
generated header in its output directory, the config's directory and that
of oapi-codegen's output [generated-orphaned]; a warning only when another
idemgen config writes to that directory, or the file names another spec.
For an output: moved into or out of a subdirectory, Go files and IR from
its spec are looked for below the output directory and above it: errors
in a directory that holds every file the config generates now (every
idemgen file from its spec there, another emitter's too, even one a run
without a config wrote: write such a file elsewhere), elsewhere
warnings for those of its emitters (a run without a config may have
written them), and nothing for the other emitters'.
Exit status: 0 clean or warnings only, 1 errors, 2 usage.
`

func check(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", checkExamples, stderr)
	var overlays listFlag
	fs.Var(&overlays, "overlay", "apply this OpenAPI Overlay 1.0 `FILE` before checking (repeatable, applied in order)")
	format := formatFlag(fs)
	strict := fs.Bool("strict", false, "report as errors, not warnings, what the spec does not declare (key parameter, problem responses, Retry-After), overlay targets that match nothing, and operations that declare a key but have no contract")
	generated := fs.Bool("generated", false, "check that the files generated from the config are up to date")
	var ignores ignoreFlag
	fs.Var(&ignores, "ignore", ignoreFlagUsage)
	var configs listFlag
	fs.Var(&configs, "config", "read settings from this idemgen.yaml `FILE`: its Go naming, ignore:, replayed-header, and the emitters to check (generate:, options:, package:) (default: the idemgen.yaml beside SPEC), and its spec and overlays unless SPEC and -overlay are given; with -generated, all of them (default ./idemgen.yaml; repeatable: each config is checked in turn)")
	base := fs.String("base", "", "compare the contracts with those of `OLD_SPEC` (the spec of the last release) and report each change that breaks retries in flight across a rolling deploy (warnings; errors with -strict)")
	var baseOverlays listFlag
	fs.Var(&baseOverlays, "base-overlay", "apply this OpenAPI Overlay 1.0 `FILE` to OLD_SPEC before comparing (repeatable, applied in order; -overlay applies to SPEC only)")
	baseConfig := fs.String("base-config", "", "name OLD_SPEC's Go identifiers as this `FILE` says, the last release's oapi-codegen configuration (its output-options) or idemgen.yaml (its name-normalizer or oapi-codegen-config, relative to FILE's directory): an operation without operationId keeps its records under its Go name, which another name normalizer changes (default: as SPEC's are named)")
	replayedHeaderFlag(fs)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if len(baseOverlays) > 0 && *base == "" {
		return usageError(fs, "-base-overlay applies to the spec -base names: give -base")
	}
	if *baseConfig != "" && *base == "" {
		return usageError(fs, "-base-config names the Go identifiers of the spec -base names: give -base")
	}
	if *generated && *base != "" {
		return usageError(fs, "-base compares two specs: not with -generated")
	}
	if *generated {
		return checkGeneratedAll(fs, configs, overlays, ignores, *strict, *format, stdout, stderr)
	}
	configPath, ok := singleConfig(fs, configs)
	if !ok {
		return ExitUsage
	}
	cfg, cfgPath, err := checkConfig(configPath, fs.Args(), overlays)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen check: %v\n", err)
		return ExitUsage
	}
	if cfg.Spec == "" || fs.NArg() > 1 {
		return usageError(fs, "want exactly one SPEC file (or a -config that names one)")
	}
	emitters, params, namesOnly, err := cfg.checkEmitters()
	if err != nil {
		if cfgPath != "" {
			err = fmt.Errorf("%s: %w", cfgPath, err)
		}
		fmt.Fprintf(stderr, "idemgen check: %v\n", err)
		return ExitUsage
	}
	extra := func(d *load.Document, spec *ir.Spec) diag.List { return rollout.MissingOperationIDs(spec, d) }
	baseNames := "" // how OLD_SPEC's Go names were derived, for the summary line
	if *base != "" {
		namer := cfg.namer
		if *baseConfig != "" {
			if namer, err = baseNamer(*baseConfig); err != nil {
				fmt.Fprintf(stderr, "idemgen check: -base-config %v\n", err)
				return ExitUsage
			}
		}
		old, err := loadBase(*base, baseOverlays, namer)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen check: -base %v\n", err)
			return ExitError
		}
		extra = func(d *load.Document, spec *ir.Spec) diag.List {
			return rollout.Check(old, spec, d, *base, cfg.Overlays, baseOverlays, cfg.namer.Change(namer))
		}
		baseNames = fmt.Sprintf("%s's alike, as no -base-config names the last release's naming", *base)
		if *baseConfig != "" {
			baseNames = fmt.Sprintf("%s's as -base-config %s sets them, %s", *base, *baseConfig, namer)
		}
	}
	spec, diags, note := diagnose(cfg, *strict, ignores, cfg.noReplayedHeader(fs), extra, *base != "")
	printNote(stderr, note)
	if !diags.HasErrors() {
		// What the emitters find, generate would refuse too.
		more, err := emitterDiags(spec, emitters, cfg.emitterOptions(params), namesOnly)
		if err != nil {
			report(diags, *format, stdout, stderr)
			fmt.Fprintf(stderr, "idemgen check: %v\n", err)
			return ExitError
		}
		diags = append(diags, more...).Sorted()
	}
	report(diags, *format, stdout, stderr)
	if diags.HasErrors() {
		return ExitError
	}
	if *format == "text" {
		_, nw := diags.Count()
		var names []string
		switch {
		case cfgPath != "" && *baseConfig != "":
			names = append(names, fmt.Sprintf("Go names as %s sets them, %s", cfgPath, cfg.namer))
		case cfgPath != "":
			names = append(names, "Go names as "+cfgPath+" sets them")
		case baseNames != "":
			names = append(names, fmt.Sprintf("Go names under %s", cfg.namer))
		}
		if baseNames != "" {
			names = append(names, baseNames)
		}
		if len(names) > 0 {
			names = []string{" (" + strings.Join(names, "; ") + ")"}
		}
		fmt.Fprintf(stderr, "%s: %s, %s%s\n", cfg.Spec, english.Count(len(spec.Operations), "idempotent operation"), english.Count(nw, "warning"), strings.Join(names, ""))
	}
	return ExitOK
}

// loadBase loads and compiles the spec path (check -base) with overlays
// (-base-overlay), its Go names as namer names them: the last release's
// (-base-config), else those of the spec checked.
func loadBase(path string, overlays []string, namer naming.Namer) (*ir.Spec, error) {
	_, spec, diags := compile.LoadAndCompile(path, load.Options{Overlays: overlays}, compile.Options{Naming: namer})
	if err := diags.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w (run idemgen check on it)", path, err)
	}
	if spec == nil {
		return nil, fmt.Errorf("%s: not compiled (run idemgen check on it)", path)
	}
	return spec, nil
}

// baseNamer returns the naming of the configuration file path (check
// -base-config), the last release's: an oapi-codegen configuration
// (isOapiConfig) by its output-options.name-normalizer and
// additional-initialisms; else an idemgen.yaml by its name-normalizer, or
// the oapi-codegen configuration its oapi-codegen-config names, relative
// to path's directory. Only those keys are read, and leniently: a key that
// names nothing (type-mapping, generate:, a setting this version dropped)
// is not the business of the old spec's names. An idemgen.yaml that names
// no naming is refused: the last release's took its names from the
// oapi-codegen.yaml beside it, not from what lies beside the file given
// (a copy), so is one whose relative oapi-codegen-config is not there.
func baseNamer(path string) (naming.Namer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return naming.Namer{}, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return naming.Namer{}, fmt.Errorf("%s: %w", path, err)
	}
	if isOapiConfig(doc) {
		return oapiNamer(path, data)
	}
	var c struct {
		NameNormalizer    *string `yaml:"name-normalizer"`
		OapiCodegenConfig *string `yaml:"oapi-codegen-config"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		return naming.Namer{}, fmt.Errorf("%s: %w", path, err)
	}
	const pass = "pass the last release's oapi-codegen configuration as -base-config (git show REF:oapi-codegen.yaml > /tmp/base.oapi-codegen.yaml), or an idemgen.yaml whose name-normalizer: is the one that named OLD_SPEC (ToCamelCase, oapi-codegen's default, when no configuration set one)"
	if c.NameNormalizer == nil && (c.OapiCodegenConfig == nil || *c.OapiCodegenConfig == "") {
		return naming.Namer{}, fmt.Errorf("%s names no naming (no name-normalizer:, no oapi-codegen-config:): the last release took its Go names from the oapi-codegen.yaml beside its idemgen.yaml, which is not necessarily what lies beside this file; %s", path, pass)
	}
	direct := ""
	if c.NameNormalizer != nil {
		direct = *c.NameNormalizer
	}
	n, err := naming.New(direct, nil)
	if err != nil {
		return naming.Namer{}, fmt.Errorf("%s: %w", path, err)
	}
	if c.OapiCodegenConfig == nil || *c.OapiCodegenConfig == "" {
		return n, nil
	}
	oapi := *c.OapiCodegenConfig
	if !filepath.IsAbs(oapi) {
		oapi = filepath.Join(filepath.Dir(path), oapi)
		if _, err := os.Stat(oapi); errors.Is(err, os.ErrNotExist) {
			return naming.Namer{}, fmt.Errorf("%s: oapi-codegen-config %s is read relative to the file's directory, and %s is not there (a copy of the last release's idemgen.yaml does not bring that release's oapi-codegen configuration with it); %s", path, *c.OapiCodegenConfig, oapi, pass)
		}
	}
	data, err = os.ReadFile(oapi)
	if err != nil {
		return naming.Namer{}, fmt.Errorf("%s: oapi-codegen-config: %w", path, err)
	}
	on, err := oapiNamer(oapi, data)
	if err != nil {
		return naming.Namer{}, fmt.Errorf("%s: oapi-codegen-config: %w", path, err)
	}
	if c.NameNormalizer != nil && n.Normalizer() != on.Normalizer() {
		return naming.Namer{}, fmt.Errorf("%s: name-normalizer %q disagrees with oapi-codegen-config %s (%s); keep one", path, direct, oapi, on)
	}
	return on, nil
}

// oapiNamer returns the naming of the oapi-codegen configuration data (the
// file path): its output-options.name-normalizer and
// additional-initialisms, read leniently (baseNamer).
func oapiNamer(path string, data []byte) (naming.Namer, error) {
	var f struct {
		OutputOptions struct {
			NameNormalizer        string   `yaml:"name-normalizer"`
			AdditionalInitialisms []string `yaml:"additional-initialisms"`
		} `yaml:"output-options"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		return naming.Namer{}, fmt.Errorf("%s: %w", path, err)
	}
	n, err := naming.New(f.OutputOptions.NameNormalizer, f.OutputOptions.AdditionalInitialisms)
	if err != nil {
		return naming.Namer{}, fmt.Errorf("%s: output-options.%w", path, err)
	}
	return n, nil
}

// oapiOnlyKeys are top-level keys of an oapi-codegen configuration that an
// idemgen.yaml does not have.
var oapiOnlyKeys = []string{"output-options", "compatibility", "import-mapping", "additional-imports"}

// isOapiConfig reports whether the configuration file doc is
// oapi-codegen's rather than an idemgen.yaml: it has a key of oapiOnlyKeys,
// an output: that is a Go file (idemgen's is a directory), or a generate:
// section that turns on something that is no idemgen emitter (chi-server,
// models, ...).
func isOapiConfig(doc map[string]any) bool {
	if slices.ContainsFunc(oapiOnlyKeys, func(k string) bool { _, ok := doc[k]; return ok }) {
		return true
	}
	if out, ok := doc["output"].(string); ok && strings.HasSuffix(out, ".go") {
		return true
	}
	gen, _ := doc["generate"].(map[string]any)
	for k := range gen {
		if _, ok := emitter.Lookup(k); !ok {
			return true
		}
	}
	return false
}

// checkConfig returns what check (without -generated) reads for the
// command line's config file, SPEC and overlays, and the config file read
// (""). With -config, it is that file with SPEC and the overlays, when
// given, in place of its spec: and overlays:, as generate reads it.
// Without, only the naming settings (name-normalizer, oapi-codegen-config),
// the ignore: list and replayed-header of the idemgen.yaml beside SPEC
// apply, and the emitters it enables with their settings (generate:,
// options:, package:, oapi-codegen-config's server settings) for their
// checks, unless its spec: names another file: it is that spec's config,
// and check (and spec) then names Go types, silences warnings, declares
// Idempotent-Replayed and runs the emitters' checks as generate -config
// does; its other settings (output:, overlays:) are generate's business.
func checkConfig(configPath string, args, overlays []string) (*Config, string, error) {
	cfg := &Config{}
	if configPath != "" {
		c, err := LoadConfig(configPath)
		if err != nil {
			return nil, "", err
		}
		cfg = c
	}
	if len(args) > 0 {
		cfg.Spec = args[0]
	}
	if len(overlays) > 0 {
		cfg.Overlays = overlays
	}
	if configPath != "" || cfg.Spec == "" {
		return cfg, configPath, nil
	}
	beside := filepath.Join(filepath.Dir(cfg.Spec), DefaultConfig)
	if _, err := os.Stat(beside); err != nil {
		return cfg, "", nil
	}
	c, err := LoadConfig(beside)
	if err != nil {
		return nil, "", fmt.Errorf("%w (the config beside the spec, read for its naming, ignore:, replayed-header and emitter settings)", err)
	}
	if c.Spec != "" && !sameFile(c.Spec, cfg.Spec) {
		return cfg, "", nil // another spec's config
	}
	cfg.namer = c.namer
	cfg.ignores, cfg.ignoreDiags = c.ignores, c.ignoreDiags
	cfg.ReplayedHeader = c.ReplayedHeader
	// The emitters it enables, for their checks (checkEmitters). When
	// generate applies overlays that this check does not, what the
	// emitters find could differ (check -config applies them): their
	// settings are still checked, and their names, as warnings.
	cfg.Generate, cfg.Options, cfg.Package, cfg.oapiServer, cfg.oapiOutput, cfg.oapiOverlay, cfg.oapiSkipped = c.Generate, c.Options, c.Package, c.oapiServer, c.oapiOutput, c.oapiOverlay, c.oapiSkipped
	if len(c.Overlays) > 0 && !sameFiles(c.Overlays, cfg.Overlays) {
		cfg.namesOnlyWhy = "check does not apply the overlays: of the idemgen.yaml beside the spec; check -config " + beside + " does"
	}
	return cfg, beside, nil
}

// checkEmitters returns the emitters whose checks check runs for c, and
// their settings, as generate -config c would run them: those c enables
// (generate:, with options: and the server settings of its
// oapi-codegen-config). namesOnly, when not "", says why only the name
// collisions of their diagnostics count, as warnings: c enables none (no
// config, or one without generate:: the Go emitters under their default
// names; their other checks depend on which of them runs, which check
// cannot tell), or c.namesOnlyWhy (the spec checked may not be the one
// generate reads).
func (c *Config) checkEmitters() (names []string, params map[string]string, namesOnly string, err error) {
	names = sortedTrue(c.Generate)
	if len(names) == 0 {
		// The server is what oapi-codegen's configuration generates, when
		// there is one: the emitters' settings are not known.
		c.plainServer = plainServer(c.oapiServer, nil, nil)
		return []string{client.Name, server.Name}, nil, "under the default names, as no idemgen.yaml beside the spec, or -config, says which emitters generate runs and how it names them", nil
	}
	params, err = c.emitterSettings(names, c.Options)
	if err != nil {
		return nil, nil, "", err
	}
	return names, params, c.namesOnlyWhy, nil
}

// emitterSettings checks what the emitters names would run with (that each
// is registered, the settings params, the package name) and returns params
// with the server emitter's settings taken from oapi-codegen.yaml
// (serverParams): the one validation generate, check and check -generated
// share.
func (c *Config) emitterSettings(names []string, params map[string]string) (map[string]string, error) {
	if err := unknownEmitter(names); err != nil {
		return nil, err
	}
	if err := emitter.CheckParams(params); err != nil {
		return nil, err
	}
	if err := emitter.CheckPackage(c.Package); err != nil {
		return nil, err
	}
	params, err := c.serverParams(params, names)
	if err != nil {
		return nil, err
	}
	c.plainServer = plainServer(c.oapiServer, names, params)
	return c.clientParams(params, names)
}

// plainServer reports whether the handlers are oapi-codegen's plain
// server's (compile.Options.PlainServer): the server emitter's
// server.strict false, when it is among the emitters names (params its
// settings, with oapi-codegen's defaults: serverParams); else an
// oapi-codegen configuration (oapi; nil without one) that generates a
// server and not strict-server. Else the strict server, the default.
func plainServer(oapi *oapiServer, names []string, params map[string]string) bool {
	if slices.Contains(names, server.Name) {
		cfg, err := server.ParseConfig(params)
		return err == nil && !cfg.Strict
	}
	return oapi != nil && oapi.router != "" && !oapi.strict
}

// emitterDiags runs the emitters names on spec without rendering their
// files (opts.CheckOnly) and returns their diagnostics (with namesOnly,
// the go-name-collision ones only, as warnings that say why); another
// failure is the error.
func emitterDiags(spec *ir.Spec, names []string, opts emitter.Options, namesOnly string) (diag.List, error) {
	opts.CheckOnly = true
	_, err := emitter.Run(names, spec, opts)
	var el *diag.ErrorList
	if err == nil || !errors.As(err, &el) {
		return nil, err
	}
	if namesOnly == "" {
		return el.List, nil
	}
	// What generate will name, or on which spec, is not known for sure: a
	// warning, which fails no check.
	var out diag.List
	for _, d := range el.List {
		if d.Rule == ruleGoNameCollision {
			d.Severity = diag.Warning
			d.Message += " (" + namesOnly + ")"
			out = append(out, d)
		}
	}
	return out, nil
}

// sameFiles reports whether the paths of a and b name the same files, in
// order.
func sameFiles(a, b []string) bool {
	return slices.EqualFunc(a, b, sameFile)
}

// ruleGoNameCollision is the rule of the emitters' name collisions, the
// checks check runs for emitters no config enables.
const ruleGoNameCollision = "go-name-collision"

// sameFile reports whether paths a and b name the same existing file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// diagnose loads cfg's spec once, compiles it and adds the checks of
// package augment (unconfirmed values, spec consistency; noReplayed:
// without the Idempotent-Replayed header) and those of cfg's oapi-codegen
// configuration (oapi-overlay-unlisted, servemux-conflict: warnings that
// -strict leaves warnings), then leaves out the warnings
// that the spec's comments, cfg's ignore: and the -ignore flags silence
// (augment.Silence). The operations cfg's oapi-codegen configuration
// leaves out are not in spec: note, when not "", names them (leaveOut).
func diagnose(cfg *Config, strict bool, flags []diag.Ignore, noReplayed bool, extra func(*load.Document, *ir.Spec) diag.List, withBase bool) (spec *ir.Spec, diags diag.List, note string) {
	d, spec, diags := compile.LoadAndCompile(cfg.Spec, load.Options{Overlays: cfg.Overlays}, compile.Options{Naming: cfg.namer, PlainServer: cfg.plainServer})
	// Ignores may name the operations left out (they are the spec's):
	// Silence checks them against the whole spec.
	whole := spec
	if spec != nil && d != nil {
		c := *spec
		whole = &c
		note = cfg.leaveOut(d.T, spec)
	}
	if cfg.oapiSkipped != "" {
		note = strings.TrimPrefix(note+"\n"+cfg.oapiSkipped, "\n")
	}
	if spec != nil {
		diags = append(diags, augment.DiagnoseDocument(d, spec, augment.Options{Strict: strict, NoReplayedHeader: noReplayed})...)
		if extra != nil && d != nil {
			diags = append(diags, extra(d, spec)...)
		}
	}
	if strict {
		for i := range diags {
			if slices.Contains(strictRules, diags[i].Rule) || slices.Contains(rollout.Rules, diags[i].Rule) {
				diags[i].Severity = diag.Error
			}
		}
	}
	diags = append(diags, cfg.oapiOverlay...)
	diags = append(diags, cfg.muxConflicts(d, spec)...)
	diags = append(diags, cfg.ignoreDiags...)
	ignores := append(slices.Clone(cfg.ignores), flags...)
	// An ignore of a rule this run cannot report is not unused: the
	// rollout-* rules are check -base's.
	// form-key-spelling is the strict server's.
	ran := func(rule string) bool {
		return rule != augment.RuleNotAugmented && (withBase || !slices.Contains(rollout.BaseRules, rule)) &&
			(rule != compile.RuleFormKeySpelling || !cfg.plainServer)
	}
	return spec, augment.Silence(d, whole, diags, ignores, ran).Sorted(), note
}

// printNote writes note (the operations oapi-codegen leaves out, which
// diagnose returns: file:line:col: note: ..., as init's notes), when not
// "", on stderr: a line beside the diagnostics, not one of them (no rule,
// and nothing to silence), so never on stdout, whatever -format.
func printNote(stderr io.Writer, note string) {
	if note != "" {
		fmt.Fprintln(stderr, note)
	}
}

// strictRules are the warnings of the loader and compiler that -strict
// makes errors, as augment does with the spec-consistency ones: a contract
// an overlay or the spec meant to give and that does not apply (a typo in
// an overlay target, an operation that declares a key but got no
// contract). They stay ignorable.
var strictRules = []string{"overlay-no-match", "key-without-contract"}

// reporter reports the diagnostics of a command that may run several
// times (one config after another): in text, each list at once on stderr;
// in JSON, all of them as one array on out, by flush. A diagnostic reported
// already (same file, line, column, severity, rule and message: two
// configs that read one spec) is not reported again.
type reporter struct {
	format      string
	out, stderr io.Writer
	all         diag.List
	seen        map[reported]bool
}

// reported is what tells a diagnostic from another for the reporter.
type reported struct {
	file          string
	line, col     int
	severity      diag.Severity
	rule, message string
}

// report reports diags.
func (r *reporter) report(diags diag.List) {
	if r.seen == nil {
		r.seen = map[reported]bool{}
	}
	fresh := diags[:0:0]
	for _, d := range diags {
		k := reported{d.Pos.File, d.Pos.Line, d.Pos.Col, d.Severity, d.Rule, d.Message}
		if !r.seen[k] {
			r.seen[k] = true
			fresh = append(fresh, d)
		}
	}
	diags = fresh
	if r.format == "json" {
		r.all = append(r.all, diags...)
		return
	}
	_ = diags.WriteText(r.stderr)
}

// flush writes the JSON array of what was reported (-format json).
func (r *reporter) flush() {
	if r.format == "json" {
		_ = r.all.WriteJSON(r.out)
	}
}

func report(diags diag.List, format string, stdout, stderr io.Writer) {
	if format == "json" {
		_ = diags.WriteJSON(stdout)
		return
	}
	_ = diags.WriteText(stderr)
}

// Config is the idemgen.yaml file, in the style of oapi-codegen's.
type Config struct {
	Package  string            `yaml:"package"`
	Output   string            `yaml:"output"` // output directory
	Spec     string            `yaml:"spec"`
	Overlays []string          `yaml:"overlays"`
	Generate map[string]bool   `yaml:"generate"` // emitter name -> on
	Options  map[string]string `yaml:"options"`  // emitter settings
	// NameNormalizer is oapi-codegen's output-options.name-normalizer;
	// OapiCodegenConfig names oapi-codegen's configuration file, which
	// idemgen reads it from (with additional-initialisms). Both make idemgen
	// name oapi-codegen's types as oapi-codegen does.
	NameNormalizer    string `yaml:"name-normalizer"`
	OapiCodegenConfig string `yaml:"oapi-codegen-config"`
	// ReplayedHeader false: idemgen spec declares no Idempotent-Replayed
	// header on the responses (augment.Options.NoReplayedHeader), so that
	// oapi-codegen's strict response types keep their shape; check then
	// reports the declarations an earlier idemgen spec wrote as stale.
	ReplayedHeader *bool `yaml:"replayed-header"`
	// Ignore silences warning rules, for the whole spec or for some of
	// its operations (see docs/contract.md, "Silencing a warning").
	Ignore []IgnoreEntry `yaml:"ignore"`

	namer naming.Namer
	// namesOnlyWhy, when not "", is why check keeps only the name
	// collisions of the emitters' checks, as warnings (checkEmitters).
	namesOnlyWhy string
	// oapiServer is what OapiCodegenConfig says about the server code
	// (nil without one): the server emitter's defaults (serverParams).
	oapiServer *oapiServer
	// oapiOutput is what it says about the client and the operations it
	// leaves out (nil without one): clientParams, leaveOut.
	oapiOutput *oapiOutput
	// oapiOverlay warns that oapi-codegen's configuration applies an
	// overlay that overlays: does not list (oapiOverlayDiags): reported by
	// diagnose, with the spec's diagnostics.
	oapiOverlay diag.List
	// plainServer: the handlers are oapi-codegen's plain server's
	// (emitterSettings and checkEmitters set it: plainServer), so
	// form-key-spelling is not reported (compile.Options.PlainServer).
	plainServer bool
	// oapiSkipped, when not "", says why the oapi-codegen.yaml beside the
	// config file is not read (besideOapiCodegenConfig): a note diagnose
	// returns.
	oapiSkipped string
	// ignores are Ignore's entries, one for each rule and operation, and
	// ignoreDiags the errors of those that cannot be (positioned in the
	// config file).
	ignores     []diag.Ignore
	ignoreDiags diag.List
}

// IgnoreEntry is one entry of the config file's ignore: list.
//
//	ignore:
//	  - rule: put-delete
//	    operations: ["DELETE /payments/{id}"]   # none: every operation
//	    reason: DELETE also cancels the payment
type IgnoreEntry struct {
	Rule       string
	Operations []string
	Reason     string

	pos, rulePos ir.Pos
	opPos        []ir.Pos
}

// UnmarshalYAML reads an entry, keeping the positions of its values.
func (e *IgnoreEntry) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: ignore: want entries such as {rule: put-delete, operations: [\"DELETE /payments/{id}\"], reason: ...}", n.Line)
	}
	e.pos = ir.Pos{Line: n.Line, Col: n.Column}
	e.rulePos = e.pos
	scalar := func(k, v *yaml.Node) (string, error) {
		if v.Kind != yaml.ScalarNode {
			return "", fmt.Errorf("line %d: ignore: %s must be a string", v.Line, k.Value)
		}
		return v.Value, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "rule":
			e.Rule, err = scalar(k, v)
			e.rulePos = ir.Pos{Line: v.Line, Col: v.Column}
		case "reason":
			e.Reason, err = scalar(k, v)
		case "operations":
			ops := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				ops = v.Content
			}
			for _, o := range ops {
				s, err := scalar(k, o)
				if err != nil {
					return err
				}
				e.Operations = append(e.Operations, s)
				e.opPos = append(e.opPos, ir.Pos{Line: o.Line, Col: o.Column})
			}
		default:
			err = fmt.Errorf("line %d: ignore: unknown field %s (want rule, operations, reason)", k.Line, k.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loadIgnores turns c.Ignore, read from the config file path, into
// c.ignores, and what is wrong with its entries into c.ignoreDiags.
func (c *Config) loadIgnores(path string) {
	at := func(p ir.Pos) ir.Pos {
		p.File = path
		return p
	}
	for _, e := range c.Ignore {
		name := "ignore: " + e.Rule
		if e.Rule == "" {
			c.ignoreDiags.Errorf(at(e.pos), diag.RuleBadIgnore, "ignore: an entry without rule: (the warning rule to silence)")
			continue
		}
		if msg := diag.CheckIgnoreRule(e.Rule); msg != "" {
			c.ignoreDiags.Errorf(at(e.rulePos), diag.RuleBadIgnore, "ignore: %s", msg)
			continue
		}
		if strings.TrimSpace(e.Reason) == "" {
			c.ignoreDiags.Errorf(at(e.rulePos), diag.RuleBadIgnore, "%s gives no reason: add reason: (why the warning does not apply)", name)
			continue
		}
		if len(e.Operations) == 0 {
			c.ignores = append(c.ignores, diag.Ignore{Rule: e.Rule, Pos: at(e.rulePos), Name: name})
		}
		for i, o := range e.Operations {
			op, ok := operationName(o)
			if !ok {
				c.ignoreDiags.Errorf(at(e.opPos[i]), diag.RuleBadIgnore, "%s: operation %q: want METHOD /path, as diagnostics name operations (e.g. \"DELETE /payments/{id}\")", name, o)
				continue
			}
			c.ignores = append(c.ignores, diag.Ignore{Rule: e.Rule, Ops: []string{op}, Pos: at(e.opPos[i]), Name: name + " for " + op})
		}
	}
}

// operationName normalizes "METHOD /path" (the method in any case).
func operationName(s string) (string, bool) {
	method, path, ok := strings.Cut(strings.TrimSpace(s), " ")
	path = strings.TrimSpace(path)
	if !ok || method == "" || !strings.HasPrefix(path, "/") {
		return "", false
	}
	return ir.Where(method, path), true
}

// ignoreFlag is the repeatable -ignore RULE[:METHOD /path] flag.
type ignoreFlag []diag.Ignore

func (f *ignoreFlag) String() string { return "" }

func (f *ignoreFlag) Set(s string) error {
	rule, op, per := strings.Cut(s, ":")
	if msg := diag.CheckIgnoreRule(rule); msg != "" {
		return errors.New(msg)
	}
	ig := diag.Ignore{Rule: rule, Pos: ir.Pos{File: "command line"}, Name: "-ignore " + s}
	if per {
		name, ok := operationName(op)
		if !ok {
			return fmt.Errorf("want RULE or RULE:METHOD /path (e.g. put-delete:DELETE /payments/{id}), not %q", s)
		}
		ig.Ops = []string{name}
	}
	*f = append(*f, ig)
	return nil
}

// ignoreFlagUsage is the -ignore flag's help.
const ignoreFlagUsage = "silence the warnings of `RULE` (RULE:METHOD /path: of that operation only; repeatable), as ignore: in idemgen.yaml does"

// LoadConfig reads an idemgen.yaml file; relative paths in it are relative
// to the file's directory, and without output: the output directory is the
// file's directory (for generate and check -generated alike). Unknown
// fields are an error. Without oapi-codegen-config:, the oapi-codegen.yaml
// beside it is read when it configures the same package and output
// directory (besideOapiCodegenConfig).
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w%s", path, err, optionsHint(data))
	}
	base := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || p == "-" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	c.Spec = rel(c.Spec)
	c.Output = rel(c.Output)
	if c.Output == "" {
		c.Output = base
	}
	for i := range c.Overlays {
		c.Overlays[i] = rel(c.Overlays[i])
	}
	// oapi-codegen's configuration is read once, for the namer and the
	// server settings.
	var oapi *oapiFile
	var oapiErr error
	c.OapiCodegenConfig = rel(c.OapiCodegenConfig)
	if c.OapiCodegenConfig == "" {
		c.OapiCodegenConfig, oapi, c.oapiSkipped = c.besideOapiCodegenConfig(base)
	} else {
		oapi, oapiErr = readOapiFile(c.OapiCodegenConfig)
	}
	if c.namer, err = c.loadNamer(oapi, oapiErr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if oapi != nil {
		c.oapiServer = serverOf(c.OapiCodegenConfig, oapi)
		c.oapiOutput = outputOf(c.OapiCodegenConfig, oapi)
		c.oapiOverlay = c.oapiOverlayDiags(path, c.OapiCodegenConfig, oapi)
	}
	c.loadIgnores(path)
	return &c, nil
}

// replayedHeaderFlag defines the -replayed-header flag of spec and check.
func replayedHeaderFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("replayed-header", true, "declare the Idempotent-Replayed header on the responses that may be replays (false: leave it out, so that oapi-codegen's strict response types keep their shape; default: replayed-header: in the config, else true)")
}

// noReplayedHeader reports whether the Idempotent-Replayed header is left
// out: -replayed-header when given on fs's command line (fs nil: never),
// else c's replayed-header, else not.
func (c *Config) noReplayedHeader(fs *flag.FlagSet) bool {
	if fs != nil && flagSet(fs, "replayed-header") {
		return fs.Lookup("replayed-header").Value.String() == "false"
	}
	return c.ReplayedHeader != nil && !*c.ReplayedHeader
}

// loadNamer returns the Namer of c's name-normalizer and oapi, the file
// c.OapiCodegenConfig as readOapiFile returned it (nil, nil without one),
// which must agree when both are set.
func (c *Config) loadNamer(oapi *oapiFile, oapiErr error) (naming.Namer, error) {
	direct, err := naming.New(c.NameNormalizer, nil)
	if err != nil {
		return naming.Namer{}, err
	}
	if oapiErr != nil {
		return naming.Namer{}, oapiErr
	}
	if oapi == nil {
		return direct, nil
	}
	n, err := naming.FromOutputOptions(oapi.OutputOptions)
	if err != nil {
		return naming.Namer{}, fmt.Errorf("oapi-codegen-config %s: %w", c.OapiCodegenConfig, err)
	}
	if c.NameNormalizer != "" && direct.Normalizer() != n.Normalizer() {
		return naming.Namer{}, fmt.Errorf("name-normalizer %q disagrees with oapi-codegen-config %s (%q); keep one", c.NameNormalizer, c.OapiCodegenConfig, n.Normalizer())
	}
	return n, nil
}

const generateExamples = `  idemgen generate -emit ir -o gen/ openapi.yaml
  idemgen generate -emit server -package api -o internal/api openapi.yaml
  idemgen generate -emit server -option server.strict=false -package api -o internal/api openapi.yaml
  idemgen generate -emit server -option server.router=gin -package api -o internal/api openapi.yaml
  idemgen generate -emit server -emit client -package api -o internal/api openapi.yaml
  idemgen generate -emit ir -o - openapi.yaml          # the IR as JSON on stdout
  idemgen generate -config idemgen.yaml
  idemgen generate -config svc1/idemgen.yaml -config svc2/idemgen.yaml

idemgen.yaml (paths relative to the file):
  package: api
  output: internal/api
  spec: openapi.yaml
  overlays: [idempotency.overlay.yaml]
  generate: {ir: true, server: true, client: true, docs: true}
  oapi-codegen-config: oapi-codegen.yaml   # name types under its name-normalizer; server.strict and
                                           # server.router default to its generate: section
  ignore: [{rule: put-delete, operations: ["DELETE /payments/{id}"], reason: also refunds}]

Flags override the file. Without -o, output: or a config, files go to the
current directory; with a config and no output:, to the config file's
directory. Nothing is written when the spec has errors or any emitter fails;
files are written atomically. Exit status: 0 written, 1 errors, 2 usage.
`

func generate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("generate", generateExamples, stderr)
	var overlays, emits, options listFlag
	var configs listFlag
	fs.Var(&configs, "config", "read settings from this idemgen.yaml `FILE` (repeatable: each config is generated in turn)")
	fs.Var(&overlays, "overlay", "apply this OpenAPI Overlay 1.0 `FILE` first (repeatable)")
	fs.Var(&emits, "emit", "run the emitter `NAME` (repeatable; available: "+strings.Join(emitter.Names(), ", ")+")")
	out := fs.String("o", "", "output `DIR` (- writes the output of the one selected emitter to stdout, and diagnostics to stderr)")
	pkg := fs.String("package", "", "Go package `NAME` of generated code")
	fs.Var(&options, "option", "set an emitter option `NAME=VALUE` (repeatable; overrides options: in the config), e.g. server.strict=false")
	var ignores ignoreFlag
	fs.Var(&ignores, "ignore", ignoreFlagUsage)
	format := formatFlag(fs)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if len(configs) > 1 && (fs.NArg() > 0 || len(overlays) > 0 || *out != "" || *pkg != "") {
		return usageError(fs, "with several -config, SPEC, -overlay, -o and -package are not allowed (each config names its own)")
	}
	if len(configs) == 0 {
		configs = listFlag{""}
	}
	r := &reporter{format: *format, out: stdout, stderr: stderr}
	code := ExitOK
	for _, c := range configs {
		code = max(code, generateOne(fs, c, overlays, emits, options, ignores, *out, *pkg, r, stdout, stderr))
	}
	r.flush()
	return code
}

// generateOne is generate for one config file (configPath; "": none),
// reporting diagnostics to r.
func generateOne(fs *flag.FlagSet, configPath string, overlays, emits, options []string, ignores []diag.Ignore, out, pkg string, r *reporter, stdout, stderr io.Writer) int {
	cfg := &Config{}
	if configPath != "" {
		c, err := LoadConfig(configPath)
		if err != nil {
			fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
			return ExitUsage
		}
		cfg = c
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "idemgen generate: want at most one SPEC file")
		return ExitUsage
	}
	if fs.NArg() == 1 {
		cfg.Spec = fs.Arg(0)
	}
	if len(overlays) > 0 {
		cfg.Overlays = overlays
	}
	if out != "" {
		cfg.Output = out
	}
	if pkg != "" {
		cfg.Package = pkg
	}
	if cfg.Output == "" { // no config file, no -o
		cfg.Output = "."
	}
	names := dedupe(emits) // -emit ir -emit ir runs ir once
	if len(names) == 0 {
		names = sortedTrue(cfg.Generate)
	}
	if cfg.Spec == "" || len(names) == 0 {
		msg := "need a SPEC and at least one emitter (-emit or generate: in the config)"
		if configPath == "" {
			if _, err := os.Stat(DefaultConfig); err == nil {
				msg += "; no -config given: to use the " + DefaultConfig + " of the current directory, run idemgen generate -config " + DefaultConfig
			} else {
				msg += "; no -config given, and no " + DefaultConfig + " in the current directory"
			}
		}
		return usageError(fs, "%s", msg)
	}
	params := cfg.Options
	if len(options) > 0 {
		params = maps.Clone(params)
		if params == nil {
			params = map[string]string{}
		}
		for _, o := range options {
			k, v, ok := strings.Cut(o, "=")
			if !ok {
				fmt.Fprintf(stderr, "idemgen generate: -option %s: want NAME=VALUE (e.g. server.strict=false)\n", o)
				return ExitUsage
			}
			params[k] = v
		}
	}
	params, err := cfg.emitterSettings(names, params)
	if err != nil {
		fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		return ExitUsage
	}
	if cfg.Output == "-" && len(names) != 1 {
		// Go, Markdown and JSON concatenated on stdout are no file of any kind.
		fmt.Fprintf(stderr, "idemgen generate: -o - writes one output to stdout, and %s selected (%s); choose one with -emit, or write to a directory\n", english.Count(len(names), "emitter is", "emitters are"), strings.Join(names, ", "))
		return ExitUsage
	}
	// With -o -, stdout carries the generated files: diagnostics (JSON
	// included) go to stderr, so that the output stays one clean stream.
	if cfg.Output == "-" {
		r.out = stderr
	}
	spec, diags, note := diagnose(cfg, false, ignores, cfg.noReplayedHeader(nil), pathFallbacks(names, params), false)
	printNote(stderr, note)
	r.report(diags)
	if diags.HasErrors() {
		return ExitError
	}
	files, err := emitter.Run(names, spec, cfg.emitterOptions(params))
	if err != nil {
		var el *diag.ErrorList
		if errors.As(err, &el) {
			r.report(el.List)
		} else {
			fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		}
		return ExitError
	}
	if cfg.Output == "-" {
		if len(files) != 1 {
			fmt.Fprintf(stderr, "idemgen generate: -o -: the emitter wrote %s, not one\n", english.Count(len(files), "file"))
			return ExitError
		}
		if _, err := stdout.Write(files[0].Data); err != nil {
			return ExitError
		}
		return ExitOK
	}
	if err := emitter.Write(cfg.Output, files); err != nil {
		fmt.Fprintf(stderr, "idemgen generate: %v\n", err)
		return ExitError
	}
	return ExitOK
}

// emitterOptions are what the emitters get for c with the emitter settings
// params: the same for generate and check -generated, so that check
// compares with what generate writes (idemgen's version included, which the
// Go emitters put in their headers).
func (c *Config) emitterOptions(params map[string]string) emitter.Options {
	return emitter.Options{Package: c.Package, Output: c.Output, Params: params, Version: buildVersion()}
}

func sortedTrue(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func version(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "  idemgen version\n", stderr)
	if code, ok := parse(fs, args, stdout); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, "takes no arguments, got %q", fs.Args())
	}
	fmt.Fprintln(stdout, "idemgen", buildVersion())
	return ExitOK
}

// buildVersion is Version; tests replace it.
var buildVersion = Version

// Version returns the module version idemgen was built from, with the VCS
// revision when the build recorded one.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" && (v == "(devel)" || strings.Contains(v, "-0.")) {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev + dirty
	}
	return v
}
