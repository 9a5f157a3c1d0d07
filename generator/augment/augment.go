// Package augment writes into an OpenAPI spec what its x-idempotency
// contracts imply, so that the spec (and the code oapi-codegen generates
// from it) declares the API idemgen's runtime serves (`idemgen spec`):
//
//   - the key parameter (header or query, with format and maxLength) when
//     the operation does not declare it; for a key in the body, a note,
//     maxLength and format in the member's schema;
//   - the problem responses (application/problem+json, one shared
//     components.schemas.IdempotencyProblem) for 400, 409, 422 (strict
//     semantics) and 503, as components.responses.Idempotency*, with
//     Retry-After on the in-flight status and 503;
//   - Idempotent-Replayed on the responses that may be replays;
//   - a contract summary in the operation's description, between markers,
//     so a later run replaces it instead of appending.
//
// Existing declarations are respected: a declared key parameter (inline
// or $ref) is not declared again, a declared response is not replaced (it
// only gains the headers above when inline), components of the spec's
// authors are never changed. Running it twice changes nothing.
//
// Every change is an OpenAPI Overlay 1.0 action: Augment applies them to
// the document (with the overlay library's own merge) and also returns them
// as an overlay document (`-as-overlay`), so a vendor's spec need not be
// rewritten: loading the spec with that overlay gives the same document.
//
// The same plan is the spec-consistency check of `idemgen check`
// (Diagnose): what it would add is reported with a rule id each.
package augment

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/speakeasy-api/openapi/overlay"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/generator/specfile"
)

// Options configure Augment and Diagnose.
type Options struct {
	Overlays []string // OpenAPI Overlay 1.0 files applied first, in order
	// Strict makes the spec-consistency findings errors (default: warnings).
	Strict bool
	// NoReplayedHeader leaves the Idempotent-Replayed header out of the
	// responses (idemgen.yaml's replayed-header: false): declared on a
	// response, it gives the response's type in oapi-codegen's strict
	// server a Headers field, so a handler's `return
	// api.AddPet200JSONResponse(pet), nil` must become `return
	// api.AddPet200JSONResponse{Body: pet}, nil`. Declarations an earlier
	// run wrote are removed (and reported as spec-stale); the runtime sends
	// the header on replays either way.
	NoReplayedHeader bool
	// Ignore silences warnings (Augment only; besides the spec's
	// # idemgen:ignore comments): see Silence.
	Ignore []diag.Ignore
	// IgnoreDiags are the errors [bad-ignore] of the ignores that could not
	// be given (the config file's malformed entries): Augment reports them
	// with the spec's diagnostics, before the ignores apply.
	IgnoreDiags diag.List
}

// Result is an augmented spec.
type Result struct {
	// Spec is the augmented document, in the format of the source file.
	Spec []byte
	// Overlay is an Overlay 1.0 document (YAML) with the same changes, to
	// apply after Options.Overlays.
	Overlay []byte
	// Actions is the number of overlay actions (0: the spec already
	// declares everything).
	Actions int
	// Format is the source file's format.
	Format specfile.Format
}

// tolerated are the errors augmentation fixes itself.
var tolerated = map[string]bool{"key-undeclared": true}

// Augment loads the spec at path with the overlays, compiles its contracts
// and augments it. It returns a nil Result when the spec has errors (other
// than an undeclared query key, which augmentation declares), or when the
// contracts hold values still to be confirmed (see Unconfirmed); the
// diagnostics say why, and carry the warnings otherwise.
//
// The diagnostics are those the ignores leave (see Silence): the comments
// of the spec's and opts.Ignore. A bad ignore (an error [bad-ignore], of
// the comments, opts.Ignore or opts.IgnoreDiags) gives a nil Result too.
func Augment(path string, opts Options) (*Result, diag.List) {
	res, d, spec, diags := augmentSpec(path, opts)
	diags = append(diags, opts.IgnoreDiags...)
	diags = Silence(d, spec, diags, opts.Ignore, func(rule string) bool { return !checkOnly[rule] })
	if slices.ContainsFunc(diags, func(x diag.Diagnostic) bool { return x.Severity == diag.Error && x.Rule == diag.RuleBadIgnore }) {
		return nil, diags // as check, which exits 1 for it
	}
	return res, diags
}

// checkOnly are the rules Augment does not check (it declares what they
// report missing, or rewrites what is stale).
var checkOnly = map[string]bool{RuleKeyParamMissing: true, RuleProblemResponseMissing: true, RuleRetryAfterMissing: true, RuleSpecStale: true}

