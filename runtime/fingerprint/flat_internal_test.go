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

// TestFlatRunsMatchCold: arrays of objects alike, taken by flatShapes in
// one run, with an element it does not take at every position (another
// name, a member less or more, a value for the general path, white space,
// another order), far from the end of the input or near it (where it reads
// a padded copy), have the canonical text of a state with no shape cached
// (no flat path), and that of the state's second sight of the body (the
// shapes cached by the first).
func TestFlatRunsMatchCold(t *testing.T) {
	item := func(k int) string { return fmt.Sprintf(`{"sku":"s%d","qty":%d,"price":%d.5}`, k, k, k) }
	odd := []string{
		`{"sku":"x","qty":1,"prices":2}`,
		`{"sku":"x","qty":1}`,
		`{"sku":"x","qty":1,"price":2,"z":3}`,
		`{"sku":"x","qty":1.50,"price":2}`,
		`{"sku":"x","qty":{"a":1},"price":2}`,
		`{"sku":"x", "qty":1,"price":2}`,
		`{"qty":1,"sku":"x","price":2}`,
		`{"sku":"\u0041","qty":1,"price":2}`,
		`[1]`,
	}
	for _, n := range []int{1, 2, 3, 6} {
		for at := -1; at < n; at++ {
			for _, o := range odd {
				for _, pad := range []int{0, 300} {
					var b strings.Builder
					b.WriteString(`{"a":[`)
					for k := range n {
						if k > 0 {
							b.WriteByte(',')
						}
						if k == at {
							b.WriteString(o)
						} else {
							b.WriteString(item(k))
						}
					}
					b.WriteString(`],"z":"` + strings.Repeat("z", pad) + `"}`)
					body := []byte(b.String())
					cold := statePool.New().(*state)
					if !cold.canonJSON(body, nil) {
						t.Fatalf("%s: %v", body, cold.err)
					}
					want := string(cold.out)
					s := statePool.New().(*state)
					for round := range 2 {
						if !s.canonJSON(body, nil) {
							t.Fatalf("%s: round %d: %v", body, round, s.err)
						}
						if got := string(s.out); got != want {
							t.Fatalf("%s: round %d: canonical text\n%s\nwant\n%s", body, round, got, want)
						}
					}
				}
			}
		}
	}
}
