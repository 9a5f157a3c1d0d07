package gentest

import (
	"testing"

	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// RuntimeReading returns how runtime/fingerprint reads a body sent with
// Content-Type ct to an operation that declares the requestBody content
// keys declared (what a generated policy passes as Options.MediaTypes;
// nil: no requestBody), found from its exported API: two JSON bodies that
// differ only in member order and white space get one fingerprint
// (ir.ReadJSON), or two forms that differ only in field order do
// (ir.ReadForm); otherwise ir.ReadRaw. Tests pin the generator's
// classifications (ir.MediaTypeReading, check -base's reading) to it.
func RuntimeReading(t testing.TB, declared []string, ct string) ir.Reading {
	t.Helper()
	h, err := fingerprint.New(fingerprint.Options{MediaTypes: append([]string{}, declared...)})
	if err != nil {
		t.Fatal(err)
	}
	same := func(a, b string) bool {
		in := func(body string) *fingerprint.Input {
			return &fingerprint.Input{Method: "POST", Operation: "op", Path: "/op", ContentType: ct, Body: []byte(body)}
		}
		return h.Sum(in(a)) == h.Sum(in(b))
	}
	switch {
	case same(`{"a":1,"b":2}`, `{ "b": 2, "a": 1 }`):
		return ir.ReadJSON
	case same("a=1&b=2", "b=2&a=1"):
		return ir.ReadForm
	}
	return ir.ReadRaw
}
