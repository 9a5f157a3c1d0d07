package docs

import (
	"strings"
	"testing"

	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/internal/gentest"
)

// TestMediaTypeReadingMatchesRuntime pins ir.MediaTypeReading, which the
// docs and contract summaries describe a body by (and the compiler checks
// volatile and unordered pointers by), to the runtime's classification of
// the declared media types (newMediaSet).
func TestMediaTypeReadingMatchesRuntime(t *testing.T) {
	cases := []string{
		"application/json", "Application/JSON", "application/json; charset=utf-8", " application/json ",
		"\tapplication/json;", "application/json x", "application/json,text/plain",
		"application/merge-patch+json", "application/vnd.api+JSON", "application/+json", "a/+json", "+json",
		"/+json", "application/", "/json", "application", "", ";", "application/jſon", "application/\u212a+json",
		"application/*+json", "*/*", "application/*", "*/json", "application/x*+json", "application/json*",
		"application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8",
		"APPLICATION/X-WWW-FORM-URLENCODED", "application/x-www-form-urlencoded x",
		"multipart/form-data", "multipart/*", "text/plain", "application/octet-stream", "application/xml",
		"application/json/x", "application//json", "application /json", "application/ json", "application/\"x\"+json",
	}
	for c := 0; c < 256; c++ {
		cases = append(cases, "application/x"+string(rune(c))+"+json", "application/x"+string([]byte{byte(c)})+"+json",
			"appl"+string([]byte{byte(c)})+"cation/x-www-form-urlencoded")
	}
	for _, ct := range cases {
		if got, want := ir.MediaTypeReading(ct), gentest.RuntimeReading(t, []string{ct}, ct); got != want {
			t.Errorf("ir.MediaTypeReading(%q) = %d, the runtime reads %d", ct, got, want)
		}
	}
}

// An operation without a requestBody, or one that declares only a range,
// gets no JSON reading from the runtime (idem.RequestSpec.MediaTypes,
// fingerprint.Options.MediaTypes): every body is compared byte for byte,
// and the docs must say so.
func TestBodyCompareByteForByte(t *testing.T) {
	for _, op := range []*ir.Operation{
		{},
		{Body: &ir.Body{ContentTypes: []string{"application/*+json"}}},
		{Body: &ir.Body{ContentTypes: []string{"*/*"}}},
	} {
		got := bodyCompare(op)
		if strings.Contains(got, "compared as data") || !strings.Contains(got, "byte for byte") {
			t.Errorf("%v: %q: the runtime compares byte for byte", op.Body, got)
		}
	}
	got := bodyCompare(&ir.Operation{Body: &ir.Body{ContentTypes: []string{"application/*+json", "application/json"}}})
	if !strings.Contains(got, "a JSON body (`application/json`) is compared as data") || !strings.Contains(got, "any other body (`application/*+json`, or a media type not listed here) is compared byte for byte") {
		t.Errorf("%q", got)
	}
}
