package diag

import (
	"slices"
	"strings"

	"github.com/idemgen/idemgen/generator/internal/editdist"
	"github.com/idemgen/idemgen/generator/ir"
)

// Rules of the ignores themselves.
const (
	// RuleBadIgnore: an ignore names an unknown rule, an error rule, an
	// operation the spec does not have, or gives no reason.
	RuleBadIgnore = "bad-ignore"
	// RuleUnusedIgnore: an ignore silenced nothing in this run.
	RuleUnusedIgnore = "unused-ignore"
)

// warningRules are the rules idemgen reports as warnings (the tables
// "Warnings" and "Spec consistency" of docs/contract.md): the rules an
// ignore may name. The spec-consistency rules, overlay-no-match and
// key-without-contract stay ignorable when -strict makes them errors.
var warningRules = []string{
	"business-key",
	"compatible-fingerprints-no-effect",
	"conflict-status-no-effect",
	"duplicate-entry",
	"extension-misspelled",
	"fingerprint-header-per-attempt",
	"fingerprint-headers-no-effect",
	"form-body-pointers",
	"form-key-spelling",
	"header-not-fingerprinted",
	"key-convention-mismatch",
	"key-optional",
	"key-param-missing",
	"key-without-contract",
	"oapi-overlay-unlisted",
	"operation-id-missing",
	"overlay-no-match",
	"overlay-warning",
	"path-fallback",
	"pointer-not-index",
	"problem-response-missing",
	"put-delete",
	"raw-body-strict",
	"response-header-not-replayed",
	"retry-after-missing",
	"retry-on-conflict-status",
	"rollout-base-unpaired",
	"rollout-fingerprint",
	"rollout-key-format",
	"rollout-key-moved",
	"rollout-key-required",
	"rollout-media-types",
	"rollout-operation-renamed",
	"rollout-response-headers",
	"rollout-scope",
	"scope-without-principal",
	"servemux-conflict",
	"spec-not-augmented",
	"spec-stale",
	"unordered-candidate",
	"unordered-no-effect",
	"volatile-candidate",
	"volatile-no-effect",
	"wait-longer-than-lease",
}

// errorRules are the rules idemgen reports as errors, and those of the
// ignores themselves (which no ignore may name either).
var errorRules = []string{
	"backoff-max-below-initial",
	"bad-duration",
	"bad-enum",
	"bad-header-name",
	RuleBadIgnore,
	"bad-pointer",
	"bad-value",
	"client-key-length",
	"client-key-schema",
	"duplicate-field",
	"generated-missing",
	"generated-orphaned",
	"generated-stale",
	"go-name-collision",
	"go-name-invalid",
	"in-flight-status-final",
	"internal-error",
	"key-body-without-json",
	"key-carrier-conflict",
	"key-declared-differently",
	"key-in-cookie",
	"key-param-go-type",
	"key-undeclared",
	"key-unknown-member",
	"load-error",
	"misplaced-field",
	"non-json-body",
	"overlay-error",
	"retry-on-client-error",
	"runtime-policy",
	"safe-method",
	"semantics-missing",
	"unconfirmed",
	"unknown-field",
	"unordered-not-array",
	"unordered-unknown-member",
	"volatile-unknown-member",
	"window-shorter-than-lease",
	"window-shorter-than-retry",
	"wrong-type",
}

// WarningRules returns the rules an ignore may name, sorted.
func WarningRules() []string { return slices.Clone(warningRules) }

// ErrorRules returns the rules idemgen reports as errors, and those about
// ignores (bad-ignore, unused-ignore), sorted: no ignore may name them.
func ErrorRules() []string {
	out := append(slices.Clone(errorRules), RuleUnusedIgnore)
	slices.Sort(out)
	return out
}

