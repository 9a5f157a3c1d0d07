package english

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		pl   []string
		want string
	}{
		{0, "warning", nil, "0 warnings"},
		{1, "warning", nil, "1 warning"},
		{2, "warning", nil, "2 warnings"},
		{1, "is", []string{"are"}, "1 is"},
		{3, "is", []string{"are"}, "3 are"},
	} {
		if got := Count(c.n, c.noun, c.pl...); got != c.want {
			t.Errorf("Count(%d, %q, %q) = %q, want %q", c.n, c.noun, c.pl, got, c.want)
		}
	}
	if Plural(1) != "" || Plural(2) != "s" {
		t.Errorf("Plural(1), Plural(2) = %q, %q", Plural(1), Plural(2))
	}
}
