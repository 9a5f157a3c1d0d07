// Package emitter is the registry of idemgen's emitters: each turns a
// checked IR into files. An emitter registers itself by name from an init
// function; `idemgen generate` runs the selected ones and writes their files
// only when every one succeeded, each file atomically.
package emitter

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/ir"
)

// File is one output file, its path relative to the output directory.
type File struct {
	Path string
	Data []byte
}

// Options are what every emitter gets besides the IR.
type Options struct {
	Package string            // Go package of generated code
	Output  string            // output directory
	Params  map[string]string // emitter-specific settings from the config file
	Version string            // idemgen's version, for the headers of generated files
	// CheckOnly: only the diagnostics are wanted (idemgen check): an
	// emitter may return its files without their data (nil), as the Go
	// emitters do, rather than render them. It must still name them, for
	// Run to find two emitters writing one file.
	CheckOnly bool
}

// CheckPackage returns an error when pkg, the Go package of generated code,
// is not a Go identifier (a keyword or _ included); "" (the emitters'
// default) is fine.
func CheckPackage(pkg string) error {
	if pkg != "" && (!token.IsIdentifier(pkg) || pkg == "_") {
		return fmt.Errorf("package %q is not a valid Go package name (a Go identifier, not a keyword or _, such as api)", pkg)
	}
	return nil
}

// Func is an emitter.
type Func func(spec *ir.Spec, opts Options) ([]File, error)

var (
	mu       sync.RWMutex
	registry = map[string]Func{}
	options  = map[string]bool{} // the settings (Options.Params keys) emitters read
)

// Option is an emitter setting: a key of Options.Params, such as
// server.strict. NewOption is the only way to make one, and it registers
// the name, so that every setting an emitter reads is one CheckParams
// accepts (TestOptionNamesDeclared finds option names read any other way).
type Option struct{ name string }

// NewOption declares the setting name (kept in a package-level variable of
// the emitter that reads it) and registers it.
func NewOption(name string) Option {
	mu.Lock()
	defer mu.Unlock()
	options[name] = true
	return Option{name: name}
}

// String returns the setting's name.
func (o Option) String() string { return o.name }

// In returns the value of the setting in params (Options.Params), and
// whether it is set. It panics for an Option not made by NewOption.
func (o Option) In(params map[string]string) (string, bool) {
	if o.name == "" {
		panic("emitter: an Option not declared with NewOption")
	}
	v, ok := params[o.name]
	return v, ok
}

