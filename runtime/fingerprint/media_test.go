package fingerprint_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// The security trial's attack: a JSON body labelled
// application/x-www-form-urlencoded, sent to an operation that declares
// only application/json, whose handler decodes JSON whatever the
// Content-Type. Read as a form, the body is one pair per '&'-separated
// part, sorted, with its percent-escapes decoded: reordering the parts (so
// that the last "amount", the one encoding/json keeps, is 100, not 1) or
// escaping a character ("%45UR") left the fingerprint as it was, while
// the handler decodes another request. With the declared media types the
// body is hashed as raw bytes: each is another request.
func TestUndeclaredFormIsRaw(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	pairs := [][2]string{
		{`{"a":"&","amount":100,"b":"&","amount":1,"c":"&"}`, `{"a":"&","amount":1,"c":"&","amount":100,"b":"&"}`},
		{`{"amount":1,"currency":"EUR"}`, `{"amount":1,"currency":"%45UR"}`},
	}
	plain := mustNew(t, fingerprint.Options{})
	declared := mustNew(t, fingerprint.Options{MediaTypes: []string{"application/json"}})
	for _, p := range pairs {
		a := &fingerprint.Input{Method: "POST", Operation: "pay", ContentType: form, Body: []byte(p[0])}
		b := &fingerprint.Input{Method: "POST", Operation: "pay", ContentType: form, Body: []byte(p[1])}
		// Without the list: the hole the trial found.
		assert.Equal(t, plain.Sum(a), plain.Sum(b), "without MediaTypes, %s and %s are one form", p[0], p[1])
		for v := 1; v <= fingerprint.Version; v++ {
			for _, version := range []int{v, fingerprint.Local(v)} {
				fa, _ := declared.SumVersion(a, version)
				fb, _ := declared.SumVersion(b, version)
				assert.NotEqual(t, fa, fb, "version %#x: %s and %s", version, p[0], p[1])
				assert.Equal(t, documentedSumDeclared(declared, nil, []string{"application/json"}, a, byte(version)), fa, "version %#x", version)
			}
		}
	}
}

