package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/emit/client"
	"github.com/idemgen/idemgen/generator/emit/server"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// DefaultOapiCodegenConfig is oapi-codegen's configuration file that
// idemgen looks for beside idemgen.yaml when oapi-codegen-config: is not
// set (see besideOapiCodegenConfig).
const DefaultOapiCodegenConfig = "oapi-codegen.yaml"

// oapiServer is what oapi-codegen's configuration says about the server
// code it generates, which idemgen's server wrapper is written against.
type oapiServer struct {
	path   string // the configuration file
	strict bool   // generate.strict-server
	// router is the server.router the generate: section implies ("" when
	// it generates no server), and routerKey the oapi-codegen setting.
	router, routerKey string
	// unsupported is a server oapi-codegen generates that idemgen has no
	// wrapper for (fiber-server, iris-server, ...).
	unsupported string
	// firstToLast: oapi-codegen applies the server options' Middlewares
	// first to last (compatibility.apply-chi-middleware-first-to-last for
	// std-http and chi, apply-gorilla-middleware-first-to-last for
	// gorilla): server.middleware-first-to-last. firstToLastKey is that
	// compatibility setting's name, "" for a router without one.
	firstToLast    bool
	firstToLastKey string
}

// oapiFile is the part of oapi-codegen's configuration idemgen reads. It
// is read and decoded once (readOapiFile) for all that idemgen takes from
// it: the choice of the file beside idemgen.yaml (package:, output:), the
// Namer (output-options:) and the server settings (generate:).
type oapiFile struct {
	Package       string                       `yaml:"package"`
	Output        string                       `yaml:"output"`
	Generate      codegen.GenerateOptions      `yaml:"generate"`
	OutputOptions codegen.OutputOptions        `yaml:"output-options"`
	Compatibility codegen.CompatibilityOptions `yaml:"compatibility"`

	// overlayPos is where the file sets output-options.overlay.path.
	overlayPos ir.Pos
	// filterPos is where the file sets each of the output-options that
	// leave operations out (filterKeys), by key: the key's position.
	filterPos map[string]ir.Pos
}

// filterKeys are the output-options with which oapi-codegen leaves
// operations out, in the order a note names them.
var filterKeys = []string{"include-tags", "exclude-tags", "include-operation-ids", "exclude-operation-ids"}

// readOapiFile reads and decodes the oapi-codegen configuration at path;
// its errors are those idemgen.yaml's oapi-codegen-config: reports.
func readOapiFile(path string) (*oapiFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("oapi-codegen-config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("oapi-codegen-config %s: %w", path, err)
	}
	var f oapiFile
	if doc.Kind != 0 { // not empty
		if err := doc.Decode(&f); err != nil {
			return nil, fmt.Errorf("oapi-codegen-config %s: %w", path, err)
		}
	}
	f.overlayPos = nodePos(path, &doc, "output-options", "overlay", "path")
	f.filterPos = map[string]ir.Pos{}
	for _, k := range filterKeys {
		f.filterPos[k] = keyPos(path, &doc, "output-options", k)
	}
	// A file without generate: gets oapi-codegen's defaults (an echo
	// server, models, the embedded spec), as oapi-codegen reads it.
	f.Generate = codegen.Configuration{Generate: f.Generate}.UpdateDefaults().Generate
	return &f, nil
}

// serverOf returns what f's generate: section says about the server.
func serverOf(path string, f *oapiFile) *oapiServer {
	g := f.Generate
	s := &oapiServer{path: path, strict: g.Strict}
	for _, r := range []struct {
		on       bool
		key, set string
	}{
		{g.StdHTTPServer, "std-http-server", "std-http"},
		{g.ChiServer, "chi-server", "chi"},
		{g.GorillaServer, "gorilla-server", "gorilla"},
		{g.EchoServer, "echo-server", "echo"},
		{g.GinServer, "gin-server", "gin"},
		{g.Echo5Server, "echo5-server", ""},
		{g.FiberServer, "fiber-server", ""},
		{g.FiberV3Server, "fiber-v3-server", ""},
		{g.IrisServer, "iris-server", ""},
	} {
		switch {
		case !r.on:
		case r.set == "":
			s.unsupported = r.key
		case s.routerKey == "":
			s.router, s.routerKey = r.set, r.key
		}
	}
	switch s.router {
	case "std-http", "chi":
		s.firstToLast, s.firstToLastKey = f.Compatibility.ApplyChiMiddlewareFirstToLast, "apply-chi-middleware-first-to-last"
	case "gorilla":
		s.firstToLast, s.firstToLastKey = f.Compatibility.ApplyGorillaMiddlewareFirstToLast, "apply-gorilla-middleware-first-to-last"
	}
	return s
}

