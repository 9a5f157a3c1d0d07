// Package initspec proposes x-idempotency contracts for a spec that has
// none yet (`idemgen init`): for every unsafe operation that already
// declares an idempotency key by a known convention (an Idempotency-Key
// header, inline or through a $ref; a PayPal-Request-Id-style request-id
// header; an idempotency_key body member, required or optional), it writes
// an OpenAPI Overlay 1.0 action with a contract whose key matches the
// declaration exactly, so the spec needs no change.
//
// What only the API's team can decide is proposed with a TODO(idemgen)
// comment on the value: the semantics and the window (at the document
// root, once for all operations), and per operation the volatile and
// unordered body members found by name (client clocks, retry counters,
// trace ids; uniqueItems arrays) and the request headers it declares,
// proposed as fingerprint-headers (check's [header-not-fingerprinted]). `idemgen check` reports each such value
// (rule "unconfirmed") until its comment is deleted.
//
// Safe operations (GET, HEAD, …) that declare a key get no contract (they
// need none): they are listed as notes, in the overlay's header comment.
package initspec

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/generator/naming"
	"github.com/idemgen/idemgen/generator/specfile"
)

// Defaults proposed for the team to confirm.
const (
	ProposedSemantics = ir.Strict
	ProposedWindow    = "24h"
	ProposedFailures  = ir.FailuresRetry
)

// Key is a key declaration found in the spec.
type Key struct {
	Carrier   ir.Carrier
	Name      string // header or query name, or the body member's JSON pointer
	Required  bool
	Format    string // ir.FormatToken, or ir.FormatUUID when the schema says format: uuid
	MaxLength int    // the schema's maxLength, 0 when it has none
	Ref       string // the $ref of the parameter declaration, "" when inline
}

func (k Key) describe() string {
	req := "optional"
	if k.Required {
		req = "required"
	}
	via := "inline"
	if k.Ref != "" {
		via = "via $ref " + k.Ref
	}
	return fmt.Sprintf("%s %s (%s, %s)", k.Carrier, k.Name, req, via)
}

// Candidate is an operation that declares a key and gets a contract.
type Candidate struct {
	Method, Path, OperationID string
	Key                       Key
	Others                    []Key    // further conventional keys it declares
	Volatile, Unordered       []string // proposed body pointers; none when Multipart (loose semantics)
	// ResponseHeaders are the headers its 2xx responses declare, proposed
	// as response.headers so that a replay carries them.
	ResponseHeaders []string
	// FingerprintHeaders are the request headers it declares that check's
	// [header-not-fingerprinted] would report, proposed (to confirm) as
	// fingerprint-headers so that a reused key with another value of one
	// is refused rather than replayed; none when Multipart (loose
	// semantics never compare fingerprints).
	FingerprintHeaders []string
	// Multipart is the multipart media type of its request body ("" for
	// none): such an operation is proposed loose semantics, since the
	// fingerprint compares a multipart body byte for byte, its boundary
	// included (check's raw-body-strict).
	Multipart string
	// AlsoJSON is the JSON media type its request body also takes ("" for
	// none) besides Multipart: under loose semantics such a request loses
	// the check that a reused key comes with the same body.
	AlsoJSON string
}

// Where names the candidate: its method and path, e.g. "POST /orders".
func (c Candidate) Where() string { return ir.Where(c.Method, c.Path) }

// Note is an operation that declares a key but gets no contract.
type Note struct {
	Method, Path string
	Key          Key
	Reason       string
	// Pos is where the operation is written (its method's key), its Line
	// 0 when unknown.
	Pos ir.Pos
}

// Where names the note's operation: its method and path, e.g. "POST /orders".
func (n Note) Where() string { return ir.Where(n.Method, n.Path) }

// Operation is an operation that gets no contract.
type Operation struct {
	Method, Path string
	// Target is the Overlay 1.0 target (JSONPath) of the operation, for an
	// action that gives it a contract.
	Target string
	// Pos is where the operation is written (its method's key), its Line
	// 0 when unknown.
	Pos ir.Pos
}

// Where names the operation: its method and path, e.g. "POST /orders".
func (o Operation) Where() string { return ir.Where(o.Method, o.Path) }

