// Package rollout compares the contracts of two versions of a spec (idemgen
// check -base) and reports each change that breaks a retry in flight
// across a rolling deploy: a client's first attempt taken by a replica of
// the old version, its retry (same key, same body) by one of the new, on
// one store, or the reverse during a rollback.
//
// What a record is named by (the operation's name, the scope, the key as
// the runtime canonicalises it) and what a retry is compared with (the
// fingerprint settings) must stay the same for a window; everything else
// (semantics strict -> loose, the window, the lease, the conflict status)
// may change at any time.
package rollout

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// Rules of check -base, and of plain check (RuleOperationIDMissing).
const (
	RuleOperationRenamed   = "rollout-operation-renamed"
	RuleScope              = "rollout-scope"
	RuleKeyFormat          = "rollout-key-format"
	RuleKeyMoved           = "rollout-key-moved"
	RuleFingerprint        = "rollout-fingerprint"
	RuleResponseHeaders    = "rollout-response-headers"
	RuleOperationIDMissing = "operation-id-missing"
)

// Rules are the warnings of this package, which check -strict makes errors.
var Rules = []string{RuleOperationRenamed, RuleScope, RuleKeyFormat, RuleKeyMoved, RuleFingerprint, RuleResponseHeaders, RuleOperationIDMissing}

// Name is the name the runtime keeps an operation's records under
// (idem.Spec.Operation): its operationId, or oapi-codegen's Go name when
// it has none (as gogen.OperationName).
func Name(op *ir.Operation) string {
	if op.OperationID != "" {
		return op.OperationID
	}
	return op.GoName
}

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// erased is op's method and path template with its parameter names left
// out: a renamed path parameter leaves it the same.
func erased(op *ir.Operation) string {
	return op.Method + " " + pathParam.ReplaceAllString(op.Path, "{}")
}

// Match pairs the idempotent operations of base and spec: by operationId
// first, then by method and path template with the parameters' names left
// out (an operationId renamed, or a path parameter). An operation of
// either without a match (gone, new, idempotent on one side only) is left
// out: no retry of it can straddle the deploy under a contract.
func Match(base, spec *ir.Spec) [][2]*ir.Operation {
	var pairs [][2]*ir.Operation
	used := map[*ir.Operation]bool{}
	byID := map[string]*ir.Operation{}
	for _, op := range base.Operations {
		if op.OperationID != "" {
			byID[op.OperationID] = op
		}
	}
	var rest []*ir.Operation
	for _, op := range spec.Operations {
		if o := byID[op.OperationID]; op.OperationID != "" && o != nil {
			pairs = append(pairs, [2]*ir.Operation{o, op})
			used[o] = true
			continue
		}
		rest = append(rest, op)
	}
	byPath := map[string][]*ir.Operation{}
	for _, op := range base.Operations {
		if !used[op] {
			byPath[erased(op)] = append(byPath[erased(op)], op)
		}
	}
	for _, op := range rest {
		k := erased(op)
		if l := byPath[k]; len(l) == 1 {
			pairs = append(pairs, [2]*ir.Operation{l[0], op})
			delete(byPath, k)
		}
	}
	return pairs
}

// Check returns what check -base reports on spec (whose document is d)
// against base (named baseName): MissingOperationIDs and Compare, without
// the operation-id-missing of an operation whose name changed (its
// rollout-operation-renamed says which operationId keeps its records).
func Check(base, spec *ir.Spec, d *load.Document, baseName string) diag.List {
	cmp := Compare(base, spec, d, baseName)
	renamed := map[string]bool{}
	for _, x := range cmp {
		if x.Rule == RuleOperationRenamed {
			renamed[x.Ops[0]] = true
		}
	}
	var out diag.List
	for _, x := range MissingOperationIDs(spec, d) {
		if !renamed[x.Ops[0]] {
			out = append(out, x)
		}
	}
	return append(out, cmp...)
}

// Compare returns a warning for each change from base to spec (whose
// document is d) that breaks retries in flight across a rolling deploy,
// positioned at spec's field, with what happens to such a retry and the
// safe procedure. baseName names base in the messages.
func Compare(base, spec *ir.Spec, d *load.Document, baseName string) diag.List {
	var out diag.List
	for _, p := range Match(base, spec) {
		c := &comparison{d: d, old: p[0], op: p[1], baseName: baseName}
		c.run()
		out = append(out, c.diags...)
	}
	return out
}

