package docs_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emit/docs"
	"github.com/idemgen/idemgen/generator/emitter"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/internal/gentest"
	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// cases are the specs whose documentation is kept as a golden file in
// testdata/docs/<name>.md.
func cases(t *testing.T) []struct{ name, spec, overlay string } {
	specs := testenv.SpecsDir(t)
	root := filepath.Join("..", "..", "..", "testdata")
	return []struct{ name, spec, overlay string }{
		{"petstore", filepath.Join(specs, "petstore-expanded.yaml"), filepath.Join(root, "overlays", "petstore.overlay.yaml")},
		{"adyen", filepath.Join(specs, "adyen-transfers-v4.json"), filepath.Join(root, "overlays", "adyen.overlay.yaml")},
		{"clean-full", filepath.Join(root, "contract", "clean-full", "openapi.yaml"), ""},
		{"coupons", filepath.Join(root, "augment", "coupons", "openapi.yaml"), ""},
		{"compatible-fingerprints", filepath.Join(root, "server", "compatible-fingerprints", "openapi.yaml"), ""},
		{"none", filepath.Join(specs, "petstore-expanded.yaml"), ""},
	}
}

func compileCase(t *testing.T, spec, overlay string) *ir.Spec {
	t.Helper()
	var ovs []string
	if overlay != "" {
		ovs = []string{overlay}
	}
	s, diags := compile.Compile(spec, compile.Options{Overlays: ovs})
	require.NotNil(t, s)
	require.False(t, diags.HasErrors(), "%v", diags)
	return s
}

func TestGolden(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			spec := compileCase(t, c.spec, c.overlay)
			got, err := docs.Render(spec)
			require.NoError(t, err)
			again, err := docs.Render(spec)
			require.NoError(t, err)
			assert.Equal(t, string(got), string(again), "deterministic")
			gentest.GoldenFile(t, filepath.Join("..", "..", "..", "testdata", "docs", c.name+".md"), got, *update)
		})
	}
}

func TestEmitterRegistered(t *testing.T) {
	f, ok := emitter.Lookup("docs")
	require.True(t, ok)
	files, err := f(&ir.Spec{Title: "T", Operations: []*ir.Operation{}}, emitter.Options{})
	require.NoError(t, err)
	require.Len(t, files, 1)
	assert.Equal(t, docs.FileName, files[0].Path)
}

// The example problem quotes the detail the engine writes for a request
// still in flight, taken from the runtime, not a paraphrase of it.
func TestInFlightExampleIsTheRuntimes(t *testing.T) {
	c := cases(t)[2] // clean-full
	out, err := docs.Render(compileCase(t, c.spec, c.overlay))
	require.NoError(t, err)
	assert.Contains(t, string(out), `"detail": "`+idem.DetailKeyInUse+`",`)
}

// Header names are printed as the spec spells them, not canonicalized
// (WWW-Authenticate, not Www-Authenticate); the runtime canonicalizes them
// itself.
func TestHeaderSpelling(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: H, version: '1'}
paths:
  /a:
    post:
      operationId: a
      x-idempotency:
        semantics: strict
        fingerprint-headers: [WWW-Authenticate, x-tenant-ID]
        response: {headers: [ETag]}
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
      responses: {'200': {description: ok}}
