package contract

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/internal/yamlmerge"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/runtime/idem"
)

// Locator turns a node of an x-idempotency value, at JSON pointer ptr
// relative to the value, into a position.
type Locator func(n *yaml.Node, ptr string) ir.Pos

// Level says where a block is written.
type Level int

// Levels.
const (
	Root      Level = iota // the document root: defaults, apply-to
	Operation              // an operation
)

type parser struct {
	loc   Locator
	diags diag.List
	level Level
	// topRef is where the block has a $ref field (not followed: the
	// fields it names are missing, not to be reported again).
	topRef ir.Pos
}

// Parse parses one x-idempotency value. It never fails: problems are
// returned as diagnostics and the offending fields are left unset.
func Parse(n *yaml.Node, level Level, loc Locator) (Block, diag.List) {
	p := &parser{loc: loc, level: level}
	var b Block
	if n == nil {
		return b, nil
	}
	n = yamlmerge.Unalias(n)
	b.Pos = loc(n, "")
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!bool":
		v, _ := strconv.ParseBool(n.Value)
		if level == Root {
			p.errorf(n, "", "wrong-type", "x-idempotency at the document root must be a mapping of defaults, not %s", n.Value)
			return b, p.diags
		}
		b.Enabled.set(v, b.Pos)
	case n.Kind == yaml.MappingNode:
		b.Enabled.set(true, b.Pos)
		p.block(n, &b)
		if !p.topRef.IsZero() && !b.Semantics.Set && b.Semantics.Pos.IsZero() {
			// As a bad value: no [semantics-missing] on top of the $ref
			// error, whose target may well hold it.
			b.Semantics.Pos = p.topRef
		}
	default:
		what := "true, false or a mapping"
		if level == Root {
			what = "a mapping"
		}
		p.errorf(n, "", "wrong-type", "x-idempotency must be %s, not %s", what, describe(n))
	}
	return b, p.diags
}

func (p *parser) errorf(n *yaml.Node, ptr, rule, format string, args ...any) {
	p.diags.Errorf(p.loc(n, ptr), rule, format, args...)
}

func (p *parser) warnf(n *yaml.Node, ptr, rule, format string, args ...any) {
	p.diags.Warnf(p.loc(n, ptr), rule, format, args...)
}

type fieldFunc func(v *yaml.Node, ptr string)

// fields walks a mapping, dispatching known fields and reporting unknown
// and duplicate ones; merge keys (<<) are expanded, the merged fields
// keeping the positions where they are written.
func (p *parser) fields(n *yaml.Node, ptr, where string, known map[string]fieldFunc) {
	seen := map[string]bool{}
	kv := yamlmerge.Pairs(n)
	for i := 0; i+1 < len(kv); i += 2 {
		k, v := kv[i], yamlmerge.Unalias(kv[i+1])
		kp := ptr + "/" + escape(k.Value)
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, kp, "wrong-type", "%s: a field name must be a string", where)
			continue
		}
		if seen[k.Value] {
			p.errorf(k, kp, "duplicate-field", "%s: field %s is written twice", where, k.Value)
			continue
		}
		seen[k.Value] = true
		f, ok := known[k.Value]
		if !ok && k.Value == "$ref" {
			p.errorf(k, kp, "unknown-field", "%s: $ref is not followed here (idemgen does not resolve x-idempotency through $ref): write the fields here, share them with a YAML anchor and merge key (<<: *name), or apply them with an overlay", where)
			if ptr == "" {
				p.topRef = p.loc(k, kp)
			}
			continue
		}
		if !ok {
			names := make([]string, 0, len(known))
			for name := range known {
				names = append(names, name)
			}
			slices.Sort(names)
			if s := diag.Suggest(k.Value, names); s != "" {
				p.errorf(k, kp, "unknown-field", "%s: unknown field %s (did you mean %s?)", where, k.Value, s)
			} else {
				p.errorf(k, kp, "unknown-field", "%s: unknown field %s (known: %s)", where, k.Value, strings.Join(names, ", "))
			}
			continue
		}
		f(v, kp)
	}
}