// Proposal is what Propose found and the overlay it wrote.
type Proposal struct {
	Candidates []Candidate
	Notes      []Note
	// Unkeyed are the methods (lower case, sorted) of the unsafe operations
	// that declare no key and have no contract: those apply-to could opt in.
	// PUT and DELETE are not among them (check warns [put-delete] on a
	// contract there) but in Idempotent.
	Unkeyed []string
	// UnkeyedOps are those operations themselves, in spec order (by path,
	// then method).
	UnkeyedOps []Operation
	// Idempotent are the methods (lower case, sorted) among put and delete
	// of the operations that declare no key and have no contract:
	// idempotent by HTTP semantics, so init proposes no apply-to for them.
	Idempotent []string
	// Overlay is the Overlay 1.0 document (YAML) with the proposed
	// contracts; nil when there is no candidate.
	Overlay []byte
}

// Options configure Propose.
type Options struct {
	Overlays []string // overlays applied to the spec first
	// OverlayPath is where the overlay will be written, for the
	// instructions in its header comment ("" for the default name).
	OverlayPath string
}

// ContractDocs is the documentation of the x-idempotency contract, for
// messages (a URL: users of the idemgen binary have no checkout of its
// repository).
const ContractDocs = "https://github.com/idemgen/idemgen/blob/main/docs/contract.md"

// DefaultOverlayPath is the overlay's name when none is given.
const DefaultOverlayPath = "idempotency.overlay.yaml"