`), 0o644))
	out, err := docs.Render(compileCase(t, spec, ""))
	require.NoError(t, err)
	assert.Contains(t, string(out), "headers `WWW-Authenticate`, `x-tenant-ID`, media type of the `Content-Type` (`application/json` is not `application/merge-patch+json`) and body: the operation declares none, so any body sent is compared byte for byte")
	assert.Contains(t, string(out), "`Content-Type`, `Content-Encoding`, `ETag`, the cache headers (`Cache-Control`, `Expires`, `Pragma`: a response the server marked `no-store` is replayed so), and `Idempotent-Replayed: true`;")
	assert.NotContains(t, string(out), "Www-Authenticate")
}

// "The same request" is worded by the body's content type, as the
// fingerprint compares it: JSON as data, a form field by field, anything
// else byte for byte (a multipart body with its boundary).
func TestBodyComparison(t *testing.T) {
	c := filepath.Join("..", "..", "..", "testdata", "contract", "raw-body-strict", "openapi.yaml")
	out, err := docs.Render(compileCase(t, c, ""))
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, "and body, by its content type: a JSON body (`application/json`) is compared as data: member order, white space, number spelling and the `Content-Type` parameters (such as `charset`) do not matter, members the schema does not declare count like the others; any other body (`multipart/form-data`, or a media type not listed here) is compared byte for byte, with the parameters of its `Content-Type` (such as `charset`); a multipart body's boundary is among those bytes and parameters, so a retry must resend the same bytes and `Content-Type`, boundary included.")
	assert.Contains(t, s, "and body (`multipart/mixed`), compared byte for byte, with the parameters of its `Content-Type` (such as `charset`); a multipart body's boundary is among those bytes and parameters")
	assert.Contains(t, s, "and form body (`application/x-www-form-urlencoded`), compared field by field: fields in any order (the values of one field in theirs), `+` and `%20` alike; a body sent with a media type not listed here is compared byte for byte, with the parameters of its `Content-Type`.")
	assert.Equal(t, 0, strings.Count(s, "JSON body (`application/json`), compared as data"), "no operation of this spec has a JSON-only body")
}

// keySpec writes a spec whose operations take a header key of each format
// in formats (one operation per format) and returns its rendered page.
func keySpec(t *testing.T, formats ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("openapi: 3.0.3\ninfo: {title: K, version: '1'}\npaths:\n")
	for i, f := range formats {
		fmt.Fprintf(&b, `  /op%[1]d:
    post:
      operationId: op%[1]d
      x-idempotency:
        semantics: strict
        key: {header: Idempotency-Key, format: %[2]s}
      responses: {'200': {description: ok}}
`, i, f)
	}
	spec := filepath.Join(t.TempDir(), "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(b.String()), 0o644))
	out, err := docs.Render(compileCase(t, spec, ""))
	require.NoError(t, err)
	return string(out)
}

// Step 1's advice on the key to create follows the key formats of the
// page: a version 7 UUID is refused by a uuidv4 key (400), so a page of
// uuidv4 operations must not advise it.
func TestKeyAdvice(t *testing.T) {
	for _, tc := range []struct {
		formats []string
		want    string
	}{
		{[]string{"uuidv4"}, "Create a new key (a version 4 UUID: the operations below refuse other versions) for each"},
		{[]string{"uuidv4", "uuid", "token"}, "Create a new key (a version 4 UUID: some operations below refuse other versions) for each"},
		{[]string{"uuidv7", "uuidv7"}, "Create a new key (a version 7 UUID: the operations below refuse other versions) for each"},
		{[]string{"uuidv4", "uuidv7"}, "Create a new key (a UUID of the version its operation's Key row names, 4 or 7: another version is refused with 400 `IDEMPOTENCY_KEY_INVALID`) for each"},
		{[]string{"uuid", "token"}, "Create a new key (a UUID; version 7 sorts by time) for each"},
	} {
		out := keySpec(t, tc.formats...)
		assert.Contains(t, out, tc.want, "%v", tc.formats)
		if slices.Contains(tc.formats, "uuidv4") {
			assert.NotContains(t, out, "version 7 sorts by time", "%v", tc.formats)
		}
	}
}

// A key in the body is named as a member, its JSON pointer beside it; a
// nested one by its pointer alone.
func TestBodyMember(t *testing.T) {
	out := string(must(docs.Render(compileCase(t, filepath.Join("..", "..", "..", "testdata", "augment", "coupons", "openapi.yaml"), ""))))
	assert.Contains(t, out, "Send the member `idempotency_key` (JSON pointer `/idempotency_key`) of the JSON request body")
	assert.NotContains(t, out, "the member `/")
}

