package idem

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKey(t *testing.T) {
	const v7 = "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70"
	const v4 = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	tests := []struct {
		raw    string
		format Format
		max    int
		want   string // "" = error
	}{
		{"abc", FormatToken, 0, "abc"},
		{`"abc"`, FormatToken, 0, "abc"},
		{`"a\"b\\c"`, FormatToken, 0, `a"b\c`},
		{`a"b`, FormatToken, 0, `a"b`},
		{"!~", FormatToken, 0, "!~"},
		{`"a b"`, FormatToken, 0, ""}, // sf-string allows SP, the token format does not
		{"a b", FormatToken, 0, ""},
		{"", FormatToken, 0, ""},
		{`""`, FormatToken, 0, ""},
		{`"abc`, FormatToken, 0, ""},
		{`"a"b"`, FormatToken, 0, ""},
		{`"a\n"`, FormatToken, 0, ""},
		{`"a\"`, FormatToken, 0, ""},
		{"\x00", FormatToken, 0, ""},
		{"é", FormatToken, 0, ""},
		{strings.Repeat("a", 255), FormatToken, 0, strings.Repeat("a", 255)},
		{strings.Repeat("a", 256), FormatToken, 0, ""},
		{"abcd", FormatToken, 3, ""},
		{`"abc"`, FormatToken, 3, "abc"}, // the length is the key's, not the quoted form's
		{v7, FormatUUID, 0, v7},
		{strings.ToUpper(v7), FormatUUID, 0, v7},
		{`"` + v4 + `"`, FormatUUIDv4, 0, v4},
		{v7, FormatUUIDv4, 0, ""},
		{v7, FormatUUIDv7, 0, v7},
		{v4, FormatUUIDv7, 0, ""},
		{"00000000-0000-0000-0000-000000000000", FormatUUID, 0, ""},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", FormatUUID, 0, ""},
		{"3f2504e0-4f89-01d3-9a0c-0305e82c3301", FormatUUID, 0, ""}, // version 0
		{"3f2504e0-4f89-91d3-9a0c-0305e82c3301", FormatUUID, 0, ""}, // version 9
		{"3f2504e0-4f89-41d3-ca0c-0305e82c3301", FormatUUID, 0, ""}, // Microsoft variant
		{"3f2504e04f8941d39a0c0305e82c3301", FormatUUID, 0, ""},
		{"{3f2504e0-4f89-41d3-9a0c-0305e82c3301}", FormatUUID, 0, ""},
		{"urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301", FormatUUID, 0, ""},
		{"3f2504e0-4f89-41d3-9a0c-0305e82c330g", FormatUUID, 0, ""},
		{"3f2504e0_4f89-41d3-9a0c-0305e82c3301", FormatUUID, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.format.String()+"/"+tt.raw, func(t *testing.T) {
			got, err := ParseKey(tt.raw, tt.format, tt.max)
			if tt.want == "" {
				assert.Error(t, err, "got %q", got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestParseKeyDetail: a key in another spelling of a UUID is told its form,
// not that it is longer than allowed.
func TestParseKeyDetail(t *testing.T) {
	const v4 = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	tests := []struct {
		raw    string
		format Format
		max    int
		detail error
	}{
		{"{" + v4 + "}", FormatUUID, 36, detailNotUUID},
		{"urn:uuid:" + v4, FormatUUIDv4, 36, detailNotUUID},
		{strings.Repeat("a", 300), FormatUUIDv7, 36, detailNotUUID},
		{"xyz", FormatUUID, 36, detailNotUUID},
		{v4, FormatUUID, 35, keyTooLong(35)},
		{"abcd", FormatToken, 3, keyTooLong(3)},
		{strings.Repeat("a", 256), FormatToken, 0, keyTooLong(DefaultMaxKeyLength)},
	}
	for _, tt := range tests {
		_, err := ParseKey(tt.raw, tt.format, tt.max)
		assert.Equal(t, tt.detail, err, "%s %q", tt.format, tt.raw)
	}
}

// FuzzParseKey: never panics; an accepted key is well formed, its sf-string
// form parses to itself, and parsing is idempotent.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"\\"`, "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70", `"`, "", "\x7f", "é"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, raw string, fm uint8) {
		format := Format(fm % 4)
		k, err := ParseKey(raw, format, 0)
		if err != nil {
			return
		}
		if k == "" || len(k) > DefaultMaxKeyLength {
			t.Fatalf("accepted %q as %q", raw, k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x21 || k[i] > 0x7e {
				t.Fatalf("accepted key %q has byte %#x", k, k[i])
			}
		}
		if format != FormatToken && (len(k) != 36 || strings.ToLower(k) != k) {
			t.Fatalf("accepted UUID %q is not canonical lower case", k)
		}
		again, err := ParseKey(k, format, 0)
		if err != nil && !(len(k) > 0 && k[0] == '"') {
			t.Fatalf("normalized key %q no longer parses: %v", k, err)
		}
		if err == nil && k[0] != '"' && again != k {
			t.Fatalf("parse is not idempotent: %q -> %q", k, again)
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(k) + `"`
		if back, err := ParseKey(quoted, format, 0); err != nil || back != k {
			t.Fatalf("sf-string %s of %q parsed as %q, %v", quoted, k, back, err)
		}
	})
}

func TestQueryKey(t *testing.T) {
	v, err := queryKey("a=1&request_id=k%2F1&b", "request_id")
	require.NoError(t, err)
	assert.Equal(t, "k/1", v)
	_, err = queryKey("a=1", "request_id")
	assert.Equal(t, errKeyMissing, err)
	_, err = queryKey("request_id=%zz", "request_id")
	assert.Error(t, err)
	v, err = queryKey("request%5Fid=x", "request_id")
	require.NoError(t, err)
	assert.Equal(t, "x", v)
}

func TestBodyKey(t *testing.T) {
	ptr, err := parsePointer("/a/1/b~0c")
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "1", "b~c"}, ptr)
	v, err := bodyKey([]byte(`{"a":[0,{"b~c":"k"}]}`), ptr)
	require.NoError(t, err)
	assert.Equal(t, "k", v)
	for _, body := range []string{``, `{}`, `{"a":null}`, `{"a":[0]}`, `{"a":{"1":{}}}`, `{"a":[0,{"b~c":null}]}`} {
		_, err := bodyKey([]byte(body), ptr)
		assert.Equal(t, errKeyMissing, err, body)
	}
	_, err = bodyKey([]byte(`{"a":[0,{"b~c":1}]}`), ptr)
	assert.Equal(t, detailNotString, err)
}

// decodeScope inverts appendScope (test-only): decodability proves injectivity.
func decodeScope(s string) (principal, operation string, kind byte, key string, hashed bool, ok bool) {
	if !strings.HasPrefix(s, scopeVersion) {
		return
	}
	s = s[len(scopeVersion):]
	if s == "" {
		return
	}
	hashed = s[0] == 'h'
	if s[0] != 'p' && s[0] != 'h' {
		return
	}
	s = s[1:]
	field := func() (string, bool) {
		i := strings.IndexByte(s, ':')
		if i < 0 {
			return "", false
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil {
			return "", false
		}
		s = s[i+1:]
		var out []byte
		for len(out) < n {
			if s == "" {
				return "", false
			}
			if s[0] == '%' {
				if len(s) < 3 {
					return "", false
				}
				b, err := strconv.ParseUint(s[1:3], 16, 8)
				if err != nil {
					return "", false
				}
				out = append(out, byte(b))
				s = s[3:]
				continue
			}
			out = append(out, s[0])
			s = s[1:]
		}
		return string(out), len(out) == n
	}
	var okp, oko, okk bool
	principal, okp = field()
	operation, oko = field()
	if s == "" {
		return
	}
	kind, s = s[0], s[1:]
	key, okk = field()
	ok = okp && oko && okk && s == ""
	return
}

func checkScope(t *testing.T, principal, operation string, kind byte, key string) {
	t.Helper()
	enc := string(appendScope(nil, principal, operation, kind, key))
	if !utf8.ValidString(enc) || strings.ContainsAny(enc, "\x00\r\n") {
		t.Fatalf("scope %q is not valid UTF-8 without NUL/CR/LF", enc)
	}
	p, o, k, key2, hashed, ok := decodeScope(enc)
	if !ok || o != operation || k != kind || key2 != key {
		t.Fatalf("scope %q of (%q, %q, %c, %q) decodes to (%q, %q, %c, %q, ok=%v)", enc, principal, operation, kind, key, p, o, k, key2, ok)
	}
	if hashed != (len(principal) > maxPrincipal) || (!hashed && p != principal) {
		t.Fatalf("scope %q: principal %q decoded as %q (hashed %v)", enc, principal, p, hashed)
	}
}

// TestScopeInjective: random triples from a small, collision-prone alphabet
// decode back to themselves, and distinct triples never share an encoding.
func TestScopeInjective(t *testing.T) {
	alphabet := []string{"a", ":", "%", "1", "0", "%3A", "\x00", "\xff", "é", "\u2028", "p", "k", "f", "1:", ""}
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var b strings.Builder
		for n := r.IntN(5); n > 0; n-- {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	seen := make(map[string][4]string)
	for i := 0; i < 50000; i++ {
		p, o, k := gen(), gen(), gen()
		kind := byte("kf"[r.IntN(2)])
		checkScope(t, p, o, kind, k)
		enc := string(appendScope(nil, p, o, kind, k))
		tuple := [4]string{p, o, string(kind), k}
		if prev, ok := seen[enc]; ok && prev != tuple {
			t.Fatalf("%q and %q share the scope %q", prev, tuple, enc)
		}
		seen[enc] = tuple
	}
	long := strings.Repeat("x", maxPrincipal+1)
	checkScope(t, long, "op", kindKey, "k")
	assert.NotEqual(t, appendScope(nil, long, "op", kindKey, "k"), appendScope(nil, long+"y", "op", kindKey, "k"))
}

// TestScopeFastPaths: the scope of a keyed request without a principal,
// from the policy's head encoded at Compile, is appendScope's, and so is a
// key field appended by appendKeyField, for every visible ASCII key
// (what ParseKey returns); appendFieldString's one- and two-digit lengths
// are strconv's, up to lengths of three and four digits.
func TestScopeFastPaths(t *testing.T) {
	for _, op := range []string{"createOrder", "o", "op%:é\x01", strings.Repeat("o", 99), strings.Repeat("o", maxOperationLength)} {
		p := MustCompile(Spec{Operation: op, Semantics: Strict})
		for _, key := range []string{"k", "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70", strings.Repeat("k", 255), "%k:", "a%", "%", "!~"} {
			got := appendKeyField(append([]byte(nil), p.anonKeyScope...), key)
			assert.Equal(t, string(appendScope(nil, "", op, kindKey, key)), string(got), "op %q key %q", op, key)
			assert.Equal(t, string(appendScope(nil, "alice", op, kindKey, key)),
				string(appendKeyField(appendScopeHead(nil, "alice", op, kindKey), key)), "op %q key %q", op, key)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		key := make([]byte, 1+r.IntN(120))
		for i := range key {
			key[i] = byte(0x21 + r.IntN(0x7e-0x21+1))
		}
		assert.Equal(t, string(appendFieldString([]byte("ab"), string(key))), string(appendKeyField([]byte("ab"), string(key))))
	}
	for _, n := range []int{0, 9, 10, 99, 100, 101, 999, 1000, 1600} {
		s := strings.Repeat("x", n)
		want := strconv.Itoa(n) + ":" + s
		assert.Equal(t, want, string(appendFieldString(nil, s)))
		assert.Equal(t, "ab"+want, string(appendFieldString([]byte("ab"), s)))
	}
}

func FuzzScope(f *testing.F) {
	f.Add("alice", "createOrder", "key-1")
	f.Add("a:1:b", "%", "\x00\xff")
	f.Fuzz(func(t *testing.T, principal, operation, key string) {
		checkScope(t, principal, operation, kindKey, key)
	})
}

func TestRecordRoundTrip(t *testing.T) {
	h := http.Header{
		"Content-Type": {"application/json"},
		"Location":     {"/a"},
		"Link":         {"<x>", "<y>"},
		"Set-Cookie":   {"no"},
		"X-Bad":        {"a\r\nInjected: 1"},
	}
	allow := []string{"Content-Type", "Location", "Link", "X-Bad"}
	b := appendRecordHead(nil, 201, h, allow)
	b = append(b, `{"ok":true}`...)
	var sr storedResponse
	require.NoError(t, decodeRecord(b, &sr, nil))
	assert.Equal(t, 201, sr.status)
	assert.False(t, sr.notReplayable)
	assert.Equal(t, `{"ok":true}`, string(sr.body))
	assert.Equal(t, []headerField{
		{"Content-Type", "application/json"}, {"Location", "/a"}, {"Link", "<x>"}, {"Link", "<y>"}, {"X-Bad", "aInjected: 1"},
	}, sr.header)

	nr := appendRecordHead(nil, 200, h, allow[:1])
	nr[1] |= flagNotReplayable
	require.NoError(t, decodeRecord(nr, &sr, nil))
	assert.True(t, sr.notReplayable)
	assert.Empty(t, sr.body)
	assert.Error(t, decodeRecord(append(nr, 'x'), &sr, nil), "a not-replayable record has no body")
}

// tagKey keeps apart fpKeys that differ in any of their words, the
// keylessKey bit of the policy word included (a tag is one word of them).
func TestRecordTagKey(t *testing.T) {
	base := fpKey{digest: 0x0123456789abcdef, n: 1024, policy: 3}
	seen := map[uint64]fpKey{tagKey(base): base}
	for _, k := range []fpKey{
		{digest: base.digest + 1, n: base.n, policy: base.policy},
		{digest: base.digest, n: base.n + 1, policy: base.policy},
		{digest: base.digest, n: base.n, policy: base.policy + 1},
		{digest: base.digest, n: base.n, policy: base.policy | keylessKey},
		{digest: base.digest, n: 0, policy: base.policy},
		{},
	} {
		w := tagKey(k)
		if o, ok := seen[w]; ok {
			t.Errorf("tagKey(%+v) == tagKey(%+v)", k, o)
		}
		seen[w] = k
	}
	assert.Equal(t, newRecordTag(5, base), recordTag{domain: 5, key: tagKey(base)})
}

// A tagged record decodes as the untagged one, and its tag reads back; a
// tagged record too short for its tag is corrupt, and an untagged one has
// no tag.
func TestRecordTag(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Location": {"/a"}}
	allow := []string{"Content-Type", "Location"}
	for _, tag := range []recordTag{
		newRecordTag(1<<64-3, fpKey{digest: 0x0123456789abcdef, n: 1 << 20, policy: 300}),
		{domain: 1},
		{domain: 1<<64 - 1, key: 1<<64 - 1},
	} {
		for _, body := range []string{`{"ok":true}`, ""} {
			plain := append(appendRecordHead(nil, 201, h, allow), body...)
			tagged := appendRecordTag(bytes.Clone(plain), &tag)
			assert.Equal(t, byte(flagTagged), tagged[1])
			assert.Len(t, tagged, len(plain)+16, "a tag is two words")
			var want, got storedResponse
			require.NoError(t, decodeRecord(plain, &want, nil))
			require.NoError(t, decodeRecord(tagged, &got, nil))
			assert.Equal(t, want, got)
			back, rest, ok := cutRecordTag(tagged)
			require.True(t, ok)
			assert.Equal(t, tag, back)
			assert.Equal(t, plain[2:], rest[2:])
			_, _, ok = cutRecordTag(plain)
			assert.False(t, ok)

			for n := 0; n < recordHeaderReserve+recordTagLen; n++ {
				short := append(bytes.Clone(tagged[:min(n, 2)]), make([]byte, max(0, n-2))...)
				_, _, ok := cutRecordTag(short)
				assert.False(t, ok, "%d bytes", n)
				assert.Error(t, decodeRecord(short, &got, nil), "%d bytes", n)
			}
		}
	}
	nr := appendRecordTag(appendRecordHead(nil, 200, h, allow), &recordTag{domain: 9})
	nr[1] |= flagNotReplayable
	var sr storedResponse
	require.NoError(t, decodeRecord(nr, &sr, nil))
	assert.True(t, sr.notReplayable)
	assert.Empty(t, sr.body)
	unknown := appendRecordHead(nil, 201, h, allow)
	unknown[1] = 1 << 2
	assert.Error(t, decodeRecord(unknown, &sr, nil), "an unknown flag")
}

// appendRecordHeadTwoPass is appendRecordHead as it was (the fields
// counted first, then written): the one-pass encoding must match it byte for byte.
func appendRecordHeadTwoPass(dst []byte, status int, h http.Header, allow []string) []byte {
	dst = append(dst, recordVersion, 0)
	dst = binary.AppendUvarint(dst, uint64(status))
	n := 0
	for _, name := range allow {
		n += len(h[name])
	}
	if n > maxRecordHeaders {
		n = maxRecordHeaders
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, name := range allow {
		for _, v := range h[name] {
			if n == 0 {
				return dst
			}
			n--
			dst = binary.AppendUvarint(dst, uint64(len(name)))
			dst = append(dst, name...)
			v = sanitizeHeaderValue(v)
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		}
	}
	return dst
}

func TestRecordHeadOnePass(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	names := []string{"Content-Type", "Location", "Link", "X-A", "Set-Cookie"}
	capped := 0
	for i := 0; i < 2000; i++ {
		h := http.Header{}
		long := i%8 == 0 // many values: past maxRecordHeaders, often
		for _, name := range names {
			for j := rng.IntN(3 * maxRecordHeaders / 2); j > 0 && (long || rng.IntN(4) > 0); j-- {
				h[name] = append(h[name], strings.Repeat("v\r", rng.IntN(4)))
			}
		}
		allow := names[:rng.IntN(len(names)+1)]
		n := 0
		for _, name := range allow {
			n += len(h[name])
		}
		if n > maxRecordHeaders {
			capped++
		}
		status := 200 + rng.IntN(400)
		want := appendRecordHeadTwoPass([]byte("x"), status, h, allow)
		got := appendRecordHead([]byte("x"), status, h, allow)
		require.Equal(t, want, got, "headers %v allow %v", h, allow)
	}
	require.Greater(t, capped, 20, "too few cases past maxRecordHeaders")
}

// FuzzDecodeRecord: decoding never panics; what decodes re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(append(appendRecordHead(nil, 201, http.Header{"Content-Type": {"a/b"}, "Location": {"/x"}}, []string{"Content-Type", "Location"}), "body"...))
	f.Add([]byte{1, 0, 200, 1, 0})
	f.Add([]byte{1, 1, 200, 1, 0})
	f.Add([]byte{})
	f.Add([]byte{2, 0, 200, 1, 0})
	f.Add(appendRecordTag(append(appendRecordHead(nil, 201, http.Header{"Location": {"/x"}}, []string{"Location"}), "body"...),
		&recordTag{domain: 7, key: tagKey(fpKey{digest: 1 << 60, n: 1024, policy: 3})}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sr storedResponse
		if err := decodeRecord(b, &sr, nil); err != nil {
			return
		}
		if sr.status < 200 || sr.status > 599 {
			t.Fatalf("decoded status %d", sr.status)
		}
		h := http.Header{}
		var allow []string
		for _, f := range sr.header {
			if !validToken(f.name) {
				t.Fatalf("decoded header name %q", f.name)
			}
			if _, ok := h[f.name]; !ok {
				allow = append(allow, f.name)
			}
			h[f.name] = append(h[f.name], f.value)
		}
		re := appendRecordHead(nil, sr.status, h, allow)
		if sr.notReplayable {
			re[1] |= flagNotReplayable
		}
		re = append(re, sr.body...)
		tag, _, tagged := cutRecordTag(b)
		if tagged {
			re = appendRecordTag(re, &tag)
		}
		var back storedResponse
		if err := decodeRecord(re, &back, nil); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if back.status != sr.status || !bytes.Equal(back.body, sr.body) || len(back.header) != len(sr.header) {
			t.Fatalf("round trip changed the record: %+v -> %+v", sr, back)
		}
		if got, _, ok := cutRecordTag(re); ok != tagged || got != tag {
			t.Fatalf("round trip changed the tag: %+v -> %+v", tag, got)
		}
	})
}

func TestAppendJSONString(t *testing.T) {
	assert.Equal(t, `"a\"b\\c\u000A\ufffdé"`, string(appendJSONString(nil, "a\"b\\c\n\xffé")))
}

// TestSWARFastPaths: appendFieldString, sanitizeHeaderValue,
// validHeaderValue and visibleASCII, which take eight plain bytes at a time,
// agree with their byte-at-a-time definitions (appendEscaped over the whole
// string, validHeaderValueByte, 0x21 to 0x7E)
// on strings of every length up to 40 mixing plain bytes with every byte
// that must be escaped or dropped, at every position.
func TestSWARFastPaths(t *testing.T) {
	refField := func(s string) []byte {
		return appendEscaped(append(strconv.AppendInt(nil, int64(len(s)), 10), ':'), s)
	}
	refSanitize := func(v string) string {
		var b []byte
		for j := 0; j < len(v); j++ {
			if validHeaderValueByte(v[j]) {
				b = append(b, v[j])
			}
		}
		return string(b)
	}
	refVisible := func(s string) bool {
		for j := 0; j < len(s); j++ {
			if s[j] < 0x21 || s[j] > 0x7e {
				return false
			}
		}
		return true
	}
	check := func(s string) {
		t.Helper()
		if got, want := appendFieldString(nil, s), refField(s); !bytes.Equal(got, want) {
			t.Fatalf("appendFieldString(%q) = %q, want %q", s, got, want)
		}
		if got, want := sanitizeHeaderValue(s), refSanitize(s); got != want {
			t.Fatalf("sanitizeHeaderValue(%q) = %q, want %q", s, got, want)
		}
		if got, want := validHeaderValue(s), refSanitize(s) == s; got != want {
			t.Fatalf("validHeaderValue(%q) = %v, want %v", s, got, want)
		}
		if got, want := visibleASCII(s), refVisible(s); got != want {
			t.Fatalf("visibleASCII(%q) = %v, want %v", s, got, want)
		}
	}
	plain := "abcdefghijklmnopqrstuvwxyz0123456789-_ ~/"
	for n := 0; n <= 40; n++ {
		base := []byte(plain + plain)[:n]
		check(string(base))
		for pos := 0; pos < n; pos++ {
			for c := 0; c < 256; c++ {
				if c >= 0x20 && c < 0x7f && c != '%' {
					continue
				}
				b := bytes.Clone(base)
				b[pos] = byte(c)
				check(string(b))
				if pos+1 < n { // a byte that carries or borrows into a plain neighbour
					b[pos+1] = 0x7e
					check(string(b))
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			if rng.IntN(8) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = plain[rng.IntN(len(plain))]
			}
		}
		check(string(b))
		check("é" + string(b) + "日本")
	}
}

// parseUUIDByte is parseUUID as it was written first, a byte at a time:
// the reference for TestParseUUIDTable.
func parseUUIDByte(s string, format Format) (string, error) {
	if len(s) != 36 {
		return "", detailNotUUID
	}
	upper := false
	allZero, allF := true, true
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", detailNotUUID
			}
			continue
		}
		switch {
		case '0' <= c && c <= '9':
		case 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			upper = true
		default:
			return "", detailNotUUID
		}
		allZero = allZero && c == '0'
		allF = allF && (c == 'f' || c == 'F')
	}
	if allZero || allF {
		return "", detailNilUUID
	}
	hexVal := func(c byte) byte {
		switch {
		case '0' <= c && c <= '9':
			return c - '0'
		case 'a' <= c && c <= 'f':
			return c - 'a' + 10
		case 'A' <= c && c <= 'F':
			return c - 'A' + 10
		}
		return 0
	}
	version := hexVal(s[14])
	variant := hexVal(s[19])
	if variant&0xc != 0x8 || version < 1 || version > 8 {
		return "", detailUUIDVer
	}
	if (format == FormatUUIDv4 && version != 4) || (format == FormatUUIDv7 && version != 7) {
		return "", detailUUIDVer
	}
	if upper {
		s = strings.ToLower(s)
	}
	return s, nil
}

// TestParseUUIDTable: parseUUID answers as parseUUIDByte (the same key or
// the same error) for UUIDs with every byte value at every position, one
// or two at a time, and for random strings of hex digits and hyphens.
func TestParseUUIDTable(t *testing.T) {
	bases := []string{"0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70", "3F2504E0-4F89-41D3-9A0C-0305E82C3301",
		"00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", "FFFFFFFF-ffff-FFFF-ffff-FFFFFFFFFFFF",
		"00000000-0000-1000-8000-000000000000", "ffffffff-ffff-8fff-bfff-ffffffffffff"}
	formats := []Format{FormatUUID, FormatUUIDv4, FormatUUIDv7}
	check := func(s string) {
		for _, f := range formats {
			got, err := parseUUID(s, f)
			want, werr := parseUUIDByte(s, f)
			if got != want || err != werr {
				t.Fatalf("parseUUID(%q, %v) = %q, %v; want %q, %v", s, f, got, err, want, werr)
			}
		}
	}
	for _, b := range bases {
		check(b)
		for i := range len(b) {
			for c := range 256 {
				s := []byte(b)
				s[i] = byte(c)
				check(string(s))
				for _, j := range []int{14, 19, (i + 7) % len(b)} {
					s2 := []byte(string(s))
					s2[j] = "0fF9aA8b-g"[c%10]
					check(string(s2))
				}
			}
		}
		check(b[1:])
		check(b + "0")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		s := make([]byte, 36)
		for i := range s {
			s[i] = "0123456789abcdefABCDEF-"[r.IntN(23)]
		}
		s[8], s[13], s[18], s[23] = '-', '-', '-', '-'
		if r.IntN(4) == 0 {
			s[r.IntN(36)] = byte(r.IntN(256))
		}
		check(string(s))
	}
}

// TestEscapedPathFastPath: escapedPath is url.URL.EscapedPath, for paths
// holding every byte, with and without a RawPath.
func TestEscapedPathFastPath(t *testing.T) {
	check := func(u *url.URL) {
		t.Helper()
		if got, want := escapedPath(u), u.EscapedPath(); got != want {
			t.Fatalf("escapedPath(%#v) = %q, want %q", u, got, want)
		}
	}
	for _, p := range []string{"", "/", "*", "/*", "/orders", "/a b", "/a?b", "/%41", "/é"} {
		check(&url.URL{Path: p})
	}
	for c := 0; c < 256; c++ {
		check(&url.URL{Path: "/orders/" + string(rune(c))})
		check(&url.URL{Path: "/orders/" + string([]byte{byte(c)}) + "/x"})
	}
	for _, raw := range []string{"/a%2Fb", "/a%2fb/c", "/%7Euser", "/a b", "/x%zz", "/orders/1"} {
		u, err := url.Parse("http://h" + raw)
		if err != nil {
			continue
		}
		check(u)
		u.RawPath = raw // a RawPath that may not match Path
		check(u)
	}
}

func TestKeyFormatDetail(t *testing.T) {
	tests := []struct {
		key  KeySpec
		want string
	}{
		{KeySpec{Format: FormatUUID}, "the Idempotency-Key header must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form"},
		{KeySpec{Name: "x-request-id", Format: FormatUUIDv4}, "the X-Request-Id header must be a version 4 UUID (RFC 9562) in canonical 8-4-4-4-12 form"},
		{KeySpec{Carrier: CarrierQuery, Name: "key", Format: FormatUUIDv7}, "the key query parameter must be a version 7 UUID (RFC 9562) in canonical 8-4-4-4-12 form"},
		{KeySpec{Carrier: CarrierBody, Name: "/idempotency_key", MaxLength: 64}, "the body member /idempotency_key must be 1 to 64 visible ASCII characters"},
	}
	for _, tt := range tests {
		p := MustCompile(Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: Strict, Key: tt.key})
		assert.Equal(t, tt.want, p.KeyFormatDetail())
	}
}
