package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

var (
	bigExponent   = regexp.MustCompile(`[eE][+-]?0*[0-9]{4,}`)
	loneSurrogate = regexp.MustCompile(`\\[uU][dD][89a-fA-F]`)
)

// FuzzCanonicalJSON checks, for any input: no panic; what is accepted is
// valid JSON whose canonical form is valid JSON, denotes the same value (by
// the encoding/json oracle) and is a fixed point; what encoding/json
// accepts (within the documented limits) is accepted; the fingerprint is
// the documented stream with the canonical form (or the raw bytes); a
// re-spelling of the value has the same canonical form and fingerprint; a
// changed leaf changes them.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `0`, `-0.0e-0`, `"\u00e9\ud83d\ude00\/"`, `{"b":1,"a":[1,2.50,1e400]}`, `{"a":1,"a":2}`,
		`[1,{"b":{"d":1,"c":2},"a":3},"x"]`, `{"client_time":1,"items":[{"note":"x","q":1}]}`,
		"\t{ \"a\" : [ true , false , null ] }\n", `[1.0e21,1e-7,0.000001]`, `{"\u0000":"\u001f"}`,
		string(fingerprinttest.SampleBody(1 << 10)), string(fingerprinttest.DenseBody(1 << 10)),
		// Runs of objects alike (fastMembers's runs, putObjects), longer
		// than one run, with one that is not at the 22nd place.
		`{"z":[` + strings.Repeat(`{"c":1,"b":"x","a":2.5},`, 21) + `{"c":1,"b":"x","a":2.50},` +
			strings.Repeat(`{"c":1,"b":"`+strings.Repeat("y", 26)+`","a":2},`, 20) + `{"c":1,"b":"x","a":2}],"y":1}`,
		`[` + strings.Repeat(`{"a":1,"b":[1,2]},`, 30) + `{"a":1,"b":[1,2] }]`,
		// Names equal under case folding (arrival order kept).
		`{"currency":"EUR","amount":1,"Amount":100}`, `{"\u212a":1,"k":2,"ſ":3,"S":4}`,
		`[{"x":1,"X":2},{"x":1,"X":2},{"X":2,"x":1}]`,
	} {
		f.Add([]byte(s), uint64(1))
	}
	h := mustNew(f, fingerprint.Options{Volatile: []string{"/client_time", "/items/*/note"}, Unordered: []string{"/tags"}})
	plain := mustNew(f, fingerprint.Options{})
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) { checkCanonicalJSON(t, h, plain, in, seed) })
}

