package augment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/speakeasy-api/openapi/overlay"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emit/docs"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/generator/naming"
)

// Markers delimit the contract summary idemgen writes into an operation's
// description (and the key note in a body member's): a later run replaces
// what is between them and leaves the rest of the text alone. They are
// HTML comments, invisible in rendered Markdown.
const (
	BeginMarker = "<!-- idemgen:contract -->"
	EndMarker   = "<!-- /idemgen:contract -->"
)

// Finding kinds: what the spec does not declare although the contract implies it.
const (
	RuleKeyParamMissing        = "key-param-missing"
	RuleProblemResponseMissing = "problem-response-missing"
	RuleRetryAfterMissing      = "retry-after-missing"
	// RuleNotAugmented: idemgen spec could not change this part of the spec
	// (a $ref to another document, an unusual node); a warning.
	RuleNotAugmented = "spec-not-augmented"
	// RuleSpecStale: what an earlier idemgen spec wrote (the contract
	// summary between the markers, the key note of a body member, a
	// component marked as idemgen's) differs from what it would write now:
	// the contract changed since.
	RuleSpecStale = "spec-stale"
)

// finding is one thing the plan adds (or cannot add) for an operation.
type finding struct {
	rule string
	op   *ir.Operation
	node *yaml.Node // where, in the spec (nil: the operation)
	msg  string
	// block: node is a text with a contract block, which the finding is
	// about (reported at its BeginMarker).
	block bool
	// pos, when set, is where to report it (another document).
	pos ir.Pos
	// manual: idemgen spec cannot fix it (it is in another document); the
	// message says what to declare where, and no hint names idemgen spec.
	manual bool
}

// planner computes the overlay actions that declare in the spec what the
// contracts imply. It only reads the tree; Apply changes it.
type planner struct {
	root    *yaml.Node
	doc     *load.Document // the loaded spec, to read other documents (nil: this one only)
	parents parents
	comps   *components
	roles   map[int]roles // union over all operations, per status
	actions []overlay.Action
	opNodes []*yaml.Node        // the operations an action updates
	edited  map[*yaml.Node]bool // shared nodes already changed by an action
	// keyMembers are the body key member schemas of the operations whose
	// key is in the body (only those keyMember finds).
	keyMembers map[*ir.Operation]*yaml.Node
	// keyOps are the operations whose body key is each member schema
	// (several when they share a request body or schema), sorted.
	keyOps   map[*yaml.Node][]string
	findings []finding
	// noReplayed: declare no Idempotent-Replayed header, and remove the
	// declarations an earlier run wrote (Options.NoReplayedHeader);
	// replayedRemoved counts them per component name.
	noReplayed      bool
	replayedRemoved map[string]int
}