func (p *parser) mapping(n *yaml.Node, ptr, what string) bool {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, ptr, "wrong-type", "%s must be a mapping, not %s", what, describe(n))
		return false
	}
	return true
}

func (p *parser) block(n *yaml.Node, b *Block) {
	p.fields(n, "", "x-idempotency", p.blockFields(b))
}

// Fields returns the names of the fields of an x-idempotency block,
// sorted (semantics, window, key, …).
func Fields() []string {
	var p parser
	known := p.blockFields(&Block{})
	names := make([]string, 0, len(known))
	for name := range known {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// blockFields returns the fields of an x-idempotency block, each setting
// its part of b.
func (p *parser) blockFields(b *Block) map[string]fieldFunc {
	return map[string]fieldFunc{
		"semantics": func(v *yaml.Node, ptr string) {
			if s, ok := p.enum(v, ptr, "semantics", "strict", "loose", "window"); ok {
				b.Semantics.set(ir.Semantics(s), p.loc(v, ptr))
			} else {
				b.Semantics.Pos = p.loc(v, ptr) // written, but wrong: reported already
			}
		},
		"window": func(v *yaml.Node, ptr string) {
			if d, ok := p.duration(v, ptr, "window", false); ok {
				b.Window.set(d, p.loc(v, ptr))
			}
		},
		"apply-to": func(v *yaml.Node, ptr string) {
			if p.level != Root {
				p.errorf(v, ptr, "misplaced-field", "apply-to belongs at the document root's x-idempotency, not on an operation")
				return
			}
			b.ApplyToSet = true
			seen := map[string]listed{}
			for i, it := range p.list(v, ptr, "apply-to") {
				ip := ptr + "/" + strconv.Itoa(i)
				m, ok := p.str(it, ip, "apply-to entry")
				if !ok {
					continue
				}
				lm := strings.ToLower(m)
				if !ir.HTTPMethod(lm) {
					p.errorf(it, ip, "bad-enum", "apply-to: %q is not an HTTP method (post, patch, put, delete)", m)
					continue
				}
				if p.duplicate(seen, lm, m, it, ip, "apply-to") {
					continue
				}
				var f Field[string]
				f.set(lm, p.loc(it, ip))
				b.ApplyTo = append(b.ApplyTo, f)
			}
		},
		"volatile":            p.pointerList(&b.Volatile, "volatile", false),
		"unordered":           p.pointerList(&b.Unordered, "unordered", true),
		"fingerprint-headers": p.fingerprintHeaders(&b.FingerprintHeaders),
		"compatible-fingerprints": func(v *yaml.Node, ptr string) {
			if p.level == Root {
				p.errorf(v, ptr, "misplaced-field", "compatible-fingerprints belongs on an operation, not at the document root: it lists fingerprint settings of another release of one operation (the one before, or the one after), and a field an entry leaves out is that operation's own; after changing the root's volatile, unordered or fingerprint-headers, give each operation its entry (a YAML anchor and alias can share one)")
				return
			}
			p.compatible(v, ptr, &b.CompatibleFingerprints)
		},
		"key": func(v *yaml.Node, ptr string) {
			if p.mapping(v, ptr, "key") {
				b.Key.Pos = p.loc(v, ptr)
				p.key(v, ptr, &b.Key)
			}
		},
		"scope": func(v *yaml.Node, ptr string) {
			var out []Field[string]
			items := p.list(v, ptr, "scope")
			for i, it := range items {
				ip := ptr + "/" + strconv.Itoa(i)
				if s, ok := p.enum(it, ip, "scope entry", "principal"); ok {
					var f Field[string]
					f.set(s, p.loc(it, ip))
					out = append(out, f)
				}
			}
			// A refused entry (reported) leaves the scope unset: without
			// it, the list would read as scope-without-principal.
			if v.Kind == yaml.SequenceNode && len(out) == len(items) {
				b.Scope.set(out, p.loc(v, ptr))
			}
		},
		"conflict-status": func(v *yaml.Node, ptr string) {
			if s, ok := p.integer(v, ptr, "conflict-status"); ok {
				if s != 409 && s != 422 {
					p.errorf(v, ptr, "bad-enum", "conflict-status must be 422 (the IETF draft's choice) or 409, not %d", s)
					return
				}
				b.ConflictStatus.set(s, p.loc(v, ptr))
			}
		},
		"in-flight": func(v *yaml.Node, ptr string) {
			if !p.mapping(v, ptr, "in-flight") {
				return
			}
			p.fields(v, ptr, "in-flight", map[string]fieldFunc{
				"status": func(v *yaml.Node, ptr string) {
					if s, ok := p.status(v, ptr, "in-flight.status"); ok {
						b.InFlight.Status.set(s, p.loc(v, ptr))
					}
				},
				"retry-after": p.durationField(&b.InFlight.RetryAfter, "in-flight.retry-after", false),
				"lease":       p.durationField(&b.InFlight.Lease, "in-flight.lease", false),
				"wait":        p.durationField(&b.InFlight.Wait, "in-flight.wait", true),
			})
		},
		"failures": func(v *yaml.Node, ptr string) {
			if s, ok := p.enum(v, ptr, "failures", "retry", "replay"); ok {
				b.Failures.set(s, p.loc(v, ptr))
			}
		},
		"response": func(v *yaml.Node, ptr string) {
			if !p.mapping(v, ptr, "response") {
				return
			}
			p.fields(v, ptr, "response", map[string]fieldFunc{
				"max-bytes": p.bytesField(&b.Response.MaxBytes, "response.max-bytes"),
				"headers":   p.headerList(&b.Response.Headers, "response.headers", idem.NeverStoredHeader),
			})
		},
		"request": func(v *yaml.Node, ptr string) {
			if !p.mapping(v, ptr, "request") {
				return
			}
			p.fields(v, ptr, "request", map[string]fieldFunc{
				"max-bytes": p.bytesField(&b.Request.MaxBytes, "request.max-bytes"),
			})
		},
		"retry": func(v *yaml.Node, ptr string) {
			if p.mapping(v, ptr, "retry") {
				b.Retry.Pos = p.loc(v, ptr)
				p.retry(v, ptr, &b.Retry)
			}
		},
	}
}

func (p *parser) key(n *yaml.Node, ptr string, k *KeyBlock) {
	// first is the first carrier given, refused ones (a cookie, a bad
	// header name) included: a second is a conflict, not the key.
	var first ir.Carrier
	carrier := func(c ir.Carrier) fieldFunc {
		return func(v *yaml.Node, vp string) {
			s, ok := p.str(v, vp, "key."+string(c))
			if !ok {
				return
			}
			if first != "" {
				p.errorf(v, vp, "key-carrier-conflict", "key: %s and %s both given; the key travels in one place", first, c)
				return
			}
			first = c
			// A refused carrier (reported below) keeps its position,
			// unset: the operation's key is unusable, not the default.
			k.Carrier.Pos = p.loc(v, vp)
			switch c {
			case ir.CarrierHeader:
				if !validHeaderName(s) {
					p.errorf(v, vp, "bad-header-name", "key.header: %q is not a valid HTTP header name", s)
					return
				}
			case ir.CarrierBody:
				if err := CheckPointer(s); err != nil {
					p.errorf(v, vp, "bad-pointer", "key.body: %v", err)
					return
				}
				if strings.Contains(s, "*") || s == "" {
					p.errorf(v, vp, "bad-pointer", "key.body: %q must name one member, without *", s)
					return
				}
			case ir.CarrierQuery:
				if s == "" {
					p.errorf(v, vp, "bad-value", "key.query: the parameter name is empty")
					return
				}
			case "cookie":
				p.diags.Unsupportedf(p.loc(v, vp), "key-in-cookie", "key.cookie: a key carried in a cookie (use a header, a body member or a query parameter)")
				return
			}
			k.Carrier.set(c, p.loc(v, vp))
			k.Name.set(s, p.loc(v, vp))
		}
	}
	p.fields(n, ptr, "key", map[string]fieldFunc{
		"header": carrier(ir.CarrierHeader),
		"body":   carrier(ir.CarrierBody),
		"query":  carrier(ir.CarrierQuery),
		"cookie": carrier("cookie"),
		"required": func(v *yaml.Node, vp string) {
			if b, ok := p.boolean(v, vp, "key.required"); ok {
				k.Required.set(b, p.loc(v, vp))
			}
		},
		"format": func(v *yaml.Node, vp string) {
			if s, ok := p.enum(v, vp, "key.format", ir.FormatToken, ir.FormatUUID, ir.FormatUUIDv4, ir.FormatUUIDv7); ok {
				k.Format.set(s, p.loc(v, vp))
			}
		},
		"max-length": p.intField(&k.MaxLength, "key.max-length", 1, 8192),
	})
}

func (p *parser) retry(n *yaml.Node, ptr string, r *RetryBlock) {
	p.fields(n, ptr, "retry", map[string]fieldFunc{
		"max-attempts": p.intField(&r.MaxAttempts, "retry.max-attempts", 1, 100),
		"backoff": func(v *yaml.Node, vp string) {
			if !p.mapping(v, vp, "retry.backoff") {
				return
			}
			p.fields(v, vp, "retry.backoff", map[string]fieldFunc{
				"initial": p.durationField(&r.Initial, "retry.backoff.initial", false),
				"max":     p.durationField(&r.Max, "retry.backoff.max", false),
				"multiplier": func(v *yaml.Node, vp string) {
					var f float64
					if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || v.Decode(&f) != nil {
						p.errorf(v, vp, "wrong-type", "retry.backoff.multiplier must be a number, not %s", describe(v))
						return
					}
					if f < 1 || f > 10 || math.IsNaN(f) {
						p.errorf(v, vp, "bad-value", "retry.backoff.multiplier must be between 1 and 10, not %s", v.Value)
						return
					}
					r.Multiplier.set(f, p.loc(v, vp))
				},
				"jitter": func(v *yaml.Node, vp string) {
					if s, ok := p.enum(v, vp, "retry.backoff.jitter", ir.JitterFull, ir.JitterEqual, ir.JitterNone); ok {
						r.Jitter.set(s, p.loc(v, vp))
					}
				},
			})
		},
		"on": func(v *yaml.Node, vp string) {
			var out []Field[string]
			seen := map[string]listed{}
			for i, it := range p.list(v, vp, "retry.on") {
				ip := vp + "/" + strconv.Itoa(i)
				if it.Kind != yaml.ScalarNode {
					p.errorf(it, ip, "wrong-type", "retry.on: an entry must be \"connection\" or a status code, not %s", describe(it))
					continue
				}
				s := it.Value
				switch {
				case it.Tag == "!!str" && s == "connection":
				case intLike(it):
					code, ok := p.decimal(it, ip, "retry.on: a status code")
					if !ok {
						continue
					}
					if code < 100 || code > 599 {
						p.errorf(it, ip, "bad-enum", "retry.on: %s is neither \"connection\" nor a status code (100-599)", s)
						continue
					}
					s = strconv.Itoa(code)
				case it.Tag == "!!str" && quotedStatusRE.MatchString(s):
					// "503", as idemgen's IR writes retry.on (its entries
					// are words and statuses): a status as a number is.
					code, err := strconv.Atoi(s)
					if err != nil || code < 100 || code > 599 {
						p.errorf(it, ip, "bad-enum", "retry.on: %q is neither \"connection\" nor a status code (100-599)", s)
						continue
					}
					s = strconv.Itoa(code)
				case it.Tag == "!!str" && intSpellingRE.MatchString(s):
					p.errorf(it, ip, "bad-value", "retry.on: a status code must be written as a plain decimal number (no sign, leading zero, base prefix or _), not %q", s)
					continue
				default:
					p.errorf(it, ip, "bad-enum", "retry.on: %q is neither \"connection\" nor a status code (100-599)", s)
					continue
				}
				if p.duplicate(seen, s, it.Value, it, ip, "retry.on") {
					continue
				}
				var f Field[string]
				f.set(s, p.loc(it, ip))
				out = append(out, f)
			}
			if v.Kind == yaml.SequenceNode {
				r.On.set(out, p.loc(v, vp))
			}
		},
	})
}

func (p *parser) list(n *yaml.Node, ptr, what string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, ptr, "wrong-type", "%s must be a list, not %s", what, describe(n))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = yamlmerge.Unalias(c)
	}
	return out
}