type comparison struct {
	d        *load.Document
	old, op  *ir.Operation
	baseName string
	diags    diag.List
}

func (c *comparison) where() string { return c.op.Method + " " + c.op.Path }

func (c *comparison) warn(pos ir.Pos, rule, format string, args ...any) {
	c.diags.Warnf(pos, rule, format, args...)
	c.diags[len(c.diags)-1].Ops = []string{c.where()}
}

// wait is the procedure for a change that renames records: keep the old
// until no retry of it can be in flight.
func (c *comparison) wait(what string) string {
	return fmt.Sprintf("keep the old "+what+" until a window (%s) has passed with no traffic to the operation, or deploy every replica at once during a quiet period (and roll back the same way)", ir.FormatDuration(c.op.Policy.Window))
}

func (c *comparison) run() {
	old, op := c.old, c.op
	if on, nn := Name(old), Name(op); on != nn {
		c.renamed(on, nn)
	}
	if oldP, newP := slices.Contains(old.Policy.Scope, "principal"), slices.Contains(op.Policy.Scope, "principal"); oldP != newP {
		c.warn(c.fieldPos("scope"), RuleScope, "%s: scope changed from %s to %s since %s: records are kept per caller on one version and shared by all callers on the other, so a retry across the deploy (or a rollback) does not find the record of its first attempt and runs the handler again; %s",
			c.where(), scopeName(oldP), scopeName(newP), c.baseName, c.wait("scope"))
	}
	c.key()
	c.fingerprint()
	var added []string
	for _, h := range op.Policy.Response.Headers {
		if !slices.ContainsFunc(old.Policy.Response.Headers, func(o string) bool { return strings.EqualFold(o, h) }) {
			added = append(added, h)
		}
	}
	if len(added) > 0 {
		n := len(added)
		c.warn(c.fieldPos("response", "headers"), RuleResponseHeaders, "%s: response %s %s %s replayed now and %s not in %s: a replay of a response the old version stored lacks %s (for a window, %s, after the deploy); clients must not rely on %s on a replay until then",
			c.where(), english.Noun(n, "header"), strings.Join(added, ", "), english.Noun(n, "is", "are"), english.Noun(n, "was", "were"), c.baseName, english.Noun(n, "it", "them"), ir.FormatDuration(op.Policy.Window), english.Noun(n, "it", "them"))
	}
}

func scopeName(principal bool) string {
	if principal {
		return "[principal]"
	}
	return "[] (shared)"
}

func (c *comparison) renamed(on, nn string) {
	old, op := c.old, c.op
	what := func(o *ir.Operation, name string) string {
		if o.OperationID != "" {
			return "operationId " + name
		}
		return "the Go name " + name + " oapi-codegen derives (no operationId)"
	}
	pos := methodPos(c.d, op)
	if op.OperationID != "" {
		if n := c.d.Lookup(opPointer(op)); n.Node != nil {
			pos = c.d.KeyPos(n, "operationId")
		}
	}
	fix := c.wait("operationId")
	switch {
	case op.OperationID == "":
		fix = fmt.Sprintf("give it operationId: %s, which keeps the name of its records", on)
	case old.OperationID == "":
		fix = fmt.Sprintf("make it operationId: %s (the old Go name), or %s", on, c.wait("name"))
	}
	c.warn(pos, RuleOperationRenamed, "%s: the name its idempotency records are kept under changed from %s in %s to %s: a retry across the deploy (or a rollback) does not find the record of its first attempt and runs the handler again; %s",
		c.where(), what(old, on), c.baseName, what(op, nn), fix)
}

