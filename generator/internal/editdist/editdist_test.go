package editdist

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"x-idempotency", "x-idempotency", 0},
		{"x-idempotancy", "x-idempotency", 1},
		{"x-idempotent", "x-idempotency", 2},
		{"kitten", "sitting", 3},
		{"flaw", "lawn", 2},
		{strings.Repeat("a", MaxLen), strings.Repeat("a", MaxLen), 0},
		{strings.Repeat("a", MaxLen+1), "a", Far},
		{"a", strings.Repeat("a", MaxLen+1), Far},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%.20q, %.20q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%.20q, %.20q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}
