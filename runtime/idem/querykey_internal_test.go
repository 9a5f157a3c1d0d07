package idem

import (
	"net/url"
	"strings"
	"testing"
)

// checkQueryKey holds queryKey to net/url.ParseQuery (what r.URL.Query(),
// and so the handler and oapi-codegen's binding, see): a key it accepts is
// the parameter's single value there; one ParseQuery holds once, from a
// query it parsed without error, is accepted; and it refuses (never takes
// another value) where ParseQuery dropped a pair or holds several; it
// refuses a key as given more than once only when two pairs name it.
func checkQueryKey(t *testing.T, raw, name string) {
	t.Helper()
	vals, perr := url.ParseQuery(raw)
	got, err := queryKey(raw, name)
	if err == nil {
		if len(vals[name]) != 1 || vals[name][0] != got {
			t.Fatalf("queryKey(%q, %q) = %q; ParseQuery has %q", raw, name, got, vals[name])
		}
		return
	}
	if perr == nil && len(vals[name]) == 1 {
		t.Fatalf("queryKey(%q, %q) failed (%v); ParseQuery has %q", raw, name, err, vals[name])
	}
	if len(vals[name]) == 0 && err != errKeyMissing && err != detailBadQuery && err != detailMany {
		t.Fatalf("queryKey(%q, %q) = %v; ParseQuery has no value", raw, name, err)
	}
	if n := namedPairs(raw, name); err == detailMany && n < 2 {
		t.Fatalf("queryKey(%q, %q) = %v; %d pairs name it", raw, name, err, n)
	}
}

// namedPairs counts the pairs of a raw query whose name, unescaped, is
// name, of those ParseQuery reads (without a semicolon).
func namedPairs(raw, name string) int {
	n := 0
	for _, part := range strings.Split(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name && !strings.Contains(part, ";") {
			n++
		}
	}
	return n
}

func TestQueryKeyAgreesWithParseQuery(t *testing.T) {
	for _, raw := range []string{
		"key=abc;x=1", "x=1;key=abc", "key=abc;x=1&key=def", "key=a&key=b", "key=a&x=1;key=b",
		"key=%zz", "key=a&key=%zz", "k%zzey=a&key=b", "key", "key=", "=key", "&&key=a&&", "key=a+b%2F",
		"ke%79=v", "key=a;", ";key=a", "key;=a", "key=%zz&key=a", "key=%zz&key=%zz", "key=%zz&x=1",
	} {
		checkQueryKey(t, raw, "key")
	}
	v, err := queryKey("key=abc;x=1", "key")
	if err != errKeyMissing {
		t.Errorf(`queryKey("key=abc;x=1") = %q, %v: ParseQuery drops the pair`, v, err)
	}
	if v, err = queryKey("key=abc;x=1&key=def", "key"); err != nil || v != "def" {
		t.Errorf(`queryKey("key=abc;x=1&key=def") = %q, %v; want "def"`, v, err)
	}
	for raw, want := range map[string]error{
		"key=%zz&x=1": detailBadQuery, "x=1&key=%zz": detailBadQuery,
		"key=%zz&key=a": detailMany, "key=a&key=%zz": detailMany, "key=%zz&key=%zz": detailMany,
	} {
		if v, err = queryKey(raw, "key"); err != want {
			t.Errorf("queryKey(%q) = %q, %v; want %v", raw, v, err, want)
		}
	}
}

func FuzzQueryKey(f *testing.F) {
	for _, s := range []string{"key=abc;x=1", "a=1&key=k%2F1&b", "key=a&key=b", "key=%zz", "ke%79=v+w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkQueryKey(t, raw, "key")
	})
}
