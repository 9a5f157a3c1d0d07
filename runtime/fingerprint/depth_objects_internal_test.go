package fingerprint

import (
	"strings"
	"testing"
)

// TestDepthIndependentOfCacheInObjects: as TestDepthIndependentOfCache, for
// a member's object value that the member loop takes whole (after
// fastMembers stopped at its name), one level below the deepest allowed:
// the state has seen the object's shape, and bodies wide and deep enough
// that its member memory holds the deep body's members.
func TestDepthIndependentOfCacheInObjects(t *testing.T) {
	for _, obj := range []string{`{"x":1,"k":{"a":1,"c":[1]}}`, `{"k":{"a":1,"c":[1]}}`, `{"x":"s","k":{"a":1,"c":[1]},"z":2}`} {
		for levels := MaxDepth - 4; levels <= MaxDepth-1; levels++ {
			body := []byte(strings.Repeat(`{"w":`, levels) + obj + strings.Repeat("}", levels))
			cold := statePool.New().(*state)
			cok := cold.canonJSON(body, nil)
			warm := statePool.New().(*state)
			var wide strings.Builder
			wide.WriteString("{")
			for i := 0; i < 3000; i++ {
				if i > 0 {
					wide.WriteString(",")
				}
				wide.WriteString(`"m` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `":1`)
			}
			wide.WriteString("}")
			var deepwide strings.Builder
			for i := 0; i < 600; i++ {
				deepwide.WriteString(`{"a":1,"b":2,"w":`)
			}
			deepwide.WriteString("1")
			deepwide.WriteString(strings.Repeat("}", 600))
			warm.canonJSON([]byte(wide.String()), nil)
			warm.canonJSON([]byte(deepwide.String()), nil)
			for range 4 {
				warm.canonJSON([]byte(obj), nil)
				warm.canonJSON([]byte(`{"w":{"w":`+obj+`}}`), nil)
			}
			ok := warm.canonJSON(body, nil)
			if ok != cok {
				t.Errorf("%s levels %d cold %v warm %v", obj, levels, cok, ok)
			}
		}
	}
}