// What the trial of the docs found a client could not tell from them: a
// replay is final whatever its status, RECORD_UNREADABLE is never retried,
// unordered arrays are multisets, the same request's path, query and media
// type, the replayed headers and the size limits, and what Retry-After
// does to the backoff span. Both the page and the spec's summary say it.
func TestRetryGuidance(t *testing.T) {
	spec := compileCase(t, filepath.Join("..", "..", "..", "testdata", "augment", "coupons", "openapi.yaml"), "")
	page := string(must(docs.Render(spec)))
	var claim *ir.Operation
	for _, op := range spec.Operations {
		if op.OperationID == "claimCoupon" {
			claim = op
		}
	}
	require.NotNil(t, claim)
	summary := must(docs.Summary(claim))
	for _, s := range []string{page, summary} {
		assert.Contains(t, s, "but never a response marked `Idempotent-Replayed: true`: it is final, whatever its status.")
		assert.Contains(t, s, "Backoff span: at most 3.5s of waiting in all; a server's `Retry-After`")
		assert.NotContains(t, s, "Longest retry span")
		assert.Contains(t, s, "unordered arrays are compared in any order but with their duplicates")
		assert.NotContains(t, s, "as sets")
		assert.Contains(t, s, "path as sent (percent-encoding included")
		assert.Contains(t, s, "query (parameters in any order")
		assert.Contains(t, s, "media type of the `Content-Type`")
		assert.Contains(t, s, "members the schema does not declare count like the others")
		assert.Contains(t, s, "`Location`, the cache headers (`Cache-Control`, `Expires`, `Pragma`: a response the server marked `no-store` is replayed so), and `Idempotent-Replayed: true`; bodies up to 1 MiB: a request whose response was larger ran, but a repeat gets 409 `IDEMPOTENCY_RESPONSE_UNAVAILABLE`")
		assert.Contains(t, s, "refuses a larger body with 413 `IDEMPOTENCY_REQUEST_TOO_LARGE`")
		assert.Contains(t, s, "upper-case hex digits name the same key as lower-case")
	}
	// A 409 of the API's own is retried once where the policy lists 409
	// (the Go client does): the retry gets its replay, which is final.
	assert.Contains(t, summary, "or 500 `IDEMPOTENCY_RECORD_UNREADABLE` with the same key; `IDEMPOTENCY_KEY_IN_USE` is waited out, while any other 409 is the API's own answer, stored: a retry (the Go client makes one where the policy lists 409) gets it again, marked `Idempotent-Replayed: true`, and ends there.")
	assert.Contains(t, page, "Any other 409 is the API's own answer, stored with the key: an operation whose retry policy lists 409 may retry it once (the Go client does)")
	for _, s := range []string{page, summary} {
		assert.NotContains(t, s, "retry only `IDEMPOTENCY_KEY_IN_USE`", "the client retries the API's own 409 once")
		// claimCoupon holds a duplicate up to 1s (in-flight.wait).
		assert.Contains(t, s, "A per-attempt timeout must allow for the hold: give every retry, and a first request whose key may already be in flight (one you resume or reuse), the time the operation takes to answer plus 1s")
	}
	assert.Contains(t, page, "409 `IDEMPOTENCY_RESPONSE_UNAVAILABLE` and 500 `IDEMPOTENCY_RECORD_UNREADABLE`. They are final")
	assert.Contains(t, page, "5. **A response marked `Idempotent-Replayed: true` is final, whatever its status.**")
	assert.Contains(t, page, "The 409 `IDEMPOTENCY_RESPONSE_UNAVAILABLE` carries it too")
	assert.NotContains(t, page, "nothing was run. | Yes. |", "REQUEST_ENDED may have run (transactional mode)")
	assert.Contains(t, page, "| Yes: it is safe to retry with the same key")
	assert.NotContains(t, page, "a repeated request inside the window")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// An operation with compatible-fingerprints says, in the API docs and in the
// contract summary idemgen spec writes into the spec, that a retry of a
// request first sent under the earlier settings is still recognized; the
// others say nothing of it.
func TestCompatibleFingerprints(t *testing.T) {
	spec := compileCase(t, filepath.Join("..", "..", "..", "testdata", "server", "compatible-fingerprints", "openapi.yaml"), "")
	const sentence = "A retry with the same key of a request first served by a release with other settings of this comparison (the one before or the one after this one, during a deploy) is still recognized as the same request, compared as that release compares it (volatile `/client_time`, unordered `/tags`, headers `X-Tenant-Id`; or volatile `/client_time`, unordered none, headers none)."
	for _, op := range spec.Operations {
		summary, err := docs.Summary(op)
		require.NoError(t, err)
		if op.OperationID == "createTransfer" {
			assert.Contains(t, summary, sentence)
		} else {
			assert.NotContains(t, summary, "other settings of this comparison", op.OperationID)
		}
	}
	page, err := docs.Render(spec)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(page), sentence))
}