func (p *parser) str(n *yaml.Node, ptr, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, ptr, "wrong-type", "%s must be a string, not %s", what, describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) enum(n *yaml.Node, ptr, what string, values ...string) (string, bool) {
	s, ok := p.str(n, ptr, what)
	if !ok {
		return "", false
	}
	if !slices.Contains(values, s) {
		if sg := diag.Suggest(s, values); sg != "" {
			p.errorf(n, ptr, "bad-enum", "%s: %q is not one of %s (did you mean %s?)", what, s, strings.Join(values, ", "), sg)
		} else {
			p.errorf(n, ptr, "bad-enum", "%s: %q is not one of %s", what, s, strings.Join(values, ", "))
		}
		return "", false
	}
	return s, true
}

func (p *parser) boolean(n *yaml.Node, ptr, what string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errorf(n, ptr, "wrong-type", "%s must be true or false, not %s", what, describe(n))
		return false, false
	}
	v, _ := strconv.ParseBool(strings.ToLower(n.Value))
	return v, true
}

func (p *parser) integer(n *yaml.Node, ptr, what string) (int, bool) {
	if n.Kind != yaml.ScalarNode || !intLike(n) {
		p.errorf(n, ptr, "wrong-type", "%s must be an integer, not %s", what, describe(n))
		return 0, false
	}
	return p.decimal(n, ptr, what)
}

