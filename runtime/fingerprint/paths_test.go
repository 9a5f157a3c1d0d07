package fingerprint_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Bodies that take particular paths of Sum, for TestSumAllocs and
// TestSumMatchesCanonical.

// longValueBody returns a top-level object with a string value long enough
// (n bytes, 512 or more) that hashObject writes it to the hash directly,
// not through its stage.
func longValueBody(n int) []byte {
	return fmt.Appendf(nil, `{"id":1,"blob":"%s","z":true}`, strings.Repeat("x", n))
}

// sortedMembersBody returns a top-level object of n short members whose
// names arrive sorted (no sort, no cached shape past 64 members): over 2
// KB for n ≥ 200, so that hashObject's stage fills and is flushed.
func sortedMembersBody(n int) []byte {
	b := []byte("{")
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"m%05d":%d`, k, k%10)
	}
	return append(b, '}')
}

// longNamesBody returns a top-level object of n members in random order
// whose names share their first ten bytes ("attribute_"), with duplicates,
// for the radix sort (n > 256) and the sort of its runs of equal first
// eight bytes.
func longNamesBody(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0xa77))
	b := []byte("{")
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `"attribute_%x":%d`, r.IntN(n), r.IntN(3))
	}
	return append(b, '}')
}

// flatShapeBody is an object with nested objects (one with sorted names,
// one without) whose shapes, once cached, let the member loop write them
// flat (flatObject), without a frame; the input goes on long enough past
// each for the member loop's fixed-size loads.
const flatShapeBody = `{"id":"ord_01J9","customer":{"email":"ada@example.com","name":"Ada Lovelace"},` +
	`"shipping":{"zip":"10115","city":"Berlin","line1":"Friedrichstrasse 1","country":"DE"},` +
	`"total":12.5,"note":"some text to keep the input going past the nested objects"}`

// unorderedBody returns {"a":[...],"b":[...]}: "a" an array of n elements
// (integers, strings, literals, arrays, objects with an array "k") in
// random order, "b" an array of objects whose "k" arrays are unordered
// too, for Unordered: ["/*", "/*/*/k"]. n > 256 sorts by radix, n > 16 by
// comparison, else by insertion.
func unorderedBody(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x0dd))
	b := []byte(`{"a":[`)
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		switch r.IntN(6) {
		case 0:
			b = fmt.Appendf(b, `"item_prefix_%x"`, r.IntN(n))
		case 1:
			b = fmt.Appendf(b, `{"k":[%d,%d]}`, r.IntN(5), r.IntN(5))
		case 2:
			b = fmt.Appendf(b, `[%d]`, r.IntN(5))
		case 3:
			b = append(b, "true"...)
		default:
			b = fmt.Appendf(b, `%d`, r.IntN(n))
		}
	}
	b = append(b, `],"b":[{"k":[3,1,2]},{"k":["y","x"]}]}`...)
	return b
}
