package fingerprint

import (
	"fmt"
	"strings"
	"testing"
)

// TestFlatRoomNotAFailure: a member's object value of a cached shape that
// comes when the member memory has less room left than the shape has
// members is still taken flat (flatShape makes room), and not marked
// noFlat, which would keep every later object of the shape off the flat
// path in this pooled state; its canonical text is unchanged.
func TestFlatRoomNotAFailure(t *testing.T) {
	obj := `{"b":2,"a":1}`
	tail := `,"z":"` + strings.Repeat("z", 100) + `"}`
	// Around the first capacity of the member memory: where the shape's
	// members stop fitting.
	for n := minMem - 6; n <= minMem+2; n++ {
		s := statePool.New().(*state)
		if !s.canonJSON([]byte(`{"x":`+obj+`}`), nil) { // caches x's shape
			t.Fatal("first body")
		}
		var b strings.Builder
		b.WriteString("{")
		for k := range n {
			fmt.Fprintf(&b, `"m%02d":%d,`, k, k)
		}
		b.WriteString(`"x":` + obj + tail)
		body := []byte(b.String())
		if !s.canonJSON(body, nil) {
			t.Fatalf("n=%d: %v", n, s.err)
		}
		got := string(s.out)
		cold := statePool.New().(*state) // no shapes cached: no flat path
		if !cold.canonJSON(body, nil) {
			t.Fatal(cold.err)
		}
		if want := string(cold.out); got != want {
			t.Errorf("n=%d: canonical text\n%s\nwant\n%s", n, got, want)
		}
		h := s.hints[hintSlot(nameKey('x', 1), 1)]
		if h <= 0 {
			t.Fatalf("n=%d: no hint for x", n)
		}
		if s.shapes[h-1].noFlat {
			t.Errorf("n=%d: x's shape marked noFlat", n)
		}
	}
}
