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
	for _, obj := range []string{`{"a":1,"b":1,"c":[1]}`, `{"a":1,"b":1,"c":[]}`, `{"a":1,"c":[1,2],"d":"x"}`, `{"a":1,"b":2}`} {
		for _, levels := range []int{MaxDepth - 2, MaxDepth - 1, MaxDepth} {
			body := []byte(strings.Repeat("[", levels) + obj + strings.Repeat("]", levels))
			cold := statePool.New().(*state)
			coldOK := cold.canonJSON(body, nil)
			coldOut := string(cold.out)

			warm := statePool.New().(*state)
			for range 4 {
				if !warm.canonJSON([]byte(obj), nil) {
					t.Fatalf("%s: %v", obj, warm.err)
				}
				if !warm.canonJSON([]byte(`[`+obj+`,`+obj+`]`), nil) {
					t.Fatalf("%s: %v", obj, warm.err)
				}
			}
			warmOK := warm.canonJSON(body, nil)
			if warmOK != coldOK || (warmOK && string(warm.out) != coldOut) {
				t.Errorf("%s at depth %d: accepted %v by a fresh state, %v by one that saw its shape", obj, levels, coldOK, warmOK)
			}
			wantOK := levels < MaxDepth-1 || !strings.Contains(obj, "[")
			if levels == MaxDepth {
				wantOK = false
			}
			if warmOK != wantOK {
				t.Errorf("%s at depth %d: accepted %v, want %v", obj, levels, warmOK, wantOK)
			}
		}
	}
}