// OptionNames returns the registered settings, sorted.
func OptionNames() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(options))
	for n := range options {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CheckParams returns an error naming the first (in sorted order) of the
// settings in params that no emitter reads, with the list of those that
// one does: a misspelt setting would otherwise be ignored.
func CheckParams(params map[string]string) error {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		mu.RLock()
		ok := options[k]
		mu.RUnlock()
		if !ok {
			known := OptionNames()
			if len(known) == 0 {
				return fmt.Errorf("unknown option %q: the emitters of this build take none", k)
			}
			if s := diag.Suggest(k, known); s != "" {
				return fmt.Errorf("unknown option %q (did you mean %s?)", k, s)
			}
			return fmt.Errorf("unknown option %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// Register makes an emitter available under name. It panics when the name
// is taken: a programming error, found at init.
func Register(name string, f Func) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("emitter: " + name + " registered twice")
	}
	registry[name] = f
}

// Lookup returns the emitter registered under name.
func Lookup(name string) (Func, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := registry[name]
	return f, ok
}

// Names returns the registered emitter names, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// IRFile is the file name the ir emitter writes.
const IRFile = "idemgen.ir.json"

// VersionComment starts the header comment of a generated Go file that
// names the idemgen version that wrote it (after "// "): check -generated
// tells a file that differs only there.
const VersionComment = "idemgen version: "

func init() {
	Register("ir", func(spec *ir.Spec, opts Options) ([]File, error) {
		// The spec, its overlays and every position's file are written
		// relative to the output directory (as the Go files' Source header),
		// so the file does not depend on the directory idemgen runs from.
		data, err := MarshalIR(spec)
		if err != nil {
			return nil, err
		}
		var rel ir.Spec // a deep copy: the other emitters share spec
		if err := json.Unmarshal(data, &rel); err != nil {
			return nil, err
		}
		rel.Source = RelPath(rel.Source, opts.Output)
		for i, ov := range rel.Overlays {
			rel.Overlays[i] = RelPath(ov, opts.Output)
		}
		relPositions(reflect.ValueOf(&rel), opts.Output)
		data, err = MarshalIR(&rel)
		if err != nil {
			return nil, err
		}
		return []File{{Path: IRFile, Data: data}}, nil
	})
}

// RelPath is path relative to the output directory out when both are known
// (path unchanged otherwise), with slashes on every system: what generated
// files record of the spec, so that they do not depend on the working
// directory idemgen runs from.
func RelPath(path, out string) string {
	if path == "" || path == "-" || out == "" || out == "-" {
		return filepath.ToSlash(path)
	}
	ap, err1 := filepath.Abs(path)
	ao, err2 := filepath.Abs(out)
	if err1 == nil && err2 == nil {
		if rel, err := filepath.Rel(ao, ap); err == nil {
			return filepath.ToSlash(rel)
		}
	}
	return filepath.ToSlash(path)
}

var posType = reflect.TypeFor[ir.Pos]()

// relPositions rewrites the file of every ir.Pos reachable from v with
// RelPath.
func relPositions(v reflect.Value, out string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			relPositions(v.Elem(), out)
		}
	case reflect.Struct:
		if v.Type() == posType {
			if f := v.FieldByName("File"); f.CanSet() && f.String() != "" {
				f.SetString(RelPath(f.String(), out))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				relPositions(v.Field(i), out)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			relPositions(v.Index(i), out)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			e := reflect.New(it.Value().Type()).Elem()
			e.Set(it.Value())
			relPositions(e, out)
			v.SetMapIndex(it.Key(), e)
		}
	}
}

// MarshalIR encodes spec as indented JSON with a final newline.
func MarshalIR(spec *ir.Spec) ([]byte, error) {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// Run runs the named emitters in order and returns all their files; it
// fails, returning no file, when any emitter is unknown or fails, or when
// two emitters produce the same path. The diagnostics of every emitter that
// fails with a *diag.ErrorList come back together, in one; another failure
// comes back alone.
func Run(names []string, spec *ir.Spec, opts Options) ([]File, error) {
	var files []File
	var diags diag.List
	for _, name := range names {
		if _, ok := Lookup(name); !ok {
			return nil, fmt.Errorf("no emitter %q in this build (available: %s)", name, strings.Join(Names(), ", "))
		}
	}
	for _, name := range names {
		f, _ := Lookup(name)
		out, err := f(spec, opts)
		if el := (*diag.ErrorList)(nil); errors.As(err, &el) {
			diags = append(diags, el.List...)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("emitter %s: %w", name, err)
		}
		for _, file := range out {
			if slices.ContainsFunc(files, func(g File) bool { return filepath.Clean(g.Path) == filepath.Clean(file.Path) }) {
				return nil, fmt.Errorf("emitter %s: %s is produced twice", name, file.Path)
			}
			files = append(files, file)
		}
	}
	if len(diags) > 0 {
		return nil, &diag.ErrorList{List: diags.Sorted()}
	}
	return files, nil
}

// Write writes files under dir, each atomically (a temporary file in the
// same directory, renamed over the target), so a reader never sees a half
// written file.
func Write(dir string, files []File) error {
	for _, f := range files {
		path := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
		if err != nil {
			return err
		}
		_, werr := tmp.Write(f.Data)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp.Name(), 0o644)
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), path)
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("writing %s: %w", path, werr)
		}
	}
	return nil
}
