package fingerprint_test

import (
	"cmp"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

func canon(t *testing.T, h *fingerprint.Hasher, in string) string {
	t.Helper()
	out, err := h.Canonical(nil, []byte(in))
	require.NoError(t, err, "input %q", in)
	return string(out)
}

// requireLike checks that in has the canonical form want, or, if the
// top-level value it embeds failed with topErr, that in fails too.
func requireLike(t *testing.T, h *fingerprint.Hasher, in, want string, topErr error) {
	t.Helper()
	got, err := h.Canonical(nil, []byte(in))
	if topErr != nil {
		require.Error(t, err, "input %q", in)
		return
	}
	require.NoError(t, err, "input %q", in)
	require.Equal(t, want, string(got), "input %q", in)
}

func mustNew(t testing.TB, opts fingerprint.Options) *fingerprint.Hasher {
	t.Helper()
	h, err := fingerprint.New(opts)
	require.NoError(t, err)
	return h
}

func TestCanonicalForm(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	tests := []struct{ name, in, want string }{
		// Literals and white space.
		{"literals", " [ true , false , null ] ", `[true,false,null]`},
		{"white space everywhere", "\t{\n\"a\" :\r\n[ 1 ,\t2 ] } \n", `{"a":[1,2]}`},
		{"empty containers", `{"a":{ },"b":[ ],"c":{}}`, `{"a":{},"b":[],"c":{}}`},
		{"scalar root", ` "x" `, `"x"`},

		// Member order.
		{"sorted by name", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"nested objects sorted", `{"z":{"y":1,"x":{"q":1,"p":2}},"a":0}`, `{"a":0,"z":{"x":{"p":2,"q":1},"y":1}}`},
		{"bytewise: upper case first", `{"a":1,"B":2,"_":3}`, `{"B":2,"_":3,"a":1}`},
		{"prefix first", `{"ab":1,"a":2,"abc":3}`, `{"a":2,"ab":1,"abc":3}`},
		{"long names share a prefix", `{"customer_name_last":1,"customer_name_first":2}`, `{"customer_name_first":2,"customer_name_last":1}`},
		{"order by decoded name", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"utf-8 byte order", `{"é":1,"z":2,"😀":3,"ｚ":4}`, `{"z":2,"é":1,"ｚ":4,"😀":3}`},
		{"duplicates keep arrival order", `{"a":2,"b":0,"a":1}`, `{"a":2,"a":1,"b":0}`},
		// A short name and a long one whose first eight bytes are the
		// short one zero-padded (escaped NULs): once a panic.
		{"short name, long name with NULs", `{"a\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000":2,"a":1}`,
			`{"a":1,"a\u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000":2}`},
		{"eight-byte name, long name with NULs", `{"abcdefgh\u0000":2,"abcdefgh":1,"abcdefg":0}`,
			`{"abcdefg":0,"abcdefgh":1,"abcdefgh\u0000":2}`},
		{"arrays keep order", `[3,1,2,{"b":1,"a":1}]`, `[3,1,2,{"a":1,"b":1}]`},

		// Strings.
		{"escapes decoded", `"\u0041\/\u00e9\ud83d\ude00"`, `"A/é😀"`},
		{"short escapes kept", `"\"\\\b\f\n\r\t"`, `"\"\\\b\f\n\r\t"`},
		{"escaped quote in unicode form", `"\u0022\u005c"`, `"\"\\"`},
		{"controls as lower-case hex", `"\u0001\u001F\u000b"`, `"\u0001\u001f\u000b"`},
		{"short escape from unicode form", `"\u000a\u0009"`, `"\n\t"`},
		{"del and line separator raw", `"\u007f\u2028"`, "\"\x7f\u2028\""},
		{"raw utf-8 kept", `"Zürich – 東京"`, `"Zürich – 東京"`},
		{"escaped names", `{"a\"b":1,"\u0061":2}`, `{"a":2,"a\"b":1}`},

		// Numbers.
		{"integers", `[0,1,-1,100,1234567890123456789012]`, `[0,1,-1,100,1.234567890123456789012e+21]`},
		{"one, many ways", `[1,1.0,1e0,10e-1,0.1e1,1.000E+0,100e-2]`, `[1,1,1,1,1,1,1]`},
		{"negative zero", `[-0,-0.0,0e5,-0E-3,0.000]`, `[0,0,0,0,0]`},
		{"no float rounding", `[9007199254740993,9007199254740992]`, `[9007199254740993,9007199254740992]`},
		{"long fractions exact", `0.1000000000000000055511151231257827`, `0.1000000000000000055511151231257827`},
		{"trailing fraction zeros", `[12.50,10.0,-3.100]`, `[12.5,10,-3.1]`},
		{"21 digits plain", `[1e20,123456789012345678901]`, `[100000000000000000000,123456789012345678901]`},
		{"22 digits exponent", `[1e21,1234567890123456789012e0]`, `[1e+21,1.234567890123456789012e+21]`},
		{"small plain", `[0.000001,1e-6,0.0000015]`, `[0.000001,0.000001,0.0000015]`},
		{"smaller exponent", `[0.0000001,1e-7,12e-8]`, `[1e-7,1e-7,1.2e-7]`},
		{"negative exponent form", `[-1.5e-10,-15E300]`, `[-1.5e-10,-1.5e+301]`},
		{"decimal point moves", `[1.25e1,125e-3,0.0125e3]`, `[12.5,0.125,12.5]`},
		{"exponent with leading zeros", `[1e007,1E+02]`, `[10000000,100]`},
		{"huge exponents exact", `[1e400,1e-400]`, `[1e+400,1e-400]`},
		{"zero with a huge exponent", `0e99999999999999999999`, `0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := canon(t, h, tt.in)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, canon(t, h, got), "canonical form is a fixed point")
		})
	}
}

func TestCanonicalInvalid(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	tests := []struct{ name, in string }{
		{"empty", ``},
		{"only space", "  \n"},
		{"truncated", `{"a":1`},
		{"trailing comma", `[1,2,]`},
		{"trailing data", `{} {}`},
		{"missing colon", `{"a" 1}`},
		{"bad literal", `tru`},
		{"single quotes", `{'a':1}`},
		{"leading zero", `01`},
		{"bare minus", `-`},
		{"bare point", `1.`},
		{"bare exponent", `1e`},
		{"plus sign", `+1`},
		{"raw control in string", "\"a\x01b\""},
		{"raw newline in string", "\"a\nb\""},
		{"bad escape", `"\x41"`},
		{"short unicode escape", `"\u00"`},
		{"lone high surrogate", `"\ud83d"`},
		{"lone low surrogate", `"\ude00"`},
		{"high surrogate then letter", `"\ud83dA"`},
		{"invalid utf-8", "\"\xff\""},
		{"truncated utf-8", "\"\xc3\""},
		{"utf-8 surrogate", "\"\xed\xa0\x80\""},
		{"byte order mark", "\xef\xbb\xbf{}"},
		{"unterminated string", `"abc`},
		{"exponent too large", `1e1000000000000000`},
		{"nan", `NaN`},
		{"too deep", strings.Repeat("[", fingerprint.MaxDepth+1) + strings.Repeat("]", fingerprint.MaxDepth+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := h.Canonical([]byte("keep"), []byte(tt.in))
			var se *fingerprint.SyntaxError
			require.True(t, errors.As(err, &se), "want a *SyntaxError, got %v", err)
			assert.GreaterOrEqual(t, se.Offset, 0)
			assert.NotEmpty(t, se.Reason)
			assert.Equal(t, "keep", string(out), "dst is returned unchanged")
		})
	}
	// The deepest nesting allowed works.
	deep := strings.Repeat("[", fingerprint.MaxDepth) + strings.Repeat("]", fingerprint.MaxDepth)
	assert.Equal(t, deep, canon(t, h, deep))
	deepObj := strings.Repeat(`{"a":`, fingerprint.MaxDepth-1) + "{}" + strings.Repeat("}", fingerprint.MaxDepth-1)
	assert.Equal(t, deepObj, canon(t, h, deepObj))
}

func TestVolatile(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Volatile: []string{
		"/client_time", "/items/*/note", "/meta/trace_id", "/a~1b", "/t~0", "/list/1", "/*/x",
	}})
	tests := []struct{ name, in, want string }{
		{"top member", `{"client_time":123,"id":1}`, `{"id":1}`},
		{"absent equals volatile", `{"id":1}`, `{"id":1}`},
		{"only member", `{"client_time":{"deep":[1,2]}}`, `{}`},
		{"wildcard index", `{"items":[{"note":"a","q":1},{"q":2,"note":"b"},{"q":3}]}`, `{"items":[{"q":1},{"q":2},{"q":3}]}`},
		{"wildcard on object", `{"items":{"y":{"note":1,"k":2}}}`, `{"items":{"y":{"k":2}}}`},
		{"nested", `{"meta":{"trace_id":"t","src":"web"}}`, `{"meta":{"src":"web"}}`},
		{"escaped tokens", `{"a/b":1,"t~":2,"t":3}`, `{"t":3}`},
		{"array element dropped", `{"list":[10,11,12]}`, `{"list":[10,12]}`},
		{"index token matches a member too", `{"list":{"1":"x","2":"y"}}`, `{"list":{"2":"y"}}`},
		{"wildcard first token", `{"p":{"x":1,"y":2},"q":[{"x":1}],"x":3}`, `{"p":{"y":2},"q":[{"x":1}],"x":3}`},
		{"escaped member name matches", `{"client\u005ftime":5,"id":1}`, `{"id":1}`},
		{"duplicates all dropped", `{"client_time":1,"id":1,"client_time":2}`, `{"id":1}`},
		{"not an object: no effect", `[{"client_time":1}]`, `[{"client_time":1}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, canon(t, h, tt.in))
		})
	}
}

func TestUnordered(t *testing.T) {
	h := mustNew(t, fingerprint.Options{
		Unordered: []string{"/set", "/orders/*/lines", "/obj", "/both"},
		Volatile:  []string{"/orders/*/lines/*/note", "/both"},
	})
	tests := []struct{ name, in, want string }{
		{"numbers", `{"set":[3,1,2]}`, `{"set":[1,2,3]}`},
		{"duplicates kept", `{"set":[2,1,2]}`, `{"set":[1,2,2]}`},
		{"mixed, by canonical text", `{"set":["b",10,2,[1],{"k":1},null,true,"a"]}`, `{"set":["a","b",10,2,[1],null,true,{"k":1}]}`},
		{"elements canonicalized first", `{"set":[{"b":1,"a":1.0},{"a":1,"b":0}]}`, `{"set":[{"a":1,"b":0},{"a":1,"b":1}]}`},
		{"prefix first", `{"set":["ab","a"]}`, `{"set":["a","ab"]}`},
		{"wildcard path with volatile inside", `{"orders":[{"lines":[{"sku":"b","note":1},{"sku":"a","note":2}]}]}`, `{"orders":[{"lines":[{"sku":"a"},{"sku":"b"}]}]}`},
		{"not an array: no effect", `{"obj":{"b":1,"a":2}}`, `{"obj":{"a":2,"b":1}}`},
		{"volatile wins", `{"both":[2,1],"k":1}`, `{"k":1}`},
		{"other arrays keep order", `{"list":[3,1,2]}`, `{"list":[3,1,2]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, canon(t, h, tt.in))
		})
	}

	root := mustNew(t, fingerprint.Options{Unordered: []string{""}})
	assert.Equal(t, `[1,2,3]`, canon(t, root, `[3,2,1]`), "the root pointer names the body")
}