var safe = map[string]bool{"GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true, "QUERY": true}

// Propose loads the spec at path and proposes contracts for the operations
// that declare a key and have no contract yet.
func Propose(path string, opts Options) (*Proposal, diag.List) {
	d, diags := load.Load(path, load.Options{Overlays: opts.Overlays})
	if d == nil {
		return nil, diags
	}
	rootBlock := d.Lookup("/x-idempotency").Node
	applyTo := map[string]bool{}
	if a := d.Lookup("/x-idempotency/apply-to").Node; a != nil && a.Kind == yaml.SequenceNode {
		for _, m := range a.Content {
			applyTo[strings.ToUpper(m.Value)] = true
		}
	}
	p := &Proposal{}
	annotated := false // some operation has a contract: root key defaults would change it
	for _, item := range d.T.Paths.Map() {
		for _, op := range item.Operations() {
			if _, has := op.Extensions["x-idempotency"]; has {
				annotated = true
			}
		}
	}
	paths := d.T.Paths.Map()
	for _, pth := range slices.Sorted(maps.Keys(paths)) {
		item := paths[pth]
		if item == nil {
			continue
		}
		ops := item.Operations()
		for _, method := range slices.Sorted(maps.Keys(ops)) {
			op := ops[method]
			method = strings.ToUpper(method)
			keys := detect(op, item.Parameters)
			if len(keys) == 0 {
				// Only the methods a contract may target (load.ContractMethod):
				// apply-to: [connect] would not parse.
				if _, has := op.Extensions["x-idempotency"]; !has && !applyTo[method] && load.ContractMethod(method) {
					list := &p.Unkeyed
					if load.IdempotentMethod(method) {
						list = &p.Idempotent
					} else {
						pos := d.KeyPos(d.Lookup("/paths/"+load.Escape(pth)), strings.ToLower(method))
						p.UnkeyedOps = append(p.UnkeyedOps, Operation{Method: method, Path: pth, Target: target(pth, method), Pos: pos})
					}
					if !slices.Contains(*list, strings.ToLower(method)) {
						*list = append(*list, strings.ToLower(method))
					}
				}
				continue
			}
			if safe[method] {
				pos := d.KeyPos(d.Lookup("/paths/"+load.Escape(pth)), strings.ToLower(method))
				p.Notes = append(p.Notes, Note{Method: method, Path: pth, Key: keys[0], Reason: method + " is safe: it needs no idempotency key, so no contract is proposed", Pos: pos})
				continue
			}
			if _, has := op.Extensions["x-idempotency"]; has || applyTo[method] {
				annotated = true
				continue // a contract exists
			}
			c := Candidate{Method: method, Path: pth, OperationID: op.OperationID, Key: keys[0], Others: keys[1:]}
			for _, h := range compile.DeclaredResponseHeaders(op) {
				c.ResponseHeaders = append(c.ResponseHeaders, h.Name)
			}
			c.Multipart = multipart(op)
			if c.Multipart != "" {
				// Proposed loose semantics, where volatile, unordered and
				// fingerprint-headers have no effect (check's *-no-effect):
				// none is proposed.
				c.AlsoJSON = jsonBody(op)
			} else {
				c.Volatile, c.Unordered = compile.Candidates(op, compile.KeyPointer(c.Key.Carrier, c.Key.Name))
				c.FingerprintHeaders = compile.DeclaredRequestHeaders(d.T, op, item.Parameters, compile.KeyHeader(c.Key.Carrier, c.Key.Name))
			}
			p.Candidates = append(p.Candidates, c)
		}
	}
	slices.Sort(p.Unkeyed)
	slices.Sort(p.Idempotent)
	if len(p.Candidates) > 0 {
		title := filepath.Base(path)
		if d.T.Info != nil && d.T.Info.Title != "" {
			title = d.T.Info.Title
		}
		ovPath := cmp.Or(opts.OverlayPath, DefaultOverlayPath)
		data, err := specfile.Encode(p.document(title, filepath.Base(path), filepath.Base(ovPath), rootBlock == nil, !annotated && len(applyTo) == 0), specfile.DefaultYAML)
		if err != nil {
			diags.Errorf(ir.Pos{File: path}, "internal-error", "cannot write the overlay: %v", err)
			return nil, diags
		}
		p.Overlay = data
	}
	return p, diags
}

// rank orders the conventions: the Idempotency-Key family first, then
// other headers, query parameters, body members.
func rank(k Key) int {
	switch {
	case k.Carrier == ir.CarrierHeader && strings.Contains(strings.ToLower(k.Name), "idempotency"):
		return 0
	case k.Carrier == ir.CarrierHeader:
		return 1
	case k.Carrier == ir.CarrierQuery:
		return 2
	}
	return 3
}

// detect returns op's conventional keys, best first, with their schemas.
func detect(op *openapi3.Operation, pathParams openapi3.Parameters) []Key {
	var out []Key
	for _, c := range compile.DetectKeys(op, pathParams) {
		k := Key{Carrier: c.Carrier, Name: c.Name, Required: c.Required, Format: ir.FormatToken}
		var schema *openapi3.SchemaRef
		if c.Carrier == ir.CarrierBody {
			schema = bodyMember(op, c.Name)
		} else {
			for _, list := range []openapi3.Parameters{op.Parameters, pathParams} {
				for _, r := range list {
					if r != nil && r.Value != nil && r.Value.In == string(c.Carrier) && r.Value.Name == c.Name {
						if k.Ref == "" && schema == nil {
							k.Ref, schema = r.Ref, r.Value.Schema
						}
					}
				}
			}
		}
		if schema != nil && schema.Value != nil {
			if schema.Value.Format == "uuid" {
				k.Format = ir.FormatUUID
			}
			if schema.Value.MaxLength != nil {
				k.MaxLength = int(*schema.Value.MaxLength)
			}
		}
		out = append(out, k)
	}
	slices.SortStableFunc(out, func(a, b Key) int { return cmp.Compare(rank(a), rank(b)) })
	return out
}

func bodyMember(op *openapi3.Operation, ptr string) *openapi3.SchemaRef {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	name := strings.TrimPrefix(ptr, "/")
	name = load.Unescape(name)
	for _, mt := range op.RequestBody.Value.Content {
		if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
			continue
		}
		stack := []*openapi3.Schema{mt.Schema.Value}
		for len(stack) > 0 && len(stack) < 1000 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if r, ok := s.Properties[name]; ok {
				return r
			}
			for _, g := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
				for _, r := range g {
					if r != nil && r.Value != nil {
						stack = append(stack, r.Value)
					}
				}
			}
		}
	}
	return nil
}

// multipart returns the first (sorted) multipart media type op's request
// body takes, "" for none.
func multipart(op *openapi3.Operation) string {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return ""
	}
	for _, ct := range slices.Sorted(maps.Keys(op.RequestBody.Value.Content)) {
		if mt, _, _ := strings.Cut(ct, ";"); strings.HasPrefix(strings.ToLower(strings.TrimSpace(mt)), "multipart/") {
			return ct
		}
	}
	return ""
}

