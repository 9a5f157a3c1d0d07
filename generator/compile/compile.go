// Package compile turns an OpenAPI spec with x-idempotency contracts into
// the IR (package generator/ir) and the diagnostics of every contract check:
// it loads the spec (package generator/load), parses and merges each
// contract (package generator/contract), and checks the contracts against
// the rest of the spec: methods, request body schemas, key declarations,
// and the conventions of real APIs.
package compile

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/generator/naming"
)

// Options configure Compile.
type Options struct {
	Overlays []string // OpenAPI Overlay 1.0 files applied before loading, in order
	// Naming names the Go identifiers of oapi-codegen's output: it must
	// follow oapi-codegen's name-normalizer (the zero value is its default).
	Naming naming.Namer
	// PlainServer: the handlers are oapi-codegen's plain server's
	// (server.strict false), which read the request body themselves, so
	// form-key-spelling, about the strict server's form decoder, is not
	// reported. The zero value is the strict server, the default.
	PlainServer bool
}

// RuleFormKeySpelling is the warning about a form body's content key that
// oapi-codegen's strict server does not decode as a form (formBody); not
// reported with Options.PlainServer.
const RuleFormKeySpelling = "form-key-spelling"

// Compile loads the spec at path and compiles its contracts. The returned
// diagnostics are sorted and free of duplicates; the spec is nil only when
// the file could not be loaded at all. A spec returned with errors among the
// diagnostics is partial (operations whose contract is unusable are left
// out) and must not be emitted.
func Compile(path string, opts Options) (*ir.Spec, diag.List) {
	_, spec, diags := LoadAndCompile(path, load.Options{Overlays: opts.Overlays}, opts)
	return spec, diags
}

// LoadAndCompile is Compile for the callers that read the loaded document
// too (loaded with lopts; opts.Overlays is not read): doc is nil when the
// spec could not be loaded. Compiling does not change the document.
func LoadAndCompile(path string, lopts load.Options, opts Options) (doc *load.Document, spec *ir.Spec, diags diag.List) {
	defer recoverInput(path, &spec, &diags)
	doc, diags = load.Load(path, lopts)
	if doc == nil {
		return nil, nil, diags.Sorted()
	}
	c := &compiler{doc: doc, names: opts.Naming, plainServer: opts.PlainServer}
	spec = c.run()
	return doc, spec, append(diags, c.diags...).Sorted()
}

// recoverInput turns a panic into an internal-error diagnostic of the
// spec at path: never crash on input, report it.
func recoverInput(path string, spec **ir.Spec, diags *diag.List) {
	if r := recover(); r != nil {
		*spec = nil
		*diags = append(*diags, diag.Diagnostic{Pos: ir.Pos{File: path}, Severity: diag.Error, Rule: "internal-error",
			Message: fmt.Sprintf("idemgen failed on this spec (please report it): %v", r)}).Sorted()
	}
}

type compiler struct {
	doc         *load.Document
	names       naming.Namer
	plainServer bool // Options.PlainServer
	diags       diag.List
	root        contract.Block
	// inherited are the diagnostics at a field operations inherit (the
	// root's window, say), each with the operations it is about.
	inherited []inheritedDiag
	// inForce are the positions of settings operations inherit that are
	// in force for one of them at least: volatile, unordered and
	// fingerprint-headers where the fingerprint decides
	// (ir.Operation.FingerprintDecides), conflict-status under strict
	// semantics. Their *-no-effect warnings, from the operations where
	// they do nothing, are dropped: the setting is there for the others.
	inForce map[ir.Pos]bool
	// declDiffs are the [key-declared-differently] about required-ness,
	// grouped (declDiff).
	declDiffs []*declDiff
}

type inheritedDiag struct {
	d   diag.Diagnostic
	ops []string
}

// inherit records d, found at a field the operation where inherits: the
// same diagnostic for several operations is reported once, naming them,
// and different ones (another lease, another retry span) stay apart.
func (c *compiler) inherit(d diag.Diagnostic, where string) {
	for i, e := range c.inherited {
		if e.d.Pos == d.Pos && e.d.Severity == d.Severity && e.d.Kind == d.Kind && e.d.Rule == d.Rule && e.d.Message == d.Message {
			c.inherited[i].ops = append(e.ops, where)
			return
		}
	}
	c.inherited = append(c.inherited, inheritedDiag{d, []string{where}})
}

// declDiff is a [key-declared-differently] about the key's required-ness:
// the same contract field (pos) and the same difference (what, had, fix)
// for all of ops, whose declarations are at (file:line:col; a body
// member's schema, "" when not found) with targets (their JSONPaths in the spec, where known).
type declDiff struct {
	pos       ir.Pos
	what, had string
	fix       string
	required  bool // what the fix sets the declaration's required to
	ops, at   []string
	targets   []string // distinct
}

// declDiff records d for the operation where, declared at at.
func (c *compiler) declDiff(d declDiff, where, at, target string) {
	i := slices.IndexFunc(c.declDiffs, func(e *declDiff) bool {
		return e.pos == d.pos && e.what == d.what && e.had == d.had && e.fix == d.fix
	})
	if i < 0 {
		c.declDiffs = append(c.declDiffs, &d)
		i = len(c.declDiffs) - 1
	}
	e := c.declDiffs[i]
	e.ops = append(e.ops, where)
	if at != "" && !slices.Contains(e.at, at) {
		e.at = append(e.at, at)
	}
	if target != "" && !slices.Contains(e.targets, target) {
		e.targets = append(e.targets, target)
	}
}

// flushDeclDiffs adds the recorded declDiffs to c.diags, one for each,
// naming their operations and declarations.
func (c *compiler) flushDeclDiffs() {
	for _, e := range c.declDiffs {
		msg := namedOps(e.ops) + ": " + e.what
		if len(e.at) > 0 {
			msg += " (declared at " + namedList(e.at, "place") + ")"
		}
		msg += " as " + e.had + ": " + e.fix
		var actions []diag.OverlayAction
		var listed []string
		for _, t := range e.targets {
			actions = append(actions, diag.OverlayAction{Target: t, Update: map[string]any{"required": e.required}})
			if len(listed) < maxListedActions {
				listed = append(listed, fmt.Sprintf("{target: %s, update: {required: %t}}", strconv.Quote(t), e.required))
			}
		}
		switch n := len(e.targets); {
		case n == 0:
		case n == 1:
			msg += " (in a spec you do not own, with an overlay action: " + listed[0] + ")"
		case n <= maxListedActions:
			// Every action, each with its declaration's own target (its
			// path and method): one given "such as" was copied for
			// another operation unchanged.
			msg += fmt.Sprintf(" (in a spec you do not own, with these %d overlay actions, one for each declaration: %s)", n, strings.Join(listed, ", "))
		default:
			msg += fmt.Sprintf(" (in a spec you do not own, with an overlay action for each of the %d declarations: %s and %d more, which -format json lists, all %d, in the diagnostic's overlay-actions)", n, strings.Join(listed, ", "), n-len(listed), n)
		}
		c.diags = append(c.diags, diag.Diagnostic{Pos: e.pos, Severity: diag.Error, Rule: "key-declared-differently", Message: msg, Ops: e.ops, Actions: actions})
	}
	c.declDiffs = nil
}

// namedOps names ops as inherited diagnostics do: the first maxNamedOps,
// then how many more.
func namedOps(ops []string) string { return namedList(ops, "operation") }

func namedList(items []string, noun string) string {
	s := strings.Join(items[:min(len(items), maxNamedOps)], ", ")
	if n := len(items) - maxNamedOps; n > 0 {
		s += fmt.Sprintf(" and %d more %s%s", n, noun, english.Plural(n))
	}
	return s
}

// maxNamedOps is how many operations an inherited diagnostic names.
const maxNamedOps = 3

// maxListedActions is how many overlay actions a [key-declared-differently]
// message gives; -format json has them all (diag.Diagnostic.Actions).
const maxListedActions = 5

// flushInherited adds the inherited diagnostics to c.diags, their message
// prefixed with the operations they are about.
func (c *compiler) flushInherited() {
	for _, e := range c.inherited {
		if c.inForce[e.d.Pos] && noEffectRules[e.d.Rule] {
			continue
		}
		e.d.Message = namedOps(e.ops) + ": " + e.d.Message
		e.d.Ops = e.ops
		c.diags = append(c.diags, e.d)
	}
	c.inherited = nil
}

