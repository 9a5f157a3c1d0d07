package fingerprint

import "testing"

func TestSmoke(t *testing.T) {
	h, err := New(Options{Volatile: []string{"/client_time", "/items/*/note"}, Unordered: []string{"/tags"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"b":1,"a":[1,2,{"z":1,"y":"\u0041\ud83d\ude00"}], "c": 1.50e1, "client_time": 5}`,
		`{"items":[{"note":"x","q":1},{"q":2,"note":3}],"tags":[3,1,2,"a",{"k":1},[2]],"n":[1e21,1e-7,0.000001,123456789012345678901234,-0,-0.0e5,1E400,0.5e-3]}`,
		`[1,2`, `{"a":1,"a":0}`, `"\"\\\/\b\f\n\r\t\u0001\u001f"`,
	} {
		out, err := h.Canonical(nil, []byte(in))
		t.Logf("%s -> %s %v", in, out, err)
	}
}
