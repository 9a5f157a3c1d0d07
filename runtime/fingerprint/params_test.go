package fingerprint_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// goldenContentTypes are Content-Type values of every kind: JSON and form
// types with parameters, raw types with well-formed parameters (quoted,
// case, white space, duplicates, order) and malformed ones.
var goldenContentTypes = []string{
	"", "application/json", "Application/JSON; charset=utf-8", "application/merge-patch+json; boundary=A",
	"application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=iso-8859-1",
	"multipart/form-data; boundary=A", "multipart/form-data; boundary=B", `multipart/form-data; boundary="A"`,
	"multipart/form-data;boundary=A", "Multipart/Form-Data; BOUNDARY=A", "multipart/form-data; boundary=a",
	"multipart/form-data; boundary=A; boundary=B", "multipart/form-data; boundary=B; boundary=A",
	`multipart/related; type="application/json"; start="<root@x>"; boundary=A`,
	"text/plain", "text/plain; charset=utf-8", "text/plain; charset=UTF-8", "text/plain; charset=iso-8859-1",
	"text/plain; charset=utf-8; format=flowed", "text/plain; format=flowed; charset=utf-8", "text/plain \t;\t charset=utf-8 \t",
	"text/plain;", "text/plain; ", "text/plain;; charset=utf-8", "text/plain; charset=utf-8;", "text/plain; charset = utf-8",
	`text/plain; charset="utf\-8"`, `text/plain; x="a;b"`, `text/plain; x="a`, "text/plain; x", "text/plain; =x", "text/plain; x=",
	"text/plain; x=\"\xe9\"", "text/plain; x=\xe9", "text/plain; x={}", `text/plain; x=""`, "application/octet-stream; x=1",
}

// goldenParamBodies are the bodies TestGoldenContentTypes sends with
// each type.
var goldenParamBodies = []string{
	"", `{"b":1,"a":2}`, "b=2&a=1",
	"--A\r\nContent-Disposition: form-data; name=\"amount\"\r\n\r\n1\r\n--A--\r\n",
	"caf\xe9",
}

// The fingerprints of every golden content type with every golden body are
// pinned in each version (they are persisted): version 1 and 2 as they
// were before version 3, which keeps the parameters of raw types.
func TestGoldenContentTypes(t *testing.T) {
	want := map[int]string{
		1: "25b726168178fe8e0f84e39bdbe13b368eae5347b5e997a0dc2e6a1a4fcd9dd1",
		2: "e968748520964ca21085e2566fc8de7c8c438105890c5c15413f5067ef4b1b71",
		3: "3709d0471abd2249ab7ba1cfb6b442bf16d97b819adcc576cdddf91aa1092717",
	}
	h := mustNew(t, fingerprint.Options{})
	for v := 1; v <= fingerprint.Version; v++ {
		d := sha256.New()
		for _, ct := range goldenContentTypes {
			for _, b := range goldenParamBodies {
				f, ok := h.SumVersion(&fingerprint.Input{Method: "POST", Operation: "op", Path: "/p", ContentType: ct, Body: []byte(b)}, v)
				if !ok {
					t.Fatalf("SumVersion %d: not computed", v)
				}
				d.Write(f[:])
			}
		}
		if got := hex.EncodeToString(d.Sum(nil)); got != want[v] {
			t.Errorf("version %d: digest %s, want %s", v, got, want[v])
		}
	}
}

// documentedParam matches one parameter as the package documentation
// defines it, white space around it, and the ';' that follows, if any
// (submatches: name, token value, quoted value, ';'), in a text whose
// bytes from 0x80 up were replaced by '(' (qdtext, not tchar).
var documentedParam = regexp.MustCompile("^[ \t]*([!#$%&'*+.^_`|~0-9A-Za-z-]+)=(?:([!#$%&'*+.^_`|~0-9A-Za-z-]+)|\"([\t !#-\\[\\]-~]*)\")[ \t]*(;?)")