func TestMultisets(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Unordered: []string{"/s"}})
	sum := func(body string) fingerprint.Fingerprint { return h.Sum(jsonInput([]byte(body))) }
	assert.Equal(t, sum(`{"s":[1,2,2]}`), sum(`{"s":[2,1,2]}`))
	assert.Equal(t, sum(`{"s":[1,2,2]}`), sum(`{"s":[2,2,1]}`))
	assert.NotEqual(t, sum(`{"s":[1,2,2]}`), sum(`{"s":[1,2]}`))
	assert.NotEqual(t, sum(`{"s":[1,2,2]}`), sum(`{"s":[1,1,2]}`))
	assert.NotEqual(t, sum(`{"s":[]}`), sum(`{}`))
}

// Objects whose names repeat (and so hit the shape cache) and objects that
// look alike but differ must all come out right, in any order of arrival,
// also when a nested object takes over the cache slot of its parent.
func TestShapes(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	in := `[{"b":1,"a":2,"c":3},{"b":4,"a":5,"c":6},{"b":7,"a":8},{"b":9,"a":10,"c":11,"d":12},` +
		`{"b":1,"a":{"b":2,"a":3,"c":4},"c":5},{"a":1,"b":2,"c":3},{"b":1,"c":2,"a":3},` +
		`{"b":1,"a":2,"a":3},{"b":{"b":{"b":1,"a":2},"a":3},"a":4}]`
	want := `[{"a":2,"b":1,"c":3},{"a":5,"b":4,"c":6},{"a":8,"b":7},{"a":10,"b":9,"c":11,"d":12},` +
		`{"a":{"a":3,"b":2,"c":4},"b":1,"c":5},{"a":1,"b":2,"c":3},{"a":3,"b":1,"c":2},` +
		`{"a":2,"a":3,"b":1},{"a":4,"b":{"a":3,"b":{"a":2,"b":1}}}]`
	for range 3 { // the cache carries over between calls
		assert.Equal(t, want, canon(t, h, in))
	}
	// Siblings of other shapes, shorter and longer ones, and a first name
	// that matches while the second does not.
	in = `[{"b":1,"a":2},{"y":1,"x":2},{"b":3,"a":4},{"b":5},{"b":6,"a":7,"0":8},{"b":9,"c":10},{"b":1,"a":2}]`
	want = `[{"a":2,"b":1},{"x":2,"y":1},{"a":4,"b":3},{"b":5},{"0":8,"a":7,"b":6},{"b":9,"c":10},{"a":2,"b":1}]`
	for range 3 {
		assert.Equal(t, want, canon(t, h, in))
	}
}