// decimalRE is an integer as a contract writes one: decimal digits without
// a leading zero, or 0; a minus sign is left to the range checks.
var decimalRE = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)$`)

// decimal reads an !!int scalar n written in plain decimal. YAML's other
// spellings of an integer are refused (bad-value): a sign (+502), a leading
// zero (0504, which YAML 1.1 decoders, gopkg.in/yaml.v3 among them, read as
// octal 324), 0o, 0x, 0b or _ separators: each is a typo, or a number that
// reads as another.
func (p *parser) decimal(n *yaml.Node, ptr, what string) (int, bool) {
	if !decimalRE.MatchString(n.Value) {
		p.errorf(n, ptr, "bad-value", "%s must be written as a plain decimal number (no sign, leading zero, base prefix or _), not %s", what, n.Value)
		return 0, false
	}
	i, err := strconv.Atoi(n.Value)
	if err != nil {
		p.errorf(n, ptr, "bad-value", "%s: %s is out of range", what, n.Value)
		return 0, false
	}
	return i, true
}

// intLike reports whether n is a scalar YAML reads as an integer, or a
// float written with digits only (0409: not octal, so gopkg.in/yaml.v3
// reads it as a float), refused by decimal for its leading zero.
func intLike(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float" && digitsRE.MatchString(n.Value))
}

var digitsRE = regexp.MustCompile(`^[-+]?[0-9]+$`)

var (
	// quotedStatusRE is a retry.on status written as a string in plain
	// decimal ("503"), accepted as the number.
	quotedStatusRE = regexp.MustCompile(`^(?:0|[1-9][0-9]*)$`)
	// intSpellingRE is an integer in another spelling (a sign, a leading
	// zero, 0x, 0o, 0b, _), refused quoted as unquoted.
	intSpellingRE = regexp.MustCompile(`^[-+]?(?:0[xXoObB][0-9a-fA-F_]*|[0-9][0-9_]*)$`)
)

func (p *parser) status(n *yaml.Node, ptr, what string) (int, bool) {
	s, ok := p.integer(n, ptr, what)
	if !ok {
		return 0, false
	}
	if s < 400 || s > 599 {
		p.errorf(n, ptr, "bad-value", "%s must be an error status (400-599), not %d", what, s)
		return 0, false
	}
	return s, true
}

// intField parses an integer from lo to hi.
func (p *parser) intField(f *Field[int], what string, lo, hi int) fieldFunc {
	return func(v *yaml.Node, ptr string) {
		if i, ok := p.integer(v, ptr, what); ok {
			if i < lo || i > hi {
				p.errorf(v, ptr, "bad-value", "%s must be between %d and %d, not %d", what, lo, hi, i)
				return
			}
			f.set(i, p.loc(v, ptr))
		}
	}
}

func (p *parser) bytesField(f *Field[int64], what string) fieldFunc {
	return func(v *yaml.Node, ptr string) {
		if v.Kind != yaml.ScalarNode || !intLike(v) {
			p.errorf(v, ptr, "wrong-type", "%s must be an integer number of bytes, not %s", what, describe(v))
			return
		}
		n, ok := p.decimal(v, ptr, what)
		if !ok {
			return
		}
		i := int64(n)
		if i < 1 || i > 1<<32 {
			p.errorf(v, ptr, "bad-value", "%s must be between 1 and 4294967296 bytes, not %d", what, i)
			return
		}
		f.set(i, p.loc(v, ptr))
	}
}

func (p *parser) durationField(f *Field[time.Duration], what string, zeroOK bool) fieldFunc {
	return func(v *yaml.Node, ptr string) {
		if d, ok := p.duration(v, ptr, what, zeroOK); ok {
			f.set(d, p.loc(v, ptr))
		}
	}
}

func (p *parser) duration(n *yaml.Node, ptr, what string, zeroOK bool) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		missing := ""
		if n.Tag == "!!null" {
			missing = " (the value is missing; leave " + what + " out for its default)"
		}
		p.errorf(n, ptr, "wrong-type", "%s must be a duration such as 90s, 10m, 24h or 7d, not %s%s", what, describe(n), missing)
		return 0, false
	}
	if n.Tag == "!!int" || n.Tag == "!!float" {
		// The suggestion must parse itself: no sign (ParseDuration
		// refuses one), and a number it reads.
		num := strings.TrimLeft(n.Value, "+-")
		such := num + "s"
		if d, err := ParseDuration(such); err != nil || d <= 0 {
			such = "90s"
		}
		if num != n.Value {
			p.errorf(n, ptr, "bad-duration", "%s: %s has no unit and a sign; write a duration without + or -, such as %s, 10m, 24h or 7d", what, n.Value, such)
		} else {
			p.errorf(n, ptr, "bad-duration", "%s: %s has no unit; write a duration such as %s, 10m, 24h or 7d", what, n.Value, such)
		}
		return 0, false
	}
	d, err := ParseDuration(n.Value)
	if err != nil {
		p.errorf(n, ptr, "bad-duration", "%s: %v", what, err)
		return 0, false
	}
	if d < 0 || (d == 0 && !zeroOK) {
		p.errorf(n, ptr, "bad-duration", "%s must be positive, not %s", what, n.Value)
		return 0, false
	}
	return d, true
}

var (
	dayRE = regexp.MustCompile(`^(\d+)d(.*)$`)
	// unitsRE is time.ParseDuration's syntax without a sign: what it
	// refuses although it matches is too long.
	unitsRE = regexp.MustCompile(`^(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$`)
)

func tooLong(s string) error {
	return fmt.Errorf("%q is too long (a duration is at most about 290 years)", s)
}

// ParseDuration parses a duration as time.ParseDuration does, plus a
// leading number of days: "7d", "1d12h". Signs are refused, anywhere: a
// contract's durations are lengths of time ("+5m" is 5m written oddly,
// "1d-23h" is 1h written misleadingly, "-5s" nothing a contract can mean).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "+-") {
		return 0, fmt.Errorf("%q has a sign; write a duration without + or -, such as 90s, 10m, 24h or 7d", s)
	}
	var days time.Duration
	rest := s
	if m := dayRE.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 100000 {
			if m[2] == "" || unitsRE.MatchString(m[2]) {
				return 0, tooLong(s)
			}
			return 0, fmt.Errorf("%q is not a duration such as 90s, 10m, 24h or 7d", s)
		}
		days = time.Duration(n) * 24 * time.Hour
		rest = m[2]
		if rest == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		if unitsRE.MatchString(rest) {
			return 0, tooLong(s)
		}
		return 0, fmt.Errorf("%q is not a duration such as 90s, 10m, 24h or 7d", s)
	}
	if days+d < days {
		return 0, tooLong(s)
	}
	return days + d, nil
}

// compatible parses compatible-fingerprints: a list of mappings, each with
// the fingerprint fields of the block itself, checked as they are.
func (p *parser) compatible(v *yaml.Node, ptr string, f *Field[[]CompatibleBlock]) {
	var out []CompatibleBlock
	for i, it := range p.list(v, ptr, "compatible-fingerprints") {
		ip := ptr + "/" + strconv.Itoa(i)
		what := "compatible-fingerprints[" + strconv.Itoa(i) + "]"
		if it.Kind != yaml.MappingNode {
			p.errorf(it, ip, "wrong-type", "%s must be a mapping of the earlier volatile, unordered and fingerprint-headers (a field left out is the current one), not %s", what, describe(it))
			continue
		}
		e := CompatibleBlock{Pos: p.loc(it, ip)}
		errs, _ := p.diags.Count()
		p.fields(it, ip, what, map[string]fieldFunc{
			"volatile":            p.pointerList(&e.Volatile, what+".volatile", false),
			"unordered":           p.pointerList(&e.Unordered, what+".unordered", true),
			"fingerprint-headers": p.headerList(&e.FingerprintHeaders, what+".fingerprint-headers", nil),
		})
		after, _ := p.diags.Count()
		e.Refused = after > errs
		out = append(out, e)
	}
	if v.Kind == yaml.SequenceNode {
		f.set(out, p.loc(v, ptr))
	}
}

// stringList parses a list of strings: check reports and refuses a bad
// entry, and gives the key that tells duplicates apart (an entry listed
// twice is dropped with a warning).
func (p *parser) stringList(f *Field[[]Field[string]], what string, check func(s string, it *yaml.Node, ip string) (key string, ok bool)) fieldFunc {
	return func(v *yaml.Node, ptr string) {
		var out []Field[string]
		seen := map[string]listed{}
		for i, it := range p.list(v, ptr, what) {
			ip := ptr + "/" + strconv.Itoa(i)
			s, ok := p.str(it, ip, what+" entry")
			if !ok {
				continue
			}
			key, ok := check(s, it, ip)
			if !ok || p.duplicate(seen, key, s, it, ip, what) {
				continue
			}
			var e Field[string]
			e.set(s, p.loc(it, ip))
			out = append(out, e)
		}
		if v.Kind == yaml.SequenceNode {
			f.set(out, p.loc(v, ptr))
		}
	}
}

// pointerList parses a list of JSON pointers; emptyOK allows the empty
// pointer (the whole body).
func (p *parser) pointerList(f *Field[[]Field[string]], what string, emptyOK bool) fieldFunc {
	return p.stringList(f, what, func(s string, it *yaml.Node, ip string) (string, bool) {
		if err := CheckPointer(s); err != nil {
			p.errorf(it, ip, "bad-pointer", "%s: %v", what, err)
			return "", false
		}
		if s == "" && !emptyOK {
			// unordered: "" is a body that is an array, a multiset.
			p.errorf(it, ip, "bad-pointer", "%s: the empty pointer names the whole body", what)
			return "", false
		}
		return s, true
	})
}

// listed is where a list entry is first listed: its position and node.
type listed struct {
	pos  ir.Pos
	node *yaml.Node
}

// duplicate reports whether key (entry s of the list what, node it at
// ptr) is in seen already, with a [duplicate-entry] warning that says
// where it is listed first; otherwise it records key's position in seen.
// An entry listed twice means nothing more than listed once: the caller
// drops it.
func (p *parser) duplicate(seen map[string]listed, key, s string, it *yaml.Node, ptr, what string) bool {
	first, ok := seen[key]
	if !ok {
		seen[key] = listed{p.loc(it, ptr), it}
		return false
	}
	here := p.loc(it, ptr)
	switch {
	case first.node == it:
		// Two aliases of one anchor: both are at the anchor.
		p.warnf(it, ptr, "duplicate-entry", "%s: %s is listed twice, by two aliases of the same anchor; delete one", what, s)
		return true
	case here.File == first.pos.File && here.Line == first.pos.Line && here.Col == first.pos.Col:
		// Two copies of one node: an overlay applied twice (given twice
		// with -overlay, or in the config and with -overlay).
		p.warnf(it, ptr, "duplicate-entry", "%s: %s is listed twice from the same place: the overlay %s is given twice; give it once", what, s, here.File)
		return true
	}
	at, fix := fmt.Sprintf("%d:%d", first.pos.Line, first.pos.Col), "delete one"
	if here.File != first.pos.File {
		// An overlay appended it to the spec's list: often the overlay
		// that idemgen spec -o wrote into the spec already.
		at = first.pos.File + ":" + at
		fix = "if idemgen spec -o wrote this overlay into the spec already, give the spec alone; otherwise delete one"
	}
	p.warnf(it, ptr, "duplicate-entry", "%s: %s is listed twice (first at %s); %s", what, s, at, fix)
	return true
}

// headerList parses a list of header names; refused (nil: none) names
// those a list may not hold.
func (p *parser) headerList(f *Field[[]Field[string]], what string, refused func(string) bool) fieldFunc {
	return p.stringList(f, what, p.headerName(what, refused))
}

// fingerprintHeaders parses the block's fingerprint-headers, a headerList.
// Resolve warns of an entry whose value changes between the attempts of
// one call (unstableHeaders), where the list has an effect.
func (p *parser) fingerprintHeaders(f *Field[[]Field[string]]) fieldFunc {
	return p.headerList(f, "fingerprint-headers", nil)
}

// headerName is the check of a headerList's entries.
func (p *parser) headerName(what string, refused func(string) bool) func(s string, it *yaml.Node, ip string) (string, bool) {
	return func(s string, it *yaml.Node, ip string) (string, bool) {
		if !validHeaderName(s) {
			p.errorf(it, ip, "bad-header-name", "%s: %q is not a valid HTTP header name", what, s)
			return "", false
		}
		if refused != nil && refused(s) {
			p.errorf(it, ip, "bad-value", "%s: %s is never stored or replayed by the runtime (Set-Cookie, hop-by-hop and framing headers, Date, Idempotent-Replayed and Retry-After are refused)", what, s)
			return "", false
		}
		return http.CanonicalHeaderKey(s), true
	}
}

// CheckPointer checks the syntax of an RFC 6901 JSON pointer ("*" tokens
// allowed): empty, or "/" followed by tokens where "~" is only in "~0" or "~1".
func CheckPointer(s string) error {
	if s == "" {
		return nil
	}
	if s[0] != '/' {
		return fmt.Errorf("%q is not a JSON pointer: it must start with /", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return fmt.Errorf("%q is not a JSON pointer: ~ must be followed by 0 or 1", s)
		}
	}
	return nil
}

// SplitPointer returns the unescaped tokens of a JSON pointer.
func SplitPointer(s string) []string {
	if s == "" {
		return nil
	}
	toks := strings.Split(s[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	return true
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!null":
			return "null"
		case "!!bool":
			return n.Value
		case "!!int", "!!float":
			return "the number " + n.Value
		}
		return n.Value
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}