// noEffectRules are the rules of the warnings that an inherited setting
// does nothing under an operation's semantics (contract's noEffect).
var noEffectRules = map[string]bool{
	contract.RuleConflictStatusNoEffect:     true,
	contract.RuleVolatileNoEffect:           true,
	contract.RuleUnorderedNoEffect:          true,
	contract.RuleFingerprintHeadersNoEffect: true,
}

// markInForce records the positions of the settings of the merged block b,
// resolved as res, that are in force for its operation (c.inForce).
func (c *compiler) markInForce(b contract.Block, res contract.Resolved) {
	if c.inForce == nil {
		c.inForce = map[ir.Pos]bool{}
	}
	op := ir.Operation{Policy: res.Policy, Key: res.Key}
	if op.FingerprintDecides() {
		for _, f := range []contract.Field[[]contract.Field[string]]{b.Volatile, b.Unordered, b.FingerprintHeaders} {
			if f.Set {
				c.inForce[f.Pos] = true
			}
		}
	}
	if b.ConflictStatus.Set && res.Policy.Semantics == ir.Strict {
		c.inForce[b.ConflictStatus.Pos] = true
	}
}

// about records that the diagnostics from the n-th on are about the
// operation where (unless they say otherwise), for the ignores that name it.
func (c *compiler) about(n int, where string) {
	for i := n; i < len(c.diags); i++ {
		if c.diags[i].Ops == nil {
			c.diags[i].Ops = []string{where}
		}
	}
}

func (c *compiler) run() *ir.Spec {
	t := c.doc.T
	spec := &ir.Spec{OpenAPI: t.OpenAPI, Source: c.doc.Path, Overlays: c.doc.Overlays, Operations: []*ir.Operation{}}
	if t.Info != nil {
		spec.Title, spec.Version = t.Info.Title, t.Info.Version
	}
	spec.BasePaths = basePaths(t.Servers)
	if n := c.doc.Lookup("/x-idempotency"); n.Node != nil {
		b, ds := contract.Parse(n.Node, contract.Root, c.locator(n))
		c.root = b
		c.diags = append(c.diags, ds...)
		for _, m := range b.ApplyTo {
			switch strings.ToUpper(m.V) {
			case "GET", "HEAD", "OPTIONS", "TRACE", "QUERY":
				c.diags.Errorf(m.Pos, "safe-method", "apply-to: %s is safe by definition and needs no idempotency key", strings.ToUpper(m.V))
			}
		}
	}
	c.misspelled(load.Node{Node: c.doc.Root, File: c.doc.Path}, "at the document root", nil)
	paths := t.Paths.Map()
	// Index the paths mapping once: a lookup per path would scan it each time.
	pathNodes := map[string]load.Node{}
	if pn := c.doc.Deref(c.doc.Lookup("/paths")); pn.Node != nil && pn.Kind == yaml.MappingNode {
		kv := yamlmerge.Pairs(pn.Node)
		for i := 0; i+1 < len(kv); i += 2 {
			k := kv[i].Value
			pathNodes[k] = load.Node{Node: kv[i+1], File: pn.File, Pointer: pn.Pointer + "/" + load.Escape(k)}
		}
	}
	for _, path := range sortedKeys(paths) {
		item := paths[path]
		if item == nil {
			continue
		}
		itemNode, ok := pathNodes[path]
		if !ok {
			itemNode = c.doc.Lookup("/paths/" + load.Escape(path))
		}
		if x := c.doc.LookupFrom(itemNode, "/x-idempotency"); x.Node != nil && itemNode.Node != nil && hasKey(c.doc.Deref(itemNode).Node, "x-idempotency") {
			c.diags.Errorf(c.doc.NodePos(x), "misplaced-field", "x-idempotency belongs on an operation (post, patch, ...), not on the path item %s", path)
		}
		c.misspelled(itemNode, "on the path item "+path, nil)
		ops := item.Operations()
		for _, method := range sortedKeys(ops) {
			if ops[method] == nil {
				continue
			}
			where := ir.Where(method, path)
			c.misspelled(c.doc.LookupFrom(itemNode, "/"+strings.ToLower(method)), "on "+where, []string{where})
			op := c.operation(path, method, item, ops[method], itemNode)
			if op != nil {
				spec.Operations = append(spec.Operations, op)
			}
			route := ir.Route{Method: strings.ToUpper(method), Path: path, GoName: c.names.Operation(ops[method].OperationID, method, path), Idempotent: op != nil}
			route.Pos = c.doc.NodePos(c.doc.LookupFrom(itemNode, "/"+strings.ToLower(method)))
			spec.Routes = append(spec.Routes, route)
		}
	}
	c.flushInherited()
	c.flushDeclDiffs()
	spec.Types = c.types()
	for _, err := range spec.Validate() {
		switch e := err.(type) {
		case *ir.CollisionError:
			c.diags.Errorf(e.Pos, "go-name-collision", "%v", e)
		case *ir.InvalidNameError:
			c.diags.Errorf(e.Pos, "go-name-invalid", "%v", e)
		default:
			c.diags.Errorf(ir.Pos{File: c.doc.Path}, "go-name-collision", "%v", e)
		}
	}
	return spec
}