// Multi-byte runes, whole or cut short, at every offset near the end of
// the input, in names, values, elements and at the top level: the string
// scanners read eight or sixteen bytes at a time, and none of their loads
// may pass the end of the input (the body is allocated at its exact size,
// so the bounds checks catch any that would).
func TestRunesAtInputEnd(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	runes := []string{"é", "–", "😀", "\xf0\x9f\x98", "\xe2\x80", "\xc3", "\x80", "\xff", "\\u00e9", "\\ud83d\\ude00"}
	for _, r := range runes {
		for pad := range 40 {
			s := strings.Repeat("a", pad) + r
			valid := utf8.ValidString(s)
			canonS := strings.NewReplacer(`\u00e9`, "é", `\ud83d\ude00`, "😀").Replace(s)
			for _, c := range []struct{ in, want string }{
				{`"` + s + `"`, `"` + canonS + `"`},
				{`{"` + s + `":1}`, `{"` + canonS + `":1}`},
				{`{"k":"` + s + `"}`, `{"k":"` + canonS + `"}`},
				{`["` + s + `"]`, `["` + canonS + `"]`},
				{`{"b":1,"a":"` + s + `"}`, `{"a":"` + canonS + `","b":1}`},
				{`{"b":"` + s + `","a":1}`, `{"a":1,"b":"` + canonS + `"}`},
				{`["` + s + `",{"` + s + `":"` + s + `"}]`, `["` + canonS + `",{"` + canonS + `":"` + canonS + `"}]`},
			} {
				in := make([]byte, len(c.in))
				copy(in, c.in)
				got, err := h.Canonical(nil, in)
				if !valid {
					require.Error(t, err, "input %q", c.in)
					continue
				}
				require.NoError(t, err, "input %q", c.in)
				require.Equal(t, c.want, string(got), "input %q", c.in)
			}
		}
	}
}

