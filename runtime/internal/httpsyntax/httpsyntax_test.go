package httpsyntax

import (
	"strings"
	"testing"
)

// TestTcharTable: IsTchar's table is RFC 9110's tchar.
func TestTcharTable(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c))
		if IsTchar(byte(c)) != want {
			t.Fatalf("IsTchar(%#x) = %v, want %v", c, !want, want)
		}
	}
}

// TestQueryPairs: the pairs are those net/url.ParseQuery keeps, names
// unescaped, values raw.
func TestQueryPairs(t *testing.T) {
	raw := "a=1&b%5Fc=x%2Fy&bad;=2&%zz=3&&d&e=%zz"
	var got []string
	for k, v := range QueryPairs(raw) {
		got = append(got, k+"|"+v)
	}
	want := []string{"a|1", "b_c|x%2Fy", "|", "d|", "e|%zz"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("QueryPairs(%q) = %q, want %q", raw, got, want)
	}
	for raw, want := range map[string]string{"x%2Fy": "x/y", "a+b": "a b", "plain": "plain"} {
		if v, ok := UnescapeValue(raw); !ok || v != want {
			t.Errorf("UnescapeValue(%q) = %q, %v", raw, v, ok)
		}
	}
	if _, ok := UnescapeValue("%zz"); ok {
		t.Error("UnescapeValue(%zz) ok")
	}
}