// documentedParams is the parameters part of the stream of format v3 for
// the Content-Type ct of media type media (lower case), built
// independently of the package: 'F' 0 for a JSON or form type, else 'F'
// and the pairs or 'R' and the text after the first ';'.
func documentedParams(media, ct string) []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	if jsonOrForm(media) {
		return []byte{'F', 0}
	}
	_, text, found := strings.Cut(ct, ";")
	if !found {
		return []byte{'F', 0}
	}
	ascii := []byte(text)
	for i, c := range ascii {
		if c >= 0x80 {
			ascii[i] = '('
		}
	}
	var pairs []byte
	n := 0
	for rest := 0; ; n++ {
		m := documentedParam.FindSubmatchIndex(ascii[rest:])
		if m == nil {
			return str([]byte{'R'}, text)
		}
		value := m[4:6]
		if value[0] < 0 {
			value = m[6:8]
		}
		pairs = str(pairs, asciiLower(text[rest+m[2]:rest+m[3]]))
		pairs = str(pairs, text[rest+value[0]:rest+value[1]])
		rest += m[1]
		if m[8] == m[9] { // no ';': the end of the text, or malformed
			if rest != len(text) {
				return str([]byte{'R'}, text)
			}
			break
		}
	}
	return append(binary.AppendUvarint([]byte{'F'}, uint64(n+1)), pairs...)
}

// Version 3 keeps the parameters of a type hashed as raw bytes: names in
// any case, a value as a token or a quoted string, white space around a
// parameter do not matter; anything else does, and malformed parameters
// count as the text they are. Versions 1 and 2 ignore them, and JSON and
// form types ignore them in every version.
func TestParams(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	sum := func(v int, ct, body string) fingerprint.Fingerprint {
		f, ok := h.SumVersion(&fingerprint.Input{Method: "POST", Operation: "op", ContentType: ct, Body: []byte(body)}, v)
		require.True(t, ok)
		return f
	}
	const mp = "--A\r\n\r\nx\r\n--A--\r\n"
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"multipart/form-data; boundary=A", "multipart/form-data; boundary=B", false},
		{"multipart/form-data; boundary=A", "multipart/form-data; boundary=a", false},
		{"multipart/form-data; boundary=A", `multipart/form-data; boundary="A"`, true},
		{"multipart/form-data; boundary=A", "multipart/form-data;boundary=A", true},
		{"multipart/form-data; boundary=A", "MULTIPART/form-data \t; \tBoundary=A\t ", true},
		{"multipart/form-data; boundary=A", "multipart/form-data", false},
		{"multipart/form-data; boundary=A", "multipart/form-data; boundary=A; x=1", false},
		{"multipart/form-data; boundary=A; x=1", "multipart/form-data; x=1; boundary=A", false}, // order kept
		{"multipart/form-data; boundary=A; boundary=B", "multipart/form-data; boundary=B; boundary=A", false},
		{`multipart/form-data; boundary="A B"`, "multipart/form-data; boundary=A B", false},
		{"text/plain; charset=utf-8", "text/plain; charset=iso-8859-1", false},
		{"text/plain; charset=utf-8", "text/plain; charset=UTF-8", false}, // values exact
		{"text/plain; charset=utf-8", "text/plain", false},
		{"text/plain", "text/plain ", true},
		{"text/plain;", "text/plain", false}, // empty parameters: malformed, as they are
		{"text/plain; charset=utf-8;", "text/plain; charset=utf-8", false},
		{"text/plain;; charset=utf-8", "text/plain; charset=utf-8", false},
		{"text/plain; charset = utf-8", "text/plain; charset=utf-8", false},
		{`text/plain; charset="utf\-8"`, "text/plain; charset=utf-8", false}, // quoted pairs: malformed
		{`text/plain; charset="utf\-8"`, `text/plain; charset="utf\-8"`, true},
		{`text/plain; x="a;b"`, "text/plain; x=a;b", false},
		{"text/plain; x=\"\xe9\"", "text/plain; x=\"\xe9\"", true},
		{"", "application/octet-stream", false},
		// JSON and form types: parameters ignored.
		{"application/json", "application/json; charset=latin1", true},
		{"application/merge-patch+json; boundary=A", "application/merge-patch+json; boundary=B", true},
		{"application/x-www-form-urlencoded; charset=utf-8", "application/x-www-form-urlencoded", true},
	} {
		for _, body := range []string{mp, `{"a":1}`, "a=1"} {
			a, b := sum(fingerprint.Version, tt.a, body), sum(fingerprint.Version, tt.b, body)
			if tt.same {
				assert.Equal(t, a, b, "%q and %q, %q", tt.a, tt.b, body)
			} else {
				assert.NotEqual(t, a, b, "%q and %q, %q", tt.a, tt.b, body)
			}
			// Versions 1 and 2: the media types alone count.
			for v := 1; v < 3; v++ {
				ma, _, _ := strings.Cut(tt.a, ";")
				mb, _, _ := strings.Cut(tt.b, ";")
				same := strings.EqualFold(strings.Trim(ma, " \t"), strings.Trim(mb, " \t"))
				assert.Equal(t, same, sum(v, tt.a, body) == sum(v, tt.b, body), "version %d: %q and %q", v, tt.a, tt.b)
			}
		}
	}
}