// A declared media type's body is fingerprinted as without the list, in
// every version: fingerprints change only for the media types the list
// leaves out.
func TestDeclaredMediaTypes(t *testing.T) {
	jsonBodies := [2]string{`{"b":1, "a":[1.0]}`, `{"a":[1],"b":1}`} // one JSON document
	formBodies := [2]string{"b=1&a=%41", "a=A&b=1"}                  // one form
	for _, tt := range []struct {
		name     string
		declared []string
		ct       string
		bodies   [2]string
		read     bool // canonicalized (as without the list), else raw
	}{
		{"json declared", []string{"application/json"}, "application/json", jsonBodies, true},
		{"json with parameters and case", []string{"application/json"}, "Application/JSON ; charset=utf-8", jsonBodies, true},
		{"declared with parameters and case", []string{" Application/Json; charset=utf-8"}, "application/json", jsonBodies, true},
		{"+json declared", []string{"application/merge-patch+json"}, "application/merge-patch+JSON", jsonBodies, true},
		{"+json not declared", []string{"application/json"}, "application/merge-patch+json", jsonBodies, false},
		{"json not declared", []string{"application/merge-patch+json"}, "application/json", jsonBodies, false},
		{"form declared", []string{"application/json", "application/x-www-form-urlencoded"}, "application/x-www-form-urlencoded", formBodies, true},
		{"form declared, json sent", []string{"application/x-www-form-urlencoded"}, "application/json", jsonBodies, false},
		{"json and form declared, json sent", []string{"application/x-www-form-urlencoded", "application/json"}, "application/json", jsonBodies, true},
		{"form not declared", []string{"application/json"}, "application/x-www-form-urlencoded", formBodies, false},
		{"no body declared", []string{}, "application/json", jsonBodies, false},
		{"no body declared, form", []string{}, "application/x-www-form-urlencoded", formBodies, false},
		{"range application/*", []string{"application/*"}, "application/json", jsonBodies, false},
		{"range */*", []string{"*/*"}, "application/x-www-form-urlencoded", formBodies, false},
		{"range *+json", []string{"application/*+json"}, "application/merge-patch+json", jsonBodies, false},
		{"range beside the type", []string{"*/*", "application/json"}, "application/json", jsonBodies, true},
		{"not a media type", []string{"json", "application/", "/json", "application/json/x", "application /json"}, "application/json", jsonBodies, false},
		{"+json not a media type", []string{"x y/z+json"}, "x y/z+json", jsonBodies, false},
		{"raw declared", []string{"text/plain"}, "application/json", jsonBodies, false},
		{"without the list", nil, "application/x-www-form-urlencoded", formBodies, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := mustNew(t, fingerprint.Options{MediaTypes: tt.declared, Volatile: []string{"/v"}})
			plain := mustNew(t, fingerprint.Options{Volatile: []string{"/v"}})
			in := func(body string) *fingerprint.Input {
				return &fingerprint.Input{Method: "POST", Operation: "op", Path: "/p", RawQuery: "q=1", ContentType: tt.ct, Body: []byte(body)}
			}
			a, b := in(tt.bodies[0]), in(tt.bodies[1])
			for v := 1; v <= fingerprint.Version; v++ {
				for _, version := range []int{v, fingerprint.Local(v)} {
					fa, _ := h.SumVersion(a, version)
					fb, _ := h.SumVersion(b, version)
					pa, _ := plain.SumVersion(a, version)
					assert.Equal(t, documentedSumDeclared(h, nil, tt.declared, a, byte(version)), fa, "version %#x: the documented stream", version)
					if tt.read {
						assert.Equal(t, pa, fa, "version %#x: the fingerprint without the list", version)
						assert.Equal(t, fa, fb, "version %#x: %s and %s are one request", version, tt.bodies[0], tt.bodies[1])
					} else {
						assert.NotEqual(t, pa, fa, "version %#x: raw, not the fingerprint without the list", version)
						assert.NotEqual(t, fa, fb, "version %#x: %s and %s compared byte for byte", version, tt.bodies[0], tt.bodies[1])
					}
				}
			}
		})
	}
}

// An undeclared JSON or form type is a raw type: its parameters count, as
// any raw type's (version 3).
func TestUndeclaredParametersCount(t *testing.T) {
	h := mustNew(t, fingerprint.Options{MediaTypes: []string{"application/json"}})
	sum := func(ct string) fingerprint.Fingerprint {
		return h.Sum(&fingerprint.Input{Method: "POST", ContentType: ct, Body: []byte("a=1")})
	}
	assert.NotEqual(t, sum("application/x-www-form-urlencoded; charset=utf-8"), sum("application/x-www-form-urlencoded"))
	assert.NotEqual(t, sum("application/merge-patch+json; charset=utf-8"), sum("application/merge-patch+json"))
	assert.Equal(t, sum("application/json; charset=utf-8"), sum("application/json")) // declared: ignored
}

// Hashers of one operation with different lists share the pooled scratch
// states, which keep the last header built (and its body domain): each
// hasher gets its own domain, whichever summed before.
func TestMediaTypesHeaderCache(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	plain := mustNew(t, fingerprint.Options{})
	declared := mustNew(t, fingerprint.Options{MediaTypes: []string{"application/json"}})
	withForm := mustNew(t, fingerprint.Options{MediaTypes: []string{"application/json", form}})
	a := &fingerprint.Input{Method: "POST", Operation: "op", ContentType: form, Body: []byte("b=1&a=2")}
	b := &fingerprint.Input{Method: "POST", Operation: "op", ContentType: form, Body: []byte("a=2&b=1")}
	for range 50 { // states come and go in the pool: many rounds, in turns
		for _, h := range []*fingerprint.Hasher{plain, declared, withForm, declared, plain} {
			same := h.Sum(a) == h.Sum(b)
			assert.Equal(t, h != declared, same)
			assert.Equal(t, documentedSumDeclared(h, nil, map[*fingerprint.Hasher][]string{declared: {"application/json"}, withForm: {"application/json", form}}[h], a, fingerprint.Version), h.Sum(a))
		}
	}
}