// TestFingerprintNotApplicable: where the fingerprint decides nothing a
// client sees (loose semantics, window with the key required: check's
// *-no-effect warnings), the docs and the summary say the fingerprint
// settings are not applicable (no "Arrays compared in any order", no
// definition of "the same request"), and under loose and window semantics
// that a different request is never refused with IDEMPOTENCY_KEY_REUSED
// (whatever conflict-status says), which the summary's "never retry" list
// then leaves out; strict, and window with the key optional, keep them.
func TestFingerprintNotApplicable(t *testing.T) {
	spec := compileCase(t, filepath.Join("..", "..", "..", "testdata", "contract", "no-effect-semantics", "openapi.yaml"), "")
	const sameRequest = `"The same request" means`
	const neverReused = "(it is never refused with `IDEMPOTENCY_KEY_REUSED`)"
	const neverRetryReused = "Never retry 400, 413, 422, `IDEMPOTENCY_KEY_REUSED`,"
	seen := 0
	for _, op := range spec.Operations {
		summary := must(docs.Summary(op))
		switch op.OperationID {
		case "loose", "windowKeyed":
			seen++
			assert.Contains(t, summary, "**Volatile fields**: not applicable: ", op.OperationID)
			assert.NotContains(t, summary, "Arrays compared in any order", op.OperationID)
			assert.NotContains(t, summary, sameRequest, op.OperationID)
			assert.NotContains(t, summary, "without a key, the same request", op.OperationID)
			assert.Contains(t, summary, neverReused, op.OperationID)
			assert.NotContains(t, summary, neverRetryReused, op.OperationID)
		case "window":
			seen++
			assert.Contains(t, summary, "**Volatile fields**: `/client_time`, `/trace_id`: left out of the comparison", op.OperationID)
			assert.Contains(t, summary, "Arrays compared in any order: `/ids`.", op.OperationID)
			assert.Contains(t, summary, sameRequest, op.OperationID)
			assert.Contains(t, summary, neverReused, op.OperationID)
			assert.NotContains(t, summary, neverRetryReused, op.OperationID)
		case "strict":
			seen++
			assert.Contains(t, summary, "Arrays compared in any order: `/ids`.", op.OperationID)
			assert.Contains(t, summary, sameRequest, op.OperationID)
			assert.NotContains(t, summary, neverReused, op.OperationID)
			assert.Contains(t, summary, neverRetryReused, op.OperationID)
		}
	}
	assert.Equal(t, 4, seen)
	page := string(must(docs.Render(spec)))
	assert.Contains(t, page, "| Volatile fields | not applicable: window semantics with a required key compare only the key. |")
	assert.Contains(t, page, "| Volatile fields | not applicable: loose semantics compare only the key. |")
}

// TestReplayedHeadersOnce: a contract may list an always-stored header
// (Cache-Control) in response.headers; the replayed sentence names it once,
// among the cache headers, not also among the listed ones.
func TestReplayedHeadersOnce(t *testing.T) {
	spec := compileCase(t, filepath.Join("..", "..", "..", "testdata", "augment", "coupons", "openapi.yaml"), "")
	var op *ir.Operation
	for _, o := range spec.Operations {
		if o.Policy.Semantics != "" {
			op = o
			break
		}
	}
	require.NotNil(t, op)
	op.Policy.Response.Headers = []string{"Location", "Cache-Control", "Expires"}
	summary, err := docs.Summary(op)
	require.NoError(t, err)
	assert.Contains(t, summary, "`Content-Encoding`, `Location`, the cache headers")
	assert.Equal(t, 1, strings.Count(summary, "`Cache-Control`"), summary)
	assert.Equal(t, 1, strings.Count(summary, "`Expires`"), summary)
}