func augmentSpec(path string, opts Options) (*Result, *load.Document, *ir.Spec, diag.List) {
	// Loaded once: the contracts are compiled from the tree the plan then
	// changes (compile only reads it), and the format is detected before
	// the overlays change it.
	d, spec, diags := compile.LoadAndCompile(path, load.Options{Overlays: opts.Overlays, Format: true}, compile.Options{})
	if spec == nil {
		return nil, d, nil, diags
	}
	diags = append(diags, Unconfirmed(d)...)
	for _, x := range diags {
		if x.Severity == diag.Error && !tolerated[x.Rule] {
			return nil, d, spec, diags.Sorted()
		}
	}
	p := plan(d.Root, d, spec.Operations, opts.NoReplayedHeader)
	diags = append(diags, p.diagnostics(d, false, true)...)
	if err := applyOverlay(d.Root, p.actions, p.opNodes); err != nil {
		diags.Errorf(ir.Pos{File: path}, "internal-error", "idemgen failed to apply its own changes (please report it): %v", err)
		return nil, d, spec, diags.Sorted()
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{d.Root}, HeadComment: d.HeadComment, FootComment: d.FootComment}
	out, err := specfile.Encode(doc, d.Format)
	if err != nil {
		diags.Errorf(ir.Pos{File: path}, "internal-error", "cannot write the augmented spec: %v", err)
		return nil, d, spec, diags.Sorted()
	}
	if src, err := os.ReadFile(path); err == nil && !d.Format.JSON {
		// What the change left untouched keeps its text: multi-line
		// scalars (the encoder would join or rewrap them) and whole
		// mapping entries (blank lines, trailing spaces, indentation).
		out = specfile.KeepUntouched(specfile.LF(src), specfile.LF(out))
		if d.Format.CRLF {
			out = bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
		}
	}
	ovBytes, err := OverlayDocument(spec, path, p.actions)
	if err != nil {
		diags.Errorf(ir.Pos{File: path}, "internal-error", "cannot write the overlay: %v", err)
		return nil, d, spec, diags.Sorted()
	}
	return &Result{Spec: out, Overlay: ovBytes, Actions: len(p.actions), Format: d.Format}, d, spec, diags.Sorted()
}

// OverlayDocument writes actions as an Overlay 1.0 YAML document.
func OverlayDocument(spec *ir.Spec, path string, actions []overlay.Action) ([]byte, error) {
	title := spec.Title
	if title == "" {
		title = filepath.Base(path)
	}
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, a := range actions {
		n := mapping("target", a.Target)
		if a.Description != "" {
			set(n, "description", str(a.Description))
		}
		if a.Remove {
			set(n, "remove", toNode(true))
		} else {
			u := a.Update
			set(n, "update", &u)
		}
		list.Content = append(list.Content, n)
	}
	version := spec.Version
	if version == "" {
		version = "0.0.0"
	}
	root := mapping(
		"overlay", "1.0.0",
		"info", mapping("title", "Idempotency declarations for "+title, "version", version),
		"actions", list,
	)
	root.HeadComment = "Generated by `idemgen spec -as-overlay` from " + filepath.Base(path) + ": what its x-idempotency\ncontracts imply, declared in the spec. Apply it after the contract overlays. DO NOT EDIT."
	return specfile.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}, specfile.DefaultYAML)
}

// Diagnose returns the diagnostics of the spec at path beyond the contract
// checks of package compile: values idemgen init proposed that are not
// confirmed yet (rule "unconfirmed", errors), and what the spec does not
// declare although spec's contracts imply it (key-param-missing,
// problem-response-missing, retry-after-missing) or what an earlier
// Augment wrote and the contracts have changed since (spec-stale):
// warnings, errors with Options.Strict. Operations whose contract is unconfirmed get only the
// former. spec is the IR compiled from the same path and overlays.
func Diagnose(path string, spec *ir.Spec, opts Options) diag.List {
	if spec == nil {
		return nil
	}
	d, _ := load.Load(path, load.Options{Overlays: opts.Overlays})
	if d == nil {
		return nil // compile reported why
	}
	return DiagnoseDocument(d, spec, opts)
}

// DiagnoseDocument is Diagnose for a spec loaded already (with its
// overlays; opts.Overlays is not read), from which spec was compiled
// (compile.LoadAndCompile).
func DiagnoseDocument(d *load.Document, spec *ir.Spec, opts Options) diag.List {
	if spec == nil {
		return nil
	}
	diags := Unconfirmed(d)
	p := plan(d.Root, d, spec.Operations, opts.NoReplayedHeader)
	return append(diags, p.diagnostics(d, opts.Strict, false)...).Sorted()
}

