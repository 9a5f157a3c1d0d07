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