// CheckIgnoreRule returns why rule cannot be ignored, as a sentence that
// starts with the rule ("" when it can): it is an error rule, a rule of the
// ignores themselves, or no rule at all.
func CheckIgnoreRule(rule string) string {
	switch {
	case slices.Contains(warningRules, rule):
		return ""
	case rule == RuleUnusedIgnore:
		return "unused-ignore cannot be ignored: delete the stale ignore instead"
	case slices.Contains(errorRules, rule):
		return rule + " is an error, and only warnings can be ignored"
	case rule == "":
		return "no rule named"
	}
	msg := rule + " is no rule idemgen reports"
	if s := Suggest(rule, warningRules); s != "" {
		msg += " (did you mean " + s + "?)"
	}
	return msg
}

// Ignore is one suppression: the warnings of Rule about the operations Ops
// (each "METHOD /path"), or about anything when Ops is empty.
type Ignore struct {
	Rule string
	Ops  []string
	// Pos is where the ignore is written: a line of the config file, a
	// comment of the spec (its File "command line" for a flag).
	Pos ir.Pos
	// Name is how messages name the ignore, e.g. "ignore: put-delete",
	// "# idemgen:ignore put-delete", "-ignore put-delete".
	Name string
}

// covers reports whether ig silences a warning of its rule about op.
func (ig Ignore) covers(op string) bool { return slices.Contains(ig.Ops, op) }

// Suppress returns l without the diagnostics the ignores silence, and with
// a warning [unused-ignore] at each ignore that silenced nothing although
// ran(its rule) says the rule was checked in this run; none when what is
// left has errors (idemgen may have stopped before checking everything).
//
// A diagnostic is silenced when its rule is a warning rule (even one that
// -strict turned into an error) and an ignore of the rule names no
// operation, or ignores of the rule name each of the operations it is
// about; a diagnostic about no operation only by an ignore that names
// none. A diagnostic that cites a rule (Diagnostic.Cites) the ignores
// would silence for its operations is reported with its message Alone.
// The ignores must have been checked (CheckIgnoreRule) already.
func (l List) Suppress(ignores []Ignore, ran func(rule string) bool) List {
	used := make([]bool, len(ignores))
	var out List
	for _, d := range l {
		if d.Cites != "" && silence(Diagnostic{Rule: d.Cites, Ops: d.Ops}, ignores, make([]bool, len(ignores))) {
			d.Message = d.Alone
		}
		if !slices.Contains(warningRules, d.Rule) || !silence(d, ignores, used) {
			out = append(out, d)
		}
	}
	if out.HasErrors() {
		return out.Sorted()
	}
	for i, ig := range ignores {
		if used[i] || (ran != nil && !ran(ig.Rule)) {
			continue
		}
		about := ""
		if len(ig.Ops) > 0 {
			about = " about " + strings.Join(ig.Ops, ", ")
		}
		out.Warnf(ig.Pos, RuleUnusedIgnore, "%s silenced nothing: no %s warning%s in this run; delete it", ig.Name, ig.Rule, about)
	}
	return out.Sorted()
}

// silence reports whether the ignores silence d, marking every one that
// matches it (a global ignore and one for its operation alike: neither is
// unused; nor is one for an operation of several that d is about, although
// d is still reported for the others: it is not stale).
func silence(d Diagnostic, ignores []Ignore, used []bool) bool {
	global := false
	covered := make([]bool, len(d.Ops))
	var by []int
	for i, ig := range ignores {
		if ig.Rule != d.Rule {
			continue
		}
		if len(ig.Ops) == 0 {
			global = true
			by = append(by, i)
			continue
		}
		for j, op := range d.Ops {
			if ig.covers(op) {
				covered[j] = true
				by = append(by, i)
			}
		}
	}
	for _, i := range by {
		used[i] = true
	}
	return global || (len(d.Ops) > 0 && !slices.Contains(covered, false))
}

// Suggest returns the candidate closest to s (case aside), within an edit
// distance of 2, for a "did you mean" hint; "" when none is that close
// (or s or the candidate is longer than 256 bytes).
func Suggest(s string, candidates []string) string {
	best, bestD := "", 3
	ls := strings.ToLower(s)
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if abs(len(ls)-len(lc)) >= bestD {
			continue // the distance is at least the lengths' difference
		}
		if d := editdist.Distance(ls, lc); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
