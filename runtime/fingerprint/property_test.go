package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

func jsonInput(body []byte) *fingerprint.Input {
	return &fingerprint.Input{Method: "POST", Operation: "op", ContentType: "application/json", Body: body}
}

func propertyRounds(t *testing.T) int {
	if testing.Short() {
		return 300
	}
	return 3000
}

// Equivalent spellings of one value have one canonical form and one
// fingerprint; the canonical form is the value (by the oracle), is a fixed
// point, and changing any leaf changes the fingerprint.
func TestPropertySpellings(t *testing.T) {
	h, err := fingerprint.New(fingerprint.Options{})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	for round := range propertyRounds(t) {
		v := withFoldVariants(r, randValue(r, 4))
		plain := spell(r, v, false)
		canon, err := fingerprint.Canonical(nil, plain)
		require.NoError(t, err, "round %d: %s", round, plain)

		// The canonical text denotes the same value.
		eq, err := oracleEqual(plain, canon)
		require.NoError(t, err, "round %d: canonical %s", round, canon)
		require.True(t, eq, "round %d: %s -> %s", round, plain, canon)
		// It is a fixed point.
		again, err := fingerprint.Canonical(nil, canon)
		require.NoError(t, err)
		require.Equal(t, string(canon), string(again))

		want := h.Sum(jsonInput(plain))
		for range 3 {
			other := spell(r, v, true)
			c2, err := fingerprint.Canonical(nil, other)
			require.NoError(t, err, "round %d: %s", round, other)
			require.Equal(t, string(canon), string(c2), "round %d: %s vs %s", round, plain, other)
			require.Equal(t, want, h.Sum(jsonInput(other)))
		}

		if n := leaves(v); n > 0 {
			m, ptr, _ := mutate(r, v, r.IntN(n), "")
			changed := spell(r, m, true)
			eq, err := oracleEqual(plain, changed)
			require.NoError(t, err)
			require.False(t, eq, "mutation at %s kept the value", ptr)
			require.NotEqual(t, want, h.Sum(jsonInput(changed)), "round %d: leaf %s changed: %s vs %s", round, ptr, plain, changed)
		}
	}
}

// A changed leaf under a volatile pointer does not change the fingerprint;
// one elsewhere does.
func TestPropertyVolatile(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range propertyRounds(t) {
		v := withFoldVariants(r, randValue(r, 4))
		n := leaves(v)
		if n == 0 {
			continue
		}
		m, ptr, _ := mutate(r, v, r.IntN(n), "")
		if ptr == "" {
			continue // the body is a scalar: a root pointer is not allowed
		}
		// Volatile at the changed leaf itself, or at a wildcard form of
		// its pointer.
		vol := ptr
		if r.IntN(2) == 0 {
			toks := strings.Split(ptr, "/")
			toks[1+r.IntN(len(toks)-1)] = "*"
			vol = strings.Join(toks, "/")
		}
		h, err := fingerprint.New(fingerprint.Options{Volatile: []string{vol}})
		require.NoError(t, err)
		a, b := spell(r, v, true), spell(r, m, true)
		require.Equal(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(b)), "round %d: volatile %s: %s vs %s", round, vol, a, b)

		// Another leaf outside the volatile pointer's reach still counts.
		k := r.IntN(n)
		m2, ptr2, _ := mutate(r, v, k, "")
		if matches(vol, ptr2) {
			continue
		}
		c := spell(r, m2, true)
		require.NotEqual(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(c)), "round %d: volatile %s, changed %s: %s vs %s", round, vol, ptr2, a, c)
	}
}

// matches reports whether the pointer pattern (with "*") matches ptr or
// one of its ancestors.
func matches(pattern, ptr string) bool {
	p, q := strings.Split(pattern, "/"), strings.Split(ptr, "/")
	if len(p) > len(q) {
		return false
	}
	for i := range p {
		if p[i] != "*" && p[i] != q[i] {
			return false
		}
	}
	return true
}

