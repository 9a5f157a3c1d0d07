package fingerprint

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// PointerError reports a malformed JSON pointer in [Options].
type PointerError struct {
	// Option is the option that holds the pointer: "Volatile" or "Unordered".
	// It is empty for an error from [CheckPointer].
	Option string
	// Pointer is the pointer as given.
	Pointer string
	// Offset is the byte offset in Pointer where the problem is.
	Offset int
	// Reason says what is wrong.
	Reason string
}

func (e *PointerError) Error() string {
	if e.Option == "" {
		return fmt.Sprintf("fingerprint: JSON pointer %q: %s (at byte %d)", e.Pointer, e.Reason, e.Offset)
	}
	return fmt.Sprintf("fingerprint: %s pointer %q: %s (at byte %d)", e.Option, e.Pointer, e.Reason, e.Offset)
}

// CheckPointer reports whether p is a pointer this package accepts in
// [Options.Volatile] or [Options.Unordered]: an RFC 6901 JSON pointer ("" or
// a sequence of "/token"), where "~0" stands for "~" and "~1" for "/", any
// other "~" is an error, and the token "*" matches any member name or array
// index. The error, if any, is a *[PointerError].
func CheckPointer(p string) error {
	_, err := splitPointer(p)
	if err != nil {
		err.Pointer = p
		return err
	}
	return nil
}

// token is one reference token of a compiled pointer.
type token struct {
	name string // unescaped
	wild bool   // the token "*"
}

// splitPointer parses an RFC 6901 pointer into unescaped tokens.
func splitPointer(p string) ([]token, *PointerError) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, &PointerError{Pointer: p, Offset: 0, Reason: `must be empty or start with "/"`}
	}
	var toks []token
	for i := 1; ; {
		j := strings.IndexByte(p[i:], '/')
		if j < 0 {
			j = len(p)
		} else {
			j += i
		}
		raw := p[i:j]
		if raw == "*" {
			toks = append(toks, token{wild: true})
		} else {
			var b strings.Builder
			for k := 0; k < len(raw); k++ {
				c := raw[k]
				if c != '~' {
					b.WriteByte(c)
					continue
				}
				if k+1 < len(raw) && (raw[k+1] == '0' || raw[k+1] == '1') {
					b.WriteByte("~/"[raw[k+1]-'0'])
					k++
					continue
				}
				return nil, &PointerError{Pointer: p, Offset: i + k, Reason: `"~" must be followed by "0" or "1"`}
			}
			toks = append(toks, token{name: b.String()})
		}
		if j == len(p) {
			return toks, nil
		}
		i = j + 1
	}
}

// The pointers of one Hasher compile to a deterministic automaton: a
// trie of the pointers (where "*" edges make it nondeterministic) turned
// into a DFA by the subset construction, so that parsing holds exactly one
// node per open container and takes one transition per member or element.
// A nil *node means "no pointer reaches below here": the fast path.

// node is a state of the compiled pointer automaton.
type node struct {
	edges    []edge // named transitions, sorted by name
	wild     *node  // transition for any other name or index; may be nil
	volatile bool   // the value here is left out
	// unordered: an array here is hashed as a multiset.
	unordered bool
}

type edge struct {
	name string
	idx  int // name as an array index, or -1 if it is not one
	to   *node
}

// child is the transition for the member name (unescaped).
func (n *node) child(name []byte) *node {
	if n == nil {
		return nil
	}
	for i := range n.edges {
		if n.edges[i].name == string(name) {
			return n.edges[i].to
		}
	}
	return n.wild
}

// elem is the transition for array index i.
func (n *node) elem(i int) *node {
	if n == nil {
		return nil
	}
	for k := range n.edges {
		if n.edges[k].idx == i {
			return n.edges[k].to
		}
	}
	return n.wild
}

// trie is the nondeterministic form, before the subset construction.
type trie struct {
	id        int
	named     map[string]*trie
	wild      *trie
	volatile  bool
	unordered bool
}

// maxStates bounds the automaton: many overlapping wildcard pointers could
// otherwise make the subset construction grow fast.
const maxStates = 1 << 14

// compile builds the automaton for the pointers in opts; it returns nil
// when there are none (every container then takes the fast path).
func compile(opts *Options) (*node, error) {
	if len(opts.Volatile) == 0 && len(opts.Unordered) == 0 {
		return nil, nil
	}
	ids := 0
	newTrie := func() *trie { ids++; return &trie{id: ids, named: map[string]*trie{}} }
	root := newTrie()
	add := func(option, p string, set func(*trie)) error {
		toks, perr := splitPointer(p)
		if perr != nil {
			perr.Option = option
			return perr
		}
		if option == "Volatile" && len(toks) == 0 {
			return &PointerError{Option: option, Pointer: p, Reason: "the root pointer would leave the whole body out"}
		}
		t := root
		for _, tk := range toks {
			if tk.wild {
				if t.wild == nil {
					t.wild = newTrie()
				}
				t = t.wild
				continue
			}
			nx := t.named[tk.name]
			if nx == nil {
				nx = newTrie()
				t.named[tk.name] = nx
			}
			t = nx
		}
		set(t)
		return nil
	}
	for _, p := range opts.Volatile {
		if err := add("Volatile", p, func(t *trie) { t.volatile = true }); err != nil {
			return nil, err
		}
	}
	for _, p := range opts.Unordered {
		if err := add("Unordered", p, func(t *trie) { t.unordered = true }); err != nil {
			return nil, err
		}
	}

	// Subset construction. A DFA state is a set of trie nodes, keyed by
	// their sorted ids.
	states := map[string]*node{}
	var build func(set []*trie) (*node, error)
	build = func(set []*trie) (*node, error) {
		if len(set) == 0 {
			return nil, nil
		}
		slices.SortFunc(set, func(a, b *trie) int { return a.id - b.id })
		set = slices.CompactFunc(set, func(a, b *trie) bool { return a == b })
		var kb strings.Builder
		for _, t := range set {
			kb.WriteString(strconv.Itoa(t.id))
			kb.WriteByte(',')
		}
		key := kb.String()
		if n, ok := states[key]; ok {
			return n, nil
		}
		if len(states) >= maxStates {
			return nil, &PointerError{Option: "Volatile/Unordered", Reason: fmt.Sprintf("more than %d automaton states: too many overlapping wildcard pointers", maxStates)}
		}
		n := &node{}
		states[key] = n
		var wilds []*trie
		names := map[string]bool{}
		for _, t := range set {
			n.volatile = n.volatile || t.volatile
			n.unordered = n.unordered || t.unordered
			if t.wild != nil {
				wilds = append(wilds, t.wild)
			}
			for name := range t.named {
				names[name] = true
			}
		}
		var err error
		if n.wild, err = build(slices.Clone(wilds)); err != nil {
			return nil, err
		}
		for _, name := range slices.Sorted(maps.Keys(names)) {
			next := slices.Clone(wilds)
			for _, t := range set {
				if c := t.named[name]; c != nil {
					next = append(next, c)
				}
			}
			to, err := build(next)
			if err != nil {
				return nil, err
			}
			n.edges = append(n.edges, edge{name: name, idx: arrayIndex(name), to: to})
		}
		return n, nil
	}
	return build([]*trie{root})
}

// arrayIndex returns the array index an RFC 6901 token names ("0" or a
// decimal without leading zeros), or -1.
func arrayIndex(s string) int {
	if s == "" || len(s) > 18 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	return n
}
