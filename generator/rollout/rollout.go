// Package rollout compares the contracts of two versions of a spec (idemgen
// check -base) and reports each change that breaks a retry in flight
// across a rolling deploy: a client's first attempt taken by a replica of
// the old version, its retry (same key, same body) by one of the new, on
// one store, or the reverse during a rollback.
//
// What a record is named by (the operation's name, the scope, the key as
// the runtime canonicalises it) and what a retry is compared with (the
// fingerprint settings, and the request media types the fingerprint reads
// as JSON or as form fields) must stay the same for a window; everything else
// (semantics strict -> loose, the window, the lease, the conflict status)
// may change at any time.
package rollout

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/english"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
)

// Rules of check -base, and of plain check (RuleOperationIDMissing).
const (
	RuleOperationRenamed   = "rollout-operation-renamed"
	RuleScope              = "rollout-scope"
	RuleKeyFormat          = "rollout-key-format"
	RuleKeyMoved           = "rollout-key-moved"
	RuleKeyRequired        = "rollout-key-required"
	RuleFingerprint        = "rollout-fingerprint"
	RuleMediaTypes         = "rollout-media-types"
	RuleResponseHeaders    = "rollout-response-headers"
	RuleBaseUnpaired       = "rollout-base-unpaired"
	RuleOperationIDMissing = "operation-id-missing"
)

// BaseRules are the rules only check -base reports: an ignore of one
// silences nothing without -base, and is not reported unused then.
var BaseRules = []string{RuleOperationRenamed, RuleScope, RuleKeyFormat, RuleKeyMoved, RuleKeyRequired, RuleFingerprint, RuleMediaTypes, RuleResponseHeaders, RuleBaseUnpaired}

// Rules are the warnings of this package, which check -strict makes errors.
var Rules = append(slices.Clone(BaseRules), RuleOperationIDMissing)

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// erased is op's method and path template with its parameter names left
// out: a renamed path parameter leaves it the same.
func erased(op *ir.Operation) string {
	return ir.Where(op.Method, pathParam.ReplaceAllString(op.Path, "{}"))
}

// Match pairs the idempotent operations of base and spec: by operationId
// first, then by method and path template with the parameters' names left
// out (an operationId renamed, or a path parameter). An operationId that
// moved to the method and path of another operation of base (two
// operations' ids swapped) pairs by method and path instead: a retry
// goes to the method and path, and there the name changed; if nothing
// of base is left there to pair with (the operation there paired by its
// own id elsewhere), it pairs by operationId after all. An operation
// of either without a match (gone, new, idempotent on one side only) is
// left out: no retry of it can straddle the deploy under a contract.
func Match(base, spec *ir.Spec) [][2]*ir.Operation {
	var pairs [][2]*ir.Operation
	used := map[*ir.Operation]bool{}
	byID := map[string]*ir.Operation{}
	atPath := map[string]int{}
	for _, op := range base.Operations {
		if op.OperationID != "" {
			byID[op.OperationID] = op
		}
		atPath[erased(op)]++
	}
	var rest []*ir.Operation
	for _, op := range spec.Operations {
		if o := byID[op.OperationID]; op.OperationID != "" && o != nil {
			if k := erased(op); erased(o) == k || atPath[k] == 0 {
				pairs = append(pairs, [2]*ir.Operation{o, op})
				used[o] = true
				continue
			}
		}
		rest = append(rest, op)
	}
	byPath := map[string][]*ir.Operation{}
	for _, op := range base.Operations {
		if !used[op] {
			byPath[erased(op)] = append(byPath[erased(op)], op)
		}
	}
	var unpaired []*ir.Operation
	for _, op := range rest {
		k := erased(op)
		if l := byPath[k]; len(l) == 1 {
			pairs = append(pairs, [2]*ir.Operation{l[0], op})
			used[l[0]] = true
			delete(byPath, k)
			continue
		}
		unpaired = append(unpaired, op)
	}
	// An operation whose id moved to another base operation's path, which
	// paired with something else, still pairs with its id's base
	// operation: nothing drops out of the comparison unseen.
	for _, op := range unpaired {
		if o := byID[op.OperationID]; op.OperationID != "" && o != nil && !used[o] {
			pairs = append(pairs, [2]*ir.Operation{o, op})
			used[o] = true
		}
	}
	return pairs
}

