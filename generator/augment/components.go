package augment

import (
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/runtime/idem"
)

// Marker is the extension idemgen puts on the components it writes, so a
// later run may replace them when the contracts change; components without
// it belong to the spec's authors and are never changed.
const Marker = compile.Marker

const markerValue = compile.MarkerValue

// Component names (a number is appended when the name is taken by a
// different definition).
const (
	ProblemSchema    = "IdempotencyProblem"
	RetryAfterHeader = "IdempotencyRetryAfter"
	ReplayedHeader   = "IdempotentReplayed"
)

// role is one reason idemgen's runtime answers with some status.
type role uint8

const (
	roleBadRequest role = iota
	roleReused
	roleInFlight
	roleResponseUnavailable
	roleStoreUnavailable
)

// roles of one status, in this order.
type roles [5]bool

func (r roles) retryAfter() bool { return r[roleInFlight] || r[roleStoreUnavailable] }

// statusRoles returns the statuses an operation's contract makes idemgen's
// runtime answer with, and why.
func statusRoles(op *ir.Operation) map[int]roles {
	m := map[int]roles{}
	add := func(status int, r role) {
		x := m[status]
		x[r] = true
		m[status] = x
	}
	add(400, roleBadRequest)
	if op.Policy.Semantics == ir.Strict {
		add(op.Policy.ConflictStatus, roleReused)
	}
	add(op.Policy.InFlight.Status, roleInFlight)
	add(409, roleResponseUnavailable)
	add(503, roleStoreUnavailable)
	return m
}

func responseName(status int) string {
	switch status {
	case 400:
		return "IdempotencyBadRequest"
	case 409:
		return "IdempotencyConflict"
	case 422:
		return "IdempotencyKeyReused"
	case 503:
		return "IdempotencyUnavailable"
	}
	return "IdempotencyStatus" + strconv.Itoa(status)
}

func problemSchema() *yaml.Node {
	codes := []string{
		idem.CodeKeyMissing, idem.CodeKeyInvalid, idem.CodeKeyReused, idem.CodeKeyInUse,
		idem.CodeStoreUnavailable, idem.CodeResponseUnavailable, idem.CodeRequestTooLarge,
		idem.CodeRequestUnreadable, idem.CodeRecordUnreadable, idem.CodePrincipalUnavailable,
		idem.CodeRequestEnded, idem.CodeHandlerPanicked, idem.CodeQuotaExceeded, idem.CodeHandlerFailed,
	}
	return mapping(
		"type", "object",
		"description", "An RFC 9457 problem document with a stable code, as idemgen's runtime writes it for idempotency errors.",
		"required", []string{"type", "title", "status", "code"},
		"properties", mapping(
			"type", mapping("type", "string", "description", "A URI that ends in the code."),
			"title", mapping("type", "string"),
			"status", mapping("type", "integer"),
			"detail", mapping("type", "string"),
			"code", mapping("type", "string", "description", "The stable problem code.", "enum", codes),
			"original_status", mapping("type", "integer", "description", idem.CodeResponseUnavailable+" only: the status of the request that ran."),
		),
		Marker, markerValue,
	)
}

func retryAfterHeader() *yaml.Node {
	return mapping(
		"description", "Seconds to wait before retrying with the same idempotency key.",
		"schema", mapping("type", "integer", "minimum", 0),
		Marker, markerValue,
	)
}

func replayedHeader() *yaml.Node {
	return mapping(
		"description", "true when this response is the stored response to an earlier request with the same idempotency key: the operation ran once, before.",
		"schema", mapping("type", "boolean"),
		Marker, markerValue,
	)
}

func responseDescription(status int, r roles) string {
	var parts []string
	if r[roleBadRequest] {
		parts = append(parts, "The idempotency key is missing ("+idem.CodeKeyMissing+") or malformed ("+idem.CodeKeyInvalid+"), or the request body could not be read ("+idem.CodeRequestUnreadable+"); do not retry, fix the request.")
	}
	if r[roleReused] {
		parts = append(parts, idem.CodeKeyReused+": the key was used for a different request; never retry with this key.")
	}
	if r[roleInFlight] {
		parts = append(parts, idem.CodeKeyInUse+": a request with this key is still being processed; retry with the same key after Retry-After.")
	}
	if r[roleResponseUnavailable] {
		parts = append(parts, idem.CodeResponseUnavailable+": the request ran, but its response could not be stored (too large, or cut short as it was sent) and cannot be replayed (this answer carries `Idempotent-Replayed: true`); do not retry.")
	}
	if r[roleStoreUnavailable] {
		parts = append(parts, idem.CodeStoreUnavailable+": the idempotency records could not be reached and nothing ran; retry with the same key after Retry-After.",
			idem.CodeRequestEnded+": the request ended on the server (its deadline passed) before the server was done with its key; it is safe to retry with the same key.")
	}
	return strings.Join(parts, " ")
}

// components collects the components the plan refers to.
type components struct {
	root  *yaml.Node
	kinds []string               // kinds in first-use order
	added map[string][]namedNode // kind -> new definitions, in first-use order
	used  map[string][]namedNode // kind -> definitions referred to (added or reused)
	stale []staleNode            // marked definitions to replace, in the order found
	// keep is, for a marked component several operations refer to (kind
	// -> name), the definition that keeps its name (see share); what
	// refers to it for another definition refers to another component.
	keep map[string]map[string]*yaml.Node
}

type namedNode struct {
	name string
	def  *yaml.Node
}

// staleNode is a definition idemgen wrote earlier (def, in the spec) that
// the contracts replace now (with want).
type staleNode struct {
	kind, name string
	def, want  *yaml.Node
}