// besideOapiCodegenConfig returns the oapi-codegen.yaml in dir (the
// directory of idemgen.yaml), read, when it is, without doubt, the
// configuration of the package idemgen generates into: its package: is
// c.Package (when both are set) and its output: file is in c.Output. Else
// "" and nil (also when it cannot be read or decoded), and, when the file
// is there but configures another package or output directory, why it is
// not read (skipped): idemgen's files and oapi-codegen's would then not
// make one package, which go build reports much later ("found packages
// api and apiv2").
func (c *Config) besideOapiCodegenConfig(dir string) (path string, f *oapiFile, skipped string) {
	path = filepath.Join(dir, DefaultOapiCodegenConfig)
	if _, err := os.Stat(filepath.Join(dir, "oapi-codegen.yml")); err == nil {
		return "", nil, "" // two candidates
	}
	f, err := readOapiFile(path)
	if err != nil {
		return "", nil, ""
	}
	if f.Package == "" || c.Package != "" && f.Package != c.Package {
		if f.Package != "" {
			skipped = fmt.Sprintf("%s: warning: not read: its package: %s is not package: %s of idemgen's config; idemgen's files and oapi-codegen's, which they refer to, must be one package (else go build fails: \"found packages\"): set the same package: in both (if it configures another package, name yours with oapi-codegen-config:)", path, f.Package, c.Package)
		}
		return "", nil, skipped
	}
	if f.Output == "" || c.Output == "" || c.Output == "-" {
		return "", nil, ""
	}
	// oapi-codegen's output is relative to where it runs: go generate runs
	// it in this directory, as idemgen.
	out := f.Output
	if !filepath.IsAbs(out) {
		out = filepath.Join(dir, out)
	}
	if filepath.Clean(filepath.Dir(out)) != filepath.Clean(c.Output) {
		return "", nil, fmt.Sprintf("%s: warning: not read: its output: %s is not in idemgen's output directory %s; idemgen's files and oapi-codegen's, which they refer to, must be one package in one directory: set the same directory in both (if it configures another package, name yours with oapi-codegen-config:)", path, f.Output, c.Output)
	}
	return path, f, ""
}

// serverParams returns params with the server emitter's settings that
// oapi-codegen's configuration implies (server.strict, server.router,
// server.middleware-first-to-last)
// where params does not set them, and an error when params contradicts
// it: the wrapper would refer to code oapi-codegen does not generate. A
// file that generates no server (models and client only, with the server
// in another configuration of the same package, as some projects split
// them) says nothing about it.
func (c *Config) serverParams(params map[string]string, emitters []string) (map[string]string, error) {
	s := c.oapiServer
	if s == nil || !slices.Contains(emitters, server.Name) || s.router == "" && s.unsupported == "" && !s.strict {
		return params, nil
	}
	if s.unsupported != "" {
		return nil, fmt.Errorf("%s generates %s: idemgen's server wrapper supports oapi-codegen's std-http-server, chi-server, gorilla-server, echo-server and gin-server", s.path, s.unsupported)
	}
	out := maps.Clone(params)
	if out == nil {
		out = map[string]string{}
	}
	if v, ok := server.StrictOption.In(params); ok {
		if b, err := strconv.ParseBool(v); err == nil && b && !s.strict && s.router != "" {
			return nil, fmt.Errorf("server.strict is true, but %s does not generate strict-server (StrictHandlerFunc, <Op>RequestObject, ... would be undefined): set strict-server: true there, or drop server.strict (idemgen then takes it from %s)", s.path, s.path)
		}
	} else {
		out[server.StrictOption.String()] = strconv.FormatBool(s.strict)
	}
	if s.router == "" {
		return out, nil // strict-server alone: no router to compare with
	}
	if v, ok := server.RouterOption.In(params); ok {
		if v != s.router && v != "none" {
			return nil, fmt.Errorf("server.router is %s, but %s generates %s (server.router: %s): drop server.router (idemgen then takes it from %s), or generate the %s server there", v, s.path, s.routerKey, s.router, s.path, v)
		}
	} else {
		out[server.RouterOption.String()] = s.router
	}
	if v, ok := server.FirstToLastOption.In(params); !ok {
		if s.firstToLast {
			out[server.FirstToLastOption.String()] = "true"
		}
	} else if b, err := strconv.ParseBool(v); err == nil && b != s.firstToLast && s.firstToLastKey != "" {
		return nil, fmt.Errorf("server.middleware-first-to-last is %s, but %s sets compatibility.%s to %t (the order oapi-codegen applies options.Middlewares in: a fallback operation's protection would run outside them, before authentication): drop server.middleware-first-to-last (idemgen then takes it from %s)", v, s.path, s.firstToLastKey, s.firstToLast, s.path)
	}
	return out, nil
}

