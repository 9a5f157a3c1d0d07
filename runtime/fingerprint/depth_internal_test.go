package fingerprint

import (
	"strings"
	"testing"
)

// TestDepthIndependentOfCache: whether a body nests too deep does not
// depend on the shapes the state has cached from earlier bodies (a
// fingerprint must not differ between processes, or between a state's
// first and later uses). An object at the deepest level allowed may hold
// scalars but no array: a member loop that takes an array of scalars as
// one span must not take it there.
func TestDepthIndependentOfCache(t *testing.T) {
	for _, obj := range []string{`{"a":1,"b":1,"c":[1]}`, `{"a":1,"b":1,"c":[]}`, `{"a":1,"c":[1,2],"d":"x"}`, `{"a":1,"b":2}`,
		`{"x":1,"k":{"a":1,"c":[1]}}`, `{"x":1,"k":{"a":1,"b":2}}`} {
		for _, levels := range []int{MaxDepth - 3, MaxDepth - 2, MaxDepth - 1, MaxDepth} {
			body := []byte(strings.Repeat("[", levels) + obj + strings.Repeat("]", levels))
			// The same depth in objects: a member's object value, taken
			// whole after fastMembers stopped at its name.
			inObj := []byte(strings.Repeat(`{"w":`, levels) + obj + strings.Repeat("}", levels))
			cold := statePool.New().(*state)
			coldOK := cold.canonJSON(body, nil)
			coldOut := string(cold.out)
			coldObj := statePool.New().(*state)
			coldObjOK := coldObj.canonJSON(inObj, nil)
			coldObjOut := string(coldObj.out)

			warm := statePool.New().(*state)
			for range 4 {
				if !warm.canonJSON([]byte(obj), nil) {
					t.Fatalf("%s: %v", obj, warm.err)
				}
				if !warm.canonJSON([]byte(`[`+obj+`,`+obj+`]`), nil) {
					t.Fatalf("%s: %v", obj, warm.err)
				}
			}
			// Bodies that grow the state's member memory (wide, and wide
			// at every level of a deep one), so that the deep body's members
			// fit in it and the member loops take them.
			var wide, deepWide strings.Builder
			wide.WriteString("{")
			for i := range 3000 {
				if i > 0 {
					wide.WriteString(",")
				}
				wide.WriteString(`"m` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `":1`)
			}
			wide.WriteString("}")
			for range MaxDepth - 1 {
				deepWide.WriteString(`{"a":1,"b":2,"w":`)
			}
			deepWide.WriteString("1" + strings.Repeat("}", MaxDepth-1))
			for _, b := range []string{wide.String(), deepWide.String(), `{"w":[` + strings.Repeat(obj+",", 300) + obj + `]}`} {
				if !warm.canonJSON([]byte(b), nil) {
					t.Fatalf("%.40s: %v", b, warm.err)
				}
			}
			for range 4 {
				for _, b := range []string{obj, `{"w":{"w":` + obj + `}}`} {
					if !warm.canonJSON([]byte(b), nil) {
						t.Fatalf("%.40s: %v", b, warm.err)
					}
				}
			}
			warmOK := warm.canonJSON(body, nil)
			if warmOK != coldOK || (warmOK && string(warm.out) != coldOut) {
				t.Errorf("%s at depth %d: accepted %v by a fresh state, %v by one that saw its shape", obj, levels, coldOK, warmOK)
			}
			warmObjOK := warm.canonJSON(inObj, nil)
			if warmObjOK != coldObjOK || (warmObjOK && string(warm.out) != coldObjOut) {
				t.Errorf("%s at object depth %d: accepted %v by a fresh state, %v by one that saw its shape", obj, levels, coldObjOK, warmObjOK)
			}
			wantOK := levels+nesting(obj) <= MaxDepth
			if warmOK != wantOK || warmObjOK != wantOK {
				t.Errorf("%s at depth %d: accepted %v (in arrays) and %v (in objects), want %v", obj, levels, warmOK, warmObjOK, wantOK)
			}
		}
	}
}

// nesting is the deepest nesting of arrays and objects in JSON text s
// (which has no brackets in its strings).
func nesting(s string) int {
	d, maxD := 0, 0
	for _, c := range s {
		switch c {
		case '[', '{':
			d++
			maxD = max(maxD, d)
		case ']', '}':
			d--
		}
	}
	return maxD
}