func newComponents(root *yaml.Node) *components {
	return &components{root: root, added: map[string][]namedNode{}, used: map[string][]namedNode{}, keep: map[string]map[string]*yaml.Node{}}
}

// share decides which of defs, the definitions that the operations
// referring to idemgen's component of kind named name (marked) want now,
// in the operations' order, keeps its name: the component's current
// definition when one of them wants it (the operations whose contract
// changed get components of their own, and the component stays as it is);
// else the one most of them want, the first on a tie (replaced in place).
// Without it, the first operation to reach current would keep the name,
// whichever changed.
func (c *components) share(kind, name string, defs []*yaml.Node) {
	cur := child(child(child(c.root, "components"), kind), name)
	if len(defs) < 2 || !compile.Marked(cur) {
		return
	}
	keep := defs[0]
	if slices.ContainsFunc(defs, func(d *yaml.Node) bool { return equal(d, cur) }) {
		keep = cur
	} else {
		best := 0
		for _, d := range defs {
			if n := len(slices.DeleteFunc(slices.Clone(defs), func(e *yaml.Node) bool { return !equal(d, e) })); n > best {
				keep, best = d, n
			}
		}
	}
	if c.keep[kind] == nil {
		c.keep[kind] = map[string]*yaml.Node{}
	}
	c.keep[kind][name] = keep
}

// componentRef is the $ref of the component of kind named name.
func componentRef(kind, name string) string {
	return "#/components/" + kind + "/" + load.Escape(name)
}

func (c *components) isUsed(kind, name string) bool {
	return slices.ContainsFunc(c.used[kind], func(u namedNode) bool { return u.name == name })
}

// ref returns the $ref of a component of kind with definition def, named
// base or base2, base3, … : an existing equal definition is reused; a
// definition idemgen wrote earlier (with the marker) is replaced when
// replace is set; any other name is left alone.
func (c *components) ref(kind, base string, def *yaml.Node, replace bool) string {
	for _, u := range c.used[kind] {
		if equal(u.def, def) {
			return componentRef(kind, u.name)
		}
	}
	existing := child(child(c.root, "components"), kind)
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name += strconv.Itoa(i)
		}
		if c.isUsed(kind, name) {
			continue
		}
		cur := child(existing, name)
		switch {
		case cur == nil:
			c.add(kind, name, def)
		case equal(cur, def):
			c.used[kind] = append(c.used[kind], namedNode{name: name, def: cur})
		case replace && compile.Marked(cur):
			c.replace(kind, name, cur, def)
		default:
			continue
		}
		return componentRef(kind, name)
	}
}

// current checks a component the spec already refers to by name (from an
// earlier run): when it is marked as idemgen's and differs from def, it is
// replaced in place (and reported stale), so what refers to it stays. A
// component without the marker, or one already chosen for a definition,
// is left alone.
//
// It returns false when the component is marked and already chosen for
// another definition (another operation's, whose contract differs now; or
// the one share chose): what refers to it for def must refer to another
// component.
func (c *components) current(kind, name string, def *yaml.Node) bool {
	if keep := c.keep[kind][name]; keep != nil && !equal(keep, def) {
		return false // chosen for another definition (share)
	}
	if i := slices.IndexFunc(c.used[kind], func(u namedNode) bool { return u.name == name }); i >= 0 {
		return equal(c.used[kind][i].def, def) || !compile.Marked(child(child(child(c.root, "components"), kind), name))
	}
	cur := child(child(child(c.root, "components"), kind), name)
	switch {
	case cur == nil || !compile.Marked(cur):
	case equal(cur, def):
		c.used[kind] = append(c.used[kind], namedNode{name: name, def: cur})
	default:
		c.replace(kind, name, cur, def)
	}
	return true
}

// currentRef is current for the component of kind that n, a declaration
// in the spec, refers to, if n is a $ref to one of this document; it
// returns current's answer (true when n is not such a $ref) and the name.
func (c *components) currentRef(kind string, n, def *yaml.Node) (bool, string) {
	name, ok := localComponent(kind, n)
	if !ok {
		return true, ""
	}
	return c.current(kind, name, def), name
}

// localComponent returns the name of the component of kind that n refers
// to, if n is a $ref to one of this document.
func localComponent(kind string, n *yaml.Node) (string, bool) {
	ptr, external := refTarget(unalias(n))
	prefix := "/components/" + kind + "/"
	if external || !strings.HasPrefix(ptr, prefix) || strings.Contains(ptr[len(prefix):], "/") {
		return "", false
	}
	return load.Unescape(ptr[len(prefix):]), true
}

// replace records cur, idemgen's definition of the component of kind
// named name, as stale, and def as the one to write under that name.
func (c *components) replace(kind, name string, cur, def *yaml.Node) {
	c.stale = append(c.stale, staleNode{kind: kind, name: name, def: cur, want: def})
	c.add(kind, name, def)
}

func (c *components) add(kind, name string, def *yaml.Node) {
	if !slices.Contains(c.kinds, kind) {
		c.kinds = append(c.kinds, kind)
	}
	c.added[kind] = append(c.added[kind], namedNode{name: name, def: def})
	c.used[kind] = append(c.used[kind], namedNode{name: name, def: def})
}

// update returns the update of the document root that adds the new
// components, or nil.
func (c *components) update() *yaml.Node {
	if len(c.kinds) == 0 {
		return nil
	}
	comps := mapping()
	for _, kind := range c.kinds {
		defs := mapping()
		for _, d := range c.added[kind] {
			set(defs, d.name, d.def)
		}
		set(comps, kind, defs)
	}
	return mapping("components", comps)
}