// asciiLower returns s with its ASCII letters in lower case (and every
// other byte as it is).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// jsonOrForm reports whether the media type media (lower case) selects
// the JSON or the form domain.
func jsonOrForm(media string) bool {
	return media == "application/json" || strings.HasSuffix(media, "+json") && strings.IndexByte(media, '/') > 0 ||
		media == "application/x-www-form-urlencoded"
}

// The security review's reproducer: one multipart body is valid under two
// boundaries, with another "amount" under each. Version 2 ignores the
// boundary, so both requests had one fingerprint (strict semantics replayed
// the first response to the second instead of refusing it); version 3
// tells them apart, and still takes a quoted boundary for the token.
func TestBoundaryParameter(t *testing.T) {
	const body = "--A\r\nContent-Disposition: form-data; name=\"amount\"\r\n\r\n1\r\n--A--\r\n" +
		"--B\r\nContent-Disposition: form-data; name=\"amount\"\r\n\r\n1000\r\n--B--\r\n"
	amount := func(ct string) string {
		_, params, err := mime.ParseMediaType(ct)
		require.NoError(t, err)
		f, err := multipart.NewReader(strings.NewReader(body), params["boundary"]).ReadForm(1 << 20)
		require.NoError(t, err)
		return f.Value["amount"][0]
	}
	h := mustNew(t, fingerprint.Options{})
	in := func(ct string) *fingerprint.Input {
		return &fingerprint.Input{Method: "POST", Operation: "pay", Path: "/pay", ContentType: ct, Body: []byte(body)}
	}
	a, b, quoted := "multipart/form-data; boundary=A", "multipart/form-data; boundary=B", `multipart/form-data; boundary="A"`
	require.Equal(t, "1", amount(a))
	require.Equal(t, "1000", amount(b))
	require.Equal(t, "1", amount(quoted))

	v2a, _ := h.SumVersion(in(a), 2)
	v2b, _ := h.SumVersion(in(b), 2)
	assert.Equal(t, v2a, v2b, "version 2 ignores the boundary")
	assert.NotEqual(t, h.Sum(in(a)), h.Sum(in(b)), "requests the handler reads differently")
	assert.Equal(t, h.Sum(in(a)), h.Sum(in(quoted)))
}