// TestMemberNumbers checks that a number as an object member's value (which
// the member loop may take inline) has the canonical form of the same
// number at the top level, for numbers of every length near the inline
// limits, with and without fractions, signs, exponents and zeros.
func TestMemberNumbers(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	nums := []string{"0", "00", "-0", "1", "7", "10", "-3", "01"}
	for d := 1; d <= 23; d++ {
		ip := strings.Repeat("9", d)
		nums = append(nums, ip, "-"+ip, ip[:d-1]+"0", "1"+strings.Repeat("0", d-1))
		for f := 1; f <= 17; f++ {
			fr := strings.Repeat("5", f)
			nums = append(nums, ip+"."+fr, ip+"."+fr[:f-1]+"0", ip+"."+fr+"e2", ip+"."+fr+"E-2")
		}
	}
	for z := 0; z <= 9; z++ {
		zs := strings.Repeat("0", z)
		nums = append(nums, "0."+zs+"5", "0."+zs+"50", "0."+zs+"125", "-0."+zs+"5", "0."+zs, "0."+zs+"1e3",
			"0."+zs+"1234567890123", "0."+zs+"12345678901230", "7."+zs+"12345678901", "7."+zs+"123456789010")
	}
	nums = append(nums, "1.", "1.e5", "1e5", "1E5", "0e0", "2.5.1", "3-", "4+1")
	pad := `"` + strings.Repeat("x", 20) + `"`
	for _, num := range nums {
		want, err := h.Canonical(nil, []byte(num))
		w := string(want)
		for _, c := range []struct{ in, want string }{
			{`{"a":` + num + `,"b":` + pad + `}`, `{"a":` + w + `,"b":` + pad + `}`},
			{`{"b":` + pad + `,"a":` + num + `}`, `{"a":` + w + `,"b":` + pad + `}`},
			{`{"a":` + num + `}`, `{"a":` + w + `}`},
			{`{"a":` + num + ` ,"b":1}`, `{"a":` + w + `,"b":1}`},
			// The first object gives the shape.
			{`[{"a":1,"b":1,"c":` + pad + `},{"a":2,"b":` + num + `,"c":` + pad + `}]`,
				`[{"a":1,"b":1,"c":` + pad + `},{"a":2,"b":` + w + `,"c":` + pad + `}]`},
			{`[{"c":1,"b":1,"a":` + pad + `},{"c":2,"b":` + num + `,"a":` + pad + `}]`,
				`[{"a":` + pad + `,"b":1,"c":1},{"a":` + pad + `,"b":` + w + `,"c":2}]`},
			{`[{"c":1,"b":1,"a":1},{"c":2,"b":` + num + `}]`, `[{"a":1,"b":1,"c":1},{"b":` + w + `,"c":2}]`},
		} {
			requireLike(t, h, c.in, c.want, err)
		}
		_, err = h.Canonical(nil, []byte(`{"a":`+num+pad+`}`))
		require.Error(t, err, "input %q", num+pad)
	}
}

