package idemclient

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewKey(t *testing.T) {
	for f, v := range map[KeyFormat]uuid.Version{"": 7, FormatUUID: 7, FormatUUIDv7: 7, FormatToken: 7, FormatUUIDv4: 4} {
		k, err := NewKey(f)
		require.NoError(t, err)
		u, err := uuid.Parse(k)
		require.NoError(t, err)
		assert.Equal(t, v, u.Version(), "format %q", f)
		k2, _ := NewKey(f)
		assert.NotEqual(t, k, k2)
	}
}

func TestParsePointer(t *testing.T) {
	toks, err := parsePointer("/a~1b/c~0d/")
	require.NoError(t, err)
	assert.Equal(t, []string{"a/b", "c~d", ""}, toks)
	for _, bad := range []string{"", "a", "/a~", "/a~2"} {
		_, err := parsePointer(bad)
		assert.Error(t, err, bad)
	}
}

func TestSetBodyKey(t *testing.T) {
	const k = "0190b7b0-0000-7000-8000-000000000001"
	for _, tc := range []struct {
		name, body, ptr string
		want            string // body out; "" when err
		existing        string
		err             bool
	}{
		{"insert first, keep spelling", `{"b": 1.50, "a":[3,1]}`, "/idempotency_key",
			`{"idempotency_key":"` + k + `","b": 1.50, "a":[3,1]}`, "", false},
		{"empty object", ` { } `, "/k", ` {"k":"` + k + `" } `, "", false},
		{"replace empty string", `{"x":1,"k" :  "" ,"y":2}`, "/k", `{"x":1,"k" :  "` + k + `" ,"y":2}`, "", false},
		{"replace null", `{"k":null}`, "/k", `{"k":"` + k + `"}`, "", false},
		{"replace the nil UUID", `{"k":"00000000-0000-0000-0000-000000000000"}`, "/k", `{"k":"` + k + `"}`, "", false},
		{"existing kept", `{"k":"mine"}`, "/k", `{"k":"mine"}`, "mine", false},
		{"nested", `{"meta":{"trace":"t"},"k":"" }`, "/meta/k", `{"meta":{"k":"` + k + `","trace":"t"},"k":"" }`, "", false},
		{"escaped names", `{"a/b":{"c~d":""}}`, "/a~1b/c~0d", `{"a/b":{"c~d":"` + k + `"}}`, "", false},
		{"skips nested lookalikes", `{"x":{"k":"no"},"k":""}`, "/k", `{"x":{"k":"no"},"k":"` + k + `"}`, "", false},
		{"not an object", `[1,2]`, "/k", "", "", true},
		{"parent missing: created", `{"a":1}`, "/meta/k", `{"meta":{"k":"` + k + `"},"a":1}`, "", false},
		{"parents missing: created", `{}`, "/meta/req/k", `{"meta":{"req":{"k":"` + k + `"}}}`, "", false},
		{"some parents missing", `{"meta":{"x":1}}`, "/meta/req/k", `{"meta":{"req":{"k":"` + k + `"},"x":1}}`, "", false},
		{"missing array index not created", `{}`, "/items/0/k", "", "", true},
		{"missing append index not created", `{}`, "/a/-/k", "", "", true},
		{"numeric member name last", `{}`, "/m/0", "", "", true},
		{"numeric member name in an existing object", `{"m":{}}`, "/m/0", `{"m":{"0":"` + k + `"}}`, "", false},
		{"numeric parent name in an existing object", `{"meta":{"x":1}}`, "/meta/0/k", `{"meta":{"0":{"k":"` + k + `"},"x":1}}`, "", false},
		{"dash parent name in an existing object", `{"a":{}}`, "/a/-/k", `{"a":{"-":{"k":"` + k + `"}}}`, "", false},
		{"numeric token below a created parent", `{"meta":{}}`, "/meta/req/0", "", "", true},
		{"parent not an object", `{"meta":[]}`, "/meta/k", "", "", true},
		{"member not a string", `{"k":5}`, "/k", "", "", true},
		{"invalid JSON", `{"k":`, "/k", "", "", true},
		{"trailing garbage", `{"k":""} x`, "/k", "", "", true},
		{"empty body", ``, "/k", "", "", true},
		// A member on the key's path named twice: parsers disagree on
		// which counts (encoding/json, the server's, takes the last), so
		// such a body is refused rather than keyed ambiguously.
		{"duplicate key member", `{"k":"","k":"other"}`, "/k", "", "", true},
		{"duplicate key member, both set", `{"k":"mine","x":1,"k":"mine"}`, "/k", "", "", true},
		{"duplicate key member, escaped spelling", `{"k":"","\u006b":"other"}`, "/k", "", "", true},
		{"duplicate parent", `{"meta":{"k":""},"meta":{}}`, "/meta/k", "", "", true},
		{"duplicate parent, key missing", `{"meta":{},"meta":{"x":1}}`, "/meta/k", "", "", true},
		{"duplicate in the nested key's object", `{"meta":{"k":null,"k":"a"}}`, "/meta/k", "", "", true},
		{"duplicates off the path are the body's business", `{"x":1,"x":2,"meta":{"y":1,"y":2},"k":"k"}`, "/meta/k",
			`{"x":1,"x":2,"meta":{"k":"` + k + `","y":1,"y":2},"k":"k"}`, "", false},
		{"the key's name as a value", `{"a":"k","k":""}`, "/k", `{"a":"k","k":"` + k + `"}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			toks, err := parsePointer(tc.ptr)
			require.NoError(t, err)
			out, existing, err := setBodyKey([]byte(tc.body), toks, k)
			if tc.err {
				assert.ErrorIs(t, err, ErrBadKeyCarrier)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(out))
			assert.Equal(t, tc.existing, existing)
			assert.True(t, json.Valid(out))
		})
	}
}

// TestFillBodyKey: fillBodyKey is setBodyKey that never inserts a member
// or a parent; it fills one that carries no key and keeps a carried one.
func TestFillBodyKey(t *testing.T) {
	const k = "0190b7b0-0000-7000-8000-000000000001"
	for _, tc := range []struct {
		body, ptr, want, existing string
		err                       bool
	}{
		{`{"k":"","a":1}`, "/k", `{"k":"` + k + `","a":1}`, "", false},
		{`{"k":null}`, "/k", `{"k":"` + k + `"}`, "", false},
		{`{"k":"00000000-0000-0000-0000-000000000000"}`, "/k", `{"k":"` + k + `"}`, "", false},
		{`{"m":{"k":""}}`, "/m/k", `{"m":{"k":"` + k + `"}}`, "", false},
		{`{"k":"mine"}`, "/k", `{"k":"mine"}`, "mine", false},
		{`{"a":1}`, "/k", "", "", true},
		{`{}`, "/k", "", "", true},
		{`{"m":{}}`, "/m/k", "", "", true},
		{`{"a":1}`, "/m/k", "", "", true},
		{`{"k":5}`, "/k", "", "", true},
		{`{"k":"","k":""}`, "/k", "", "", true},
		{`{"k":`, "/k", "", "", true},
	} {
		toks, err := parsePointer(tc.ptr)
		require.NoError(t, err)
		out, existing, err := fillBodyKey([]byte(tc.body), toks, k)
		if tc.err {
			assert.ErrorIs(t, err, ErrBadKeyCarrier, tc.body)
			continue
		}
		require.NoError(t, err, tc.body)
		assert.Equal(t, tc.want, string(out), tc.body)
		assert.Equal(t, tc.existing, existing, tc.body)
	}
}

func TestSetQueryKey(t *testing.T) {
	assert.Equal(t, "request_id=k1", setQueryKey("", "request_id", "k1"))
	assert.Equal(t, "b=%2F&a=1&request_id=k1", setQueryKey("b=%2F&a=1", "request_id", "k1"), "other pairs keep their spelling and order")
	assert.Equal(t, "a=1&request_id=k%2B1", setQueryKey("request_id=&a=1", "request_id", "k+1"), "an empty pair is replaced")
	assert.Equal(t, "a=1&request_id=k1", setQueryKey("request_id=00000000-0000-0000-0000-000000000000&a=1", "request_id", "k1"), "so is the nil UUID")
	assert.Equal(t, "a=1&request_id=k1", setQueryKey("request_id=k0&a=1&request_id=", "request_id", "k1"), "every pair of the name goes")
	assert.Equal(t, "a=1&request_id=k1", setQueryKey("&request_id=k0&&a=1&", "request_id", "k1"), "empty pairs go")
	// One buffer: the key is on the hot path of every query-carried call.
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { setQueryKey("b=%2F&a=1&request_id=", "request_id", "k1") }))
	assert.Equal(t, "", headerKey(http.Header{"Idempotency-Key": {"00000000-0000-0000-0000-000000000000"}}, "Idempotency-Key"))
	for _, tc := range []struct {
		raw    string
		key    string
		pairs  int
		others bool
	}{
		{"request_id=00000000-0000-0000-0000-000000000000", "", 1, false},
		{"a=1&request_id=k1", "k1", 1, false},
		{"request_id=", "", 1, false},
		{"request_id", "", 1, false},
		{"a=1", "", 0, false},
		{"request_id=&request_id=abc", "abc", 2, false},
		{"request%5Fid=k%2B1&request_id=k%2b1", "k+1", 2, false},
		{"request_id=k%2B1&request_id=k+1", "k+1", 2, true},
		{"request_id=abc&request_id=abc&request_id=", "abc", 3, false},
		{"request_id=a&request_id=b", "a", 2, true},
		// A pair holding a semicolon is skipped, as the server's parser does.
		{"request_id=K;x", "", 0, false},
		{"request_id=K;x&request_id=abc", "abc", 1, false},
		{"a=1;request_id=K", "", 0, false},
		// A badly escaped value is no key either (the server refuses it).
		{"request_id=%zz", "", 1, false},
		{"request_id=%zz&request_id=abc", "abc", 2, false},
		{"request_id=abc&request_id=%zz", "abc", 2, false},
	} {
		key, pairs, others := queryKey(tc.raw, "request_id")
		assert.Equal(t, tc.key, key, tc.raw)
		assert.Equal(t, tc.pairs, pairs, tc.raw)
		assert.Equal(t, tc.others, others, tc.raw)
	}
}

// FuzzSetBodyKey: whatever the body, setBodyKey either fails with
// ErrBadKeyCarrier or returns valid JSON in which the pointer names the key
// (or the caller's existing key) and nothing else changed.
func FuzzSetBodyKey(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"k":""}`, `{"k":null}`, `{"k":"x"}`, `{"m":{"k":""}}`,
		`{"m":{}}`, `[]`, `{"k":5}`, ` {"a" : [1, {"k":""}] , "k" : "" } `, `{"\u006b":""}`, `{"k":"","k":"y"}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	const key = "key-1"
	f.Fuzz(func(t *testing.T, body []byte, nested bool) {
		toks := []string{"k"}
		if nested {
			toks = []string{"m", "k"}
		}
		out, existing, err := setBodyKey(body, toks, key)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q from %q", out, body)
		}
		var in, got map[string]any
		if json.Unmarshal(body, &in) != nil || json.Unmarshal(out, &got) != nil {
			t.Fatalf("not objects: %q -> %q", body, out)
		}
		parent := got
		inParent := in
		if nested {
			parent, _ = got["m"].(map[string]any)
			if _, ok := in["m"]; !ok { // created
				if len(parent) != 1 {
					t.Fatalf("created m = %v in %q", got["m"], out)
				}
				in["m"] = map[string]any{}
			}
			inParent, _ = in["m"].(map[string]any)
		}
		want := key
		if existing != "" {
			want = existing
			if string(out) != string(body) {
				t.Fatalf("existing key but body changed: %q -> %q", body, out)
			}
			return // duplicate members make the decoded view ambiguous
		}
		// Duplicate names: encoding/json keeps the last; the splice edits the first.
		if dupName(body) {
			return
		}
		if parent["k"] != want {
			t.Fatalf("k = %v in %q", parent["k"], out)
		}
		delete(parent, "k")
		delete(inParent, "k")
		a, _ := json.Marshal(in)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Fatalf("other members changed: %s vs %s", a, b)
		}
	})
}

// dupName reports whether any object in body repeats a member name.
func dupName(body []byte) bool {
	dec := json.NewDecoder(jsonReader(body))
	var stack []map[string]bool
	expectKey := []bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = append(expectKey, true)
				continue
			case '[':
				stack = append(stack, nil)
				expectKey = append(expectKey, false)
				continue
			default:
				stack = stack[:len(stack)-1]
				expectKey = expectKey[:len(expectKey)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1] != nil && expectKey[n-1] {
				if stack[n-1][v] {
					return true
				}
				stack[n-1][v] = true
				expectKey[n-1] = false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1] != nil {
			expectKey[n-1] = true
		}
	}
}

func jsonReader(b []byte) *bytesReader { return &bytesReader{b: b} }

type bytesReader struct{ b []byte }

func (r *bytesReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