// diagnostics turns the plan's findings into diagnostics; notAugmented
// selects the findings about what could not be changed (for Augment)
// rather than what is missing (for Diagnose).
func (p *planner) diagnostics(d *load.Document, strict, notAugmented bool) diag.List {
	var diags diag.List
	unconfirmedRoot := hasTODO(child(d.Root, "x-idempotency"))
	src := sources{}
	for _, f := range p.findings {
		if (f.rule == RuleNotAugmented) != notAugmented {
			continue
		}
		if !notAugmented && (unconfirmedRoot || hasTODO(child(p.anyOperationNode(f.op), "x-idempotency"))) {
			continue // confirm the contract first: what it implies may change
		}
		if !notAugmented && f.rule == RuleKeyParamMissing && f.op.Key.Carrier == ir.CarrierQuery {
			continue // compile reports it already (key-undeclared, an error)
		}
		pos := f.op.Pos
		if f.pos.File != "" {
			pos = f.pos
		} else if f.rule == RuleKeyParamMissing {
			// About the whole operation: at its method key (post:), as
			// compile's key-without-contract.
			item := load.Node{Node: child(child(d.Root, "paths"), f.op.Path), File: d.Path, Pointer: "/paths/" + load.Escape(f.op.Path)}
			if kp := d.KeyPos(item, strings.ToLower(f.op.Method)); kp.Line > 0 {
				pos = kp
			}
		} else if f.node != nil {
			if np := d.Pos(f.node, d.Path, ""); np.Line > 0 {
				pos = np
				if f.block {
					pos = src.markerPos(pos, f.node, p.nodeAfter(d, f.node, pos.File))
				}
			}
		}
		h, alone := hint(f.rule, len(d.Overlays) > 0), ""
		if cand, ok := mismatchedKey(d, f.op); ok {
			// compile reports [key-convention-mismatch] too: when the
			// header the operation declares is the key, idemgen spec
			// would declare the contract's beside it, a second key.
			switch f.rule {
			case RuleKeyParamMissing:
				h, alone = compile.MismatchedKeyHint(cand, f.op.Key.Name), compile.MismatchedKeyHintAlone(cand, f.op.Key.Name)
			case RuleProblemResponseMissing, RuleRetryAfterMissing:
				h = " (settle [" + compile.RuleConventionMismatch + "] first, then run idemgen spec, or apply the overlay idemgen spec -as-overlay writes)"
				alone = fmt.Sprintf(" (if the %s %s it declares is its key, set key.%s: %s in the contract first; then run idemgen spec, or apply the overlay idemgen spec -as-overlay writes)", cand.Carrier, cand.Name, cand.Carrier, cand.Name)
			}
		}
		if f.manual {
			h, alone = "", ""
		}
		if strict && !notAugmented {
			diags.Errorf(pos, f.rule, "%s", f.msg+h)
		} else {
			diags.Warnf(pos, f.rule, "%s", f.msg+h)
		}
		diags[len(diags)-1].Ops = []string{f.op.Where()}
		if alone != "" {
			diags.Cite(compile.RuleConventionMismatch, f.msg+alone)
		}
	}
	return diags
}

// mismatchedKey returns the key op declares by convention when it is not
// the contract's (compile.MismatchedKey).
func mismatchedKey(d *load.Document, op *ir.Operation) (compile.KeyCandidate, bool) {
	if d.T == nil || d.T.Paths == nil {
		return compile.KeyCandidate{}, false
	}
	item := d.T.Paths.Value(op.Path)
	if item == nil {
		return compile.KeyCandidate{}, false
	}
	kop := item.GetOperation(strings.ToUpper(op.Method))
	if kop == nil {
		return compile.KeyCandidate{}, false
	}
	return compile.MismatchedKey(kop, item.Parameters, op.Key)
}

// hint says how to act on a finding of rule; overlays: the spec was
// checked with overlays applied.
func hint(rule string, overlays bool) string {
	switch rule {
	case RuleKeyParamMissing, RuleProblemResponseMissing, RuleRetryAfterMissing:
		return " (run idemgen spec, or apply the overlay idemgen spec -as-overlay writes)"
	case RuleSpecStale:
		if overlays {
			// Running idemgen spec again with the overlays on a spec it
			// wrote them into applies them twice: their lists double.
			return " (if idemgen spec -o already wrote these overlays into the spec, it holds their contracts: edit them there, run idemgen spec on the spec alone and check the spec alone, since applying an overlay again appends its lists a second time; otherwise run idemgen spec again with these overlays, on the original spec or with -as-overlay)"
		}
		return " (run idemgen spec again)"
	}
	return ""
}

// TODO is the mark idemgen init puts in a comment on each value it
// proposes and the team must confirm; `idemgen check` reports every such
// value (rule "unconfirmed") until the comment is deleted.
const TODO = "TODO(idemgen)"