// Check returns what check -base reports on spec (whose document is d,
// with overlays applied) against base (named baseName, with
// baseOverlays applied; namingChange says how the naming of its Go
// names differs from spec's, "" when it does not: see Compare):
// MissingOperationIDs and Compare, without the
// operation-id-missing of an operation whose name changed (its
// rollout-operation-renamed says which operationId keeps its records),
// and a warning when nothing could be compared (Unpaired).
func Check(base, spec *ir.Spec, d *load.Document, baseName string, overlays, baseOverlays []string, namingChange string) diag.List {
	name := baseName // in the messages: the old release is the spec with its overlays
	if len(baseOverlays) > 0 {
		name = baseName + " with " + strings.Join(baseOverlays, ", ")
	}
	cmp := Compare(base, spec, d, name, namingChange)
	cmp = append(cmp, Unpaired(base, spec, d, baseName, overlays, baseOverlays)...)
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

// Unpaired returns a rollout-base-unpaired warning when spec has
// idempotent operations, and so has base, and none pairs (Match); when
// one of them has idempotent operations and the other none, and an
// overlay is applied to either (overlays to spec, baseOverlays to base):
// most often, the overlay that holds one side's contracts was not given.
// A base without contracts, and no overlay, is the first release that
// adopts contracts (or a spec that dropped them all): nothing to say.
func Unpaired(base, spec *ir.Spec, d *load.Document, baseName string, overlays, baseOverlays []string) diag.List {
	var out diag.List
	nb, ns := len(base.Operations), len(spec.Operations)
	overlaid := len(overlays) > 0 || len(baseOverlays) > 0
	const nothing = "no contract was compared, so no change is reported"
	switch {
	case nb > 0 && ns > 0:
		if len(Match(base, spec)) > 0 {
			return nil
		}
		hint := "if that release's contracts came with an overlay, give its version of it with -base-overlay (git show REF:FILE > /tmp/base.overlay.yaml)"
		if overlaid {
			hint = baseHint(overlays, baseOverlays)
		}
		out.Warnf(ir.Pos{File: baseName, Line: 1, Col: 1}, RuleBaseUnpaired, "none of the %s of %s pairs with one of %s (by operationId, or by method and path): %s; %s",
			english.Count(nb, "idempotent operation"), baseName, d.Path, nothing, hint)
	case !overlaid:
	case nb == 0 && ns > 0:
		out.Warnf(ir.Pos{File: baseName, Line: 1, Col: 1}, RuleBaseUnpaired, "%s has no idempotent operation (no x-idempotency contract): %s; %s; on the first release with contracts there is none to compare with: silence it for that release (-ignore rollout-base-unpaired, or an ignore: entry with the reason)",
			baseName, nothing, baseHint(overlays, baseOverlays))
	case nb > 0 && ns == 0:
		hint := "check that -overlay (or the config's overlays:) gives this release's overlays (" + strings.Join(overlays, ", ") + ")"
		if len(overlays) == 0 {
			hint = fmt.Sprintf("%s gets its contracts with %s %s: give this release's version of each with -overlay (or the config's overlays:)", baseName, english.Noun(len(baseOverlays), "the overlay", "the overlays"), strings.Join(baseOverlays, ", "))
		}
		out.Warnf(ir.Pos{File: d.Path, Line: 1, Col: 1}, RuleBaseUnpaired, "%s has no idempotent operation (no x-idempotency contract), and %s has %s: %s; %s; if this release drops every contract on purpose, silence it for this release (-ignore rollout-base-unpaired, or an ignore: entry with the reason)",
			d.Path, baseName, english.Count(nb, "idempotent operation"), nothing, hint)
	}
	return out
}

// baseHint is what a warning that the base has no contract says to do,
// given the overlays applied to spec and to the base (one of them
// given). The overlays of spec are not applied to the base: the
// contracts they hold are the new ones, and would hide every change.
func baseHint(overlays, baseOverlays []string) string {
	if len(baseOverlays) > 0 {
		return "check that -base-overlay gives that release's overlays (" + strings.Join(baseOverlays, ", ") + ")"
	}
	return "the spec checked gets its contracts with " + english.Noun(len(overlays), "the overlay", "the overlays") + " " + strings.Join(overlays, ", ") + ": give that release's version of each with -base-overlay (git show REF:FILE > /tmp/base.overlay.yaml)"
}

// Compare returns a warning for each change from base to spec (whose
// document is d) that breaks retries in flight across a rolling deploy,
// positioned at spec's field, with what happens to such a retry and the
// safe procedure. baseName names base in the messages; namingChange
// (naming.Namer.Change) says what changed in how base's Go names were
// derived, which renames an operation without operationId at the same
// method and path. One change at the document root that several
// operations inherit is one warning about all of them.
func Compare(base, spec *ir.Spec, d *load.Document, baseName, namingChange string) diag.List {
	var out diag.List
	at := map[finding]int{} // a finding's warning in out
	for _, p := range Match(base, spec) {
		c := &comparison{d: d, old: p[0], op: p[1], baseName: baseName, namingChange: namingChange, others: base.Operations}
		c.run()
		for _, f := range c.found {
			where := f.op
			f.op = ""
			if i, ok := at[f]; ok {
				out[i].Ops = append(out[i].Ops, where)
				out[i].Message = strings.Join(out[i].Ops, ", ") + ": " + f.message
				continue
			}
			at[f] = len(out)
			out.Warnf(f.pos, f.rule, "%s: %s", where, f.message)
			out[len(out)-1].Ops = []string{where}
		}
	}
	return out
}

// finding is a change found on one operation, op, its message without the
// operation's name.
type finding struct {
	pos           ir.Pos
	rule, message string
	op            string
}

type comparison struct {
	d            *load.Document
	old, op      *ir.Operation
	baseName     string
	namingChange string          // Compare's
	others       []*ir.Operation // base's operations
	found        []finding
}

func (c *comparison) warn(pos ir.Pos, rule, format string, args ...any) {
	c.found = append(c.found, finding{pos: pos, rule: rule, message: fmt.Sprintf(format, args...), op: c.op.Where()})
}

// window is the longer of the old and new windows: how long a record of
// either release lives.
func (c *comparison) window() string {
	return ir.FormatDuration(max(c.old.Policy.Window, c.op.Policy.Window))
}

// wait is the procedure for a change that renames records: keep the old
// until no retry of it can be in flight.
func (c *comparison) wait(what string) string {
	return fmt.Sprintf("keep the old "+what+" until a window (%s) has passed with no traffic to the operation, or deploy every replica at once during a quiet period (and roll back the same way)", c.window())
}

// across says what a retry across the deploy is (retry: "a retry", "an
// identical retry with ..."): a rolling deploy (and a rollback) runs both
// releases at once, and a retry of a request one took may go to either.
func across(retry string) string {
	return retry + " of a request one release took, served by the other (a rolling deploy runs both at once, as does a rollback),"
}

func (c *comparison) run() {
	old, op := c.old, c.op
	if on, nn := old.RecordName(), op.RecordName(); on != nn {
		c.renamed(on, nn)
	}
	if oldP, newP := slices.Contains(old.Policy.Scope, "principal"), slices.Contains(op.Policy.Scope, "principal"); oldP != newP {
		c.warn(c.fieldPos("scope"), RuleScope, "scope changed from %s to %s since %s: records are kept per caller on one version and shared by all callers on the other, so %s does not find the record of its first attempt and runs the handler again; %s",
			scopeName(oldP), scopeName(newP), c.baseName, across("a retry"), c.wait("scope"))
	}
	c.key()
	c.fingerprint()
	c.mediaTypes()
	var added []string
	for _, h := range op.Policy.Response.Headers {
		if !slices.ContainsFunc(old.Policy.Response.Headers, func(o string) bool { return strings.EqualFold(o, h) }) {
			added = append(added, h)
		}
	}
	if len(added) > 0 {
		n := len(added)
		c.warn(c.fieldPos("response", "headers"), RuleResponseHeaders, "response %s %s %s replayed now and %s not in %s: a replay of a response the old version stored lacks %s (for a window, %s, after the deploy); clients must not rely on %s on a replay until then",
			english.Noun(n, "header"), strings.Join(added, ", "), english.Noun(n, "is", "are"), english.Noun(n, "was", "were"), c.baseName, english.Noun(n, "it", "them"), c.window(), english.Noun(n, "it", "them"))
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
	now := what(op, nn)
	if old.OperationID == "" && op.OperationID == "" && old.Where() == op.Where() {
		how := "under another naming"
		if c.namingChange != "" {
			how = "now that " + c.namingChange
		}
		now = "the Go name " + nn + " oapi-codegen derives from the same method and path (no operationId) " + how
	}
	switch {
	case op.OperationID == "":
		fix = fmt.Sprintf("give it operationId: %s, which keeps the name of its records", on)
	case old.OperationID == "":
		fix = fmt.Sprintf("make it operationId: %s (the old Go name), or %s", on, c.wait("name"))
	}
	also := ""
	for _, o := range c.others {
		if o != old && o.RecordName() == nn {
			also = fmt.Sprintf(", and may even find a record %s made with the same key (that operation's records were kept under %s)", o.Where(), nn)
			break
		}
	}
	c.warn(pos, RuleOperationRenamed, "the name its idempotency records are kept under changed from %s in %s to %s: %s does not find the record of its first attempt and runs the handler again%s; %s",
		what(old, on), c.baseName, now, across("a retry"), also, fix)
}

// key reports a key moved (carrier or name), made required or optional, its format
// changed between token and uuid (case folded or not), narrowed or
// widened, or its max-length lowered or raised: each refuses, on one
// release, a retry of a request the other took.
func (c *comparison) key() {
	ok, nk := c.old.Key, c.op.Key
	sameName := ok.Name == nk.Name || ok.Carrier == ir.CarrierHeader && strings.EqualFold(ok.Name, nk.Name)
	const missing = "is refused with 400 IDEMPOTENCY_KEY_MISSING, which a client takes as final"
	if ok.Carrier != nk.Carrier || !sameName {
		const again = "runs the handler again (the key is optional: the retry is taken for a new request without a key)"
		var then string
		switch {
		case ok.Required && nk.Required:
			then = missing
		case !ok.Required && !nk.Required:
			then = again
		case nk.Required:
			then = "on a new replica " + missing + ", and on an old one " + again
		default:
			then = "on an old replica " + missing + ", and on a new one " + again
		}
		c.warn(c.fieldPos("key"), RuleKeyMoved, "the idempotency key moved from %s %s in %s to %s %s: %s sends it where the release that took the request reads it, and %s; %s",
			ok.Carrier, ok.Name, c.baseName, nk.Carrier, nk.Name, across("a retry"), then, c.wait("key"))
	} else if !ok.Required && nk.Required {
		c.warn(c.fieldPos("key", "required"), RuleKeyRequired, "the idempotency key is required now and was optional in %s: a retry without a key on a new replica of a request an old one took without one %s (as is any request without a key); every client must send a key before this release is deployed",
			c.baseName, missing)
	} else if ok.Required && !nk.Required {
		c.warn(c.fieldPos("key", "required"), RuleKeyRequired, "the idempotency key is optional now and was required in %s: a retry without a key on an old replica (a rolling deploy runs both releases at once, as does a rollback) of a request a new one took without one %s (as is any request without a key there); clients may leave the key out only once this release is on every replica",
			c.baseName, missing)
	}
	const final = "is refused with 400 IDEMPOTENCY_KEY_INVALID, which a client takes as final"
	const onOld = "a retry on an old replica (a rolling deploy runs both releases at once, as does a rollback) of a request a new one took"
	uuid := func(f string) bool { return f != ir.FormatToken }
	narrow, wide := narrowed(ok.Format, nk.Format), narrowed(nk.Format, ok.Format)
	switch {
	case uuid(ok.Format) != uuid(nk.Format):
		also, fix := "", ""
		if narrow {
			also = fmt.Sprintf(", and a retry on a new replica of a request an old one took with a key that is no UUID %s", final)
		}
		if wide {
			also = fmt.Sprintf(", and a retry on an old replica of a request a new one took with a key that is no UUID %s", final)
			fix = "; and no client may send a key that is no UUID until this release is on every replica"
		}
		c.warn(c.fieldPos("key", "format"), RuleKeyFormat, "key format changed from %s in %s to %s: a uuid key is lower-cased before it names the record and a token key is not, so %s does not find the record of its first attempt and runs the handler again%s; %s%s",
			ok.Format, c.baseName, nk.Format, across("a retry with an upper-case key"), also, c.wait("format"), fix)
	case narrow && wide:
		c.warn(c.fieldPos("key", "format"), RuleKeyFormat, "key format changed from %s in %s to %s: a retry on a new replica of a request an old one took with a %s key, and %s with a %s key, %s; first deploy a release with format: %s (which accepts both) to every replica, then move the clients to %s keys, then deploy this one",
			ok.Format, c.baseName, nk.Format, ok.Format, onOld, nk.Format, final, ir.FormatUUID, nk.Format)
	case narrow:
		c.warn(c.fieldPos("key", "format"), RuleKeyFormat, "key format narrowed from %s in %s to %s: a retry on a new replica of a request an old one took with a key %s accepts and %s does not %s; keep the old format until a window (%s) has passed with no such key, or have clients send %s keys first",
			ok.Format, c.baseName, nk.Format, ok.Format, nk.Format, final, c.window(), nk.Format)
	case wide:
		c.warn(c.fieldPos("key", "format"), RuleKeyFormat, "key format widened from %s in %s to %s: %s with a key %s accepts and %s does not %s; no client may send such a key until this release is on every replica",
			ok.Format, c.baseName, nk.Format, onOld, nk.Format, ok.Format, final)
	}
	// The longest key a format accepts: a uuid is 36 characters (its
	// max-length is at least that), a token up to max-length.
	longest := func(k ir.Key) int {
		if uuid(k.Format) {
			return 36
		}
		return k.MaxLength
	}
	length := func(k ir.Key) string {
		if uuid(k.Format) {
			return "36 (a uuid key's length)"
		}
		return fmt.Sprint(k.MaxLength)
	}
	switch {
	case nk.Format == ir.FormatToken && longest(ok) > nk.MaxLength:
		c.warn(c.fieldPos("key", "max-length"), RuleKeyFormat, "key max-length lowered from %s in %s to %d: a retry on a new replica of a request an old one took with a key longer than %d %s; keep the old max-length until a window (%s) has passed with no longer key, or have clients send shorter keys first",
			length(ok), c.baseName, nk.MaxLength, nk.MaxLength, final, c.window())
	case ok.Format == ir.FormatToken && longest(nk) > ok.MaxLength:
		c.warn(c.fieldPos("key", "max-length"), RuleKeyFormat, "key max-length raised from %d in %s to %s: %s with a key longer than %d %s; no client may send a longer key until this release is on every replica",
			ok.MaxLength, c.baseName, length(nk), onOld, ok.MaxLength, final)
	}
}

// narrowed reports whether key format to refuses a key that from accepts:
// token accepts any visible ASCII, uuid any UUID, uuidv4 and uuidv7 one
// version each.
func narrowed(from, to string) bool {
	switch from {
	case ir.FormatToken:
		return to != ir.FormatToken
	case ir.FormatUUID:
		return to == ir.FormatUUIDv4 || to == ir.FormatUUIDv7
	default:
		return to != from && to != ir.FormatUUID && to != ir.FormatToken
	}
}

// fingerprint reports a change of the fingerprint settings that a strict
// replica of either release refuses a retry of the other's request for
// (422), unless the entries bridge it: a rolling deploy runs both
// releases at once, so a record the new release made is retried on an old
// replica as much as the reverse. The new release must list the old
// settings (when it is strict) and the running one the new settings (when
// it is strict): the two-release procedure. Loose and window semantics
// refuse no keyed retry for its fingerprint; a keyless window request,
// named by its fingerprint, is not bridged.
func (c *comparison) fingerprint() {
	oldFP, newFP := c.old.Policy.Fingerprint(), c.op.Policy.Fingerprint()
	if oldFP.Same(newFP) {
		return
	}
	// The fields that differ, and the entries that would bridge the
	// change: toOld (the new release's, the old values), toNew (the
	// running release's, the new values).
	var fields, toOld, toNew []string
	add := func(name string, same bool, a, b []string) {
		if !same {
			fields = append(fields, name)
			toOld, toNew = append(toOld, name+": "+ir.Flow(a)), append(toNew, name+": "+ir.Flow(b))
		}
	}
	type only = ir.FingerprintSettings // one list of the settings, compared as Same does
	add("volatile", only{Volatile: oldFP.Volatile}.Same(only{Volatile: newFP.Volatile}), ir.Pointers(oldFP.Volatile), ir.Pointers(newFP.Volatile))
	add("unordered", only{Unordered: oldFP.Unordered}.Same(only{Unordered: newFP.Unordered}), ir.Pointers(oldFP.Unordered), ir.Pointers(newFP.Unordered))
	add("fingerprint-headers", only{FingerprintHeaders: oldFP.FingerprintHeaders}.Same(only{FingerprintHeaders: newFP.FingerprintHeaders}), oldFP.FingerprintHeaders, newFP.FingerprintHeaders)
	root := c.atRoot(fields[0])
	pos := c.fieldPos(fields[0])
	changed := fmt.Sprintf("fingerprint settings changed (%s) since %s", strings.Join(fields, ", "), c.baseName)
	oldP, newP := c.old.Policy, c.op.Policy
	if keyless(c.old) && keyless(c.op) {
		// Keyed retries are replayed (or re-run after a failure or an
		// expired lease) whatever their fingerprint, as under loose; a
		// keyless request's record is named by its fingerprint.
		c.warn(pos, RuleFingerprint, "%s: a request without a key, whose record is named by its fingerprint, runs the handler again when retried across the deploy (or a rollback), and compatible-fingerprints does not help it; %s",
			changed, c.wait("settings"))
		return
	}
	// Who refuses whom: a strict replica compares a keyed retry's
	// fingerprint with its record's; loose and window ones replay it, or
	// claim a failed attempt or an expired lease again, whatever it is.
	oldRefuses := oldP.Semantics == ir.Strict && !slices.ContainsFunc(oldP.CompatibleFingerprints, newFP.Same)
	newRefuses := newP.Semantics == ir.Strict && !slices.ContainsFunc(newP.CompatibleFingerprints, oldFP.Same)
	then := refusedRetry(oldRefuses, newRefuses, "")
	if then == "" {
		return // bridged both ways
	}
	where := " to the contract"
	if root {
		where = " on each operation (the field is for operations; a YAML anchor can share one entry)"
	}
	entry := func(l []string) string { return "compatible-fingerprints: [{" + strings.Join(l, ", ") + "}]" }
	var fix string
	switch {
	case !oldRefuses:
		fix = fmt.Sprintf("add %s%s, and remove it two windows (2 × %s) after this release is on every replica (a record re-claimed or taken over through it keeps the old fingerprint for a window from that claim)", entry(toOld), where, c.window())
	case !newRefuses:
		keep := "this one needs none"
		if newP.Semantics == ir.Strict {
			keep = "this one keeps its entry"
		}
		fix = fmt.Sprintf("%s does not accept this release's settings: first deploy a release that keeps the settings of %s and adds %s%s, then this one (%s)", c.baseName, c.baseName, entry(toNew), where, keep)
	default:
		fix = fmt.Sprintf("deploy it in two releases: first one that keeps the settings of %s and adds %s%s; then this one, with %s, once that one is on every replica; and drop this entry in a third release, two windows (2 × %s) after this one is on every replica", c.baseName, entry(toNew), where, entry(toOld), c.window())
	}
	c.warn(pos, RuleFingerprint, "%s: %s; %s", changed, then, fix)
}

// readTypes returns the media types among op's declared request media
// types that the fingerprint reads as JSON or as form fields, by essence
// (ir.MediaEssence), with their reading: a body of any other media type
// is read byte for byte (runtime/fingerprint's Options.MediaTypes, which
// the generated policy fills with the declared ones).
func readTypes(op *ir.Operation) map[string]ir.Reading {
	m := map[string]ir.Reading{}
	if op.Body == nil {
		return m
	}
	for _, ct := range op.Body.ContentTypes {
		if r := ir.MediaTypeReading(ct); r != ir.ReadRaw {
			m[ir.MediaEssence(ct)] = r
		}
	}
	return m
}

// mediaTypes reports a change of the request media types the fingerprint
// reads as JSON or as form fields (a declared one added or removed,
// another media type in its place): a body sent with such a media type is
// read one way by one release and another way by the other, so its
// fingerprint differs, as for a change of the fingerprint settings
// (fingerprint), and no compatible-fingerprints entry bridges it (the
// runtime reads bodies under an entry by the declared media types of the
// release that holds it). A media type read byte for byte on both sides
// (one added that is neither JSON nor a form, a range) changes nothing.
func (c *comparison) mediaTypes() {
	oldT, newT := readTypes(c.old), readTypes(c.op)
	var changed, types, removed, added []string
	for _, mt := range slices.Sorted(maps.Keys(oldT)) {
		if _, ok := newT[mt]; !ok {
			changed = append(changed, fmt.Sprintf("%s: read %s in %s, %s now", mt, oldT[mt], c.baseName, ir.ReadRaw))
			types = append(types, mt)
			removed = append(removed, mt)
		}
	}
	for _, mt := range slices.Sorted(maps.Keys(newT)) {
		if _, ok := oldT[mt]; !ok {
			changed = append(changed, fmt.Sprintf("%s: read %s in %s, %s now", mt, ir.ReadRaw, c.baseName, newT[mt]))
			types = append(types, mt)
			added = append(added, mt)
		}
	}
	if len(changed) == 0 {
		return
	}
	slices.Sort(types)
	pos := c.contentPos(added)
	what := fmt.Sprintf("the request media types read as JSON or as form fields changed since %s (%s), and how a body is read decides its fingerprint", c.baseName, strings.Join(changed, "; "))
	sent := " sent as " + orList(types)
	// The procedure by direction: a media type no longer read (removed)
	// is sent by clients today, so its requests must stop, or the deploy
	// be atomic; one read now (added) must not be sent until every
	// replica reads it, as a widened key format.
	var fixes []string
	if len(removed) > 0 {
		fixes = append(fixes, fmt.Sprintf("keep declaring %s, as %s does, until a window (%s) has passed with no request sent as %s, or deploy every replica at once during a quiet period (and roll back the same way)",
			strings.Join(removed, ", "), c.baseName, c.window(), english.Noun(len(removed), "it", "one of them")))
	}
	if len(added) > 0 {
		fixes = append(fixes, fmt.Sprintf("no client may send a body as %s until this release is on every replica (and none during a rollback to %s)", orList(added), c.baseName))
	}
	fix := "compatible-fingerprints cannot bridge it (the runtime reads a body under an entry by the media types the release declares); " + strings.Join(fixes, "; and ")
	if keyless(c.old) && keyless(c.op) {
		c.warn(pos, RuleMediaTypes, "%s: a request without a key%s, whose record is named by its fingerprint, runs the handler again when retried across the deploy (or a rollback); %s", what, sent, fix)
		return
	}
	then := refusedRetry(c.old.Policy.Semantics == ir.Strict, c.op.Policy.Semantics == ir.Strict, sent)
	if then == "" {
		return // loose or window with a key on both sides: a keyed retry is replayed whatever its fingerprint
	}
	c.warn(pos, RuleMediaTypes, "%s: %s; %s", what, then, fix)
}

// keyless reports whether op takes requests without a key whose records
// are named by their fingerprint (window semantics, the key optional).
func keyless(op *ir.Operation) bool {
	return op.Policy.Semantics == ir.Window && !op.Key.Required
}

// refusedRetry says which identical retry (sent: what it is sent as, ""
// or " sent as ...") gets 422 across the deploy, given whether a replica
// of the old release (oldRefuses) and of the new one (newRefuses) refuses
// a retry of a request the other took for its fingerprint (a strict one
// does; loose and window ones replay it, or claim a failed attempt or an
// expired lease again, whatever it is); "" when neither does.
func refusedRetry(oldRefuses, newRefuses bool, sent string) string {
	const refused = "gets 422 IDEMPOTENCY_KEY_REUSED, which a client takes as final (and a failed first attempt or an expired lease blocks the key for the window)"
	switch {
	case oldRefuses && newRefuses:
		return across("an identical retry"+sent) + " " + refused
	case newRefuses:
		return "an identical retry" + sent + " on a new replica of a request an old one took " + refused
	case oldRefuses:
		return "an identical retry" + sent + " on an old replica (a rolling deploy runs both releases at once, as does a rollback) of a request a new one took " + refused
	}
	return ""
}

// orList joins l with commas and a last "or".
func orList(l []string) string {
	if len(l) < 2 {
		return strings.Join(l, "")
	}
	return strings.Join(l[:len(l)-1], ", ") + " or " + l[len(l)-1]
}

// contentPos is where the first of the media types added (essences) is
// declared in op's requestBody content, else its content, else its
// requestBody, else its method.
func (c *comparison) contentPos(added []string) ir.Pos {
	rb := c.d.Lookup(opPointer(c.op) + "/requestBody")
	if rb.Node == nil {
		return methodPos(c.d, c.op)
	}
	content := c.d.LookupFrom(rb, "/content")
	if content.Node == nil {
		return c.d.KeyPos(c.d.Lookup(opPointer(c.op)), "requestBody")
	}
	if len(added) > 0 && c.op.Body != nil {
		for _, ct := range c.op.Body.ContentTypes {
			if ir.MediaEssence(ct) == added[0] {
				return c.d.KeyPos(content, ct)
			}
		}
	}
	return c.d.KeyPos(rb, "content")
}

// opPointer is the JSON pointer of op in its document.
func opPointer(op *ir.Operation) string {
	return "/paths/" + load.Escape(op.Path) + "/" + strings.ToLower(op.Method)
}

// fieldAndParent returns the node of the contract field at path (keys
// below x-idempotency) of the operation's block, else of the root's block
// (where the merged value comes from), and the mapping that holds it.
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

// atRoot reports whether the field at path comes from the root's block
// (the operation's does not set it).
func (c *comparison) atRoot(path ...string) bool {
	n, _ := c.fieldAndParent(path)
	return n.Node != nil && c.d.Lookup(opPointer(c.op)+"/x-idempotency/"+strings.Join(load.EscapeAll(path), "/")).Node == nil
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
		where := op.Where()
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