// TestMemberStrings checks that a string as the value of a member of
// objects that repeat a shape (which fastMembers may take) has the
// canonical form of the same string at the top level, for escapes, UTF-8
// sequences of every length, valid or not, and control characters at every
// offset of a string of up to forty bytes.
func TestMemberStrings(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	pieces := []string{`\"`, `\\`, `\/`, `\n`, `\t`, `\r`, `\b`, `\f`, `\u00e9`, `\u0001`, `\ud83d\ude00`, `\ud83d`, `\x`,
		"é", "ü", "–", "€", "\u0800", "\ud7ff", "\ue000", "😀", "\xed\xa0\x80", "\xe0\x80\x80", "\xc0\xaf", "\xc3", "\xe2\x80", "\xff", "\x01", "\x1f", "\x7f"}
	pad := `"` + strings.Repeat("y", 20) + `"`
	for _, p := range pieces {
		for off := range 40 {
			s := `"` + strings.Repeat("a", off) + p + strings.Repeat("b", off%5) + `"`
			want, err := h.Canonical(nil, []byte(s))
			w := string(want)
			for _, c := range []struct{ in, want string }{
				// The first object gives the shape.
				{`[{"a":1,"b":"x","c":` + pad + `},{"a":2,"b":` + s + `,"c":` + pad + `}]`,
					`[{"a":1,"b":"x","c":` + pad + `},{"a":2,"b":` + w + `,"c":` + pad + `}]`},
				{`[{"c":1,"b":"x","a":` + pad + `},{"c":2,"b":` + s + `,"a":` + pad + `}]`,
					`[{"a":` + pad + `,"b":"x","c":1},{"a":` + pad + `,"b":` + w + `,"c":2}]`},
			} {
				requireLike(t, h, c.in, c.want, err)
			}
		}
	}
}

// arrayBody embeds the array text a in the members of objects of one
// shape, where the member loop takes arrays of scalars as they are when
// their text is canonical.
func arrayBody(a string) string {
	return `{"list":[{"a":` + a + `,"b":1},{"a":` + a + `,"b":1},{"b":2,"a":` + a + `}],"z":"` + strings.Repeat("x", 40) + `"}`
}

