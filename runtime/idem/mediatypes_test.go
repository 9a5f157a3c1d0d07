package idem_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// formCT is the label of the security trial's attack.
const formCT = "application/x-www-form-urlencoded"

// trialRetries are the security trial's pairs: a JSON body, and a retry
// that the handler (which decodes JSON whatever the Content-Type) reads as
// another request, while the form reading of both is one: the
// '&'-separated parts reordered (the last "amount", the one encoding/json
// keeps, goes from 1 to 100), a character percent-escaped.
var trialRetries = []struct{ name, first, retry string }{
	{"parts reordered", `{"a":"&","amount":100,"b":"&","amount":1,"c":"&"}`, `{"a":"&","amount":1,"c":"&","amount":100,"b":"&"}`},
	{"percent-escaped", `{"item":"book","currency":"EUR"}`, `{"item":"book","currency":"%45UR"}`},
}

// The security trial's attack through the engine: a JSON body labelled
// application/x-www-form-urlencoded to an operation that declares only
// application/json, then a retry with the same key that the handler reads
// as another request. It was replayed the first response; it is refused
// now (422), over the process-local (memstore) and the SHA-256 fingerprint.
func TestUndeclaredMediaTypeAttack(t *testing.T) {
	for _, local := range []bool{true, false} {
		for _, tt := range trialRetries {
			t.Run(tt.name, func(t *testing.T) {
				ms := memstore.New(memstore.Options{SweepInterval: -1})
				t.Cleanup(func() { _ = ms.Close() })
				var s idem.Store = ms
				if !local {
					s = plainStore{ms} // not a LocalReader: SHA-256
				}
				f := newFixtureStore(t, ms, s, idem.Options{})
				sp := strictSpec()
				sp.Request.MediaTypes = []string{"application/json"}
				h := f.eng.Handler(mustCompile(t, sp), f.createOrder())
				form := http.Header{"Content-Type": {formCT}}
				require.Equal(t, 201, send(h, req{key: "k", body: tt.first, header: form}).Code)
				requireProblem(t, send(h, req{key: "k", body: tt.retry, header: form}), 422, idem.CodeKeyReused)
				// The same bytes again are the same request.
				w := send(h, req{key: "k", body: tt.first, header: form})
				require.Equal(t, 201, w.Code, w.Body.String())
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
				assert.Equal(t, int32(1), f.calls.Load())
			})
		}
	}
}

// Without Request.MediaTypes (a Spec written by hand, or generated before
// the list) every body is read as its Content-Type says, as before: the
// attack's retry is a replay. This pins the documented behaviour of nil.
func TestMediaTypesNilKeepsContentTypeReading(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
	form := http.Header{"Content-Type": {formCT}}
	tt := trialRetries[1]
	require.Equal(t, 201, send(h, req{key: "k", body: tt.first, header: form}).Code)
	w := send(h, req{key: "k", body: tt.retry, header: form})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
}

// A declared media type is read as before: JSON as data (a retry with
// other white space and member order is replayed), a form declared beside
// it field by field; an operation that declares no body (an empty list)
// compares any body byte for byte.
func TestDeclaredMediaTypesEngine(t *testing.T) {
	for _, tt := range []struct {
		name        string
		declared    []string
		ct          string
		first, same string
		replayed    bool
	}{
		{"json declared", []string{"application/json"}, "application/json; charset=utf-8", `{"item":"book","n":1}`, `{ "n": 1.0, "item": "book" }`, true},
		{"form declared", []string{"application/json", formCT}, formCT, "item=book&n=1", "n=1&item=%62ook", true},
		{"form not declared", []string{"application/json"}, formCT, "item=book&n=1", "n=1&item=%62ook", false},
		{"json not declared", []string{formCT}, "application/json", `{"item":"book","n":1}`, `{ "n": 1.0, "item": "book" }`, false},
		{"no body declared", []string{}, "application/json", `{"item":"book","n":1}`, `{ "n": 1.0, "item": "book" }`, false},
		{"range declared", []string{"*/*"}, "application/json", `{"item":"book","n":1}`, `{ "n": 1.0, "item": "book" }`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, idem.Options{})
			sp := strictSpec()
			sp.Request.MediaTypes = tt.declared
			// A handler that reads nothing: the answer depends on the
			// fingerprint alone.
			h := f.eng.Handler(mustCompile(t, sp), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				f.calls.Add(1)
				w.WriteHeader(http.StatusCreated)
			}))
			ct := http.Header{"Content-Type": {tt.ct}}
			require.Equal(t, 201, send(h, req{key: "k", body: tt.first, header: ct}).Code)
			w := send(h, req{key: "k", body: tt.same, header: ct})
			if tt.replayed {
				require.Equal(t, 201, w.Code, w.Body.String())
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
			} else {
				requireProblem(t, w, 422, idem.CodeKeyReused)
			}
		})
	}
}

// A compatible setting (another release's volatile, unordered and
// fingerprint-headers) reads bodies by the operation's declared media
// types too. A record made by a release without the list (generated code
// of before, which read a form-labelled body as a form) and a retry with
// the attack's other body: under the entry read as a form, the retry would
// match the record and be replayed its response.
func TestMediaTypesCompatible(t *testing.T) {
	ms := memstore.New(memstore.Options{SweepInterval: -1})
	t.Cleanup(func() { _ = ms.Close() })
	old := newFixtureStore(t, ms, ms, idem.Options{})
	cur := newFixtureStore(t, ms, ms, idem.Options{})
	v1 := strictSpec()
	v1.Volatile = []string{"/trace"}
	v2 := strictSpec()
	v2.Request.MediaTypes = []string{"application/json"}
	v2.CompatibleFingerprints = []idem.FingerprintSpec{{Volatile: []string{"/trace"}}}
	form := http.Header{"Content-Type": {formCT}}
	tt := trialRetries[0]
	require.Equal(t, 201, send(old.eng.Handler(mustCompile(t, v1), old.createOrder()), req{key: "k", body: tt.first, header: form}).Code)
	h := cur.eng.Handler(mustCompile(t, v2), cur.createOrder())
	requireProblem(t, send(h, req{key: "k", body: tt.retry, header: form}), 422, idem.CodeKeyReused)
	// A JSON body sent as declared still matches through the entry.
	require.Equal(t, 201, send(old.eng.Handler(mustCompile(t, v1), old.createOrder()), req{key: "j", body: `{"item":"a","trace":"1"}`}).Code)
	w := send(h, req{key: "j", body: `{"item":"a","trace":"1"}`})
	require.Equal(t, 201, w.Code, w.Body.String())
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
}

// Spec returns the list as given: nil stays nil (the Content-Type reading),
// an empty list empty (no body declared), and a copy.
func TestMediaTypesSpec(t *testing.T) {
	sp := strictSpec()
	assert.Nil(t, mustCompile(t, sp).Spec().Request.MediaTypes)
	sp.Request.MediaTypes = []string{}
	got := mustCompile(t, sp).Spec().Request.MediaTypes
	assert.NotNil(t, got)
	assert.Empty(t, got)
	sp.Request.MediaTypes = []string{"application/json"}
	p := mustCompile(t, sp)
	sp.Request.MediaTypes[0] = "text/plain"
	assert.Equal(t, []string{"application/json"}, p.Spec().Request.MediaTypes)
}
