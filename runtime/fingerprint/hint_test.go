package fingerprint_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// TestShapeHints canonicalizes, in random order, bodies whose objects
// look alike but differ (the same first names, other later ones, other
// orders), at the top level and in arrays that are members' values, so
// that the shape hints a body leaves are wrong for the next; the canonical
// form must not depend on what came before. The oracle is encoding/json
// (sorted names; the bodies have no escapes or numbers it writes
// otherwise).
func TestShapeHints(t *testing.T) {
	bodies := []string{
		`{"a":1,"b":2,"c":3}`,
		`{"a":1,"b":2,"d":3}`,
		`{"a":1,"b":2}`,
		`{"a":1,"b":2,"c":3,"d":4}`,
		`{"b":2,"a":1,"c":3}`,
		`{"a":1,"c":2,"b":3}`,
		`{ "a": 1, "b": 2, "c": {"x":1,"y":2} }`,
		`{"a":1,"b":2,"c":{"y":1,"x":2}}`,
		`{"items":[{"k":1,"n":"x","z":true},{"k":2,"n":"y","z":false}],"a":1}`,
		`{"items":[{"k":1,"n":"x"},{"k":2,"n":"y","z":false}],"a":1}`,
		`{"items":[{"n":"x","k":1,"z":true}],"a":1}`,
		`{"items":[{"k":1,"m":"x","z":true}],"b":1}`,
		`{"items":[[{"k":1,"n":"x"}],{"n":1,"k":2}],"a":{"items":[{"z":1,"k":2}]}}`,
		`{"other":[{"k":1,"n":"x","z":true}],"items":{"k":1,"n":"x"}}`,
		`[{"a":1,"b":2,"c":3},{"a":1,"b":2,"d":3}]`,
		`{"sku":"A","name":"smart \"kit\"","quantity":5,"tags":["a","b"],"attributes":{"color":"x","size":"M"}}`,
		`{"sku":"A","name":"kit","quantity":5,"tags":["a","b"],"attributes":{"size":"M","color":"x"}}`,
	}
	want := make([]string, len(bodies))
	for k, b := range bodies {
		var v any
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		want[k] = string(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
	}
	h, err := fingerprint.New(fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	sums := map[int]fingerprint.Fingerprint{}
	for range 20000 {
		k := r.IntN(len(bodies))
		got, err := fingerprint.Canonical(nil, []byte(bodies[k]))
		if err != nil || string(got) != want[k] {
			t.Fatalf("%s: got %s, %v; want %s", bodies[k], got, err, want[k])
		}
		f := h.Sum(&fingerprint.Input{ContentType: "application/json", Body: []byte(bodies[k])})
		if old, ok := sums[k]; ok && old != f {
			t.Fatalf("%s: fingerprint changed", bodies[k])
		}
		sums[k] = f
	}
}