// FuzzParams checks SumVersion against the documented stream for any
// Content-Type, in every version, and that version 3 takes two
// Content-Types of a raw type for one only when Go's mime.ParseMediaType
// reads them alike (the media type, the parameters, whether it fails):
// the variants are the type respelled (case, quotes, white space) or
// changed (a backslash, a duplicate, a ';').
func FuzzParams(f *testing.F) {
	for _, ct := range goldenContentTypes {
		f.Add(ct, uint64(len(ct)))
	}
	h := mustNew(f, fingerprint.Options{})
	f.Fuzz(func(t *testing.T, ct string, seed uint64) {
		in := &fingerprint.Input{Method: "POST", ContentType: ct, Body: []byte("--A--\r\n")}
		for v := 1; v <= fingerprint.Version; v++ {
			got, ok := h.SumVersion(in, v)
			if want := documentedSumVersion(h, nil, in, byte(v)); !ok || got != want {
				t.Fatalf("%q: SumVersion %d %v, documented stream %v", ct, v, got, want)
			}
		}
		media, _, _ := strings.Cut(ct, ";")
		if jsonOrForm(asciiLower(strings.Trim(media, " \t"))) {
			return // parameters ignored
		}
		r := rand.New(rand.NewPCG(seed, 1))
		a := h.Sum(in)
		for range 8 {
			other := respell(r, ct)
			if h.Sum(&fingerprint.Input{Method: "POST", ContentType: other, Body: in.Body}) != a {
				continue
			}
			ma, pa, ea := mime.ParseMediaType(ct)
			mb, pb, eb := mime.ParseMediaType(other)
			if ma != mb || !maps.Equal(pa, pb) || (ea == nil) != (eb == nil) {
				t.Fatalf("one fingerprint for %q (mime: %q %q %v) and %q (mime: %q %q %v)", ct, ma, pa, ea, other, mb, pb, eb)
			}
		}
	})
}

// respell returns ct with one random change at a random place: a letter's
// case flipped, a token quoted or a quoted string unquoted, white space or
// a backslash, a ';' or a '"' inserted, a byte removed or a parameter
// repeated.
func respell(r *rand.Rand, ct string) string {
	if ct == "" {
		return "text/plain"
	}
	i := r.IntN(len(ct))
	switch r.IntN(8) {
	case 0:
		c := ct[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			c ^= 0x20
		}
		return ct[:i] + string(c) + ct[i+1:]
	case 1: // quote the token after a '='
		if j := strings.IndexByte(ct[i:], '='); j >= 0 {
			j += i + 1
			k := j
			for k < len(ct) && strings.IndexByte(" \t;\"", ct[k]) < 0 {
				k++
			}
			return ct[:j] + `"` + ct[j:k] + `"` + ct[k:]
		}
	case 2:
		return strings.Replace(ct, `"`, "", 2)
	case 3:
		return ct[:i] + []string{" ", "\t", " \t"}[r.IntN(3)] + ct[i:]
	case 4:
		return ct[:i] + `\` + ct[i:]
	case 5:
		return ct[:i] + []string{";", `"`, "=", "; "}[r.IntN(4)] + ct[i:]
	case 6:
		return ct[:i] + ct[i+1:]
	case 7:
		if j := strings.IndexByte(ct, ';'); j >= 0 {
			return ct + ct[j:]
		}
	}
	return ct
}

// A raw type with many parameters has the documented stream: a count of
// 128 or more takes more than one byte of its varint (appendParams writes
// the pairs after a one-byte count and moves them on), and a malformed
// parameter after many well-formed ones makes the text count as it is.
func TestManyParams(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	for _, n := range []int{1, 127, 128, 129, 300, 16384} {
		var ct strings.Builder
		ct.WriteString("multipart/form-data")
		for i := range n {
			fmt.Fprintf(&ct, "; P%d=%q", i, strings.Repeat("v", i%5))
		}
		for _, tail := range []string{"", "; x", ";"} {
			in := &fingerprint.Input{Method: "POST", Operation: "op", Path: "/p", ContentType: ct.String() + tail, Body: []byte("--A--\r\n")}
			if got, want := h.Sum(in), documentedSum(h, nil, in); got != want {
				t.Errorf("%d parameters%q: Sum %v, documented stream %v", n, tail, got, want)
			}
		}
	}
}