// key reports a key moved (carrier or name) or its format changed between
// token and uuid.
func (c *comparison) key() {
	ok, nk := c.old.Key, c.op.Key
	sameName := ok.Name == nk.Name || ok.Carrier == ir.CarrierHeader && strings.EqualFold(ok.Name, nk.Name)
	if ok.Carrier != nk.Carrier || !sameName {
		then := "runs the handler again (the key is optional: the retry is taken for a new request without a key)"
		if nk.Required {
			then = "is refused with 400 IDEMPOTENCY_KEY_MISSING, which a client takes as final"
		}
		c.warn(c.fieldPos("key"), RuleKeyMoved, "%s: the idempotency key moved from %s %s in %s to %s %s: a retry that sends it where the old version reads it (or, in a rollback, where the new one does) %s; %s",
			c.where(), ok.Carrier, ok.Name, c.baseName, nk.Carrier, nk.Name, then, c.wait("key"))
	}
	uuid := func(f string) bool { return f != ir.FormatToken }
	if uuid(ok.Format) != uuid(nk.Format) {
		c.warn(c.fieldPos("key", "format"), RuleKeyFormat, "%s: key format changed from %s in %s to %s: a uuid key is lower-cased before it names the record and a token key is not, so a retry with an upper-case key across the deploy (or a rollback) does not find the record of its first attempt and runs the handler again; %s",
			c.where(), ok.Format, c.baseName, nk.Format, c.wait("format"))
	}
}

// fpSettings are the fingerprint settings of a contract: sets, compared
// without order (header names without case).
type fpSettings struct {
	volatile, unordered, headers []string
}

func settings(p ir.Policy) fpSettings {
	ptrs := func(l []ir.Pointer) []string {
		var out []string
		for _, v := range l {
			out = append(out, v.Pointer)
		}
		return out
	}
	return fpSettings{volatile: ptrs(p.Volatile), unordered: ptrs(p.Unordered), headers: p.FingerprintHeaders}
}