// Plan returns the actions that augment the spec whose root mapping is
// root with the contracts of ops, in the order to apply them, and what
// each operation lacked. It never fails: what it cannot change is reported
// as a RuleNotAugmented finding and left alone. ops must come from the same
// document (the IR compiled from it).
func plan(root *yaml.Node, doc *load.Document, ops []*ir.Operation, noReplayed bool) *planner {
	p := &planner{root: root, doc: doc, parents: indexParents(root), comps: newComponents(root), roles: map[int]roles{}, edited: map[*yaml.Node]bool{}, keyMembers: map[*ir.Operation]*yaml.Node{}, keyOps: map[*yaml.Node][]string{},
		noReplayed: noReplayed, replayedRemoved: map[string]int{}}
	for _, op := range ops {
		if op.Key.Carrier == ir.CarrierBody {
			if m := p.keyMember(op, p.operationNode(op)); m != nil {
				p.keyMembers[op] = m
				p.keyOps[m] = append(p.keyOps[m], op.Where())
			}
		}
		for s, r := range statusRoles(op) {
			u := p.roles[s]
			for i := range r {
				u[i] = u[i] || r[i]
			}
			p.roles[s] = u
		}
	}
	for m, ops := range p.keyOps {
		slices.Sort(ops)
		p.keyOps[m] = slices.Compact(ops)
	}
	p.shareKeyParams(ops)
	var opActions []overlay.Action
	for _, op := range ops {
		seen := len(p.comps.stale)
		if a, ok := p.operation(op); ok {
			opActions = append(opActions, a)
		}
		for _, s := range p.comps.stale[seen:] {
			if h := replayedOnly(s); h != nil {
				// Only the Idempotent-Replayed header of the 409
				// IDEMPOTENCY_RESPONSE_UNAVAILABLE answer differs: no rule
				// requires it, and replayed-header: false removes it.
				if p.noReplayed {
					if ptr, _ := refTarget(h); strings.HasPrefix(ptr, "/components/headers/") {
						p.replayedRemoved[load.Unescape(strings.TrimPrefix(ptr, "/components/headers/"))]++
					}
					p.found(RuleSpecStale, op, h, "the component %s %s declares the Idempotent-Replayed header that idemgen spec wrote, and replayed-header is false now", s.kind, s.name)
				}
				continue
			}
			p.found(RuleSpecStale, op, firstDifference(s.def, s.want), "the component %s %s that idemgen spec wrote is stale: the contract of %s implies another one now", s.kind, s.name, op.Where())
		}
	}
	first := p.unusedReplayedHeaders()
	for _, kind := range p.comps.kinds {
		var names []string
		for _, s := range p.comps.stale {
			if s.kind == kind {
				names = append(names, s.name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			first = append(first, overlay.Action{Target: "$.components." + kind + "['" + name + "']", Remove: true,
				Description: "Replace idemgen's " + kind + " " + name + " (the contracts changed)."})
		}
	}
	if u := p.comps.update(); u != nil {
		first = append(first, overlay.Action{Target: "$", Description: "Shared declarations of idemgen's runtime: problem responses, headers, key parameters.", Update: *u})
	}
	p.actions = append(append(first, p.actions...), opActions...)
	return p
}

func (p *planner) notAugmented(op *ir.Operation, n *yaml.Node, format string, args ...any) {
	p.findings = append(p.findings, finding{rule: RuleNotAugmented, op: op, node: n, msg: fmt.Sprintf(format, args...)})
}

func (p *planner) found(rule string, op *ir.Operation, n *yaml.Node, format string, args ...any) {
	p.findings = append(p.findings, finding{rule: rule, op: op, node: n, msg: fmt.Sprintf(format, args...)})
}

// staleBlock reports the contract block of text n as stale.
func (p *planner) staleBlock(op *ir.Operation, n *yaml.Node, format string, args ...any) {
	p.findings = append(p.findings, finding{rule: RuleSpecStale, op: op, node: n, msg: fmt.Sprintf(format, args...), block: true})
}

// target returns the JSONPath of n, checked to select exactly n.
func (p *planner) target(n *yaml.Node) (string, bool) {
	path, ok := p.parents.jsonPath(p.root, n)
	if !ok {
		return "", false
	}
	ov := overlay.Overlay{Version: "1.0.0"}
	q, err := ov.NewPath(path, nil)
	if err != nil {
		return "", false
	}
	got := q.Query(p.root)
	if len(got) != 1 || got[0] != n {
		return "", false
	}
	return path, true
}

// operationNode finds the operation in the tree (not through $refs: what
// lives in a component or another document is not the operation's to change).
func (p *planner) operationNode(op *ir.Operation) *yaml.Node {
	return child(child(child(p.root, "paths"), op.Path), strings.ToLower(op.Method))
}

func (p *planner) operation(op *ir.Operation) (overlay.Action, bool) {
	opNode := p.operationNode(op)
	if !isMapping(opNode) {
		if !p.external(op) {
			p.notAugmented(op, nil, "%s is not written in this document (its path item is a $ref or missing): declare its idempotency there", op.Where())
		}
		return overlay.Action{}, false
	}
	upd := mapping()
	p.keyParam(op, opNode, upd)
	p.responses(op, opNode, upd)
	p.description(op, opNode, upd)
	if op.Key.Carrier == ir.CarrierBody {
		p.bodyMember(op, opNode)
	}
	if len(upd.Content) == 0 {
		return overlay.Action{}, false
	}
	path, ok := p.target(opNode)
	if !ok {
		p.notAugmented(op, opNode, "%s cannot be addressed by an overlay target", op.Where())
		return overlay.Action{}, false
	}
	var what []string
	for i := 0; i < len(upd.Content); i += 2 {
		what = append(what, upd.Content[i].Value)
	}
	p.opNodes = append(p.opNodes, opNode)
	return overlay.Action{Target: path, Description: "Idempotency of " + op.Where() + ": " + strings.Join(what, ", ") + ".", Update: *complete(opNode, upd)}, true
}

// externalOperation returns the operation op in the document its path
// item's $ref names (the zero Node when it cannot be read).
func (p *planner) externalOperation(op *ir.Operation) (item, opn load.Node) {
	if p.doc == nil {
		return load.Node{}, load.Node{}
	}
	item = load.Node{Node: child(child(p.root, "paths"), op.Path), File: p.doc.Path, Pointer: "/paths/" + load.Escape(op.Path)}
	if item.Node == nil {
		return load.Node{}, load.Node{}
	}
	opn = p.doc.Deref(p.doc.LookupFrom(item, "/"+load.Escape(strings.ToLower(op.Method))))
	if !isMapping(opn.Node) {
		return load.Node{}, load.Node{}
	}
	return item, opn
}

// external checks an operation written in another document (its path
// item is a $ref), which idemgen spec does not change: what its contract
// implies and that document does not declare is reported there (for
// check, without a hint to run idemgen spec) and listed in one
// RuleNotAugmented finding (for spec). It returns false when that
// document cannot be read.
func (p *planner) external(op *ir.Operation) bool {
	item, opn := p.externalOperation(op)
	if opn.Node == nil {
		return false
	}
	at := p.doc.KeyPos(item, strings.ToLower(op.Method))
	file := opn.File
	var todo []string
	if k := op.Key; k.Carrier != ir.CarrierBody && k.Param == nil {
		p.findings = append(p.findings, finding{rule: RuleKeyParamMissing, op: op, pos: at, manual: true,
			msg: fmt.Sprintf("%s does not declare its idempotency key (%s %s) as a parameter: declare it in %s (%s), which idemgen spec does not change", op.Where(), k.Carrier, k.Name, file, compile.KeyParamText(k))})
		todo = append(todo, "the key parameter ("+compile.KeyParamText(k)+")")
	}
	resps := p.doc.LookupFrom(opn, "/responses")
	respsPos := at
	if resps.Node != nil {
		respsPos = p.doc.NodePos(resps)
	}
	sr := statusRoles(op)
	statuses := make([]int, 0, len(sr))
	for s := range sr {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	var missing, missingRetry, noRetry []string
	for _, s := range statuses {
		code := strconv.Itoa(s)
		var r load.Node
		if resps.Node != nil {
			r = p.doc.LookupFrom(resps, "/"+code)
		}
		if r.Node == nil {
			missing = append(missing, code)
			if sr[s].retryAfter() {
				missingRetry = append(missingRetry, code)
			}
			continue
		}
		if !sr[s].retryAfter() {
			continue
		}
		rr := p.doc.Deref(r)
		if rr.Node == nil || childFold(child(rr.Node, "headers"), "Retry-After") != nil {
			continue // a remote document, or declared
		}
		p.findings = append(p.findings, finding{rule: RuleRetryAfterMissing, op: op, pos: p.doc.NodePos(r), manual: true,
			msg: fmt.Sprintf("the %s response of %s does not declare the Retry-After header idemgen's runtime sends with it: declare it in %s (%s), which idemgen spec does not change", code, op.Where(), rr.File, retryAfterText)})
		noRetry = append(noRetry, code)
	}
	if len(missing) > 0 {
		what := fmt.Sprintf("the problem response%s %s (%s)", english.Plural(len(missing)), strings.Join(missing, ", "), problemText(missingRetry))
		p.findings = append(p.findings, finding{rule: RuleProblemResponseMissing, op: op, pos: respsPos, manual: true,
			msg: fmt.Sprintf("%s does not declare the problem response%s %s that idemgen's runtime may answer with: declare %s in %s, which idemgen spec does not change", op.Where(), english.Plural(len(missing)), strings.Join(missing, ", "), english.Noun(len(missing), "it", "them"), file)})
		todo = append(todo, what)
	}
	if len(noRetry) > 0 {
		todo = append(todo, fmt.Sprintf("the Retry-After header (%s) on the %s response%s", retryAfterText, strings.Join(noRetry, ", "), english.Plural(len(noRetry))))
	}
	if len(todo) == 0 {
		p.findings = append(p.findings, finding{rule: RuleNotAugmented, op: op, pos: at,
			msg: fmt.Sprintf("%s is written in %s, which idemgen spec does not change: it declares what its contract implies, but its description has no contract summary", op.Where(), file)})
		return true
	}
	p.findings = append(p.findings, finding{rule: RuleNotAugmented, op: op, pos: at,
		msg: fmt.Sprintf("%s is written in %s, which idemgen spec does not change: declare there %s", op.Where(), file, strings.Join(todo, "; "))})
	return true
}

// retryAfterText says what a Retry-After header declares.
const retryAfterText = "a header Retry-After with schema {type: integer, minimum: 0}, the seconds to wait before retrying with the same key"

// problemText describes the problem responses to declare; retry are those
// of them that carry Retry-After.
func problemText(retry []string) string {
	s := "each with an application/problem+json body, as idemgen spec declares them in components.responses"
	if len(retry) > 0 {
		s += fmt.Sprintf(", and %s on %s", retryAfterText, strings.Join(retry, ", "))
	}
	return s
}

// keyParam declares the key header or query parameter when the operation
// (or its path item) does not.
func (p *planner) keyParam(op *ir.Operation, opNode, upd *yaml.Node) {
	k := op.Key
	if k.Carrier == ir.CarrierBody {
		return
	}
	def, base := keyParamDef(k)
	if e := p.declared(op, opNode); e != nil {
		// idemgen's own parameter from an earlier run: replaced in place
		// (and reported stale) when the key changed.
		if ok, name := p.comps.currentRef("parameters", e, def); !ok {
			p.repointKeyParam(op, opNode, e, name, def, base)
		}
		return
	}
	if k.Param != nil {
		return
	}
	var r string
	if name := p.existingParam(k); name != "" {
		p.comps.current("parameters", name, def)
		r = componentRef("parameters", name)
	} else {
		// Not replace: the definition depends on the key, and a marked
		// parameter of that name may be another operation's (which
		// replaces it in place itself, through current).
		r = p.comps.ref("parameters", base, def, false)
	}
	params := child(opNode, "parameters")
	if params != nil && params.Kind != yaml.SequenceNode {
		p.notAugmented(op, params, "the parameters of %s are not a list", op.Where())
		return
	}
	set(upd, "parameters", toNode([]*yaml.Node{ref(r)}))
	p.found(RuleKeyParamMissing, op, opNode, "%s does not declare its idempotency key (%s %s) as a parameter", op.Where(), k.Carrier, k.Name)
}

// shareKeyParams tells p.comps, for each of idemgen's key parameter
// components that several operations of ops refer to, the declarations
// they want now (components.share): the operations whose contract changed
// get components of their own, whatever their place in the paths.
func (p *planner) shareKeyParams(ops []*ir.Operation) {
	var names []string
	wants := map[string][]*yaml.Node{}
	for _, op := range ops {
		opNode := p.operationNode(op)
		if op.Key.Carrier == ir.CarrierBody || !isMapping(opNode) {
			continue
		}
		e := p.declared(op, opNode)
		if e == nil {
			continue
		}
		name, ok := localComponent("parameters", e)
		if !ok {
			continue
		}
		if _, ok := wants[name]; !ok {
			names = append(names, name)
		}
		def, _ := keyParamDef(op.Key)
		wants[name] = append(wants[name], def)
	}
	for _, name := range names {
		p.comps.share("parameters", name, wants[name])
	}
}

// repointKeyParam points e, op's $ref to idemgen's key parameter
// component name, at another component with def: name declares the key of
// another operation now, whose contract differs from op's.
func (p *planner) repointKeyParam(op *ir.Operation, opNode, e *yaml.Node, name string, def *yaml.Node, base string) {
	if params := child(opNode, "parameters"); params == nil || !slices.Contains(params.Content, e) || !isMapping(e) {
		p.notAugmented(op, e, "the key parameter of %s is idemgen's component parameters %s, declared for the path and shared with operations whose contracts imply another declaration now: declare the key on each operation (delete the path's $ref and run idemgen spec again)", op.Where(), name)
		return
	}
	path, ok := p.target(e)
	if !ok {
		p.notAugmented(op, e, "the key parameter of %s cannot be addressed by an overlay target", op.Where())
		return
	}
	r := p.comps.ref("parameters", base, def, false)
	p.actions = append(p.actions, overlay.Action{Target: path, Description: "The key parameter of " + op.Where() + " (its contract differs from the other operations' that use " + name + ").", Update: *mapping("$ref", r)})
	p.found(RuleSpecStale, op, e, "the key parameter of %s is idemgen's component parameters %s, which other operations use and its contract differs from theirs now", op.Where(), name)
}

// keyWhat describes the values key k takes: a UUID is 36 characters in its
// canonical form (its max-length never binds), a token at most its
// max-length.
func keyWhat(k ir.Key) string {
	if k.Format != ir.FormatToken {
		return "a UUID (36 characters)"
	}
	return fmt.Sprintf("a string of visible ASCII characters of at most %d characters", k.MaxLength)
}

// keyParamDef returns the definition of idemgen's key parameter component
// for k and the base of its name.
func keyParamDef(k ir.Key) (*yaml.Node, string) {
	schema := mapping("type", "string")
	switch k.Format {
	case ir.FormatUUID, ir.FormatUUIDv4, ir.FormatUUIDv7:
		set(schema, "format", str("uuid"))
	}
	set(schema, "maxLength", toNode(k.MaxLength))
	def := mapping(
		"name", k.Name,
		"in", string(k.Carrier),
		"required", k.Required,
		"description", fmt.Sprintf("Idempotency key: %s, new for each logical call and the same on every retry of it. The operation's description states what a repeated key means.", keyWhat(k)),
		"schema", schema,
		Marker, markerValue,
	)
	base := naming.Default.Param(k.Name, "")
	if base == "" || !strings.Contains(strings.ToLower(base), "idempot") {
		base = "Idempotency" + base
	}
	return def, base
}

// existingParam returns the name of a component parameter of the spec
// that declares the key as the contract says (the spec's own declaration,
// as in many vendor specs), or "".
func (p *planner) existingParam(k ir.Key) string {
	params := child(child(p.root, "components"), "parameters")
	if !isMapping(params) {
		return ""
	}
	for i := 0; i+1 < len(params.Content); i += 2 {
		d := resolve(p.root, params.Content[i+1])
		in, name := child(d, "in"), child(d, "name")
		if in == nil || name == nil || in.Value != string(k.Carrier) {
			continue
		}
		if name.Value != k.Name && !(k.Carrier == ir.CarrierHeader && strings.EqualFold(name.Value, k.Name)) {
			continue
		}
		if compatible(p.root, d, k) {
			return params.Content[i].Value
		}
	}
	return ""
}

// compatible reports whether a parameter declaration agrees with the key
// (the checks of key-declared-differently).
func compatible(root, d *yaml.Node, k ir.Key) bool {
	required := child(d, "required")
	if (required != nil && required.Value == "true") != k.Required {
		return false
	}
	s := resolve(root, child(d, "schema"))
	if s == nil {
		return child(d, "schema") == nil
	}
	if t := child(s, "type"); t != nil && !(t.Kind == yaml.ScalarNode && t.Value == "string") {
		return false
	}
	if ml := child(s, "maxLength"); ml != nil && ml.Value != strconv.Itoa(k.MaxLength) {
		return false
	}
	uuid := k.Format != ir.FormatToken
	if f := child(s, "format"); f != nil && (f.Value == "uuid") != uuid {
		return false
	}
	return child(s, "pattern") == nil || !uuid
}

// declared returns the element of the operation's or path item's
// parameters that declares op's key parameter, inline or through a $ref,
// or nil (the IR knows only about what kin-openapi resolved, this looks at
// the tree itself).
func (p *planner) declared(op *ir.Operation, opNode *yaml.Node) *yaml.Node {
	item := child(child(p.root, "paths"), op.Path)
	for _, list := range []*yaml.Node{child(opNode, "parameters"), child(item, "parameters")} {
		if list == nil || list.Kind != yaml.SequenceNode {
			continue
		}
		for _, e := range list.Content {
			d := resolve(p.root, e)
			if _, external := refTarget(unalias(e)); external {
				return e // another document: trust the IR (Param == nil means it is not this one)
			}
			if d == nil || child(d, "in") == nil || child(d, "name") == nil {
				continue
			}
			if child(d, "in").Value != string(op.Key.Carrier) {
				continue
			}
			name := child(d, "name").Value
			if name == op.Key.Name || (op.Key.Carrier == ir.CarrierHeader && strings.EqualFold(name, op.Key.Name)) {
				return e
			}
		}
	}
	return nil
}

// responses declares the problem responses, Retry-After on the statuses
// that carry it, and Idempotent-Replayed on the replayable responses.
func (p *planner) responses(op *ir.Operation, opNode, upd *yaml.Node) {
	resps := child(opNode, "responses")
	if resps != nil && resps.Kind != yaml.MappingNode {
		p.notAugmented(op, resps, "the responses of %s are not a mapping", op.Where())
		return
	}
	newResps := mapping()
	keyStyle := yaml.SingleQuotedStyle
	if resps != nil && len(resps.Content) > 0 && resps.Content[0].Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		keyStyle = resps.Content[0].Style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle)
	}
	// Idempotent-Replayed on the responses the API declares (before adding ours).
	if resps != nil {
		for i := 0; i+1 < len(resps.Content); i += 2 {
			code, r := resps.Content[i].Value, unalias(resps.Content[i+1])
			if p.noReplayed {
				p.removeReplayed(op, code, r)
				continue
			}
			if !replayable(code, op.Policy.Failures) || !isMapping(r) || child(r, "$ref") != nil {
				continue // a $ref'd response is shared: not ours to change
			}
			if h := childFold(child(r, "headers"), "Idempotent-Replayed"); h != nil {
				p.comps.currentRef("headers", h, replayedHeader())
				continue
			}
			h := p.comps.ref("headers", ReplayedHeader, replayedHeader(), true)
			set(ensure(ensure(ensure(newResps, code), "headers"), "Idempotent-Replayed"), "$ref", str(h))
		}
	}
	statuses := make([]int, 0, 5)
	for s := range statusRoles(op) {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	var missing []string
	for _, s := range statuses {
		code := strconv.Itoa(s)
		roles := p.roles[s]
		existing := child(resps, code)
		if existing == nil {
			newResps.Content = append(newResps.Content, quoted(code, keyStyle), ref(p.comps.ref("responses", responseName(s), p.responseDef(s), true)))
			missing = append(missing, code)
			continue
		}
		if ptr, _ := refTarget(existing); strings.HasPrefix(ptr, "/components/responses/"+responseName(s)) && compile.Marked(lookup(p.root, ptr)) {
			// idemgen's own component, from an earlier run: replaced
			// (and reported stale) when the contracts imply another one.
			p.comps.ref("responses", responseName(s), p.responseDef(s), true)
		}
		if !roles.retryAfter() || !statusRoles(op)[s].retryAfter() {
			continue
		}
		p.retryAfter(op, code, existing, newResps)
	}
	if len(missing) > 0 {
		p.found(RuleProblemResponseMissing, op, resps, "%s does not declare the problem response%s %s that idemgen's runtime may answer with", op.Where(), english.Plural(len(missing)), strings.Join(missing, ", "))
	}
	if len(newResps.Content) > 0 {
		set(upd, "responses", newResps)
	}
}

// removeReplayed removes from r, the response declared under code, the
// Idempotent-Replayed header an earlier run declared: a $ref to idemgen's
// component (marked). One the API's authors wrote is theirs, and stays.
func (p *planner) removeReplayed(op *ir.Operation, code string, r *yaml.Node) {
	if !isMapping(r) || child(r, "$ref") != nil {
		return
	}
	headers := child(r, "headers")
	h := childFold(headers, "Idempotent-Replayed")
	ptr, external := refTarget(unalias(h))
	prefix := "/components/headers/"
	if h == nil || external || !strings.HasPrefix(ptr, prefix+ReplayedHeader) || !compile.Marked(lookup(p.root, ptr)) {
		return
	}
	n := h
	if len(headers.Content) == 2 {
		n = headers // the only header: the response had none before
	}
	path, ok := p.target(n)
	if !ok {
		p.notAugmented(op, h, "the Idempotent-Replayed header of the %s response of %s cannot be addressed by an overlay target", code, op.Where())
		return
	}
	p.replayedRemoved[load.Unescape(ptr[len(prefix):])]++
	p.actions = append(p.actions, overlay.Action{Target: path, Remove: true, Description: "No Idempotent-Replayed on the " + code + " response of " + op.Where() + " (replayed-header: false)."})
	p.found(RuleSpecStale, op, h, "the %s response of %s declares the Idempotent-Replayed header that idemgen spec wrote, and replayed-header is false now", code, op.Where())
}

// unusedReplayedHeaders returns the actions that remove idemgen's
// Idempotent-Replayed components that nothing refers to once
// removeReplayed's actions are applied.
func (p *planner) unusedReplayedHeaders() []overlay.Action {
	if len(p.replayedRemoved) == 0 {
		return nil
	}
	refs := map[string]int{}
	eachNode(p.root, func(n *yaml.Node) {
		if ptr, _ := refTarget(n); strings.HasPrefix(ptr, "/components/headers/") {
			refs[load.Unescape(strings.TrimPrefix(ptr, "/components/headers/"))]++
		}
	})
	headers := child(child(p.root, "components"), "headers")
	var gone []string
	for name, n := range p.replayedRemoved {
		if refs[name] == n {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	if len(gone) > 0 && len(gone)*2 == len(headers.Content) {
		return []overlay.Action{{Target: "$.components.headers", Remove: true, Description: "Remove idemgen's Idempotent-Replayed header (replayed-header: false)."}}
	}
	var out []overlay.Action
	for _, name := range gone {
		out = append(out, overlay.Action{Target: "$.components.headers['" + name + "']", Remove: true, Description: "Remove idemgen's Idempotent-Replayed header (replayed-header: false)."})
	}
	return out
}

// retryAfter declares Retry-After on a response the API declares itself
// at a status that carries it: inline in the operation's update, or, for a
// $ref'd response of this document, on that shared response.
func (p *planner) retryAfter(op *ir.Operation, code string, existing, newResps *yaml.Node) {
	r := resolve(p.root, existing)
	if r == nil {
		p.externalRetryAfter(op, code, existing)
		return
	}
	if h := childFold(child(r, "headers"), "Retry-After"); h != nil {
		p.comps.currentRef("headers", h, retryAfterHeader())
		return
	}
	h := ref(p.comps.ref("headers", RetryAfterHeader, retryAfterHeader(), true))
	p.found(RuleRetryAfterMissing, op, existing, "the %s response of %s does not declare the Retry-After header idemgen's runtime sends with it", code, op.Where())
	if r == existing {
		set(ensure(ensure(ensure(newResps, code), "headers"), "Retry-After"), "$ref", h.Content[1])
		return
	}
	if p.edited[r] {
		return
	}
	path, ok := p.target(r)
	if !ok {
		p.notAugmented(op, existing, "the %s response of %s cannot be addressed by an overlay target", code, op.Where())
		return
	}
	p.edited[r] = true
	p.actions = append(p.actions, overlay.Action{Target: path, Description: "Retry-After on a shared " + code + " response.", Update: *complete(r, mapping("headers", mapping("Retry-After", h)))})
}

// externalRetryAfter checks the Retry-After header of a response given as
// a $ref to another document, which idemgen spec does not change: when that
// document does not declare it (or cannot be read), check reports it with
// no hint to run idemgen spec and spec reports it as RuleNotAugmented,
// both naming the document and what to declare.
func (p *planner) externalRetryAfter(op *ir.Operation, code string, existing *yaml.Node) {
	there := "another document"
	if p.doc != nil {
		r := p.doc.Deref(load.Node{Node: existing, File: p.doc.Path})
		if r.Node != nil && childFold(child(r.Node, "headers"), "Retry-After") != nil {
			return
		}
		if ref := child(existing, "$ref"); ref != nil {
			there = ref.Value
		}
	}
	p.findings = append(p.findings, finding{rule: RuleRetryAfterMissing, op: op, node: existing, manual: true,
		msg: fmt.Sprintf("the %s response of %s does not declare the Retry-After header idemgen's runtime sends with it: declare it in %s (%s), which idemgen spec does not change", code, op.Where(), there, retryAfterText)})
	p.notAugmented(op, existing, "the %s response of %s is %s, which idemgen spec does not change: declare there %s", code, op.Where(), there, retryAfterText)
}

// replayable reports whether a response declared under code may be a
// stored response replayed with Idempotent-Replayed: the runtime stores
// what is below 500 (but 408, 425 and 429, which free the key), and 5xx
// only with failures: replay.
func replayable(code, failures string) bool {
	switch strings.ToUpper(code) {
	case "DEFAULT", "2XX", "3XX", "4XX":
		return true
	case "5XX":
		return failures == ir.FailuresReplay
	}
	s, err := strconv.Atoi(code)
	if err != nil {
		return false
	}
	switch {
	case s == 408 || s == 425 || s == 429 || s < 200:
		return false
	case s >= 500:
		return failures == ir.FailuresReplay
	}
	return true
}

// description writes the contract summary into the operation's description.
func (p *planner) description(op *ir.Operation, opNode, upd *yaml.Node) {
	summary, err := docs.Summary(op)
	if err != nil {
		p.notAugmented(op, opNode, "cannot render the contract summary of %s: %v", op.Where(), err)
		return
	}
	cur := child(opNode, "description")
	if cur != nil && cur.Kind != yaml.ScalarNode {
		p.notAugmented(op, cur, "the description of %s is not a string", op.Where())
		return
	}
	old := ""
	if cur != nil {
		old = cur.Value
	}
	next := ReplaceBlock(old, summary)
	if next == old {
		return
	}
	if hasBlock(old) {
		p.staleBlock(op, cur, "the contract summary in the description of %s (between the idemgen:contract markers) is stale: it differs from what the contract says now", op.Where())
	}
	if cur != nil {
		set(upd, "description", str(next))
		return
	}
	set(upd, "description", literal(next))
}

// hasBlock reports whether text holds a block between BeginMarker and
// EndMarker (written by an earlier run).
func hasBlock(text string) bool {
	i := strings.LastIndex(text, BeginMarker)
	return i >= 0 && strings.Contains(text[i:], EndMarker)
}

// replayedOnly returns, when the stale response component s differs from
// what the contracts imply only in the Idempotent-Replayed header one of
// them declares, the header the spec's component declares (or, when it is
// the one without it, its description); nil otherwise.
func replayedOnly(s staleNode) *yaml.Node {
	if s.kind != "responses" {
		return nil
	}
	have, hh := withoutReplayed(unalias(s.def))
	want, wh := withoutReplayed(unalias(s.want))
	if (hh == nil) == (wh == nil) || firstDifference(have, want) != nil {
		return nil
	}
	if hh != nil {
		return hh
	}
	if d := child(unalias(s.def), "description"); d != nil {
		return d
	}
	return unalias(s.def)
}

// withoutReplayed returns a copy of the response r without its
// Idempotent-Replayed header (and without headers when none is left), and
// that header (nil when r declares none).
func withoutReplayed(r *yaml.Node) (*yaml.Node, *yaml.Node) {
	if !isMapping(r) {
		return r, nil
	}
	headers := unalias(child(r, "headers"))
	h := childFold(headers, "Idempotent-Replayed")
	if h == nil {
		return r, nil
	}
	out := *r
	out.Content = nil
	for i := 0; i+1 < len(r.Content); i += 2 {
		if r.Content[i].Value != "headers" {
			out.Content = append(out.Content, r.Content[i], r.Content[i+1])
			continue
		}
		rest := *headers
		rest.Content = nil
		for j := 0; j+1 < len(headers.Content); j += 2 {
			if !strings.EqualFold(headers.Content[j].Value, "Idempotent-Replayed") {
				rest.Content = append(rest.Content, headers.Content[j], headers.Content[j+1])
			}
		}
		if len(rest.Content) > 0 {
			out.Content = append(out.Content, r.Content[i], &rest)
		}
	}
	return &out, h
}

// responseDef is the definition of idemgen's problem response component
// for status s.
func (p *planner) responseDef(s int) *yaml.Node {
	roles := p.roles[s]
	def := mapping("description", responseDescription(s, roles))
	headers := mapping()
	if roles.retryAfter() {
		set(headers, "Retry-After", ref(p.comps.ref("headers", RetryAfterHeader, retryAfterHeader(), true)))
	}
	if roles[roleResponseUnavailable] && !p.noReplayed {
		// IDEMPOTENCY_RESPONSE_UNAVAILABLE carries Idempotent-Replayed: true.
		set(headers, "Idempotent-Replayed", ref(p.comps.ref("headers", ReplayedHeader, replayedHeader(), true)))
	}
	if len(headers.Content) > 0 {
		set(def, "headers", headers)
	}
	set(def, "content", mapping("application/problem+json", mapping("schema", ref(p.comps.ref("schemas", ProblemSchema, problemSchema(), true)))))
	set(def, Marker, str(markerValue))
	return def
}

// ReplaceBlock returns text with the block between BeginMarker and
// EndMarker replaced by block (or, when text has no such block, with the
// block appended after a blank line). The result ends with a newline when
// the block is the end of the text.
func ReplaceBlock(text, block string) string {
	whole := BeginMarker + "\n" + block + "\n" + EndMarker
	if i := strings.LastIndex(text, BeginMarker); i >= 0 {
		if j := strings.Index(text[i:], EndMarker); j >= 0 {
			rest := text[i+j+len(EndMarker):]
			return text[:i] + whole + rest
		}
	}
	if strings.TrimSpace(text) == "" {
		return whole + "\n"
	}
	return strings.TrimRight(text, " \t\r\n") + "\n\n" + whole + "\n"
}

// ReplaceInline is ReplaceBlock for one-line texts (a schema member's
// description): the block stays on the text's last line.
func ReplaceInline(text, block string) string {
	whole := BeginMarker + " " + block + " " + EndMarker
	if i := strings.LastIndex(text, BeginMarker); i >= 0 {
		if j := strings.Index(text[i:], EndMarker); j >= 0 {
			return text[:i] + whole + text[i+j+len(EndMarker):]
		}
	}
	if strings.TrimSpace(text) == "" {
		return whole
	}
	return strings.TrimRight(text, " \t\r\n") + " " + whole
}

// keyMember returns the schema of op's body key member, or nil when it is
// not an inline mapping of this document.
func (p *planner) keyMember(op *ir.Operation, opNode *yaml.Node) *yaml.Node {
	rb := resolve(p.root, child(opNode, "requestBody"))
	content := child(rb, "content")
	var schema *yaml.Node
	if isMapping(content) {
		if mt := child(content, "application/json"); mt != nil {
			schema = child(mt, "schema")
		} else {
			for i := 0; i+1 < len(content.Content); i += 2 {
				if naming.IsJSONMediaType(content.Content[i].Value) {
					schema = child(unalias(content.Content[i+1]), "schema")
					break
				}
			}
		}
	}
	return p.member(schema, strings.Split(strings.TrimPrefix(op.Key.Name, "/"), "/"), 0)
}

// bodyMember notes the key in the body member's schema: a description
// block, and maxLength and format when the schema has none. A member
// several operations reach (a shared request body or schema) is noted
// once, naming them all: the note does not depend on which comes first.
func (p *planner) bodyMember(op *ir.Operation, opNode *yaml.Node) {
	member := p.keyMembers[op]
	if member == nil {
		p.notAugmented(op, opNode, "the key member %s of %s's body is not written in this document (or only through a $ref): note the key in its schema there", op.Key.Name, op.Where())
		return
	}
	if p.edited[member] {
		return
	}
	p.edited[member] = true // checked (and changed, if need be) once
	upd := mapping()
	ops := p.keyOps[member] // op.Where() among them
	note := fmt.Sprintf("Idempotency key of %s: %s, new for each logical call and the same on every retry of it.", strings.Join(ops, ", "), keyWhat(op.Key))
	cur := child(member, "description")
	if cur == nil || cur.Kind == yaml.ScalarNode {
		old := ""
		if cur != nil {
			old = cur.Value
		}
		if next := ReplaceInline(old, note); next != old {
			set(upd, "description", str(next))
			if hasBlock(old) {
				p.staleBlock(op, cur, "the key note in the description of the body member %s of %s (between the idemgen:contract markers) is stale: it differs from what the contracts say now", op.Key.Name, strings.Join(ops, ", "))
			}
		}
	}
	if child(member, "maxLength") == nil {
		set(upd, "maxLength", toNode(op.Key.MaxLength))
	}
	if op.Key.Format != ir.FormatToken && child(member, "format") == nil {
		set(upd, "format", str("uuid"))
	}
	if len(upd.Content) == 0 {
		return
	}
	path, ok := p.target(member)
	if !ok {
		p.notAugmented(op, member, "the key member %s of %s cannot be addressed by an overlay target", op.Key.Name, op.Where())
		return
	}
	p.actions = append(p.actions, overlay.Action{Target: path, Description: "The idempotency key of " + strings.Join(ops, ", ") + " in its body schema.", Update: *upd})
}

// member finds the schema of the member at toks below schema, through
// local $refs and allOf/oneOf/anyOf branches; nil when it is not an inline
// mapping of this document.
func (p *planner) member(schema *yaml.Node, toks []string, depth int) *yaml.Node {
	s := resolve(p.root, schema)
	if s == nil || depth > 32 || len(toks) == 0 {
		return nil
	}
	tok := load.Unescape(toks[0])
	var next *yaml.Node
	if props := child(s, "properties"); props != nil {
		next = child(props, tok)
	}
	if next == nil {
		for _, group := range []string{"allOf", "oneOf", "anyOf"} {
			if g := child(s, group); g != nil && g.Kind == yaml.SequenceNode {
				for _, b := range g.Content {
					if m := p.member(b, toks, depth+1); m != nil {
						return m
					}
				}
			}
		}
		return nil
	}
	if len(toks) > 1 {
		return p.member(next, toks[1:], depth+1)
	}
	if !isMapping(next) || child(next, "$ref") != nil {
		return nil
	}
	return next
}

// anyOperationNode is operationNode, or the operation in another document
// when its path item is a $ref there.
func (p *planner) anyOperationNode(op *ir.Operation) *yaml.Node {
	if n := p.operationNode(op); n != nil {
		return n
	}
	_, opn := p.externalOperation(op)
	return opn.Node
}