// basePaths returns the paths of servers for ir.Spec.BasePaths: each URL
// with its variables replaced by their default values, its path resolved
// against "/" ("." and ".." segments resolved), escaped; without the URLs
// that do not parse or keep a variable the server does not declare,
// without repeats, and without the root path "/" (a URL without a path):
// the root is no base path. Every path is under it, whatever the base
// path a client really sends to, so that reading a request under it could
// take POST /orders under an undeclared /acme/v1 for tenant acme's POST
// /{tenant}/v1/orders and retry it.
func basePaths(servers openapi3.Servers) []string {
	var out []string
	root := &url.URL{Path: "/"}
	for _, s := range servers {
		if s == nil {
			continue
		}
		raw := s.URL
		for _, name := range slices.Sorted(maps.Keys(s.Variables)) {
			if v := s.Variables[name]; v != nil {
				raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
			}
		}
		if strings.ContainsAny(raw, "{}") {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		p := root.ResolveReference(&url.URL{Path: u.Path, RawPath: u.RawPath}).EscapedPath()
		if p != "/" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// types lists the Go types oapi-codegen declares for the components, by
// name (x-go-name honoured, as oapi-codegen does for definitions that are
// not references).
func (c *compiler) types() []ir.Decl {
	comp := c.doc.T.Components
	if comp == nil {
		return nil
	}
	var out []ir.Decl
	add := func(kind, name string, ext map[string]any, isRef bool) {
		goName := ""
		if s, ok := ext["x-go-name"].(string); ok && !isRef {
			goName = s
		}
		pos := c.doc.NodePos(c.doc.Lookup("/components/" + kind + "/" + load.Escape(name)))
		if pos.IsZero() {
			pos = ir.Pos{File: c.doc.Path, Pointer: "/components/" + kind + "/" + load.Escape(name)}
		}
		out = append(out, ir.Decl{Name: c.names.Schema(name, goName), What: strings.TrimSuffix(kind, "s") + " " + name, Pos: pos})
	}
	for _, name := range sortedKeys(comp.Schemas) {
		if r := comp.Schemas[name]; r != nil && r.Value != nil {
			add("schemas", name, r.Value.Extensions, r.Ref != "")
		}
	}
	for _, name := range sortedKeys(comp.Parameters) {
		if r := comp.Parameters[name]; r != nil && r.Value != nil {
			add("parameters", name, r.Value.Extensions, r.Ref != "")
		}
	}
	for _, name := range sortedKeys(comp.Responses) {
		if r := comp.Responses[name]; r != nil && r.Value != nil {
			add("responses", name, r.Value.Extensions, r.Ref != "")
		}
	}
	for _, name := range sortedKeys(comp.RequestBodies) {
		if r := comp.RequestBodies[name]; r != nil && r.Value != nil {
			add("requestBodies", name, r.Value.Extensions, r.Ref != "")
		}
	}
	slices.SortStableFunc(out, func(a, b ir.Decl) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func hasKey(n *yaml.Node, key string) bool {
	if n == nil || n.Kind != yaml.MappingNode {
		return false
	}
	return yamlmerge.Value(n, key) != nil
}

func (c *compiler) locator(base load.Node) contract.Locator {
	return func(n *yaml.Node, ptr string) ir.Pos {
		return c.doc.Pos(n, base.File, base.Pointer+ptr)
	}
}

// keyPos is the position of the operation's method key (`post:`) in
// itemNode, for a diagnostic about the whole operation; opPos (its first
// field) when that is unknown.
func (c *compiler) keyPos(itemNode load.Node, method string, opPos ir.Pos) ir.Pos {
	if p := c.doc.KeyPos(itemNode, strings.ToLower(method)); p.Line > 0 {
		return p
	}
	return opPos
}

func (c *compiler) operation(path, method string, item *openapi3.PathItem, op *openapi3.Operation, itemNode load.Node) *ir.Operation {
	if op == nil {
		return nil
	}
	method = strings.ToUpper(method)
	opNode := c.doc.LookupFrom(itemNode, "/"+strings.ToLower(method))
	opPos := c.doc.NodePos(opNode)
	if opPos.IsZero() {
		opPos = ir.Pos{File: c.doc.Path, Pointer: "/paths/" + load.Escape(path) + "/" + strings.ToLower(method)}
	}
	where := ir.Where(method, path)
	defer c.about(len(c.diags), where)

	// Is the operation idempotent, and by which block?
	var block contract.Block
	ext := c.doc.LookupFrom(opNode, "/x-idempotency")
	if ext.Node == nil {
		if v, ok := op.Extensions["x-idempotency"]; ok {
			// Not found in the node tree (a remote $ref): fall back to
			// kin-openapi's value, positioned at the operation.
			var n yaml.Node
			if err := n.Encode(v); err == nil {
				ext = load.Node{Node: &n, File: opPos.File, Pointer: opPos.Pointer + "/x-idempotency"}
			}
		}
	}
	switch {
	case ext.Node != nil:
		b, ds := contract.Parse(ext.Node, contract.Operation, c.fixedLocator(ext, opPos))
		c.diags = append(c.diags, ds...)
		if b.Enabled.Set && !b.Enabled.V {
			return nil
		}
		if !b.Enabled.Set { // wrong type: already reported
			return nil
		}
		block = b
	case c.applies(method):
		block.Pos = c.applyToPos(method)
	default:
		if load.ContractMethod(method) {
			if ks := DetectKeys(op, item.Parameters); len(ks) > 0 {
				c.diags.Warnf(c.keyPos(itemNode, method, opPos), "key-without-contract", "%s declares the idempotency key %s %s but has no x-idempotency contract", where, ks[0].Carrier, ks[0].Name)
			}
		}
		return nil
	}

	switch method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "QUERY":
		c.diags.Errorf(block.Pos, "safe-method", "x-idempotency on %s: %s is safe by definition and needs no idempotency key", where, method)
		return nil
	}
	if load.IdempotentMethod(method) {
		c.diags.Warnf(block.Pos, "put-delete", "x-idempotency on %s: %s is idempotent by HTTP semantics; a key only helps if the handler has side effects beyond the resource state (notifications, payments)", where, method)
	}

	merged := contract.Merge(c.root, block)
	res, ds, ok := contract.Resolve(merged)
	own := blockPositions(block)
	if ok {
		c.markInForce(merged, res)
	}
	for _, d := range ds {
		if own[d.Pos] {
			c.diags = append(c.diags, d)
		} else {
			c.inherit(d, where)
		}
	}
	goName := c.names.Operation(op.OperationID, method, path)
	names := naming.Names(goName)
	out := &ir.Operation{
		OperationID: op.OperationID,
		GoName:      goName,
		Method:      method,
		Path:        path,
		Summary:     op.Summary,
		Description: op.Description,
		Tags:        op.Tags,
		Policy:      res.Policy,
		Key:         res.Key,
		Pos:         opPos,
		ContractPos: block.Pos,
	}
	params := mergeParamRefs(item.Parameters, op.Parameters, "/paths/"+load.Escape(path)+"/parameters", opNode.Pointer+"/parameters")
	var hasParamsObject bool
	for _, p := range params {
		if p.v.In != "path" && p.v.In != "" {
			hasParamsObject = true
		}
	}
	for _, name := range pathTemplateParams(path) {
		for _, p := range params {
			if p.v.In == "path" && p.v.Name == name {
				out.PathParams = append(out.PathParams, c.irParam(p, goName))
			}
		}
	}
	out.Names = ir.Names{
		Handler:        names.Handler,
		RequestObject:  names.RequestObject,
		ResponseObject: names.ResponseObject,
		ClientMethod:   names.Handler,
		WithResponse:   names.WithResponse,
		ResponseType:   names.ResponseType,
	}
	if hasParamsObject {
		out.Names.Params = names.Params
	}
	out.Body = c.body(op, names)
	c.rawBodyStrict(out, where)
	if out.Body != nil {
		out.Names.ClientWithBody = names.ClientWithBody
		out.Names.WithBodyWithResponse = names.WithBodyWithResponse
		if out.Body.GoType != "" {
			out.Names.JSONRequestBody = names.JSONRequestBody
		} else {
			out.Names.ClientMethod = names.ClientWithBody
			out.Names.WithResponse = names.WithBodyWithResponse
		}
	}

	// A key carrier refused by the parser (a cookie, a bad header name)
	// leaves the key unusable: its checks would be about the default key.
	keyRefused := !merged.Key.Carrier.Set && !merged.Key.Carrier.Pos.IsZero()
	if !keyRefused {
		c.checkKey(out, op, opNode, item.Parameters, params, merged)
	}
	c.checkPointers(out, op, merged)
	c.formBody(out, opNode, merged)
	c.checkResponseHeaders(out, op, opNode)
	c.checkRequestHeaders(out, params)
	if !ok || keyRefused {
		return nil // no semantics or no key (reported): checked, but left out
	}
	return out
}

// checkResponseHeaders warns of a header a 2xx response of op declares that
// a replay would drop: one response.headers does not list, and that
// contract.ReplayCandidate says belongs there.
func (c *compiler) checkResponseHeaders(out *ir.Operation, op *openapi3.Operation, opNode load.Node) {
	for _, h := range DeclaredResponseHeaders(op) {
		if slices.ContainsFunc(out.Policy.Response.Headers, func(l string) bool { return http.CanonicalHeaderKey(l) == http.CanonicalHeaderKey(h.Name) }) {
			continue
		}
		pos := c.doc.NodePos(c.doc.LookupFrom(opNode, "/responses/"+load.Escape(h.Status)+"/headers/"+load.Escape(h.Name)))
		if pos.Line == 0 {
			pos = out.Pos
		}
		c.diags.Warnf(pos, "response-header-not-replayed", "the %s response of %s declares the header %s, which a replay drops: list it in response.headers to replay it", h.Status, out.Where(), h.Name)
	}
}

// RuleHeaderNotFingerprinted is the rule of the warning that an
// idempotent operation declares a request header fingerprint-headers does
// not list.
const RuleHeaderNotFingerprinted = "header-not-fingerprinted"

// checkRequestHeaders warns of a header parameter the operation (or its
// path item) declares that the fingerprint does not cover and that
// UnfingerprintedHeader says may change what the request asks. Not where
// the fingerprint decides nothing (ir.Operation.FingerprintDecides: loose
// semantics, window with the key required), where fingerprint-headers has
// no effect.
func (c *compiler) checkRequestHeaders(out *ir.Operation, params []paramRef) {
	if !out.FingerprintDecides() {
		return
	}
	sem := out.Policy.Semantics
	keyHeader := KeyHeader(out.Key.Carrier, out.Key.Name)
	// A header the path item and the operation both declare, in another
	// case (mergeParamRefs keeps both), is reported once, at the
	// operation's, which comes later.
	var hs []paramRef
	for _, p := range params {
		if p.v.In != "header" || !UnfingerprintedHeader(c.doc.T, p.v.Name, keyHeader, out.Policy.FingerprintHeaders) {
			continue
		}
		if i := slices.IndexFunc(hs, func(h paramRef) bool {
			return strings.EqualFold(strings.TrimSpace(h.v.Name), strings.TrimSpace(p.v.Name))
		}); i >= 0 {
			hs[i] = p
			continue
		}
		hs = append(hs, p)
	}
	for _, p := range hs {
		name := p.v.Name
		pos := c.doc.NodePos(c.doc.Deref(c.doc.Lookup(p.ptr)))
		if pos.Line == 0 {
			pos = out.Pos
		}
		what := fmt.Sprintf("a request with the key of an earlier one and another %s gets the earlier one's replay, not %d IDEMPOTENCY_KEY_REUSED", name, out.Policy.ConflictStatus)
		if sem == ir.Window {
			what = fmt.Sprintf("two requests without a key that differ only in %s are taken for one: the second gets the first's replay", name)
		}
		c.diags.Warnf(pos, RuleHeaderNotFingerprinted, "%s declares the request header %s, which the fingerprint does not cover: %s; list it in fingerprint-headers, or silence [%s] for the operation if its value never changes what the request does", out.Where(), name, what, RuleHeaderNotFingerprinted)
	}
}

// KeyHeader is the header that carries a key of carrier and name (the
// keyHeader of UnfingerprintedHeader and DeclaredRequestHeaders): name for
// a header key, "" for a key in the query or the body.
func KeyHeader(carrier ir.Carrier, name string) string { return keyIn(ir.CarrierHeader, carrier, name) }

// KeyPointer is the body member that carries a key of carrier and name
// (the keyPtr of Candidates): name, a JSON pointer, for a body key, "" for
// a key in a header or the query.
func KeyPointer(carrier ir.Carrier, name string) string { return keyIn(ir.CarrierBody, carrier, name) }

// keyIn is name when carrier is in, else "".
func keyIn(in, carrier ir.Carrier, name string) string {
	if carrier != in {
		return ""
	}
	return name
}

// UnfingerprintedHeader reports whether the request header name, which an
// idempotent operation of t declares, should be in its fingerprint and is
// not: fingerprint-headers (listed) does not list it, in any case;
// contract.FingerprintCandidate says another value of it may ask for
// something else; and it is neither the key's header (keyHeader, "" for a
// key in the query or the body), nor another key by convention (one
// request's name, not its meaning: [key-convention-mismatch] is about it),
// nor the header of one of t's apiKey security schemes (who calls: the
// scope's business).
func UnfingerprintedHeader(t *openapi3.T, name, keyHeader string, listed []string) bool {
	name = strings.TrimSpace(name)
	same := func(l string) bool { return strings.EqualFold(strings.TrimSpace(l), name) }
	if !contract.FingerprintCandidate(name) || same(keyHeader) || LooksLikeKeyName(name) || slices.ContainsFunc(listed, same) {
		return false
	}
	if t != nil && t.Components != nil {
		for _, s := range t.Components.SecuritySchemes {
			if s != nil && s.Value != nil && s.Value.Type == "apiKey" && s.Value.In == "header" && same(s.Value.Name) {
				return false
			}
		}
	}
	return true
}

// DeclaredRequestHeaders returns the names of the header parameters op
// and its path item (pathParams) declare that UnfingerprintedHeader
// accepts with nothing listed, path item's first, each once (in any case).
func DeclaredRequestHeaders(t *openapi3.T, op *openapi3.Operation, pathParams openapi3.Parameters, keyHeader string) []string {
	var out []string
	for _, p := range mergeParamRefs(pathParams, op.Parameters, "", "") {
		if p.v.In == "header" && UnfingerprintedHeader(t, p.v.Name, keyHeader, out) {
			out = append(out, strings.TrimSpace(p.v.Name))
		}
	}
	return out
}

// A ResponseHeader is a header a response declares.
type ResponseHeader struct {
	Status string // as in the spec: "201", "2XX"
	Name   string // as in the spec
}

// DeclaredResponseHeaders returns the headers op's 2xx responses declare
// that contract.ReplayCandidate accepts, by status then name; a header
// declared by several responses is returned once, at its first.
func DeclaredResponseHeaders(op *openapi3.Operation) []ResponseHeader {
	if op == nil || op.Responses == nil {
		return nil
	}
	var hs []ResponseHeader
	seen := map[string]bool{}
	statuses := slices.Sorted(maps.Keys(op.Responses.Map()))
	for _, st := range statuses {
		if len(st) != 3 || st[0] != '2' {
			continue
		}
		r := op.Responses.Map()[st]
		if r == nil || r.Value == nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(r.Value.Headers)) {
			canon := http.CanonicalHeaderKey(name)
			if seen[canon] || !contract.ReplayCandidate(name) {
				continue
			}
			seen[canon] = true
			hs = append(hs, ResponseHeader{Status: st, Name: name})
		}
	}
	return hs
}

// fixedLocator positions nodes of an x-idempotency value; a value that came
// from kin-openapi (no positions) is positioned at the operation.
func (c *compiler) fixedLocator(base load.Node, opPos ir.Pos) contract.Locator {
	return func(n *yaml.Node, ptr string) ir.Pos {
		p := c.doc.Pos(n, base.File, base.Pointer+ptr)
		if p.Line == 0 {
			p.Line, p.Col = opPos.Line, opPos.Col
		}
		return p
	}
}

func (c *compiler) applies(method string) bool {
	for _, m := range c.root.ApplyTo {
		if strings.EqualFold(m.V, method) {
			return true
		}
	}
	return false
}

func (c *compiler) applyToPos(method string) ir.Pos {
	for _, m := range c.root.ApplyTo {
		if strings.EqualFold(m.V, method) {
			return m.Pos
		}
	}
	return c.root.Pos
}

type paramRef struct {
	v      *openapi3.Parameter
	ptr    string // JSON pointer of its declaration in the spec (may be a $ref)
	ref    string // its $ref, "" when declared inline
	shared bool   // declared on the path item, not on the operation
}

func mergeParamRefs(pathParams, opParams openapi3.Parameters, pathPtr, opPtr string) []paramRef {
	var out []paramRef
	own := map[string]bool{}
	for _, r := range opParams {
		if r != nil && r.Value != nil {
			own[r.Value.In+"\x00"+r.Value.Name] = true
		}
	}
	for i, r := range pathParams {
		if r != nil && r.Value != nil && !own[r.Value.In+"\x00"+r.Value.Name] {
			out = append(out, paramRef{v: r.Value, ptr: fmt.Sprintf("%s/%d", pathPtr, i), ref: r.Ref, shared: true})
		}
	}
	for i, r := range opParams {
		if r != nil && r.Value != nil {
			out = append(out, paramRef{v: r.Value, ptr: fmt.Sprintf("%s/%d", opPtr, i), ref: r.Ref})
		}
	}
	return out
}

// jsonPath returns the JSONPath (RFC 9535, as overlay targets are
// written) of the node at JSON pointer ptr.
func jsonPath(ptr string) string {
	var b strings.Builder
	b.WriteString("$")
	toks := contract.SplitPointer(ptr)
	for i, tok := range toks {
		// An index of a parameters list (not a components/parameters name).
		list := i >= 2 && toks[i-1] == "parameters" && toks[i-2] != "components"
		switch {
		case list && tok != "" && strings.Trim(tok, "0123456789") == "":
			b.WriteString("[" + tok + "]")
		case identifier.MatchString(tok):
			b.WriteString("." + tok)
		default:
			b.WriteString("['" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(tok) + "']")
		}
	}
	return b.String()
}

// paramTarget is the JSONPath of the parameter declared at ptr (a JSON
// pointer in the spec), named name, for an overlay action that changes
// it: in a parameters list, a filter on its name,
// parameters[?(@.name=='Idempotency-Key')], when no other parameter of
// the list is written with that name (and the name holds no quote or
// backslash, which would need escaping in the filter or the message): an index would select another parameter once
// the spec's authors insert one before it, and is easily copied for an
// operation where the key has another index. The overlay library's legacy
// JSONPath and RFC 9535 select the same parameter with it (load warns
// about a filter only when they differ). Otherwise jsonPath(ptr).
func (c *compiler) paramTarget(ptr, name string) string {
	toks := contract.SplitPointer(ptr)
	n := len(toks)
	if n < 4 || toks[0] != "paths" || toks[n-2] != "parameters" || strings.ContainsAny(name, `'"\`) {
		return jsonPath(ptr)
	}
	list := c.doc.Lookup(ptr[:strings.LastIndex(ptr, "/")])
	if list.Node == nil || list.Kind != yaml.SequenceNode {
		return jsonPath(ptr)
	}
	same := 0
	for _, item := range list.Content {
		if v := yamlmerge.Unalias(yamlmerge.Value(item, "name")); v != nil && v.Kind == yaml.ScalarNode && v.Value == name {
			same++
		}
	}
	if same != 1 {
		return jsonPath(ptr)
	}
	parent := jsonPath(ptr[:strings.LastIndex(ptr, "/")])
	return parent + "[?(@.name=='" + name + "')]"
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var templateParam = regexp.MustCompile(`\{([^{}]+)\}`)

func pathTemplateParams(path string) []string {
	var out []string
	for _, m := range templateParam.FindAllStringSubmatch(path, -1) {
		out = append(out, m[1])
	}
	return out
}

func (c *compiler) irParam(p paramRef, opGoName string) ir.Param {
	goName := ""
	if s, ok := p.v.Extensions["x-go-name"].(string); ok {
		goName = s
	}
	// oapi-codegen: the parameter's extension, else its schema's, else
	// output-options.prefer-skip-optional-pointer.
	skip := c.names.PreferSkipOptionalPointer()
	if b, ok := p.v.Extensions["x-go-type-skip-optional-pointer"].(bool); ok {
		skip = b
	} else if p.v.Schema != nil && p.v.Schema.Value != nil {
		if b, ok := p.v.Schema.Value.Extensions["x-go-type-skip-optional-pointer"].(bool); ok {
			skip = b
		}
	}
	n := c.doc.Deref(c.doc.Lookup(p.ptr))
	pos := c.doc.NodePos(n)
	if pos.IsZero() {
		pos = ir.Pos{File: c.doc.Path, Pointer: p.ptr}
	}
	return ir.Param{
		Name:     p.v.Name,
		In:       p.v.In,
		GoName:   c.names.Param(p.v.Name, goName),
		Required: p.v.Required,
		Pointer:  !p.v.Required && !skip,
		GoType:   c.names.ParamType(p.ref, p.v, opGoName, p.shared, c.doc.T.IsOpenAPI31OrLater()),
		Pos:      pos,
	}
}

func isJSON(ct string) bool { return naming.IsJSONMediaType(ct) }

func (c *compiler) body(op *openapi3.Operation, names naming.Op) *ir.Body {
	if op.RequestBody == nil || op.RequestBody.Value == nil || len(op.RequestBody.Value.Content) == 0 {
		return nil
	}
	rb := op.RequestBody.Value
	b := &ir.Body{ContentTypes: sortedKeys(rb.Content), Required: rb.Required}
	for _, ct := range b.ContentTypes {
		// JSON as the fingerprint reads it: a range (application/*+json)
		// that oapi-codegen takes for JSON selects no reading.
		if ir.MediaTypeReading(ct) == ir.ReadJSON {
			b.JSON = true
		}
	}
	if mt := rb.Content.Get("application/json"); mt != nil {
		b.GoType = names.JSONBody
		if mt.Schema != nil && mt.Schema.Ref != "" {
			goName := ""
			if mt.Schema.Value != nil {
				if s, ok := mt.Schema.Value.Extensions["x-go-name"].(string); ok {
					goName = s
				}
			}
			if t := c.names.SchemaRef(mt.Schema.Ref, goName); t != "" {
				b.GoType = t
				b.Alias = true
			} else if !strings.HasPrefix(mt.Schema.Ref, "#") {
				b.GoType = "" // an external type: oapi-codegen needs an import mapping
			}
		}
	}
	return b
}

// memberPos returns where the spec declares the body member at toks of
// op's JSON request body (file:line:col), following $refs through the
// properties of its schemas; "" when it is not found so (a member of an
// allOf branch, say).
func (c *compiler) memberPos(op *openapi3.Operation, opNode load.Node, toks []string) string {
	if op.RequestBody == nil || op.RequestBody.Value == nil || opNode.Node == nil {
		return ""
	}
	content := op.RequestBody.Value.Content
	ct := ""
	if mt := content.Get("application/json"); mt != nil && mt.Schema != nil {
		ct = "application/json"
	} else {
		for _, name := range sortedKeys(content) {
			if isJSON(name) && content[name] != nil && content[name].Schema != nil {
				ct = name
				break
			}
		}
	}
	if ct == "" {
		return ""
	}
	ptr := "/requestBody/content/" + load.Escape(ct) + "/schema"
	for _, tok := range toks {
		ptr += "/properties/" + load.Escape(tok)
	}
	n := c.doc.LookupFrom(opNode, ptr)
	if n.Node == nil {
		return ""
	}
	p := c.doc.NodePos(n)
	if p.Line == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Marker is the extension idemgen spec puts, with the value MarkerValue,
// on the components it writes into a spec (package augment): a later run
// replaces them when the contracts change; components without it belong to
// the spec's authors.
const (
	Marker      = "x-generated-by"
	MarkerValue = "idemgen"
)

// Marked reports whether the mapping n is marked as idemgen spec's own:
// its Marker entry (through merge keys and aliases) is MarkerValue.
func Marked(n *yaml.Node) bool {
	m := yamlmerge.Unalias(yamlmerge.Value(n, Marker))
	return m != nil && m.Kind == yaml.ScalarNode && m.Value == MarkerValue
}

// generatedParam reports whether p is a $ref to a parameter component of
// this document that idemgen spec wrote (Marked).
func (c *compiler) generatedParam(p paramRef) bool {
	if p.ref == "" {
		return false
	}
	n := c.doc.Deref(c.doc.Lookup(p.ptr))
	return n.Node != nil && n.File == c.doc.Path && strings.HasPrefix(n.Pointer, "/components/parameters/") && Marked(n.Node)
}

// checkKey checks the key carrier against the spec's declarations.
func (c *compiler) checkKey(out *ir.Operation, op *openapi3.Operation, opNode load.Node, pathParams openapi3.Parameters, params []paramRef, b contract.Block) {
	k := &out.Key
	keyPos := k.Pos
	where := out.Where()
	switch k.Carrier {
	case ir.CarrierHeader, ir.CarrierQuery:
		var decl *paramRef
		for i, p := range params {
			if p.v.In != string(k.Carrier) {
				continue
			}
			if (k.Carrier == ir.CarrierHeader && strings.EqualFold(p.v.Name, k.Name)) || p.v.Name == k.Name {
				decl = &params[i]
				break
			}
		}
		if decl == nil {
			if k.Carrier == ir.CarrierQuery {
				msg := fmt.Sprintf("key.query: %s declares no query parameter %s", where, k.Name)
				cand, ok := MismatchedKey(op, pathParams, out.Key)
				external := opNode.File != "" && opNode.File != c.doc.Path
				switch {
				case external && !ok:
					// idemgen spec does not change an operation written in
					// another document (augment's spec-not-augmented).
					c.diags.Errorf(keyPos, "key-undeclared", "%s: declare it in %s (%s), which idemgen spec does not change", msg, opNode.File, KeyParamText(*k))
				case external:
					c.diags.Errorf(keyPos, "key-undeclared", "%s (it declares the key %s %s: if that is the key, set key.%s: %s as [%s] says; if not, declare %s in %s (%s), which idemgen spec does not change)", msg, cand.Carrier, cand.Name, cand.Carrier, cand.Name, RuleConventionMismatch, k.Name, opNode.File, KeyParamText(*k))
					c.diags.Cite(RuleConventionMismatch, fmt.Sprintf("%s (it declares the key %s %s: if that is the key, set key.%s: %s in the contract; if not, declare %s in %s (%s), which idemgen spec does not change)", msg, cand.Carrier, cand.Name, cand.Carrier, cand.Name, k.Name, opNode.File, KeyParamText(*k)))
				case !ok:
					c.diags.Errorf(keyPos, "key-undeclared", "%s (run idemgen spec, or apply the overlay idemgen spec -as-overlay writes)", msg)
				default:
					// As augment's key-param-missing: [key-convention-mismatch]
					// fires too, and idemgen spec would declare a second key.
					c.diags.Errorf(keyPos, "key-undeclared", "%s%s", msg, MismatchedKeyHint(cand, k.Name))
					c.diags.Cite(RuleConventionMismatch, msg+MismatchedKeyHintAlone(cand, k.Name))
				}
			}
			c.conventionMismatch(out, op, pathParams, keyPos)
			break
		}
		p := c.irParam(*decl, out.GoName)
		k.Param = &p
		kind, goType, why := keyGoKind(decl.v, c.doc.T.IsOpenAPI31OrLater())
		k.GoKind = kind
		declPos := fmt.Sprintf("%s:%d:%d", p.Pos.File, p.Pos.Line, p.Pos.Col)
		target := ""
		if p.Pos.File == c.doc.Path && p.Pos.Pointer != "" {
			target = c.paramTarget(p.Pos.Pointer, decl.v.Name)
		}
		formatReported := false
		if !c.generatedParam(*decl) {
			// idemgen spec's own parameter (from an earlier run) is not
			// the spec's authors' declaration: when the contract changed
			// since, augment reports it [spec-stale] and replaces it.
			formatReported = c.compareDecl(out, b, decl.v.Required, decl.v.Schema, fmt.Sprintf("%s parameter %s", decl.v.In, decl.v.Name), declPos, target)
		}
		// A format key-declared-differently reported gives the type: not
		// reported a second time (an x-go-type gives it otherwise).
		if formatReported {
			if _, _, xgo := xGoType(decl.v.Schema); !xgo {
				why = ""
			}
		}
		if why != "" {
			cannot := "whose Go type (" + goType + ") cannot hold the key"
			if goType == "" { // declared with content: the type (p.GoType) is fine, its encoding is not
				cannot = "which the generated code cannot pass the key in"
			}
			c.diags.Unsupportedf(p.Pos, "key-param-go-type", "the key of %s travels in the %s parameter %s, %s: %s; the generated code handles a key parameter of a string type (string, an enum, a named type such as type Key string given with x-go-type) or a UUID (format: uuid)", where, p.In, p.Name, cannot, why)
		}
	case ir.CarrierBody:
		body := jsonBodySchema(op)
		if body == nil {
			c.diags.Errorf(keyPos, "key-body-without-json", "key.body: %s has no JSON request body to carry the key %s", where, k.Name)
			break
		}
		toks := contract.SplitPointer(k.Name)
		ms := resolve(body, toks)
		if len(ms) == 0 {
			c.diags.Errorf(keyPos, "key-unknown-member", "key.body: %s names no member of the request body schema", k.Name)
			break
		}
		// Required-ness: the last token must be in its parent's required list.
		parent := resolve(body, toks[:len(toks)-1])
		required := false
		name := toks[len(toks)-1]
		for _, pm := range parent {
			if pm.schema != nil {
				for _, br := range branches(pm.schema) {
					if slices.Contains(br.Required, name) {
						required = true
					}
				}
			}
		}
		var schema *openapi3.SchemaRef
		if ms[0].schema != nil {
			schema = &openapi3.SchemaRef{Value: ms[0].schema}
		}
		c.compareDecl(out, b, required, schema, "body member "+k.Name, c.memberPos(op, opNode, toks), "")
		k.BodyField = c.bodyField(op, toks)
	}
	var keyName string
	switch k.Carrier {
	case ir.CarrierBody:
		toks := contract.SplitPointer(k.Name)
		keyName = toks[len(toks)-1]
	default:
		keyName = k.Name
	}
	if looksLikeBusinessID(keyName) {
		c.diags.Warnf(keyPos, "business-key", "key %s looks like a business identifier: a key names one logical request (a UUID the client makes per call), not the thing it acts on; two different requests about the same object would be taken for retries of each other", keyName)
	}
}

// MismatchedKey returns the key op declares by convention when it is not
// key (the contract's), the first DetectKeys finds: what
// [key-convention-mismatch] says to set key.header (or key.body) to.
// ok is false when op declares key itself or no key by convention.
func MismatchedKey(op *openapi3.Operation, pathParams openapi3.Parameters, key ir.Key) (cand KeyCandidate, ok bool) {
	cands := DetectKeys(op, pathParams)
	for _, cand := range cands {
		if cand.Carrier == key.Carrier && strings.EqualFold(cand.Name, key.Name) {
			return KeyCandidate{}, false
		}
	}
	if len(cands) == 0 {
		return KeyCandidate{}, false
	}
	return cands[0], true
}

// KeyParamText describes the key parameter to declare for k, where idemgen
// spec cannot declare it (an operation written in another file): the
// hints of key-undeclared here and of augment's key-param-missing and
// spec-not-augmented.
func KeyParamText(k ir.Key) string {
	schema := "type: string"
	if k.Format != ir.FormatToken {
		schema += ", format: uuid"
	}
	schema += ", maxLength: " + strconv.Itoa(k.MaxLength)
	return fmt.Sprintf("name: %s, in: %s, required: %t, schema: {%s}", k.Name, k.Carrier, k.Required, schema)
}

// MismatchedKeyHint is the hint, for a diagnostic that would have idemgen
// spec declare the contract's key keyName, that op declares cand (what
// MismatchedKey returns) instead: if cand is the key, set it in the
// contract, or idemgen spec declares a second key.
func MismatchedKeyHint(cand KeyCandidate, keyName string) string {
	return fmt.Sprintf(" (it declares the key %s %s: if that is the key, set key.%s: %s as [%s] says, rather than run idemgen spec, which would declare %s beside it)", cand.Carrier, cand.Name, cand.Carrier, cand.Name, RuleConventionMismatch, keyName)
}

// MismatchedKeyHintAlone is MismatchedKeyHint for when the user silenced
// [key-convention-mismatch] (diag.Diagnostic.Alone): the same choice,
// without sending them to a warning they turned off.
func MismatchedKeyHintAlone(cand KeyCandidate, keyName string) string {
	return fmt.Sprintf(" (it declares the key %s %s: if that is the key, set key.%s: %s in the contract; if not, run idemgen spec, or apply the overlay idemgen spec -as-overlay writes, to declare %s beside it)", cand.Carrier, cand.Name, cand.Carrier, cand.Name, keyName)
}

// RuleConventionMismatch is the rule of the warning that an operation
// declares another key by convention than its contract's.
const RuleConventionMismatch = "key-convention-mismatch"

// conventionMismatch warns when the contract's key header is not declared
// but the operation declares another key by convention.
func (c *compiler) conventionMismatch(out *ir.Operation, op *openapi3.Operation, pathParams openapi3.Parameters, pos ir.Pos) {
	if cand, ok := MismatchedKey(op, pathParams, out.Key); ok {
		c.diags.Warnf(pos, "key-convention-mismatch", "the contract's key is %s %s, but %s declares the key %s %s; set key.%s: %s", out.Key.Carrier, out.Key.Name, out.Where(), cand.Carrier, cand.Name, cand.Carrier, cand.Name)
	}
}

var sampleKeys = map[string]string{
	ir.FormatUUID:   "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d",
	ir.FormatUUIDv4: "3b241101-e2bb-4255-8caf-4136c566a962",
	ir.FormatUUIDv7: "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d",
}

// compareDecl reports where the spec declares the key (what, with
// declRequired and schema) differently from the contract
// [key-declared-differently], and whether it reported the schema's format
// (a key of format uuid* declared with another format than uuid). at,
// when not "", is where the spec declares it (file:line:col), and target
// the JSONPath of that declaration in the spec, for an overlay that changes
// it. A required-ness that differs is reported once for all the operations
// whose contract takes key.required from the same field (a root contract's,
// typically) and whose declarations differ alike, naming them
// (flushDeclDiffs).
func (c *compiler) compareDecl(out *ir.Operation, b contract.Block, declRequired bool, schema *openapi3.SchemaRef, short, at, target string) (format bool) {
	what := short
	if at != "" {
		what += " (declared at " + at + ")"
	}
	k := out.Key
	pos := func(f ir.Pos) ir.Pos {
		if !f.IsZero() {
			return f
		}
		return k.Pos
	}
	// Without semantics (reported already), an unset key.required has no
	// default to compare.
	if declRequired != k.Required && (b.Semantics.Set || b.Key.Required.Set) {
		wanted := "optional"
		if k.Required {
			wanted = "required"
		}
		had := "optional"
		if declRequired {
			had = "required"
		}
		fix := "declare it required: true in the spec, or set key.required: false in the contract if clients may send no key"
		if declRequired {
			fix = "set key.required: true in the contract, or declare it required: false in the spec"
		}
		if strings.HasPrefix(short, "body member") {
			fix = "list it among its object's required members in the spec, or set key.required: false in the contract if clients may send no key"
			if declRequired {
				fix = "set key.required: true in the contract, or drop it from its object's required members in the spec"
			}
		}
		c.declDiff(declDiff{
			pos:  pos(b.Key.Required.Pos),
			what: fmt.Sprintf("the key is %s by the contract (key.required: %t) but the spec declares the %s", wanted, k.Required, short),
			had:  had, fix: fix, required: !declRequired,
		}, out.Where(), at, target)
	}
	if schema == nil || schema.Value == nil {
		return false
	}
	s := schema.Value
	if s.Format != "" || s.Pattern != "" || s.MinLength > 0 {
		out.Key.Schema = &ir.KeySchema{Format: s.Format, Pattern: s.Pattern, MinLength: int(min(s.MinLength, math.MaxInt32))}
	}
	if s.Type != nil && len(s.Type.Slice()) > 0 && !s.Type.Includes("string") {
		c.diags.Errorf(k.Pos, "key-declared-differently", "the key is a string, but the spec declares the %s as %s", what, strings.Join(s.Type.Slice(), " or "))
		return false
	}
	if s.MaxLength != nil && int(*s.MaxLength) != k.MaxLength {
		// Say where the contract's value comes from, and only fixes that
		// leave both valid: key.max-length is 1 to 8192 (contract's
		// bad-value), a UUID key's 36 at least.
		have, fix := fmt.Sprint(k.MaxLength), fmt.Sprintf("set key.max-length: %d, or maxLength: %d in the spec", *s.MaxLength, k.MaxLength)
		if !b.Key.MaxLength.Set {
			have, fix = have+" (the default)", fmt.Sprintf("set key.max-length: %d, or remove maxLength from the spec", *s.MaxLength)
		}
		switch {
		case k.Format != ir.FormatToken && *s.MaxLength < 36:
			if k.MaxLength == 36 {
				fix = fmt.Sprintf("a %s is 36 characters: set maxLength: 36 in the spec, or remove it", k.Format)
			} else {
				fix = fmt.Sprintf("a %s is 36 characters: set key.max-length: 36 and maxLength: 36 in the spec, or remove maxLength from the spec", k.Format)
			}
		case *s.MaxLength == 0 || *s.MaxLength > 8192:
			fix = fmt.Sprintf("key.max-length cannot be %d (it is 1 to 8192): set maxLength: %d in the spec, or remove it", *s.MaxLength, k.MaxLength)
		}
		c.diags.Errorf(pos(b.Key.MaxLength.Pos), "key-declared-differently", "key.max-length is %s but the spec declares the %s with maxLength %d; %s", have, what, *s.MaxLength, fix)
	}
	uuidFormat := k.Format != ir.FormatToken
	switch {
	case s.Format == "uuid" && !uuidFormat:
		c.diags.Errorf(pos(b.Key.Format.Pos), "key-declared-differently", "key.format is %s but the spec declares the %s with format uuid (set key.format: uuid)", k.Format, what)
	case s.Format != "" && s.Format != "uuid" && uuidFormat:
		c.diags.Errorf(pos(b.Key.Format.Pos), "key-declared-differently", "key.format is %s but the spec declares the %s with format %s", k.Format, what, s.Format)
		format = true
	}
	if s.Pattern != "" && uuidFormat {
		if re, err := regexp.Compile(s.Pattern); err == nil && !re.MatchString(sampleKeys[k.Format]) {
			c.diags.Errorf(pos(b.Key.Format.Pos), "key-declared-differently", "key.format is %s but the spec's pattern %q for the %s rejects a %s such as %s", k.Format, s.Pattern, what, k.Format, sampleKeys[k.Format])
		}
	}
	return format
}

// checkPointers resolves the volatile and unordered pointers against the
// request body schema (those of compatible-fingerprints too) and looks for
// undeclared volatile and set-like members.
func (c *compiler) checkPointers(out *ir.Operation, op *openapi3.Operation, b contract.Block) {
	pol := &out.Policy
	where := out.Where()
	body := jsonBodySchema(op)
	hasNonJSON := out.Body != nil && !out.Body.JSON
	check := func(list []ir.Pointer, field, label string) {
		for i := range list {
			p := &list[i]
			switch {
			case out.Body == nil:
				c.diags.Errorf(p.Pos, field+"-unknown-member", "%s: %s has no request body, so %s names nothing", label, where, p.Pointer)
				continue
			case hasNonJSON:
				c.diags.Unsupportedf(p.Pos, "non-json-body", "%s: %s applies to JSON bodies only; %s takes %s%s", label, p.Pointer, where, strings.Join(out.Body.ContentTypes, ", "), jsonRangeHint(out.Body.ContentTypes))
				continue
			case body == nil:
				continue // JSON without a schema: anything may be there
			}
			toks := contract.SplitPointer(p.Pointer)
			ms := resolve(body, toks)
			parent, tok, zero := leadingZeroIndex(body, toks)
			hint := ""
			if zero {
				hint = fmt.Sprintf("; %s is not an array index (RFC 6901 forbids leading zeros), so in the array %s it names no item", tok, parent)
			}
			if len(ms) == 0 {
				if hint == "" {
					hint = didYouMean(body, toks)
				}
				c.diags.Errorf(p.Pos, field+"-unknown-member", "%s: %s names no member of the request body schema of %s%s", label, p.Pointer, where, hint)
				continue
			}
			if zero {
				c.diags.Warnf(p.Pos, "pointer-not-index", "%s: %s names members named %q only%s", label, p.Pointer, tok, hint)
			}
			for _, m := range ms {
				p.Matches = append(p.Matches, m.path)
			}
			p.Matches = slices.Compact(p.Matches)
			if field == "unordered" {
				known, arrays := 0, 0
				var others []string
				for _, m := range ms {
					if m.schema == nil || !typed(m.schema) {
						continue
					}
					known++
					array := false
					for _, br := range branches(m.schema) {
						if isArray(br) {
							array = true
							break
						}
					}
					if array {
						arrays++
					} else {
						others = append(others, m.path+" ("+kindOf(m.schema)+")")
					}
				}
				switch {
				case known > 0 && arrays == 0:
					c.diags.Errorf(p.Pos, "unordered-not-array", "%s: %s names %s, not an array", label, showPointer(p.Pointer), kindOf(ms[0].schema))
				case len(others) > 0:
					c.diags.Warnf(p.Pos, "unordered-no-effect", "%s: %s also names %s, not arrays: unordered has no effect there", label, showPointer(p.Pointer), strings.Join(others, ", "))
				}
			}
		}
	}
	check(pol.Volatile, "volatile", "volatile")
	check(pol.Unordered, "unordered", "unordered")
	// An entry's own lists are checked as the block's; a list it leaves
	// out is the current one, checked above (its matches copied).
	for i := range pol.CompatibleFingerprints {
		e, own := &pol.CompatibleFingerprints[i], b.CompatibleFingerprints.V[i]
		label := fmt.Sprintf("compatible-fingerprints[%d].", i)
		if own.Volatile.Set {
			check(e.Volatile, "volatile", label+"volatile")
		} else {
			e.Volatile = slices.Clone(pol.Volatile)
		}
		if own.Unordered.Set {
			check(e.Unordered, "unordered", label+"unordered")
		} else {
			e.Unordered = slices.Clone(pol.Unordered)
		}
	}
	if body == nil || !out.FingerprintDecides() {
		return // volatile and unordered would have no effect (contract's volatile-no-effect)
	}
	volPos := ir.FirstPos(b.Volatile.Pos, out.ContractPos)
	unPos := ir.FirstPos(b.Unordered.Pos, out.ContractPos)
	keyPtr := KeyPointer(out.Key.Carrier, out.Key.Name)
	for _, m := range walk(body, 8) {
		if m.path == keyPtr {
			continue
		}
		if contract.VolatileName(m.name) && !coveredBy(pol.Volatile, m.path) {
			c.diags.Warnf(volPos, "volatile-candidate", "body member %s of %s looks volatile (a clock, retry counter or trace id) but is not declared volatile; %s", m.path, where, conflictEffect(pol.Semantics, "changes it"))
		}
		if m.schema.UniqueItems && isArray(m.schema) && !unorderedAt(pol.Unordered, m.path) && !coveredBy(pol.Volatile, m.path) {
			c.diags.Warnf(unPos, "unordered-candidate", "body member %s of %s is a set (uniqueItems) but is not declared unordered; %s", m.path, where, conflictEffect(pol.Semantics, "sends its items in another order"))
		}
	}
}

// conflictEffect says what a retry that does what (changes a member) gets
// under semantics s where the fingerprint decides (FingerprintDecides):
// under strict semantics a conflict; under window semantics, with the key
// optional, only a retry without a key is found by its fingerprint.
func conflictEffect(s ir.Semantics, what string) string {
	if s == ir.Window {
		return "a retry without a key that " + what + " looks like another request: it runs again (a retry with the key gets the replay)"
	}
	return "a retry that " + what + " looks like another request: a conflict"
}

func coveredBy(list []ir.Pointer, path string) bool {
	for _, p := range list {
		if covers(p.Pointer, path) {
			return true
		}
	}
	return false
}

// unorderedAt is coveredBy for the unordered pointers, where the root
// pointer "" (a body that is an array) covers that array only, not the
// arrays inside its items.
func unorderedAt(list []ir.Pointer, path string) bool {
	for _, p := range list {
		if (p.Pointer == "" && path == "") || (p.Pointer != "" && covers(p.Pointer, path)) {
			return true
		}
	}
	return false
}

// showPointer writes a JSON pointer in a message: the root pointer as "".
func showPointer(p string) string {
	if p == "" {
		return `""`
	}
	return p
}

func kindOf(s *openapi3.Schema) string {
	if s == nil || s.Type == nil || len(s.Type.Slice()) == 0 {
		return "a value"
	}
	t := s.Type.Slice()[0]
	switch t {
	case "object", "array", "integer":
		return "an " + t
	}
	return "a " + t
}

// blockPositions returns the positions of an x-idempotency block and of
// every field it sets, at any depth: where the diagnostics about its own
// fields point.
func blockPositions(b contract.Block) map[ir.Pos]bool {
	set := map[ir.Pos]bool{}
	posType := reflect.TypeFor[ir.Pos]()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch {
		case v.Type() == posType:
			if p := v.Interface().(ir.Pos); !p.IsZero() {
				set[p] = true
			}
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case v.Kind() == reflect.Slice || v.Kind() == reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case v.Kind() == reflect.Pointer && !v.IsNil():
			walk(v.Elem())
		}
	}
	walk(reflect.ValueOf(b))
	return set
}

// rawBodyStrict warns when a strict or window contract compares a
// multipart body: the fingerprint takes such a body byte for byte, its
// boundary included, so a client that makes a new boundary per attempt
// sends a different request every time.
func (c *compiler) rawBodyStrict(out *ir.Operation, where string) {
	if out.Body == nil || out.Policy.Semantics == ir.Loose {
		return
	}
	for _, ct := range out.Body.ContentTypes {
		if !strings.HasPrefix(ir.MediaEssence(ct), "multipart/") {
			continue
		}
		who, what := "a client that makes a new boundary for each attempt", fmt.Sprintf("gets %d IDEMPOTENCY_KEY_REUSED on every retry", out.Policy.ConflictStatus)
		if out.Policy.Semantics != ir.Strict {
			who, what = "a client that sends no key and makes a new boundary for each attempt", "runs the operation again on every retry"
		}
		c.diags.Warnf(out.ContractPos, "raw-body-strict", "%s takes %s, which the fingerprint compares byte for byte, its boundary included: %s %s; clients must resend the same bytes (or use loose semantics)", where, ct, who, what)
		return
	}
}

// The form media type as oapi-codegen matches it: its form decoder (and
// the form type of its strict request object) is for the requestBody
// content key written exactly so.
const formMediaType = "application/x-www-form-urlencoded"

// formBody warns, when the fingerprint decides (FingerprintDecides), about
// a form body (a content key the fingerprint reads as form fields:
// ir.MediaTypeReading) that the fingerprint and the handler read apart:
//   - form-body-pointers: the operation's volatile or unordered pointers
//     (accepted for its JSON body) never apply to a form body: the
//     runtime's form reading (runtime/fingerprint's parseForm) compares
//     every field, by its decoded name, bytewise, and applies no pointer;
//     a retry that changes a volatile field is another request.
//   - form-key-spelling: a key spelled with parameters or capitals
//     (application/x-www-form-urlencoded; charset=utf-8): the fingerprint
//     reads a body sent as a form as form fields (any order, '+' and
//     %20 alike) whatever the spelling, but oapi-codegen's strict server
//     gives its form decoder only to the key written exactly
//     formMediaType, so the handler gets the raw bytes. Not for the plain
//     server (Options.PlainServer), whose handlers read the body
//     themselves.
func (c *compiler) formBody(out *ir.Operation, opNode load.Node, b contract.Block) {
	if out.Body == nil || !out.FingerprintDecides() {
		return
	}
	where := out.Where()
	var forms []string
	for _, ct := range out.Body.ContentTypes {
		if ir.MediaTypeReading(ct) != ir.ReadForm {
			continue
		}
		forms = append(forms, ct)
		if ct == formMediaType || c.plainServer {
			continue
		}
		pos := out.ContractPos
		if content := c.doc.LookupFrom(opNode, "/requestBody/content"); content.Node != nil {
			pos = c.doc.KeyPos(content, ct)
		}
		c.diags.Warnf(pos, RuleFormKeySpelling, "%s declares its form body as %q: the fingerprint reads a body sent as a form as form fields (in any order, '+' and %%20 alike), but oapi-codegen's strict server gives its form decoder only to the key written exactly %s, so the handler gets the raw bytes, and one that reads them as anything but form fields (stores or forwards them, decodes JSON from them) sees two requests where the fingerprint sees one; write the key exactly %s (a client may still send a charset parameter), or have the handler parse the form (url.ParseQuery)",
			where, ct, formMediaType, formMediaType)
	}
	if len(forms) == 0 || !out.Body.JSON {
		return // a form alone takes no pointer (non-json-body)
	}
	pol := &out.Policy
	var fields, changes []string
	var pos ir.Pos
	if len(pol.Volatile) > 0 {
		fields = append(fields, "volatile "+ir.Flow(ir.Pointers(pol.Volatile)))
		changes = append(changes, "changes a volatile field")
		pos = ir.FirstPos(b.Volatile.Pos, out.ContractPos)
	}
	if len(pol.Unordered) > 0 {
		fields = append(fields, "unordered "+ir.Flow(ir.Pointers(pol.Unordered)))
		changes = append(changes, "reorders the values of an unordered field (repeated)")
		if pos.IsZero() {
			pos = ir.FirstPos(b.Unordered.Pos, out.ContractPos)
		}
	}
	if len(fields) == 0 {
		return
	}
	conflict := fmt.Sprintf("gets %d IDEMPOTENCY_KEY_REUSED", pol.ConflictStatus)
	if pol.Semantics != ir.Strict {
		conflict = "without a key runs the operation again"
	}
	c.diags.Warnf(pos, "form-body-pointers", "%s: %s %s to its JSON body only: a body sent as %s is compared as form fields, every field counting by its name (no pointer applies to it, whatever its spelling), so a form retry that %s %s; clients that send a form must resend the same fields, or leave the form out of the requestBody if no client sends one",
		where, strings.Join(fields, " and "), english.Noun(len(fields), "applies", "apply"), strings.Join(forms, ", "), strings.Join(changes, " or "), conflict)
}

// jsonRangeHint explains why a body declared with a JSON range (or an
// entry that is not a media type, which oapi-codegen may still take for
// JSON) is no JSON body for the fingerprint; "" when none of cts is such.
func jsonRangeHint(cts []string) string {
	for _, ct := range cts {
		if isJSON(ct) || strings.HasSuffix(ir.MediaEssence(ct), "+json") {
			return fmt.Sprintf(" (the fingerprint reads a body as JSON only when sent as a media type the operation declares exactly: %s is a range or no media type, so a body it covers is compared byte for byte; declare application/json or the exact +json type)", ct)
		}
	}
	return ""
}

// bodyField returns the Go field of the body member at toks in oapi-codegen's
// type of op's request body when idemgen can tell it and it is a string (or
// *string): a member of the properties of an object schema, inline, of type
// string with a format oapi-codegen maps to string, no enum, not nullable,
// no x-go-type; the request body has application/json as its one content
// type (so the strict server's request object has it as Body). "" otherwise.
func (c *compiler) bodyField(op *openapi3.Operation, toks []string) string {
	if len(toks) != 1 || op.RequestBody == nil || op.RequestBody.Value == nil {
		return ""
	}
	content := op.RequestBody.Value.Content
	mt := content.Get("application/json")
	if len(content) != 1 || mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return ""
	}
	goTypeExt := func(ext map[string]any) bool {
		for _, e := range []string{"x-go-type", "x-go-type-name", "x-go-type-import", "x-oapi-codegen-only-honour-go-name"} {
			if _, ok := ext[e]; ok {
				return true
			}
		}
		return false
	}
	ref, body := mt.Schema, mt.Schema.Value
	if ref.Ref != "" && (!strings.HasPrefix(ref.Ref, "#/components/schemas/") || goTypeExt(ref.Extensions)) {
		return ""
	}
	if goTypeExt(body.Extensions) || body.AllOf != nil || body.OneOf != nil || body.AnyOf != nil || body.Not != nil ||
		body.Type != nil && !body.Type.Is("object") {
		return ""
	}
	prop := body.Properties[toks[0]]
	if prop == nil || prop.Ref != "" || prop.Value == nil {
		return ""
	}
	p := prop.Value
	if goTypeExt(p.Extensions) || p.Type == nil || !p.Type.Is("string") || len(p.Enum) > 0 || p.Const != nil || p.Nullable ||
		p.AllOf != nil || p.OneOf != nil || p.AnyOf != nil || p.Not != nil || p.ContentMediaType != "" || p.ContentEncoding != "" ||
		naming.StringType(p, c.doc.T.IsOpenAPI31OrLater()) != "string" {
		return ""
	}
	goName, _ := p.Extensions["x-go-name"].(string)
	return c.names.Param(toks[0], goName)
}