// Arrays in object members: as they are when canonical, else canonicalized
// or rejected as anywhere else.
func TestArraysInMembers(t *testing.T) {
	tests := []struct{ in, want string }{
		{"[]", "{\"list\":[{\"a\":[],\"b\":1},{\"a\":[],\"b\":1},{\"a\":[],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[ ]", "{\"list\":[{\"a\":[],\"b\":1},{\"a\":[],\"b\":1},{\"a\":[],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1,2]", "{\"list\":[{\"a\":[1,2],\"b\":1},{\"a\":[1,2],\"b\":1},{\"a\":[1,2],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1.0]", "{\"list\":[{\"a\":[1],\"b\":1},{\"a\":[1],\"b\":1},{\"a\":[1],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1e2]", "{\"list\":[{\"a\":[100],\"b\":1},{\"a\":[100],\"b\":1},{\"a\":[100],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[-1]", "{\"list\":[{\"a\":[-1],\"b\":1},{\"a\":[-1],\"b\":1},{\"a\":[-1],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[-0]", "{\"list\":[{\"a\":[0],\"b\":1},{\"a\":[0],\"b\":1},{\"a\":[0],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"a\\/b\"]", "{\"list\":[{\"a\":[\"a/b\"],\"b\":1},{\"a\":[\"a/b\"],\"b\":1},{\"a\":[\"a/b\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"\\u0041\"]", "{\"list\":[{\"a\":[\"A\"],\"b\":1},{\"a\":[\"A\"],\"b\":1},{\"a\":[\"A\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"é\",\"日本\",\"😀\"]", "{\"list\":[{\"a\":[\"é\",\"日本\",\"😀\"],\"b\":1},{\"a\":[\"é\",\"日本\",\"😀\"],\"b\":1},{\"a\":[\"é\",\"日本\",\"😀\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"a\\\"b\\\\c\\n\\t\\r\\b\\f\"]", "{\"list\":[{\"a\":[\"a\\\"b\\\\c\\n\\t\\r\\b\\f\"],\"b\":1},{\"a\":[\"a\\\"b\\\\c\\n\\t\\r\\b\\f\"],\"b\":1},{\"a\":[\"a\\\"b\\\\c\\n\\t\\r\\b\\f\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[true,false,null]", "{\"list\":[{\"a\":[true,false,null],\"b\":1},{\"a\":[true,false,null],\"b\":1},{\"a\":[true,false,null],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[[1]]", "{\"list\":[{\"a\":[[1]],\"b\":1},{\"a\":[[1]],\"b\":1},{\"a\":[[1]],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[{\"b\":1,\"a\":2}]", "{\"list\":[{\"a\":[{\"a\":2,\"b\":1}],\"b\":1},{\"a\":[{\"a\":2,\"b\":1}],\"b\":1},{\"a\":[{\"a\":2,\"b\":1}],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1 ,2]", "{\"list\":[{\"a\":[1,2],\"b\":1},{\"a\":[1,2],\"b\":1},{\"a\":[1,2],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1, 2]", "{\"list\":[{\"a\":[1,2],\"b\":1},{\"a\":[1,2],\"b\":1},{\"a\":[1,2],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[0.10]", "{\"list\":[{\"a\":[0.1],\"b\":1},{\"a\":[0.1],\"b\":1},{\"a\":[0.1],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[0.0000001]", "{\"list\":[{\"a\":[1e-7],\"b\":1},{\"a\":[1e-7],\"b\":1},{\"a\":[1e-7],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[0.000001]", "{\"list\":[{\"a\":[0.000001],\"b\":1},{\"a\":[0.000001],\"b\":1},{\"a\":[0.000001],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[123456789012345678901234]", "{\"list\":[{\"a\":[1.23456789012345678901234e+23],\"b\":1},{\"a\":[1.23456789012345678901234e+23],\"b\":1},{\"a\":[1.23456789012345678901234e+23],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1234567890123456]", "{\"list\":[{\"a\":[1234567890123456],\"b\":1},{\"a\":[1234567890123456],\"b\":1},{\"a\":[1234567890123456],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[16.990000000000002,0.30000000000000004]", "{\"list\":[{\"a\":[16.990000000000002,0.30000000000000004],\"b\":1},{\"a\":[16.990000000000002,0.30000000000000004],\"b\":1},{\"a\":[16.990000000000002,0.30000000000000004],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1.1234567890000,0.00000012345678]", "{\"list\":[{\"a\":[1.123456789,1.2345678e-7],\"b\":1},{\"a\":[1.123456789,1.2345678e-7],\"b\":1},{\"a\":[1.123456789,1.2345678e-7],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[0.1234567,1.25]", "{\"list\":[{\"a\":[0.1234567,1.25],\"b\":1},{\"a\":[0.1234567,1.25],\"b\":1},{\"a\":[0.1234567,1.25],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"\\u00e9\"]", "{\"list\":[{\"a\":[\"é\"],\"b\":1},{\"a\":[\"é\"],\"b\":1},{\"a\":[\"é\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"\\ud83d\\ude00\"]", "{\"list\":[{\"a\":[\"😀\"],\"b\":1},{\"a\":[\"😀\"],\"b\":1},{\"a\":[\"😀\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"x\",1,true]", "{\"list\":[{\"a\":[\"x\",1,true],\"b\":1},{\"a\":[\"x\",1,true],\"b\":1},{\"a\":[\"x\",1,true],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[1,]", ""},
		{"[1", ""},
		{"[\"a]", ""},
		{"[tru]", ""},
		{"[01]", ""},
		{"[1.]", ""},
		{"[.5]", ""},
		{"[\"\\u0000\"]", "{\"list\":[{\"a\":[\"\\u0000\"],\"b\":1},{\"a\":[\"\\u0000\"],\"b\":1},{\"a\":[\"\\u0000\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"\x01\"]", ""},
		{"[\"\xff\"]", ""},
		{"[\"\xed\xa0\x80\"]", ""},
		{"[\"ࠀ\"]", "{\"list\":[{\"a\":[\"ࠀ\"],\"b\":1},{\"a\":[\"ࠀ\"],\"b\":1},{\"a\":[\"ࠀ\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"[\"long string with more than sixteen bytes \\\" and escapes\"]", "{\"list\":[{\"a\":[\"long string with more than sixteen bytes \\\" and escapes\"],\"b\":1},{\"a\":[\"long string with more than sixteen bytes \\\" and escapes\"],\"b\":1},{\"a\":[\"long string with more than sixteen bytes \\\" and escapes\"],\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
	}
	h := mustNew(t, fingerprint.Options{})
	for _, tt := range tests {
		got, err := h.Canonical(nil, []byte(arrayBody(tt.in)))
		if tt.want == "" {
			assert.Error(t, err, "%q", tt.in)
			continue
		}
		assert.NoError(t, err, "%q", tt.in)
		assert.Equal(t, tt.want, string(got), "%q", tt.in)
	}
}

// objBody has objects of one shape whose member "a" is first the object
// a, then twice the object b, which the member loop may take whole as an
// object of a's shape.
func objBody(a, b string) string {
	return `{"list":[{"a":` + a + `,"b":1},{"a":` + b + `,"b":1},{"b":2,"a":` + b + `}],"z":"` + strings.Repeat("x", 40) + `"}`
}

// Objects in object members, after an object of another shape.
func TestObjectsInMembers(t *testing.T) {
	tests := []struct{ a, b, want string }{
		{"{\"y\":1,\"x\":2}", "{\"y\":3,\"x\":4}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":3}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"y\":3},\"b\":1},{\"a\":{\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"x\":3}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":3},\"b\":1},{\"a\":{\"x\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":3,\"x\":4,\"w\":5}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"w\":5,\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"w\":5,\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"x\":4,\"y\":3}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\": 3,\"x\":4}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":3 ,\"x\":4}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{ \"y\":3,\"x\":4}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":3,\"x\":4 }", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":1.0,\"x\":\"\\u0041\"}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":\"A\",\"y\":1},\"b\":1},{\"a\":{\"x\":\"A\",\"y\":1},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":[1,\"a\"],\"x\":{\"q\":1}}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":{\"q\":1},\"y\":[1,\"a\"]},\"b\":1},{\"a\":{\"x\":{\"q\":1},\"y\":[1,\"a\"]},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":\"é\\\"\\n\",\"x\":true}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":true,\"y\":\"é\\\"\\n\"},\"b\":1},{\"a\":{\"x\":true,\"y\":\"é\\\"\\n\"},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"y\":1,\"x\":2,}", ""},
		{"{\"y\":1,\"x\":2}", "{\"y\":1,\"x\"}", ""},
		{"{\"y\":1,\"x\":2}", "{\"y\":1,\"x\":2", ""},
		{"{\"y\":1,\"x\":2}", "{}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{},\"b\":1},{\"a\":{},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"a\":1,\"b\":2}", "{\"a\":3,\"b\":4}", "{\"list\":[{\"a\":{\"a\":1,\"b\":2},\"b\":1},{\"a\":{\"a\":3,\"b\":4},\"b\":1},{\"a\":{\"a\":3,\"b\":4},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"a\":1,\"b\":2}", "{\"a\":3}", "{\"list\":[{\"a\":{\"a\":1,\"b\":2},\"b\":1},{\"a\":{\"a\":3},\"b\":1},{\"a\":{\"a\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"a\":1,\"b\":2}", "{\"b\":3}", "{\"list\":[{\"a\":{\"a\":1,\"b\":2},\"b\":1},{\"a\":{\"b\":3},\"b\":1},{\"a\":{\"b\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"color\":\"x\",\"size\":\"M\",\"fragile\":true}", "{\"color\":\"blue\",\"size\":\"XL\",\"fragile\":false}", "{\"list\":[{\"a\":{\"color\":\"x\",\"fragile\":true,\"size\":\"M\"},\"b\":1},{\"a\":{\"color\":\"blue\",\"fragile\":false,\"size\":\"XL\"},\"b\":1},{\"a\":{\"color\":\"blue\",\"fragile\":false,\"size\":\"XL\"},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"color\":\"x\",\"size\":\"M\",\"fragile\":true}", "{\"color\":\"blue\",\"size\":\"XL\"}", "{\"list\":[{\"a\":{\"color\":\"x\",\"fragile\":true,\"size\":\"M\"},\"b\":1},{\"a\":{\"color\":\"blue\",\"size\":\"XL\"},\"b\":1},{\"a\":{\"color\":\"blue\",\"size\":\"XL\"},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"\\u0079\":1,\"x\":2}", "{\"y\":3,\"x\":4}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"y\":1,\"x\":2}", "{\"\\u0079\":3,\"x\":4}", "{\"list\":[{\"a\":{\"x\":2,\"y\":1},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":1},{\"a\":{\"x\":4,\"y\":3},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
		{"{\"a_rather_long_member_name\":1,\"b\":2}", "{\"a_rather_long_member_name\":3,\"b\":4}", "{\"list\":[{\"a\":{\"a_rather_long_member_name\":1,\"b\":2},\"b\":1},{\"a\":{\"a_rather_long_member_name\":3,\"b\":4},\"b\":1},{\"a\":{\"a_rather_long_member_name\":3,\"b\":4},\"b\":2}],\"z\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}"},
	}
	h := mustNew(t, fingerprint.Options{})
	for _, tt := range tests {
		got, err := h.Canonical(nil, []byte(objBody(tt.a, tt.b)))
		if tt.want == "" {
			assert.Error(t, err, "%q then %q", tt.a, tt.b)
			continue
		}
		assert.NoError(t, err, "%q then %q", tt.a, tt.b)
		assert.Equal(t, tt.want, string(got), "%q then %q", tt.a, tt.b)
	}
}

// Objects as array elements, after an element of the same or another
// shape (the second and later may be taken whole, without a frame): each
// is written as it would be alone, in arrays at the top level, in object
// members, in unordered arrays and under pointers into the elements.
func TestObjectsInArrays(t *testing.T) {
	objs := []string{
		`{"sku":"sku-1000","qty":1,"price":9.99}`,
		`{"sku":"sku-1001","qty":2,"price":16.990000000000002}`,
		`{"sku":"sku-1002","qty":3}`,
		`{"sku":"sku-1003","qty":4,"price":1.0}`,
		`{"sku":"a\/b","qty":5,"price":2}`,
		`{"sku":"x","qty":6,"price":3,"extra":true}`,
		`{"qty":7,"sku":"y","price":4}`,
		`{ "sku" : "z" , "qty" : 8 , "price" : 5 }`,
		`{"sku":"w","qty":[1,2,3],"price":{"b":1,"a":2}}`,
		`{"sku":"v","qty":[1, 2],"price":[]}`,
		`{"a":1,"b":2}`,
		`{"a":1,"b":"\u00e9"}`,
		`{"sku":"u","sku":"t","qty":1}`,
		`{"sku":"s","qty":1,"price":01}`,
	}
	testObjectsInArrays(t, objs)
	testObjectsAtInputEnd(t, objs)
}

func testObjectsInArrays(t *testing.T, objs []string) {
	plain := mustNew(t, fingerprint.Options{})
	alone := make([]string, len(objs))
	errs := make([]error, len(objs))
	for k, o := range objs {
		var b []byte
		b, errs[k] = plain.Canonical(nil, []byte(o))
		alone[k] = string(b)
	}
	hs := []*fingerprint.Hasher{plain,
		mustNew(t, fingerprint.Options{Volatile: []string{"/list/1/qty"}}),
		mustNew(t, fingerprint.Options{Unordered: []string{"/list"}})}
	for hk, h := range hs {
		for a := range objs {
			for b := range objs {
				elems := []int{a, b, b, a, b}
				var want []string
				var err error
				for _, k := range elems {
					want = append(want, alone[k])
					err = cmp.Or(err, errs[k])
				}
				parts := []string{objs[a], objs[b], objs[b], objs[a], objs[b]}
				sep := []string{",", ", ", ",\n"}[(a+b)%3]
				arr := "[" + strings.Join(parts, sep) + "]"
				if hk == 1 && err == nil {
					// The second element without its qty (a number or
					// an array of numbers, in these objects).
					w := qtyMember.ReplaceAllString(alone[b], "")
					w = strings.Replace(strings.Replace(w, "{,", "{", 1), ",}", "}", 1)
					want[1] = w
				}
				if hk == 2 {
					slices.Sort(want)
				}
				wantArr := "[" + strings.Join(want, ",") + "]"
				if hk == 0 {
					requireLike(t, h, arr, wantArr, err)
				}
				requireLike(t, h, `{"list":`+arr+`,"z":1}`, `{"list":`+wantArr+`,"z":1}`, err)
				// A separator missing or wrong after elements taken whole.
				for _, bad := range []string{" ", "x", ":", "]"} {
					in := `{"list":[` + objs[a] + "," + objs[b] + "," + objs[b] + bad + objs[b] + `],"z":1}`
					_, e := h.Canonical(nil, []byte(in))
					require.Error(t, e, "input %q", in)
				}
			}
		}
	}
}

// testObjectsAtInputEnd: objects of a shape seen before, as the last
// element of an array or the value of the last member, at the end of the
// input (where the member loop reads a padded copy of the rest), whole and
// cut short at every length, are canonicalized (or rejected) as they are
// with white space after them, far from the end.
func testObjectsAtInputEnd(t *testing.T, objs []string) {
	plain := mustNew(t, fingerprint.Options{})
	vol := mustNew(t, fingerprint.Options{Volatile: []string{"/v"}})
	for _, h := range []*fingerprint.Hasher{plain, vol} {
		for a := range objs {
			for b := range objs {
				for _, body := range []string{
					`{"list":[` + objs[a] + "," + objs[b] + `]}`,
					`{"v":1,"list":[` + objs[a] + `],"m":` + objs[b] + `}`,
					`{"m":` + objs[a] + `,"x":{"m":` + objs[b] + `}}`,
					`[` + objs[a] + "," + objs[b] + "]",
				} {
					for cut := 0; cut <= min(40, len(body)); cut++ {
						in := body[:len(body)-cut]
						want, werr := h.Canonical(nil, []byte(in+strings.Repeat(" ", 300)))
						got, err := h.Canonical(nil, []byte(in))
						require.Equal(t, werr == nil, err == nil, "input %q: %v, %v", in, err, werr)
						require.Equal(t, string(want), string(got), "input %q", in)
					}
				}
			}
		}
	}
}

var qtyMember = regexp.MustCompile(`,?"qty":(\[[^\]]*\]|[0-9.]+)`)