// oapiOutput is what oapi-codegen's configuration says about the rest of
// the code idemgen's files refer to: its client and the operations it
// generates code for.
type oapiOutput struct {
	path       string // the configuration file
	client     bool   // generate.client
	clientType string // output-options.client-type-name ("": Client)
	// The output-options that leave operations out, as oapi-codegen
	// applies them (its filterOperationsByTag, filterOperationsByOperationID).
	includeTags, excludeTags, includeIDs, excludeIDs []string
	// filterPos is where the file sets each of them (oapiFile.filterPos).
	filterPos map[string]ir.Pos
}

func outputOf(path string, f *oapiFile) *oapiOutput {
	o := f.OutputOptions
	return &oapiOutput{
		path: path, client: f.Generate.Client, clientType: o.ClientTypeName,
		includeTags: o.IncludeTags, excludeTags: o.ExcludeTags, includeIDs: o.IncludeOperationIDs, excludeIDs: o.ExcludeOperationIDs,
		filterPos: f.filterPos,
	}
}

// clientParams returns params with client.oapi-client-type set from
// oapi-codegen's client-type-name (where params does not set it), and an
// error when the client emitter is among emitters while oapi-codegen's
// configuration generates no client: the helpers would refer to
// <Op>Response, ClientWithResponses, ... that do not exist.
func (c *Config) clientParams(params map[string]string, emitters []string) (map[string]string, error) {
	o := c.oapiOutput
	if o == nil || !slices.Contains(emitters, client.Name) {
		return params, nil
	}
	if !o.client {
		return nil, fmt.Errorf("the client emitter is on (generate: {client: true}), but %s does not generate oapi-codegen's client (ClientWithResponses, <Op>Response, ... would be undefined): set client: true in its generate: section, or turn idemgen's client off", o.path)
	}
	if _, ok := client.OapiTypeOption.In(params); ok || o.clientType == "" {
		return params, nil
	}
	out := maps.Clone(params)
	if out == nil {
		out = map[string]string{}
	}
	out[client.OapiTypeOption.String()] = o.clientType
	return out, nil
}

// omits reports whether oapi-codegen leaves op out under o's
// include-tags, exclude-tags, include-operation-ids and
// exclude-operation-ids.
func (o *oapiOutput) omits(op *openapi3.Operation) bool {
	hasTag := func(tags []string) bool {
		return slices.ContainsFunc(op.Tags, func(t string) bool { return slices.Contains(tags, t) })
	}
	switch {
	case len(o.excludeTags) > 0 && hasTag(o.excludeTags),
		len(o.includeTags) > 0 && !hasTag(o.includeTags),
		slices.Contains(o.excludeIDs, op.OperationID),
		len(o.includeIDs) > 0 && !slices.Contains(o.includeIDs, op.OperationID):
		return true
	}
	return false
}

