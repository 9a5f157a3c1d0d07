package fingerprint_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// encoding/json (which oapi-codegen's servers decode with) matches a member
// name to a struct field under case folding, and the last member that
// matches wins: {"amount":1,"Amount":100} and {"Amount":100,"amount":1}
// are two requests (a handler sees 100, then 1), whose fingerprints must
// differ. (The security finding this fixes: the canonical form sorted both
// to {"Amount":100,"amount":1}.)
func TestCaseFoldedDuplicateMembers(t *testing.T) {
	type charge struct {
		Amount   float64 `json:"amount"`
		Currency string  `json:"currency"`
	}
	a, b := `{"currency":"EUR","amount":1,"Amount":100}`, `{"currency":"EUR","Amount":100,"amount":1}`
	var da, db charge
	require.NoError(t, json.Unmarshal([]byte(a), &da))
	require.NoError(t, json.Unmarshal([]byte(b), &db))
	require.NotEqual(t, da, db, "the handler sees two requests")

	h := mustNew(t, fingerprint.Options{})
	assert.NotEqual(t, h.Sum(jsonInput([]byte(a))), h.Sum(jsonInput([]byte(b))))
	assert.Equal(t, a, canon(t, h, a), "arrival order kept")
	assert.Equal(t, b, canon(t, h, b), "arrival order kept")
}

