package fingerprint

import (
	"fmt"
	"math/rand/v2"
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

// TestPointedObjectsMatchCold: in objects that a pointer reaches, the
// member loop takes the members of a cached shape that no pointer reaches
// (fastMembers), and leaves to the general path those that one does (an
// unordered array, a nested volatile member, a wildcard); the canonical
// text is that of a state with no shape cached, on the first sight of a
// body and on the next ones (shapes cached, also by the other hasher's
// bodies, in one pooled state).
func TestPointedObjectsMatchCold(t *testing.T) {
	pad := strings.Repeat("z", 40)
	cases := []struct {
		opts Options
		body string
	}{
		{Options{Unordered: []string{"/b"}}, `{"a":1,"b":[3,1,2],"c":"x"}`},
		{Options{Unordered: []string{"/b"}}, `{"b":[3,1,2],"a":1,"c":"x","d":[2,1]}`},
		{Options{Volatile: []string{"/x/y"}}, `{"a":1,"x":{"y":1,"z":2},"c":2}`},
		{Options{Volatile: []string{"/x/y"}}, `{"x":{"z":2,"y":[1]},"a":1}`},
		{Options{Volatile: []string{"/*/y"}}, `{"a":{"y":1,"z":2},"b":{"z":3,"y":4},"c":5}`},
		{Options{Volatile: []string{"/c"}}, `{"a":1,"b":2,"c":3}`},
		{Options{Volatile: []string{"/a"}}, `{"b":2,"a":1,"c":3}`},
		{Options{Volatile: []string{"/items/*/note"}}, `{"id":7,"items":[{"note":"x","q":1},{"note":"y","q":2}],"z":1}`},
		{Options{Unordered: []string{"/items/*/tags"}}, `{"id":7,"items":[{"q":1,"tags":[2,1]},{"q":2,"tags":[4,3]}],"z":1}`},
		// Volatile members, last in their object or not, with values the
		// member loop checks or leaves to the general path, far enough
		// from the end of the input for the member loop to take them.
		{Options{Volatile: []string{"/x/c"}}, `{"x":{"c":3},"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/x/c"}}, `{"x":{"b":1,"c":3},"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/x/c"}}, `{"x":{"b":1,"c":3 },"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/x/c"}}, `{"x":{"b":1,"c":"s"},"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/c"}}, `{"a":1,"c":"\u0041","b":2,"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/c"}}, `{"a":1,"c":"\n","b":2,"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/c"}}, `{"a":1,"c":{"x":[2,1]},"b":2,"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/c"}}, `{"a":1,"c":[2,1] ,"b":2,"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/c"}}, `{"a":1,"c":1.50,"b":2,"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/c", "/c/x"}, Unordered: []string{"/d"}}, `{"c":"x","a":1,"d":[2,1],"z":"` + pad + `"}`},
		{Options{Volatile: []string{"/sent_at"}}, `{"customer":"c","sent_at":"t","items":[{"sku":"a","qty":1},{"sku":"b","qty":2}],"note":"n","meta":{"b":"2","a":"1"}}`},
	}
	s := statePool.New().(*state)
	for _, c := range cases {
		h, err := New(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		// The same body without the pointers first: its shapes cached
		// without regard to them.
		for _, root := range []*node{nil, h.root} {
			cold := statePool.New().(*state)
			if !cold.canonJSON([]byte(c.body), root) {
				t.Fatalf("%s: %v", c.body, cold.err)
			}
			want := string(cold.out)
			for round := range 3 {
				if !s.canonJSON([]byte(c.body), root) {
					t.Fatalf("%s: round %d: %v", c.body, round, s.err)
				}
				if got := string(s.out); got != want {
					t.Fatalf("%+v %s (pointers: %v): round %d: canonical text\n%s\nwant\n%s", c.opts, c.body, root != nil, round, got, want)
				}
			}
		}
	}
}

// TestWarmMatchesColdRandom: bodies of a few recurring shapes (objects of
// names from a small set, arrays of objects alike, nested objects,
// values in canonical form or not, white space here and there), under
// hashers with and without Volatile and Unordered pointers, have in one
// pooled state, whose shapes and hints carry over from body to body, the
// canonical text (or the failure) of a state with nothing cached.
func TestWarmMatchesColdRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c", "sent_at", "items", "meta", "x", "a_longer_name_here"}
	scalar := func() string {
		return []string{`1`, `2.50`, `-0`, `1e3`, `"s"`, `"\u0041"`, `"\n"`, `true`, `null`, `12345678901234567890`, `0.5`,
			`"a somewhat longer string value"`}[r.IntN(12)]
	}
	var value func(depth int) string
	object := func(depth int, pool []string) string {
		var b strings.Builder
		b.WriteByte('{')
		n := r.IntN(len(pool) + 1)
		for k := range n {
			if k > 0 {
				b.WriteString([]string{",", ",", ",", " , "}[r.IntN(4)])
			}
			b.WriteString(`"` + pool[(k+r.IntN(2))%len(pool)] + `":` + value(depth+1))
		}
		b.WriteByte('}')
		return b.String()
	}
	value = func(depth int) string {
		if depth > 3 {
			return scalar()
		}
		switch r.IntN(8) {
		case 0:
			return `[` + scalar() + `,` + scalar() + `]`
		case 1:
			return `[ ` + scalar() + ` ]`
		case 2:
			var b strings.Builder
			b.WriteByte('[')
			for k := range r.IntN(4) {
				if k > 0 {
					b.WriteByte(',')
				}
				b.WriteString(object(depth+1, []string{"sku", "qty", "price"}))
			}
			b.WriteByte(']')
			return b.String()
		case 3:
			return object(depth, []string{"campaign", "channel", "y"})
		default:
			return scalar()
		}
	}
	var hashers []*Hasher
	for _, o := range []Options{{}, {Volatile: []string{"/sent_at"}}, {Volatile: []string{"/a", "/items/*/qty"}, Unordered: []string{"/b"}},
		{Volatile: []string{"/*/y"}}, {Unordered: []string{"/items", "/x/*"}}, {Volatile: []string{"/meta/channel", "/c"}}} {
		h, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		hashers = append(hashers, h)
	}
	s := statePool.New().(*state)
	for it := range 3000 {
		body := []byte(object(0, names) + strings.Repeat(" ", r.IntN(2)*40))
		for _, h := range hashers {
			cold := statePool.New().(*state)
			wantOK := cold.canonJSON(body, h.root)
			gotOK := s.canonJSON(body, h.root)
			if gotOK != wantOK || gotOK && string(s.out) != string(cold.out) {
				t.Fatalf("%d: %s: warm %v %s (%v), cold %v %s (%v)", it, body, gotOK, s.out, s.err, wantOK, cold.out, cold.err)
			}
		}
	}
}

// TestFlatPermutedSpans: the members of a run of objects alike whose names
// are out of order, each "name":value written with two 16-byte moves when
// it is at most 32 bytes long and the moves stay within the input (or its
// padded copy) and the output (putShort), and through putMember otherwise,
// at any position in the order (a longer member, white space after the
// colon, a member that ends near the end of the input), have the
// canonical text of a state with no shape cached.
func TestFlatPermutedSpans(t *testing.T) {
	for _, l := range []int{1, 14, 15, 16, 17, 25, 26, 27, 28, 40} {
		for _, ws := range []int{-1, 0, 1, 2} {
			// "b":"<l bytes>" is l+6 bytes: 31, 32 and 33 around 25-27.
			item := func(k int) string {
				mid := fmt.Sprintf(`"b":"%s"`, strings.Repeat(string(rune('a'+k%26)), l))
				if k%3 == ws {
					mid = `"b": "x"`
				}
				return fmt.Sprintf(`{"c":%d,%s,"a":%d}`, k, mid, 100-k)
			}
			for n := 1; n <= 5; n++ {
				var b strings.Builder
				b.WriteString(`{"z":[`)
				for k := range n {
					if k > 0 {
						b.WriteByte(',')
					}
					b.WriteString(item(k))
				}
				b.WriteString(`]}`)
				base := b.String()
				// The last object ends 2 bytes before the end of the
				// input; with padding after it, up to far from it.
				for pad := 0; pad <= 70; pad += 1 + pad/8 {
					body := []byte(base[:len(base)-1] + `,"zz":"` + strings.Repeat("p", pad) + `"}`)
					if pad == 0 {
						body = []byte(base)
					}
					cold := statePool.New().(*state)
					if !cold.canonJSON(body, nil) {
						t.Fatalf("%s: %v", body, cold.err)
					}
					want := string(cold.out)
					s := statePool.New().(*state)
					for round := range 3 {
						// No text of the last round where this one
						// writes.
						for j := range s.buf[:cap(s.buf)] {
							s.buf[:cap(s.buf)][j] = 0xFF
						}
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

// TestFlatRunLimits: a run of objects alike that fastMembers takes in one
// call (objs > 1) ends where s.mem has no room for another object, at an
// object it does not take whole (another value, a member less, white
// space around the separators, an escape, the end of the input near), and
// goes on from there as flatShapes's loop would; the canonical text is
// that of a state with no shape cached, for arrays longer than one run.
func TestFlatRunLimits(t *testing.T) {
	for _, sorted := range []bool{false, true} {
		testFlatRunLimits(t, sorted)
	}
}

// testFlatRunLimits is TestFlatRunLimits for objects whose names arrive
// out of order or (sorted) in order, where an object with fewer members
// (the first names) is taken too, and where some members are longer than
// putShort's 32 bytes.
func testFlatRunLimits(t *testing.T, sorted bool) {
	item := func(k int) string { return fmt.Sprintf(`{"c":%d,"b":"s%d","a":%d.5}`, k, k, k%7) }
	odd := []string{
		``, // none
		`{"c":1,"b":"x","a":2.50}`,
		`{"c":1,"b":"x"}`,
		`{"c":1,"b":"x","a":2 }`,
		`{"c":1,"b":"\u0041","a":2}`,
		`{"c":1,"b":"x","a":2,"z":1}`,
		`{"c":1,"a":2,"b":"x"}`,
		`{}`,
	}
	if sorted {
		item = func(k int) string {
			return fmt.Sprintf(`{"a":%d.5,"b":"s%s","c":%d}`, k%7, strings.Repeat("b", k%40), k)
		}
		odd = []string{
			`{"a":2.50,"b":"x","c":1}`,
			`{"a":2,"b":"x"}`,
			`{"a":2}`,
			`{"a":2,"b":"x","c":1 }`,
			`{"a":2,"b":"\u0041","c":1}`,
			`{"a":2,"b":"x","c":1,"d":1}`,
			`{"a":2,"c":1,"b":"x"}`,
			`{}`,
		}
	}
	for _, n := range []int{2, 20, 21, 22, 23, 43, 64, 70} {
		for _, at := range []int{0, 1, 20, 21, 22, n - 1} {
			if at >= n {
				continue
			}
			for _, o := range odd {
				for _, sep := range []string{",", ", "} {
					for _, pad := range []int{0, 40, 300} {
						var b strings.Builder
						b.WriteString(`{"z":[`)
						for k := range n {
							if k > 0 {
								if k == at+1 {
									b.WriteString(sep)
								} else {
									b.WriteByte(',')
								}
							}
							if k == at && o != "" {
								b.WriteString(o)
							} else {
								b.WriteString(item(k))
							}
						}
						b.WriteString(`],"y":"` + strings.Repeat("y", pad) + `"}`)
						body := []byte(b.String())
						cold := statePool.New().(*state)
						if !cold.canonJSON(body, nil) {
							t.Fatalf("%s: %v", body, cold.err)
						}
						want := string(cold.out)
						s := statePool.New().(*state)
						for round := range 3 {
							for j := range s.buf[:cap(s.buf)] {
								s.buf[:cap(s.buf)][j] = 0xFF
							}
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
}

// TestPutObjectsLimits: putObjects writes no byte past the length of buf
// (here followed by sentinels in the same array) nor reads past that of
// src, whatever their room, and what it wrote is the objects it reports,
// whole, in canonical order.
func TestPutObjectsLimits(t *testing.T) {
	// The second's last member in canonical order is 32 bytes long: the
	// most a member moves, writing the most past the object's end.
	for _, c := range []string{"1", `"` + strings.Repeat("c", 26) + `"`} {
		testPutObjectsLimits(t, `{"c":`+c+`,"bb":"xyz","a":22}`, `{"a":22,"bb":"xyz","c":`+c+`}`)
	}
}

func testPutObjectsLimits(t *testing.T, obj, want string) {
	for _, pad := range []int{0, 8, 31, 32, 40} {
		text := obj + "," + obj + "," + obj + strings.Repeat(" ", pad)
		var ms []member
		for o := range 3 {
			at := o * (len(obj) + 1)
			for _, name := range []string{`"c"`, `"bb"`, `"a"`} {
				ks := at + strings.Index(obj, name)
				ke := ks + len(name)
				ve := ke + 1 + strings.IndexAny(obj[ke-at+1:], ",}")
				ms = append(ms, member{ks: ks, ke: ke, vs: ke + 1, ve: ve, klen: len(name) - 2})
			}
		}
		for l := range 200 {
			back := make([]byte, l+64)
			for j := range back {
				back[j] = 0xEE
			}
			buf := back[:l:l]
			src := []byte(text)[:len(text):len(text)]
			w, last, took := putObjects(buf, 0, src, ms, []int32{2, 1, 0}, -1)
			for j := l; j < len(back); j++ {
				if back[j] != 0xEE {
					t.Fatalf("pad %d, len %d: byte %d past buf written", pad, l, j-l)
				}
			}
			exp := strings.TrimSuffix(strings.Repeat(want+",", took), ",")
			if got := string(buf[:w]); got != exp {
				t.Fatalf("pad %d, len %d: wrote %q (%d objects), want %q", pad, l, got, took, exp)
			}
			if took > 0 && last != (took-1)*(len(want)+1) {
				t.Fatalf("pad %d, len %d: last %d", pad, l, last)
			}
			// The last member of the last object ends len(text)-pad-1:
			// a 32-byte read from it fits with 32-8 bytes of padding.
			if l >= 200-1 && took != 3 && pad >= 32 {
				t.Fatalf("pad %d, len %d: took %d of 3", pad, l, took)
			}
		}
	}
}