// Unconfirmed reports, as errors with rule "unconfirmed", every value of
// an x-idempotency block (the document root's or an operation's) that
// carries a TODO(idemgen) comment.
func Unconfirmed(d *load.Document) diag.List {
	var diags diag.List
	eachBlock(d, func(_ *yaml.Node, block load.Node, op string) {
		where := op
		if where == "" {
			where = "document root"
		}
		walkComments(block.Node, block.Pointer, func(n *yaml.Node, ptr, comment string) {
			field := strings.TrimPrefix(strings.TrimPrefix(ptr, block.Pointer), "/")
			if field == "" {
				field = "x-idempotency"
			}
			msg := strings.TrimSpace(strings.TrimPrefix(comment[strings.Index(comment, TODO)+len(TODO):], ":"))
			if msg != "" {
				msg = " (" + msg + ")"
			}
			diags.Errorf(d.Pos(n, block.File, ptr), "unconfirmed", "%s %s: proposed by idemgen init and not confirmed yet%s; check the value and delete the %s comment", where, strings.ReplaceAll(field, "/", "."), msg, TODO)
		})
	})
	return diags
}

// eachBlock calls f for the x-idempotency block of the document root (op
// "") and of each operation (op "METHOD /path"), with the key node that
// names it in its mapping.
func eachBlock(d *load.Document, f func(key *yaml.Node, block load.Node, op string)) {
	if x := d.Lookup("/x-idempotency"); x.Node != nil {
		f(keyNode(d.Root, "x-idempotency"), x, "")
	}
	paths := d.Deref(d.Lookup("/paths"))
	if paths.Node == nil || paths.Kind != yaml.MappingNode {
		return
	}
	pkv := yamlmerge.Pairs(paths.Node)
	for i := 0; i+1 < len(pkv); i += 2 {
		path := pkv[i].Value
		item := load.Node{Node: pkv[i+1], File: paths.File, Pointer: paths.Pointer + "/" + load.Escape(path)}
		item = d.Deref(item)
		if item.Node == nil || item.Kind != yaml.MappingNode {
			continue
		}
		ikv := yamlmerge.Pairs(item.Node)
		for j := 0; j+1 < len(ikv); j += 2 {
			method := ikv[j].Value
			op := load.Node{Node: ikv[j+1], File: item.File, Pointer: item.Pointer + "/" + load.Escape(method)}
			if x := child(op.Node, "x-idempotency"); x != nil {
				f(keyNode(op.Node, "x-idempotency"), load.Node{Node: x, File: op.File, Pointer: op.Pointer + "/x-idempotency"}, ir.Where(method, path))
			}
		}
	}
}

// keyNode returns the key node of key in mapping m (nil if none).
func keyNode(m *yaml.Node, key string) *yaml.Node {
	m = unalias(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	kv := yamlmerge.Pairs(m)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i].Value == key {
			return kv[i]
		}
	}
	return nil
}

// walkComments calls f for every node below n (n included) whose comments
// hold the TODO mark; a key's head comment counts for its value.
func walkComments(n *yaml.Node, ptr string, f func(n *yaml.Node, ptr, comment string)) {
	const mark = TODO
	var walk func(n *yaml.Node, ptr string, depth int)
	walk = func(n *yaml.Node, ptr string, depth int) {
		if n == nil || depth > 64 {
			return
		}
		for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
			if strings.Contains(c, mark) {
				f(n, ptr, firstLineWith(c, mark))
				break
			}
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := ptr + "/" + load.Escape(k.Value)
				for _, c := range []string{k.HeadComment, k.LineComment, k.FootComment} {
					if strings.Contains(c, mark) {
						f(v, p, firstLineWith(c, mark))
						break
					}
				}
				walk(v, p, depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s/%d", ptr, i), depth+1)
			}
		}
	}
	walk(n, ptr, 0)
}

func firstLineWith(comment, s string) string {
	for _, l := range strings.Split(comment, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "#"))
		}
	}
	return comment
}

// hasTODO reports whether a block holds a TODO(idemgen) comment.
func hasTODO(n *yaml.Node) bool {
	found := false
	walkComments(n, "", func(*yaml.Node, string, string) { found = true })
	return found
}

// Apply applies the plan for ops to the tree under root (a spec's root
// mapping) and returns the number of actions; the same changes as Augment,
// without files: for tests and tools that hold the tree already.
func Apply(root *yaml.Node, ops []*ir.Operation) (int, error) {
	p := plan(root, nil, ops, false)
	if len(p.actions) == 0 {
		return 0, nil
	}
	return len(p.actions), applyOverlay(root, p.actions, p.opNodes)
}