func sameSet(a, b []string, fold bool) bool {
	norm := func(l []string) []string {
		out := make([]string, 0, len(l))
		for _, s := range l {
			if fold {
				s = strings.ToLower(s)
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

func (s fpSettings) equal(o fpSettings) bool {
	return sameSet(s.volatile, o.volatile, false) && sameSet(s.unordered, o.unordered, false) && sameSet(s.headers, o.headers, true)
}

func flow(l []string) string { return "[" + strings.Join(l, ", ") + "]" }

func (c *comparison) fingerprint() {
	os, ns := settings(c.old.Policy), settings(c.op.Policy)
	if os.equal(ns) {
		return
	}
	keyless := c.op.Policy.Semantics == ir.Window && !c.op.Key.Required
	if c.op.Policy.Semantics == ir.Strict {
		for _, prev := range c.previous(ns) {
			if prev.equal(os) {
				return // bridged
			}
		}
	}
	// The entry that would bridge the change: the fields that differ.
	var fields, entry []string
	if !sameSet(os.volatile, ns.volatile, false) {
		fields, entry = append(fields, "volatile"), append(entry, "volatile: "+flow(os.volatile))
	}
	if !sameSet(os.unordered, ns.unordered, false) {
		fields, entry = append(fields, "unordered"), append(entry, "unordered: "+flow(os.unordered))
	}
	if !sameSet(os.headers, ns.headers, true) {
		fields, entry = append(fields, "fingerprint-headers"), append(entry, "fingerprint-headers: "+flow(os.headers))
	}
	switch {
	case keyless:
		// Keyed retries are replayed (or re-run after a failure or an
		// expired lease) whatever their fingerprint, as under loose; a
		// keyless request's record is named by its fingerprint.
		c.warn(c.fieldPos(fields[0]), RuleFingerprint, "%s: fingerprint settings changed (%s) since %s: a request without a key, whose record is named by its fingerprint, runs the handler again when retried across the deploy (or a rollback), and compatible-fingerprints does not help it; %s",
			c.where(), strings.Join(fields, ", "), c.baseName, c.wait("settings"))
		return
	case c.op.Policy.Semantics != ir.Strict:
		// Loose and window semantics never refuse a keyed retry for its
		// fingerprint: a completed record is replayed, a failed one or an
		// expired lease is claimed again whatever the fingerprint.
		return
	}
	then := "an identical retry of a request the old version took gets 422 IDEMPOTENCY_KEY_REUSED, which a client takes as final (and a failed first attempt or an expired lease blocks the key for the window)"
	c.warn(c.fieldPos(fields[0]), RuleFingerprint, "%s: fingerprint settings changed (%s) since %s: %s; add compatible-fingerprints: [{%s}] to the contract for one window (%s), then remove it",
		c.where(), strings.Join(fields, ", "), c.baseName, then, strings.Join(entry, ", "), ir.FormatDuration(c.op.Policy.Window))
}

// previous reads the compatible-fingerprints entries of the operation's
// contract (else of the root's), leniently from the document: each a
// mapping whose volatile, unordered and fingerprint-headers, each a list of
// strings, default to cur's. What does not read so is left out.
func (c *comparison) previous(cur fpSettings) []fpSettings {
	n := c.field("compatible-fingerprints")
	if n.Node == nil {
		return nil
	}
	l := yamlmerge.Unalias(c.d.Deref(n).Node)
	if l == nil || l.Kind != yaml.SequenceNode {
		return nil
	}
	var out []fpSettings
	for _, e := range l.Content {
		e = yamlmerge.Unalias(e)
		if e.Kind != yaml.MappingNode {
			continue
		}
		s := cur
		ok := true
		kv := yamlmerge.Pairs(e)
		for i := 0; i+1 < len(kv); i += 2 {
			var v []string
			if err := kv[i+1].Decode(&v); err != nil {
				ok = false
				break
			}
			switch kv[i].Value {
			case "volatile":
				s.volatile = v
			case "unordered":
				s.unordered = v
			case "fingerprint-headers":
				s.headers = v
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

// opPointer is the JSON pointer of op in its document.
func opPointer(op *ir.Operation) string {
	return "/paths/" + load.Escape(op.Path) + "/" + strings.ToLower(op.Method)
}

// field returns the node of the contract field at path (keys below
// x-idempotency) of the operation's block, else of the root's block: where
// the merged value comes from.
func (c *comparison) field(path ...string) load.Node {
	n, _ := c.fieldAndParent(path)
	return n
}

func (c *comparison) fieldAndParent(path []string) (n, parent load.Node) {
	for _, block := range []string{opPointer(c.op) + "/x-idempotency", "/x-idempotency"} {
		n, parent = load.Node{}, c.d.Lookup(block)
		for i, k := range path {
			if parent.Node == nil {
				break
			}
			n = c.d.LookupFrom(parent, "/"+load.Escape(k))
			if i < len(path)-1 {
				parent = n
			}
		}
		if n.Node != nil {
			return n, parent
		}
	}
	return load.Node{}, load.Node{}
}

// fieldPos is where the field at path is written (see field), else the
// operation's contract.
func (c *comparison) fieldPos(path ...string) ir.Pos {
	n, parent := c.fieldAndParent(path)
	if n.Node == nil {
		return c.op.ContractPos
	}
	return c.d.KeyPos(parent, path[len(path)-1])
}

// MissingOperationIDs returns a warning for each idempotent operation of
// spec (whose document is d) without an operationId: its records are kept
// under the Go name oapi-codegen derives, which a path parameter renamed or
// a name normalizer changed renames.
func MissingOperationIDs(spec *ir.Spec, d *load.Document) diag.List {
	var out diag.List
	for _, op := range spec.Operations {
		if op.OperationID != "" {
			continue
		}
		where := op.Method + " " + op.Path
		out.Warnf(methodPos(d, op), RuleOperationIDMissing, "%s has no operationId: its idempotency records are kept under the Go name oapi-codegen derives, %s, which a renamed path parameter or another name normalizer changes, and a retry in flight across such a deploy then runs the handler again; give it operationId: %s (the name its records have now)",
			where, op.GoName, op.GoName)
		out[len(out)-1].Ops = []string{where}
	}
	return out
}

// methodPos is where op's method key is written (`post:`), else op.Pos.
func methodPos(d *load.Document, op *ir.Operation) ir.Pos {
	item := d.Lookup("/paths/" + load.Escape(op.Path))
	if item.Node == nil || d.LookupFrom(item, "/"+strings.ToLower(op.Method)).Node == nil {
		return op.Pos
	}
	return d.KeyPos(item, strings.ToLower(op.Method))
}