// An object with two distinct names equal under encoding/json's case
// folding keeps its members in their order of arrival; any other object
// is sorted as before.
func TestCaseFoldedNames(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	tests := []struct{ name, in, want string }{
		{"ascii case", `{"b":0,"id":1,"ID":2}`, `{"b":0,"id":1,"ID":2}`},
		{"ascii case, other order", `{"ID":2,"b":0,"id":1}`, `{"ID":2,"b":0,"id":1}`},
		{"kelvin sign", `{"\u212a":1,"k":2}`, "{\"\u212a\":1,\"k\":2}"},
		{"kelvin sign and K", `{"x":0,"\u212aey":1,"Key":2}`, "{\"x\":0,\"\u212aey\":1,\"Key\":2}"},
		{"long s", `{"ſ":1,"s":2}`, `{"ſ":1,"s":2}`},
		{"long s and S", `{"caſe":1,"a":0,"CASE":2}`, `{"caſe":1,"a":0,"CASE":2}`},
		{"three-way", `{"amount":1,"z":0,"AMOUNT":2,"Amount":3}`, `{"amount":1,"z":0,"AMOUNT":2,"Amount":3}`},
		{"latin-1", `{"é":1,"É":2}`, `{"é":1,"É":2}`},
		{"sharp s and capital sharp s", `{"ẞ":2,"ß":1}`, `{"ẞ":2,"ß":1}`},
		{"sigma forms", `{"σ":1,"ς":2,"Σ":3}`, `{"σ":1,"ς":2,"Σ":3}`},
		{"escaped name", `{"a":2,"\u0041":1}`, `{"a":2,"A":1}`},
		{"with exact duplicates", `{"a":1,"b":0,"A":2,"a":3}`, `{"a":1,"b":0,"A":2,"a":3}`},
		{"values canonicalized", `{"amount":"\u0041","Amount":1.0}`, `{"amount":"A","Amount":1}`},
		{"nested", `{"z":{"b":0,"ID":2,"id":1},"a":0}`, `{"a":0,"z":{"b":0,"ID":2,"id":1}}`},
		{"parent sorted, child kept", `{"z":{"id":1,"Id":2},"a":{"b":1,"a":2}}`, `{"a":{"a":2,"b":1},"z":{"id":1,"Id":2}}`},

		// Not equal under encoding/json's folding (simple case folding
		// only): sorted.
		{"dotted capital I", `{"İd":1,"id":2}`, `{"id":2,"İd":1}`},
		{"dotless i", `{"ıd":1,"id":2}`, `{"id":2,"ıd":1}`},
		{"sharp s is not ss", `{"ß":1,"ss":2}`, `{"ss":2,"ß":1}`},
		{"different names with capitals", `{"b":1,"A":2,"c":3}`, `{"A":2,"b":1,"c":3}`},
		{"an object and its case variant", `{"b":{"x":1},"B":0}`, `{"b":{"x":1},"B":0}`},
		{"fold-alike in sibling objects", `{"z":{"b":1,"a":2},"y":{"B":1,"A":2}}`, `{"y":{"A":2,"B":1},"z":{"a":2,"b":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 { // the shape cache carries over between calls
				got := canon(t, h, tt.in)
				assert.Equal(t, tt.want, got)
				assert.Equal(t, got, canon(t, h, got), "canonical form is a fixed point")
			}
		})
	}
}

// foldPairs are bodies that differ only in the order of members whose
// names are equal under case folding.
var foldPairs = [][2]string{
	{`{"currency":"EUR","amount":1,"Amount":100}`, `{"currency":"EUR","Amount":100,"amount":1}`},
	{`{"\u212a":1,"k":2}`, `{"k":2,"\u212a":1}`},
	{`{"ſ":1,"s":2}`, `{"s":2,"ſ":1}`},
	{`{"S":1,"ſ":2}`, `{"ſ":2,"S":1}`},
	{`{"b":0,"id":1,"Id":2,"ID":3}`, `{"b":0,"ID":3,"Id":2,"id":1}`},
	{`{"b":0,"id":1,"Id":2,"ID":3}`, `{"b":0,"Id":2,"id":1,"ID":3}`},
	{`{"o":{"x":1,"X":2},"p":1}`, `{"p":1,"o":{"X":2,"x":1}}`},
	{`[{"x":1,"X":2}]`, `[{"X":2,"x":1}]`},
}

func TestCaseFoldedFingerprints(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	for _, p := range foldPairs {
		for range 2 {
			assert.NotEqual(t, h.Sum(jsonInput([]byte(p[0]))), h.Sum(jsonInput([]byte(p[1]))), "%s vs %s", p[0], p[1])
			a, _ := h.SumVersion(jsonInput([]byte(p[0])), fingerprint.Local(fingerprint.Version))
			b, _ := h.SumVersion(jsonInput([]byte(p[1])), fingerprint.Local(fingerprint.Version))
			assert.NotEqual(t, a, b, "local: %s vs %s", p[0], p[1])
		}
	}
}

// A fold group in the elements of an unordered array: each element keeps
// its members' order, and the elements are then a multiset.
func TestCaseFoldedUnordered(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Unordered: []string{"/items"}})
	sum := func(body string) fingerprint.Fingerprint { return h.Sum(jsonInput([]byte(body))) }
	a := `{"items":[{"q":1,"Q":2},{"q":3}]}`
	assert.NotEqual(t, sum(a), sum(`{"items":[{"Q":2,"q":1},{"q":3}]}`))
	assert.Equal(t, sum(a), sum(`{"items":[{"q":3},{"q":1,"Q":2}]}`))
	assert.Equal(t, `{"items":[{"q":1,"Q":2},{"q":3}]}`, canon(t, h, `{"items":[{"q":3},{"q":1,"Q":2}]}`))
	assert.Equal(t, `{"items":[{"Q":2,"q":1},{"q":3}]}`, canon(t, h, `{"items":[{"q":3},{"Q":2,"q":1}]}`))
}

// A volatile pointer names a member exactly: a case variant of a volatile
// name is another member, which counts (encoding/json may fill the field
// from it, and the canonical form does not guess which field that is).
// With both, the volatile one is left out: what remains differs only in
// the volatile field, for a handler.
func TestCaseFoldedVolatile(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Volatile: []string{"/ts", "/items/*/note"}})
	sum := func(body string) fingerprint.Fingerprint { return h.Sum(jsonInput([]byte(body))) }
	assert.Equal(t, sum(`{"id":1}`), sum(`{"ts":1,"id":1}`))
	assert.NotEqual(t, sum(`{"id":1}`), sum(`{"TS":1,"id":1}`), "a case variant is not volatile")
	assert.NotEqual(t, sum(`{"TS":1,"id":1}`), sum(`{"TS":2,"id":1}`))
	assert.Equal(t, `{"TS":2,"id":1}`, canon(t, h, `{"id":1,"ts":1,"TS":2}`), "one name of the fold group is left: sorted")
	assert.Equal(t, `{"TS":2,"id":1}`, canon(t, h, `{"ts":1,"TS":2,"id":1}`))
	assert.Equal(t, `{"items":[{"Note":2,"note2":3}]}`, canon(t, h, `{"items":[{"note2":3,"note":1,"Note":2}]}`))
	assert.Equal(t, `{"items":[{"note2":3,"Note":2,"NOTE":4}]}`, canon(t, h, `{"items":[{"note2":3,"Note":2,"note":1,"NOTE":4}]}`))
}

// foldObject returns the compact text of an object of n members (n >= 2)
// whose names are len long (at least 4), the members 0 and at, at the
// front or the back, fold-alike (the second an upper-case variant of the
// first) when fold, else with distinct folded names; the members are in
// an order that is not sorted.
func foldObject(n, nameLen, at int, fold bool) (members []string, body string) {
	for k := range n {
		name := fmt.Sprintf("%0*d", nameLen, n-k) // descending: not sorted
		name = "m" + name[1:]
		members = append(members, fmt.Sprintf("%q:%d", name, k))
	}
	variant := strings.ToUpper(members[0][:2]) + members[0][2:]
	if !fold {
		variant = `"N` + members[0][2:]
	}
	members[at] = variant[:strings.IndexByte(variant, ':')] + fmt.Sprintf(":%d", at)
	return members, "{" + strings.Join(members, ",") + "}"
}

// Objects with a fold group around the limits of the fast paths: sizes
// around the insertion sort (16), the shape cache (64 members) and the
// radix sort (256), names around fastMembers's (21 bytes) and the sort
// keys' eight bytes; at the top level (hashed as it closes), as a member's
// value, in arrays of objects alike (taken whole, in runs), cold and with
// the shapes cached.
func TestCaseFoldedSizes(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	for _, n := range []int{2, 3, 16, 17, 63, 64, 65, 66, 256, 257, 300} {
		for _, nameLen := range []int{4, 8, 9, 21, 22, 40} {
			for _, at := range []int{1, n - 1} {
				for _, fold := range []bool{true, false} {
					members, obj := foldObject(n, nameLen, at, fold)
					want := obj // a fold group: the order of arrival
					if !fold {
						sorted := slices.Clone(members)
						slices.Sort(sorted) // no escapes: bytewise by name
						want = "{" + strings.Join(sorted, ",") + "}"
					}
					swapped := slices.Clone(members)
					swapped[0], swapped[at] = swapped[at], swapped[0]
					other := "{" + strings.Join(swapped, ",") + "}"
					var run, runWant []string
					for range 40 {
						run, runWant = append(run, obj), append(runWant, want)
					}
					bodies := []struct{ in, want string }{
						{obj, want},
						{`{"v":` + obj + `,"w":` + obj + `}`, `{"v":` + want + `,"w":` + want + `}`},
						{`[` + strings.Join(run, ",") + `]`, `[` + strings.Join(runWant, ",") + `]`},
						{`{"r":[` + strings.Join(run, ",") + `],"s":[` + strings.Join(run, ",") + `]}`,
							`{"r":[` + strings.Join(runWant, ",") + `],"s":[` + strings.Join(runWant, ",") + `]}`},
					}
					for _, b := range bodies {
						for range 2 {
							require.Equal(t, b.want, canon(t, h, b.in), "n %d, name %d, at %d, fold %v", n, nameLen, at, fold)
							require.Equal(t, documentedSum(h, nil, jsonInput([]byte(b.in))), h.Sum(jsonInput([]byte(b.in))))
						}
					}
					if fold {
						require.NotEqual(t, h.Sum(jsonInput([]byte(obj))), h.Sum(jsonInput([]byte(other))), "n %d, name %d, at %d", n, nameLen, at)
					}
				}
			}
		}
	}
}

// Large objects with many duplicate names (one entry each in foldCollide's
// hash table) and upper-case letters, with and without a fold group.
func TestCaseFoldedManyDuplicates(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	var ms []string
	for k := range 3000 {
		ms = append(ms, fmt.Sprintf(`"%s":%d`, []string{"Amount", "b", "Zed", "b", "é"}[k%5], k%7))
	}
	body := "{" + strings.Join(ms, ",") + "}"
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(a, b string) int {
		return strings.Compare(a[:strings.IndexByte(a, ':')], b[:strings.IndexByte(b, ':')])
	})
	assert.Equal(t, "{"+strings.Join(sorted, ",")+"}", canon(t, h, body), "no fold group: sorted")
	for _, variant := range []string{`"amount":1`, `"ZED":1`, `"É":1`, `"B":1`} {
		with := append(slices.Clone(ms[:1500]), append([]string{variant}, ms[1500:]...)...)
		body := "{" + strings.Join(with, ",") + "}"
		assert.Equal(t, body, canon(t, h, body), "fold group %s: arrival order", variant)
	}
}