// Unordered arrays are multisets: any permutation of their elements has one
// fingerprint; adding, removing or changing an element changes it.
func TestPropertyUnordered(t *testing.T) {
	h, err := fingerprint.New(fingerprint.Options{Unordered: []string{"/set", "/nested/*/set"}})
	require.NoError(t, err)
	r := rand.New(rand.NewPCG(5, 6))
	for round := range propertyRounds(t) {
		elems := make(jarr, r.IntN(6))
		for i := range elems {
			if r.IntN(3) == 0 && i > 0 {
				elems[i] = elems[r.IntN(i)] // duplicates
			} else {
				elems[i] = randValue(r, 2)
			}
		}
		perm := make(jarr, len(elems))
		for i, j := range r.Perm(len(elems)) {
			perm[i] = elems[j]
		}
		doc := func(set jarr) []byte {
			return spell(r, jobj{{"set", set}, {"nested", jarr{jobj{{"set", set}}}}, {"x", jnum{digits: "1"}}}, true)
		}
		a, b := doc(elems), doc(perm)
		require.Equal(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(b)), "round %d: %s vs %s", round, a, b)

		if len(elems) > 0 {
			fewer := elems[:len(elems)-1]
			require.NotEqual(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(doc(fewer))))
			more := append(jarr{elems[r.IntN(len(elems))]}, elems...)
			require.NotEqual(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(doc(more))))
			if n := leaves(elems); n > 0 {
				m, _, _ := mutate(r, elems, r.IntN(n), "")
				if eq, _ := oracleEqual(spell(r, sortedCanon(t, m.(jarr)), false), spell(r, sortedCanon(t, elems), false)); !eq {
					require.NotEqual(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(doc(m.(jarr)))), "round %d", round)
				}
			}
		}
	}
}

// sortedCanon returns the elements of a ordered by canonical text, so that
// two multisets compare as arrays.
func sortedCanon(t *testing.T, a jarr) jv {
	type kv struct {
		c string
		v jv
	}
	var ks []kv
	r := rand.New(rand.NewPCG(0, 0))
	for _, e := range a {
		c, err := fingerprint.Canonical(nil, spell(r, e, false))
		require.NoError(t, err)
		ks = append(ks, kv{string(c), e})
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j-1].c > ks[j].c; j-- {
			ks[j-1], ks[j] = ks[j], ks[j-1]
		}
	}
	out := make(jarr, len(ks))
	for i := range ks {
		out[i] = ks[i].v
	}
	return out
}

// The oracle and the canonicalizer agree on equality for independent
// random values (which are mostly different, sometimes equal).
func TestPropertyOracleAgreement(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for round := range propertyRounds(t) {
		// Small values collide often enough to test both directions.
		a := spell(r, withFoldVariants(r, randValue(r, 1)), true)
		b := spell(r, withFoldVariants(r, randValue(r, 1)), true)
		if r.IntN(4) == 0 {
			b = spell(r, mustDecodeModel(t, a), true)
		}
		eq, err := oracleEqual(a, b)
		require.NoError(t, err)
		ca, err := fingerprint.Canonical(nil, a)
		require.NoError(t, err)
		cb, err := fingerprint.Canonical(nil, b)
		require.NoError(t, err)
		require.Equal(t, eq, bytes.Equal(ca, cb), "round %d: %s vs %s: canonical %s vs %s", round, a, b, ca, cb)
	}
}

// mustDecodeModel turns a JSON text into the model, to spell it anew.
func mustDecodeModel(t *testing.T, b []byte) jv {
	v, err := decodeOracle(b)
	require.NoError(t, err)
	return toModel(v)
}

func toModel(v any) jv {
	switch v := v.(type) {
	case nil:
		return jnull{}
	case bool:
		return jbool(v)
	case string:
		return jstr(v)
	case json.Number:
		s := string(v)
		n := jnum{}
		if s[0] == '-' {
			n.neg, s = true, s[1:]
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			n.exp, _ = strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
			s = s[:i]
		}
		if i := strings.IndexByte(s, '.'); i >= 0 {
			n.exp -= len(s) - i - 1
			s = s[:i] + s[i+1:]
		}
		s = strings.TrimLeft(s, "0")
		for strings.HasSuffix(s, "0") {
			s = s[:len(s)-1]
			n.exp++
		}
		if s == "" {
			return jnum{neg: n.neg, digits: "0"}
		}
		n.digits = s
		return n
	case []any:
		a := make(jarr, len(v))
		for i := range v {
			a[i] = toModel(v[i])
		}
		return a
	case map[string]any:
		var o jobj
		for k, e := range v {
			o = append(o, jmember{k, toModel(e)})
		}
		return o
	case oobj:
		var o jobj
		for _, m := range v {
			o = append(o, jmember{m.name, toModel(m.val)})
		}
		return o
	}
	panic("unexpected")
}
