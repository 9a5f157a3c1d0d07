package rollout

import (
	"testing"

	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/internal/gentest"
)

// TestReadTypesMatchesRuntime pins readTypes, which rollout-media-types
// compares two releases by, to runtime/fingerprint: for every declared
// set of requestBody content keys (up to two of many spellings, ranges and
// non-media types among them) and every Content-Type a client may send,
// the body is read as readTypes says for the Content-Type's essence (not
// listed: byte for byte), as the runtime reads it under
// Options.MediaTypes, the declared keys the generated policy passes. The
// runtime's reading is found from its exported API: two JSON bodies that
// differ only in member order and white space, or two forms that differ
// only in field order, get one fingerprint.
func TestReadTypesMatchesRuntime(t *testing.T) {
	keys := []string{
		"application/json", "application/json; charset=utf-8", "Application/JSON", " application/json ",
		"application/vnd.orders+json", "application/merge-patch+json;v=2", "application/+json", "+json",
		"application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8", "Application/X-WWW-Form-Urlencoded",
		"multipart/form-data", "text/plain", "application/*", "*/*", "application/*+json", "json", "",
	}
	cts := []string{
		"application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "application/json ;charset=utf-8", "\tapplication/json",
		"application/vnd.orders+json", "application/VND.ORDERS+JSON; v=1", "application/merge-patch+json", "application/problem+json",
		"application/x-www-form-urlencoded", "application/x-www-form-urlencoded;charset=UTF-8", "Application/X-WWW-Form-Urlencoded",
		"multipart/form-data; boundary=x", "text/plain", "application/octet-stream", "json", "", "application/+json",
	}
	var sets [][]string
	sets = append(sets, nil) // no requestBody: an empty list, every body raw
	for i, a := range keys {
		sets = append(sets, []string{a})
		for _, b := range keys[i+1:] {
			sets = append(sets, []string{a, b})
		}
	}
	var checked, read int
	for _, declared := range sets {
		op := &ir.Operation{}
		if declared != nil {
			op.Body = &ir.Body{ContentTypes: declared}
		}
		types := readTypes(op)
		for _, ct := range cts {
			want, ok := types[ir.MediaEssence(ct)]
			if !ok {
				want = ir.ReadRaw
			}
			if got := gentest.RuntimeReading(t, declared, ct); got != want {
				t.Errorf("declared %q, Content-Type %q: readTypes says %s, the runtime reads it %s", declared, ct, want, got)
			}
			checked++
			if want != ir.ReadRaw {
				read++
			}
		}
	}
	// Both readings and raw are exercised, not only raw.
	if read < checked/10 {
		t.Fatalf("only %d of %d cases read as JSON or form fields", read, checked)
	}
	t.Logf("%d cases, %d read as JSON or form fields", checked, read)
}