// leaveOut removes from spec the operations (and routes) oapi-codegen
// leaves out under c's oapi-codegen configuration, so that no emitter
// refers to the types oapi-codegen does not declare for them, and returns
// a note naming the idempotent ones ("" when there are none), at the first
// of the output-options that leave operations out in the file
// (file:line:col: note: ..., as init's notes).
func (c *Config) leaveOut(doc *openapi3.T, spec *ir.Spec) string {
	o := c.oapiOutput
	if o == nil || doc == nil || doc.Paths == nil || len(o.includeTags)+len(o.excludeTags)+len(o.includeIDs)+len(o.excludeIDs) == 0 {
		return ""
	}
	omitted := map[string]bool{} // "METHOD /path"
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op != nil && o.omits(op) {
				omitted[ir.Where(method, path)] = true
			}
		}
	}
	var names []string
	spec.Operations = slices.DeleteFunc(slices.Clone(spec.Operations), func(op *ir.Operation) bool {
		if !omitted[op.Where()] {
			return false
		}
		name := op.Where()
		if op.OperationID != "" {
			name += " (" + op.OperationID + ")"
		}
		names = append(names, name)
		return true
	})
	spec.Routes = slices.DeleteFunc(slices.Clone(spec.Routes), func(r ir.Route) bool { return omitted[r.Where()] })
	if len(names) == 0 {
		return ""
	}
	var set []string
	var pos ir.Pos // the first of the keys set, in the file
	for i, list := range [][]string{o.includeTags, o.excludeTags, o.includeIDs, o.excludeIDs} {
		if len(list) == 0 {
			continue
		}
		set = append(set, filterKeys[i])
		p := o.filterPos[filterKeys[i]]
		if pos.Line == 0 || p.Line > 0 && (p.Line < pos.Line || p.Line == pos.Line && p.Col < pos.Col) {
			pos = p
		}
	}
	at := o.path
	if pos.Line > 0 {
		at = fmt.Sprintf("%s:%d:%d", at, pos.Line, pos.Col)
	}
	return fmt.Sprintf("%s: note: oapi-codegen leaves out %s (%s), so idemgen generates nothing for %s: %s",
		at, english.Count(len(names), "idempotent operation"), strings.Join(set, ", "), english.Noun(len(names), "it", "them"), strings.Join(names, ", "))
}

// muxConflicts returns, when oapi-codegen's configuration generates
// std-http-server, a warning [servemux-conflict] for each route of spec
// that net/http's ServeMux would panic on when oapi-codegen's
// HandlerWithOptions registers it ("METHOD /path", the path as
// codegen.SwaggerUriToStdHttpUri writes it): one whose pattern conflicts
// with an earlier route's under its precedence rules (neither more
// specific than the other, Go 1.22), or a pattern it refuses. Each is at
// the later route's path key in d, the spec loaded (where the fix is:
// rename the path; its operation without d), about it and the earlier
// one. The rules
// are the running Go's own: each pattern is registered on a ServeMux and
// the panic recovered, so the routes of an application built with another
// Go version may differ. None otherwise.
func (c *Config) muxConflicts(d *load.Document, spec *ir.Spec) diag.List {
	if c.oapiServer == nil || c.oapiServer.routerKey != "std-http-server" || spec == nil {
		return nil
	}
	pattern := func(r ir.Route) string { return r.Method + " " + codegen.SwaggerUriToStdHttpUri(r.Path) }
	mux := http.NewServeMux()
	var out diag.List
	for i, r := range spec.Routes {
		msg := register(mux, pattern(r))
		if msg == "" {
			continue
		}
		ops := []string{r.Where()}
		// The earlier route it conflicts with: the first that a ServeMux
		// of the two refuses (none when the pattern alone is refused).
		if register(http.NewServeMux(), pattern(r)) == "" {
			for _, e := range spec.Routes[:i] {
				m := http.NewServeMux()
				if register(m, pattern(e)) == "" && register(m, pattern(r)) != "" {
					ops = append([]string{e.Where()}, ops...)
					break
				}
			}
		}
		pos := r.Pos
		if d != nil {
			pos = d.KeyPos(d.Lookup("/paths"), r.Path)
		}
		if pos.IsZero() {
			pos = ir.Pos{File: spec.Source}
		}
		out.Warnf(pos, ruleServeMuxConflict, "%s generates std-http-server, whose ServeMux will panic at startup: %s (rename or remove one of the paths, e.g. with an overlay for oapi-codegen, leave one operation out with exclude-operation-ids, or generate chi-server)", c.oapiServer.path, msg)
		out[len(out)-1].Ops = ops
	}
	return out
}

// register registers pattern on mux and returns why mux panicked, in one
// line ("" when it did not).
func register(mux *http.ServeMux, pattern string) (msg string) {
	defer func() {
		if v := recover(); v != nil {
			// Where the pattern was registered is this function.
			msg = registeredAt.ReplaceAllString(fmt.Sprint(v), "")
			msg = strings.Join(strings.Fields(msg), " ")
		}
	}()
	mux.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	return ""
}

var registeredAt = regexp.MustCompile(` \(registered at [^)]*\)`)