func checkCanonicalJSON(t *testing.T, h, plain *fingerprint.Hasher, in []byte, seed uint64) {
	{
		// Never panics, whatever the content type claims; a JSON body's
		// fingerprint is the documented stream with Canonical's output
		// (Sum hashes a top-level object as it closes).
		for _, hh := range []*fingerprint.Hasher{h, plain} {
			if got, want := hh.Sum(jsonInput(in)), documentedSum(hh, nil, jsonInput(in)); got != want {
				t.Fatalf("%q: Sum %v, documented stream %v", in, got, want)
			}
			// The process-local variant: the same stream, digested
			// with the process's keys.
			lv := byte(fingerprint.Local(fingerprint.Version))
			if got, _ := hh.SumVersion(jsonInput(in), int(lv)); got != documentedSumVersion(hh, nil, jsonInput(in), lv) {
				t.Fatalf("%q: local SumVersion %v differs from the documented stream", in, got)
			}
		}
		h.Sum(&fingerprint.Input{ContentType: "application/x-www-form-urlencoded", Body: in, RawQuery: string(in)})

		canon, err := plain.Canonical(nil, in)
		valid := json.Valid(in)
		if err != nil {
			if valid && utf8.Valid(in) && !loneSurrogate.Match(in) && !bigExponent.Match(in) && depth(in) <= fingerprint.MaxDepth &&
				!bytes.HasPrefix(in, []byte("\xef\xbb\xbf")) {
				t.Fatalf("rejected valid JSON %q: %v", in, err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted invalid JSON %q as %q", in, canon)
		}
		if !json.Valid(canon) {
			t.Fatalf("canonical form of %q is not JSON: %q", in, canon)
		}
		again, err := plain.Canonical(nil, canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", in, canon, again, err)
		}
		// With pointers, the canonical form is a fixed point too, and
		// valid JSON.
		if hc, err := h.Canonical(nil, in); err != nil {
			t.Fatalf("rejected by the hasher with pointers only: %q: %v", in, err)
		} else if again, err := h.Canonical(nil, hc); err != nil || !bytes.Equal(again, hc) || !json.Valid(hc) {
			t.Fatalf("with pointers, not a fixed point: %q -> %q -> %q (%v)", in, hc, again, err)
		}
		if bigExponent.Match(in) || hasDuplicateNames(canon) {
			return // the oracle works with big.Rat and maps
		}
		if eq, err := oracleEqual(in, canon); err != nil || !eq {
			t.Fatalf("canonical form changes the value: %q -> %q (%v)", in, canon, err)
		}

		r := rand.New(rand.NewPCG(seed, 7))
		v := mustDecodeModel(t, in)
		other := spell(r, v, true)
		c2, err := plain.Canonical(nil, other)
		if err != nil || !bytes.Equal(c2, canon) {
			t.Fatalf("re-spelling %q of %q: %q vs %q (%v)", other, in, c2, canon, err)
		}
		if plain.Sum(jsonInput(other)) != plain.Sum(jsonInput(in)) {
			t.Fatalf("re-spelling %q of %q: fingerprints differ", other, in)
		}
		if n := leaves(v); n > 0 {
			m, ptr, _ := mutate(r, v, r.IntN(n), "")
			changed := spell(r, m, true)
			if plain.Sum(jsonInput(changed)) == plain.Sum(jsonInput(in)) {
				t.Fatalf("leaf %s changed (%q -> %q), same fingerprint", ptr, in, changed)
			}
		}
	}
}

// depth is the nesting depth of a JSON text (ignoring strings).
func depth(in []byte) int {
	d, max := 0, 0
	inStr, esc := false, false
	for _, c := range in {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			d++
			max = maxInt(max, d)
		case !inStr && (c == ']' || c == '}'):
			d--
		}
	}
	return max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// hasDuplicateNames reports whether an object in the JSON text repeats a
// member name.
func hasDuplicateNames(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	// A number out of float64's range (1e700) is no error as a json.Number:
	// without it, the scan stopped there and missed later duplicates.
	d.UseNumber()
	type frame struct {
		obj   bool
		key   bool // the next string token is a name
		names map[string]bool
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.obj && top.key {
			if top.names[s] {
				return true
			}
			top.names[s] = true
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.obj {
				top.key = true
			}
			stack = append(stack, &frame{obj: true, key: true, names: map[string]bool{}})
			continue
		case json.Delim('['):
			if top != nil && top.obj {
				top.key = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].obj {
				stack[len(stack)-1].key = true
			}
			continue
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

// FuzzMediaTypes checks the declared media types (Options.MediaTypes)
// through Sum: no panic, and the fingerprint of a request is the documented
// stream's (documentedSumDeclared: the JSON and form domains only for a
// media type declared exactly), for any declared entry and Content-Type.
func FuzzMediaTypes(f *testing.F) {
	for _, s := range [][3]string{
		{"application/json", "application/json", `{"a":1}`},
		{"application/json", "application/x-www-form-urlencoded", `{"a":"&","b":"%41"}`},
		{" Application/JSON ; charset=utf-8", "application/json;charset=utf-8", `{"a":1}`},
		{"application/*", "application/json", `{"a":1}`},
		{"*/*", "application/x-www-form-urlencoded", "b=1&a=2"},
		{"application/x-www-form-urlencoded", "Application/X-WWW-Form-URLEncoded", "b=1&a=2"},
		{"application/vnd.a+json; v=2", "application/vnd.a+JSON; v=3", `{"a":1}`},
		{"x y/z+json", "x y/z+json", `{"a":1}`},
		{"", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, declared, ct, body string) {
		list := []string{declared, "text/plain"}
		h, err := fingerprint.New(fingerprint.Options{MediaTypes: list})
		if err != nil {
			t.Fatal(err)
		}
		in := &fingerprint.Input{Method: "POST", ContentType: ct, Body: []byte(body)}
		for _, v := range []int{1, 2, fingerprint.Version, fingerprint.Local(fingerprint.Version)} {
			got, _ := h.SumVersion(in, v)
			if want := documentedSumDeclared(h, nil, list, in, byte(v)); got != want {
				t.Fatalf("declared %q, %q %q, version %#x: Sum %v, documented stream %v", declared, ct, body, v, got, want)
			}
		}
	})
}

// FuzzForm checks the query and form canonicalization through Sum: no
// panic; a query's part of the fingerprint is as documented (decodeForm,
// an independent decoder, then a stable sort by name); reordering pairs of
// different names and re-encoding the bytes of names and values keep the
// fingerprint; the oracle (net/url) agrees on which texts are malformed is
// checked in form_internal_test.go.
func FuzzForm(f *testing.F) {
	for _, s := range []string{"", "=", "=&=", "a=1", "b=2&a=1", "a=1&a=2", "a+b=%41", "a", "a=", "&&a=1&", "%zz=1", "x=%e2%82%ac&y=+", "a=1;b=2",
		"00&0&0&0&=&=0&0&0&0&0&0&0&0"} {
		f.Add(s, uint64(1))
	}
	h := mustNew(f, fingerprint.Options{})
	form := "application/x-www-form-urlencoded"
	f.Fuzz(func(t *testing.T, q string, seed uint64) {
		a := h.Sum(&fingerprint.Input{RawQuery: q, ContentType: form, Body: []byte(q)})
		// The query and form body as documented (decodeForm, an
		// independent decoder).
		for _, in := range []*fingerprint.Input{
			{RawQuery: q, ContentType: form, Body: []byte(q)},
			{RawQuery: q, ContentType: "application/json", Body: []byte(`{"a":1}`)},
			{ContentType: "Application/X-WWW-Form-URLEncoded; charset=utf-8", Body: []byte(q)},
		} {
			if got, want := h.Sum(in), documentedSum(h, nil, in); got != want {
				t.Fatalf("%q as %s: Sum %v, documented stream %v", q, in.ContentType, got, want)
			}
			lv := byte(fingerprint.Local(fingerprint.Version))
			if got, _ := h.SumVersion(in, int(lv)); got != documentedSumVersion(h, nil, in, lv) {
				t.Fatalf("%q as %s: local SumVersion %v differs from the documented stream", q, in.ContentType, got)
			}
		}
		pairs, ok := decodeForm(q)
		if !ok {
			return
		}
		r := rand.New(rand.NewPCG(seed, 9))
		// Re-encode: shuffle names (keeping the order within one name)
		// and spell every byte at random.
		other := encodeForm(r, shuffleNames(r, pairs))
		b := h.Sum(&fingerprint.Input{RawQuery: other, ContentType: form, Body: []byte(other)})
		if a != b {
			t.Fatalf("%q and %q differ", q, other)
		}
		if len(pairs) > 0 {
			k := r.IntN(len(pairs))
			pairs[k][1] += "x"
			changed := encodeForm(r, pairs)
			if h.Sum(&fingerprint.Input{RawQuery: changed, ContentType: form, Body: []byte(changed)}) == a {
				t.Fatalf("%q and %q have one fingerprint", q, changed)
			}
		}
	})
}

// decodeForm decodes like the documented rules (an independent
// implementation): pairs in order, or false on a malformed escape.
func decodeForm(q string) ([][2]string, bool) {
	var out [][2]string
	for _, part := range strings.Split(q, "&") {
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		n, ok1 := unescapeForm(name)
		v, ok2 := unescapeForm(value)
		if !ok1 || !ok2 {
			return nil, false
		}
		out = append(out, [2]string{n, v})
	}
	return out, true
}

func unescapeForm(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '+':
			b.WriteByte(' ')
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", false
			}
			b.WriteByte(unhexByte(s[i+1])<<4 | unhexByte(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func isHex(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }

func unhexByte(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func shuffleNames(r *rand.Rand, pairs [][2]string) [][2]string {
	// A stable merge of the per-name lists in random name order.
	byName := map[string][][2]string{}
	var names []string
	for _, p := range pairs {
		if _, ok := byName[p[0]]; !ok {
			names = append(names, p[0])
		}
		byName[p[0]] = append(byName[p[0]], p)
	}
	var out [][2]string
	for len(names) > 0 {
		k := r.IntN(len(names))
		list := byName[names[k]]
		out = append(out, list[0])
		if len(list) == 1 {
			names = append(names[:k], names[k+1:]...)
		} else {
			byName[names[k]] = list[1:]
		}
	}
	return out
}

func encodeForm(r *rand.Rand, pairs [][2]string) string {
	var b strings.Builder
	enc := func(s string) {
		for i := 0; i < len(s); i++ {
			c := s[i]
			plain := c != '%' && c != '+' && c != '&' && c != '=' && c != ' '
			switch {
			case c == ' ' && r.IntN(2) == 0:
				b.WriteByte('+')
			case plain && r.IntN(3) != 0:
				b.WriteByte(c)
			default:
				hex := "0123456789ABCDEF"
				if r.IntN(2) == 0 {
					hex = "0123456789abcdef"
				}
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			}
		}
	}
	for i, p := range pairs {
		if i > 0 || r.IntN(4) == 0 {
			b.WriteByte('&')
		}
		enc(p[0])
		if p[1] != "" || p[0] == "" || r.IntN(2) == 0 {
			b.WriteByte('=') // "=" alone is a pair; an empty part is not
		}
		enc(p[1])
	}
	return b.String()
}