// jsonBody returns the first JSON media type (application/json or
// +json) of op's request body, "" when it has none.
func jsonBody(op *openapi3.Operation) string {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return ""
	}
	for _, ct := range slices.Sorted(maps.Keys(op.RequestBody.Value.Content)) {
		if naming.IsJSONMediaType(ct) {
			return ct
		}
	}
	return ""
}

// keyNode is the contract's key block for k (keyFields, explicit or not),
// with, for a key the spec declares optional, a TODO(idemgen) that says
// what that means: the block keeps the spec's required: false (requiring
// the key would refuse requests the spec allows), and check warns
// [key-optional].
func keyNode(k Key, explicit bool) *yaml.Node {
	n := flow(node(keyFields(k, explicit)...))
	if k.Required {
		return n
	}
	return comment(n, todo+"the spec declares the key optional, so a request without one runs every time, retries included (check warns [key-optional]): make it required here and in the spec if every client sends one (idemgen's client helpers always do), or delete this mark to keep it optional")
}

// keyFields returns the contract's key block for k: carrier, required,
// format, and max-length when the schema declares one. With explicit (an
// operation's key that differs from the root's, whose fields it would
// otherwise inherit), format and max-length are written even when they are
// the defaults.
func keyFields(k Key, explicit bool) []any {
	f := []any{string(k.Carrier), k.Name, "required", k.Required}
	if k.Format != ir.FormatToken || explicit {
		f = append(f, "format", k.Format)
	}
	if k.MaxLength > 0 {
		f = append(f, "max-length", k.MaxLength)
	} else if explicit {
		f = append(f, "max-length", contract.DefaultKeyMaxLength)
	}
	return f
}

// sameKey reports whether two declarations give the same key block.
func sameKey(a, b Key) bool {
	return a.Carrier == b.Carrier && a.Name == b.Name && a.Required == b.Required && a.Format == b.Format && a.MaxLength == b.MaxLength
}

// commonKey is the declaration most operations share (the first on a tie).
func (p *Proposal) commonKey() Key {
	best, bestN := p.Candidates[0].Key, 0
	for _, c := range p.Candidates {
		n := 0
		for _, o := range p.Candidates {
			if sameKey(c.Key, o.Key) {
				n++
			}
		}
		if n > bestN {
			best, bestN = c.Key, n
		}
	}
	return best
}

const todo = augment.TODO + ": "

// document builds the overlay.
func (p *Proposal) document(title, specName, ovName string, withRoot, rootKey bool) *yaml.Node {
	actions := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	var root Key
	if withRoot {
		block := node(
			"semantics", comment(string(ProposedSemantics), todo+"confirm. strict: a repeated key with a different request is refused (422); loose: a repeated key gets the first response whatever the request; window: repeats inside the window get the first response, the key is optional"),
			"window", comment(ProposedWindow, todo+"confirm how long a key is remembered (at least 1.5 x the client's longest retry span: 5.25s with the default retry policy)"),
			"failures", comment(ProposedFailures, todo+"confirm what a 5xx or a handler error does to the key. retry: it frees the key, so a retry runs the operation again (a handler that always fails runs up to 4 times per call with the default retry policy); replay: a 5xx response (a strict handler's returned error answered by the generated error handler included) is stored and replayed like a success (a panic still frees the key). Choose replay when a 5xx may follow a side effect (money moved, then writing the answer failed)"),
		)
		if rootKey {
			root = p.commonKey()
			set := node("key", keyNode(root, false))
			block.Content = append(block.Content, set.Content...)
		}
		actions.Content = append(actions.Content, node(
			"target", "$",
			"description", "Defaults for every operation below; confirm semantics and window.",
			"update", node("x-idempotency", block),
		))
	}
	for _, c := range p.Candidates {
		var block *yaml.Node
		if rootKey && sameKey(c.Key, root) && len(c.Volatile) == 0 && len(c.Unordered) == 0 && len(c.ResponseHeaders) == 0 && len(c.FingerprintHeaders) == 0 && c.Multipart == "" {
			block = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}
		} else {
			var fields []any
			if c.Multipart != "" {
				why := todo + "confirm. loose, not strict: the body is " + c.Multipart + ", which the fingerprint compares byte for byte, its boundary included, so a client that makes a new boundary for each attempt would be refused on every retry (check warns [raw-body-strict]); loose compares only the key"
				if c.AlsoJSON != "" {
					why += ". The body may also be " + c.AlsoJSON + ", which loses under loose the check that a reused key comes with the same request (422): keep strict if its clients matter more, and silence [raw-body-strict] with the reason"
				}
				fields = append(fields, "semantics", comment(string(ir.Loose), why))
			}
			if !rootKey || !sameKey(c.Key, root) {
				fields = append(fields, "key", keyNode(c.Key, rootKey))
			}
			if len(c.Volatile) > 0 {
				fields = append(fields, "volatile", comment(flow(seq(c.Volatile)), todo+"confirm: members that may change between retries of one call, left out of the comparison"))
			}
			if len(c.Unordered) > 0 {
				fields = append(fields, "unordered", comment(flow(seq(c.Unordered)), todo+"confirm: arrays whose order does not matter"))
			}
			if len(c.FingerprintHeaders) > 0 {
				fields = append(fields, "fingerprint-headers", comment(flow(seq(c.FingerprintHeaders)), todo+"confirm: request headers the operation declares, compared with the body, so that a reused key with another value of one is refused (422), not given the first request's replay; delete any whose value changes between attempts of one call (a signature, a client clock) and silence [header-not-fingerprinted] for the operation with why"))
			}
			if len(c.ResponseHeaders) > 0 {
				fields = append(fields, "response", comment(flow(node("headers", flow(seq(c.ResponseHeaders)))), "headers the 2xx responses declare: a replay carries only those listed"))
			}
			block = node(fields...)
		}
		desc := fmt.Sprintf("%s declares the key %s.", c.Where(), c.Key.describe())
		for _, o := range c.Others {
			desc += fmt.Sprintf(" It also declares %s, not used as the key.", o.describe())
		}
		actions.Content = append(actions.Content, node(
			"target", target(c.Path, c.Method),
			"description", desc,
			"update", node("x-idempotency", block),
		))
	}
	doc := node(
		"overlay", "1.0.0",
		"info", node("title", "Idempotency contracts for "+title+" (proposed by idemgen init)", "version", "0.1.0"),
		"actions", actions,
	)
	head := []string{
		fmt.Sprintf("Proposed by `idemgen init %s`: an x-idempotency contract for %s", specName, english.Noun(len(p.Candidates), "the one operation", fmt.Sprintf("each of the %d operations", len(p.Candidates)))),
		english.Noun(len(p.Candidates), "that declares", "that declare") + " an idempotency key, matching how the spec declares it.",
		"",
		"Review every value marked " + augment.TODO + " and delete the mark when it is right:",
		fmt.Sprintf("  idemgen check -overlay %s %s", ovName, specName),
		"reports each one as [unconfirmed] until then. Every field: " + ContractDocs + "#fields",
	}
	if len(p.Notes) > 0 {
		head = append(head, "", "Not annotated:")
		for _, n := range p.Notes {
			head = append(head, fmt.Sprintf("  %s declares the key %s, but %s.", n.Where(), n.Key.describe(), n.Reason))
		}
	}
	doc.HeadComment = strings.Join(head, "\n")
	return &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}
}

func target(path, method string) string {
	return "$.paths['" + strings.ReplaceAll(strings.ReplaceAll(path, `\`, `\\`), `'`, `\'`) + "']." + strings.ToLower(method)
}

func node(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, scalar(kv[i]), scalar(kv[i+1]))
	}
	return n
}

func scalar(v any) *yaml.Node {
	switch v := v.(type) {
	case *yaml.Node:
		return v
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	}
	panic(fmt.Sprintf("initspec: no node for %T", v))
}

func seq(items []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, s := range items {
		n.Content = append(n.Content, scalar(s))
	}
	return n
}

func flow(n *yaml.Node) *yaml.Node { n.Style = yaml.FlowStyle; return n }

func comment(v any, c string) *yaml.Node {
	n := scalar(v)
	n.LineComment = "# " + c
	return n
}
