package augment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/diag"
	"github.com/idemgen/idemgen/generator/load"
	"github.com/idemgen/idemgen/generator/specfile"
	"github.com/idemgen/idemgen/internal/gentest"
	"github.com/idemgen/idemgen/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var testdata = filepath.Join("..", "..", "testdata")

type specCase struct {
	name     string
	spec     string
	overlays []string
	golden   string // directory of the golden files, "" for none
}

func cases(t testing.TB) []specCase {
	specs := testenv.SpecsDir(t)
	aug := filepath.Join(testdata, "augment")
	ov := filepath.Join(testdata, "overlays")
	cs := []specCase{
		{"coupons", filepath.Join(aug, "coupons", "openapi.yaml"), nil, filepath.Join(aug, "coupons")},
		{"orders-json", filepath.Join(aug, "orders-json", "openapi.json"), []string{filepath.Join(aug, "orders-json", "contracts.overlay.yaml")}, filepath.Join(aug, "orders-json")},
		{"crlf", filepath.Join(aug, "crlf", "openapi.yaml"), nil, filepath.Join(aug, "crlf")},
		{"petstore", filepath.Join(specs, "petstore-expanded.yaml"), []string{filepath.Join(ov, "petstore.overlay.yaml")}, filepath.Join(aug, "petstore")},
		{"adyen", filepath.Join(specs, "adyen-transfers-v4.json"), []string{filepath.Join(ov, "adyen.overlay.yaml")}, ""},
	}
	if !testing.Short() && !testenv.RaceEnabled { // 700 KB: minutes under -race; runs in scripts/test's race-free pass
		cs = append(cs, specCase{"modern-treasury", filepath.Join(specs, "modern-treasury.yaml"), []string{filepath.Join(ov, "modern-treasury.overlay.yaml")}, ""})
	}
	return cs
}

func run(t *testing.T, c specCase) *augment.Result {
	t.Helper()
	res, diags := augment.Augment(c.spec, augment.Options{Overlays: c.overlays})
	require.NotNil(t, res, "%v", diags)
	for _, d := range diags {
		assert.NotEqual(t, diag.Error, d.Severity, "%s", d)
		assert.NotEqual(t, augment.RuleNotAugmented, d.Rule, "%s", d)
	}
	return res
}

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestGolden compares the augmented specs (YAML stays YAML, JSON stays
// JSON) and their overlays with golden files.
func TestGolden(t *testing.T) {
	for _, c := range cases(t) {
		if c.golden == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := run(t, c)
			ext := ".yaml"
			if res.Format.JSON {
				ext = ".json"
				assert.True(t, json.Valid(res.Spec))
			} else {
				var v any
				assert.NoError(t, yaml.Unmarshal(res.Spec, &v))
			}
			require.NoError(t, os.MkdirAll(c.golden, 0o755))
			gentest.GoldenFile(t, filepath.Join(c.golden, "augmented"+ext), res.Spec, *update)
			gentest.GoldenFile(t, filepath.Join(c.golden, "augment.overlay.yaml"), res.Overlay, *update)
		})
	}
}

// TestIdempotent: augmenting an augmented spec changes nothing.
func TestIdempotent(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			first := run(t, c)
			require.Positive(t, first.Actions)
			name := "openapi.yaml"
			if first.Format.JSON {
				name = "openapi.json"
			}
			again := run(t, specCase{spec: writeTemp(t, name, first.Spec)})
			assert.Zero(t, again.Actions)
			assert.Equal(t, string(first.Spec), string(again.Spec))
		})
	}
}

// TestOverlayEquivalent: loading the spec with the contract overlays and
// then the overlay of -as-overlay gives the document Augment writes.
func TestOverlayEquivalent(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res := run(t, c)
			ov := writeTemp(t, "augment.overlay.yaml", res.Overlay)
			d, diags := load.Load(c.spec, load.Options{Overlays: append(append([]string{}, c.overlays...), ov)})
			require.NotNil(t, d, "%v", diags)
			for _, x := range diags {
				assert.NotEqual(t, "overlay-no-match", x.Rule, "%s", x)
				assert.NotEqual(t, diag.Error, x.Severity, "%s", x)
			}
			src, err := os.ReadFile(c.spec)
			require.NoError(t, err)
			srcDoc, err := specfile.Parse(src)
			require.NoError(t, err)
			got, err := specfile.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{d.Root}, HeadComment: srcDoc.HeadComment, FootComment: srcDoc.FootComment}, res.Format)
			require.NoError(t, err)
			if !res.Format.JSON && !res.Format.CRLF {
				// What Augment keeps of the source's text.
				got = specfile.KeepUntouched(specfile.LF(src), got)
			}
			assert.Equal(t, string(res.Spec), string(got))
		})
	}
}

// TestUntouchedPartsKept: outside the operations and components it
// changes, the augmented spec keeps the source's lines (comments included).
func TestUntouchedPartsKept(t *testing.T) {
	c := cases(t)[0]
	src, err := os.ReadFile(c.spec)
	require.NoError(t, err)
	res := run(t, c)
	for _, line := range []string{
		"# Coupons API: the redemption service of the seed articles, with one",
		"        # The key, declared by hand: idemgen must not declare it twice.",
		"      x-idempotency: {semantics: loose}",
		"          schema: {type: string, format: uuid, maxLength: 64}",
	} {
		assert.Contains(t, string(src), line+"\n")
		assert.Contains(t, string(res.Spec), line+"\n")
	}
	// The hand-declared key is not declared again.
	assert.Equal(t, 1, strings.Count(string(res.Spec), "- name: Idempotency-Key"))
}

// TestAugmentedSpecIsConsistent: the augmented spec compiles without
// errors, with the same contracts, and Diagnose finds nothing missing.
func TestAugmentedSpecIsConsistent(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			before, diags := compile.Compile(c.spec, compile.Options{Overlays: c.overlays})
			require.False(t, diags.HasErrors(), "%v", diags)
			missing := augment.Diagnose(c.spec, before, augment.Options{Overlays: c.overlays})
			assert.NotEmpty(t, missing)

			res := run(t, c)
			name := "openapi.yaml"
			if res.Format.JSON {
				name = "openapi.json"
			}
			path := writeTemp(t, name, res.Spec)
			after, diags := compile.Compile(path, compile.Options{})
			require.False(t, diags.HasErrors(), "%v", diags)
			require.Len(t, after.Operations, len(before.Operations))
			for i := range after.Operations {
				assert.Equal(t, before.Operations[i].Policy.Semantics, after.Operations[i].Policy.Semantics)
				if after.Operations[i].Key.Carrier != "body" {
					assert.NotNil(t, after.Operations[i].Key.Param, "%s declares its key", after.Operations[i].Where())
				}
			}
			assert.Empty(t, augment.Diagnose(path, after, augment.Options{Strict: true}))
		})
	}
}

func TestDiagnoseRules(t *testing.T) {
	c := cases(t)[0]
	spec, _ := compile.Compile(c.spec, compile.Options{})
	diags := augment.Diagnose(c.spec, spec, augment.Options{})
	var buf bytes.Buffer
	require.NoError(t, diags.WriteText(&buf))
	got := strings.ReplaceAll(buf.String(), filepath.Dir(c.spec)+string(filepath.Separator), "")
	gentest.GoldenFile(t, filepath.Join(c.golden, "want.txt"), []byte(got), *update)
	rules := map[string]diag.Severity{}
	for _, d := range diags {
		rules[d.Rule] = d.Severity
	}
	for _, r := range []string{augment.RuleKeyParamMissing, augment.RuleProblemResponseMissing, augment.RuleRetryAfterMissing} {
		sev, ok := rules[r]
		assert.True(t, ok, r)
		assert.Equal(t, diag.Warning, sev, r)
	}
	strict := augment.Diagnose(c.spec, spec, augment.Options{Strict: true})
	assert.True(t, strict.HasErrors())
	assert.Len(t, strict, len(diags))
}

func TestReplaceBlock(t *testing.T) {
	tests := []struct{ text, want string }{
		{"", augment.BeginMarker + "\nB\n" + augment.EndMarker + "\n"},
		{"Intro.", "Intro.\n\n" + augment.BeginMarker + "\nB\n" + augment.EndMarker + "\n"},
		{"Intro.\n\n" + augment.BeginMarker + "\nold\n" + augment.EndMarker + "\nOutro.", "Intro.\n\n" + augment.BeginMarker + "\nB\n" + augment.EndMarker + "\nOutro."},
		{augment.BeginMarker + " unterminated", augment.BeginMarker + " unterminated\n\n" + augment.BeginMarker + "\nB\n" + augment.EndMarker + "\n"},
	}
	for _, tt := range tests {
		got := augment.ReplaceBlock(tt.text, "B")
		assert.Equal(t, tt.want, got)
		assert.Equal(t, got, augment.ReplaceBlock(got, "B"), "idempotent")
	}
	assert.Equal(t, "Key. "+augment.BeginMarker+" B "+augment.EndMarker, augment.ReplaceInline("Key.", "B"))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// TestMergeKeys: an operation merged into its path item (`/a: {<<: *base}`)
// is checked like one written there, at the position of the merged nodes,
// and augmenting declares what it lacks where it is written.
func TestMergeKeys(t *testing.T) {
	src := `openapi: 3.0.3
info: {title: M, version: "1"}
x-common: &base
  post:
    operationId: createA
    x-idempotency: {semantics: strict, window: 24h}
    responses: {'200': {description: ok}}
paths:
  /a:
    <<: *base
`
	path := writeTemp(t, "openapi.yaml", []byte(src))
	spec, diags := compile.Compile(path, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	require.Len(t, spec.Operations, 1)
	assert.Equal(t, 5, spec.Operations[0].Pos.Line, "the operation is where it is written")
	got := augment.Diagnose(path, spec, augment.Options{})
	rules := map[string]int{}
	for _, d := range got {
		rules[d.Rule] = d.Pos.Line
	}
	// key-param-missing at the operation's key, post: in the anchor.
	assert.Equal(t, map[string]int{augment.RuleKeyParamMissing: 4, augment.RuleProblemResponseMissing: 7}, rules, "%v", got)

	res := run(t, specCase{spec: path})
	after := writeTemp(t, "openapi.yaml", res.Spec)
	assert.Contains(t, string(res.Spec), "<<: *base")
	spec2, diags := compile.Compile(after, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Empty(t, augment.Diagnose(after, spec2, augment.Options{Strict: true}))
}

// TestSpecStaleOverlaysAgain: a spec idemgen spec wrote in place holds
// its overlays' contracts; checked with an edited overlay, its summary is
// [spec-stale]. The hint must not send the user to run idemgen spec with
// the overlays on that spec again (its lists would append a second time)
// but to edit the contracts in the spec and check the spec alone.
func TestSpecStaleOverlaysAgain(t *testing.T) {
	c := cases(t)[3]
	require.Equal(t, "petstore", c.name)
	res := run(t, c)
	path := writeTemp(t, "openapi.yaml", res.Spec)
	ov, err := os.ReadFile(c.overlays[0])
	require.NoError(t, err)
	require.Contains(t, string(ov), "window: 24h")
	edited := writeTemp(t, "petstore.overlay.yaml", []byte(strings.Replace(string(ov), "window: 24h", "window: 1h", 1)))
	spec, diags := compile.Compile(path, compile.Options{Overlays: []string{edited}})
	require.False(t, diags.HasErrors(), "%v", diags)
	got := augment.Diagnose(path, spec, augment.Options{Overlays: []string{edited}})
	require.NotEmpty(t, got)
	for _, d := range got {
		assert.Equal(t, augment.RuleSpecStale, d.Rule, "%s", d)
		assert.NotContains(t, d.Message, "(run idemgen spec again)", "%s", d)
		assert.Contains(t, d.Message, "check the spec alone", "%s", d)
	}
	// Without overlays the hint stays short.
	stale := writeTemp(t, "openapi.yaml", []byte(strings.Replace(string(res.Spec), "window: 24h", "window: 1h", 1)))
	spec, diags = compile.Compile(stale, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	got = augment.Diagnose(stale, spec, augment.Options{})
	require.NotEmpty(t, got)
	assert.Contains(t, got[0].Message, "(run idemgen spec again)")
}

// TestSpecStale: after idemgen spec, a contract change leaves the text
// between the markers (and idemgen's components) saying the old contract:
// Diagnose reports each such place [spec-stale], a warning, an error with
// Strict, and augmenting again makes the spec current.
func TestSpecStale(t *testing.T) {
	c := cases(t)[0]
	res := run(t, c)
	require.Contains(t, string(res.Spec), "window: 10m")
	stale := strings.Replace(string(res.Spec), "window: 10m", "window: 20m", 1)
	path := writeTemp(t, "openapi.yaml", []byte(stale))
	spec, diags := compile.Compile(path, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)

	got := augment.Diagnose(path, spec, augment.Options{})
	require.Len(t, got, 1, "%v", got)
	d := got[0]
	assert.Equal(t, augment.RuleSpecStale, d.Rule)
	assert.Equal(t, diag.Warning, d.Severity)
	assert.Contains(t, d.Message, "contract summary in the description of")
	assert.Contains(t, d.Message, "run idemgen spec again")
	// At the marker of the stale block, in the description.
	lines := strings.Split(stale, "\n")
	require.Greater(t, d.Pos.Line, 0)
	assert.True(t, strings.HasPrefix(lines[d.Pos.Line-1][d.Pos.Col-1:], augment.BeginMarker), "%s: %q", d.Pos, lines[d.Pos.Line-1])

	strict := augment.Diagnose(path, spec, augment.Options{Strict: true})
	require.Len(t, strict, 1)
	assert.Equal(t, diag.Error, strict[0].Severity)

	// A component idemgen wrote that differs from what it writes now (an
	// older idemgen, or another set of contracts) is stale too.
	fresh := writeTemp(t, "openapi.yaml", res.Spec)
	spec, diags = compile.Compile(fresh, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Empty(t, augment.Diagnose(fresh, spec, augment.Options{Strict: true}))
	old := "      description: 'IDEMPOTENCY_KEY_REUSED: the key was used for a different request"
	require.Contains(t, string(res.Spec), "    IdempotencyConflict:\n"+old)
	compSrc := strings.Replace(string(res.Spec), old, "      description: 'Older words. IDEMPOTENCY_KEY_REUSED: the key was used for a different request", 1)
	comp := writeTemp(t, "openapi.yaml", []byte(compSrc))
	spec, diags = compile.Compile(comp, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	got = augment.Diagnose(comp, spec, augment.Options{})
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, augment.RuleSpecStale, got[0].Rule)
	assert.Contains(t, got[0].Message, "component responses IdempotencyConflict")
	compLines := strings.Split(compSrc, "\n")
	assert.Equal(t, "    IdempotencyConflict:", compLines[got[0].Pos.Line-2], "at the component's definition")
	assert.Equal(t, "'Older words.", compLines[got[0].Pos.Line-1][got[0].Pos.Col-1:][:13], "at the value that differs")
	// Below its first entry too.
	old = "          description: The stable problem code.\n"
	require.Equal(t, 1, strings.Count(string(res.Spec), old))
	compSrc = strings.Replace(string(res.Spec), old, "          description: The problem code.\n", 1)
	comp = writeTemp(t, "openapi.yaml", []byte(compSrc))
	spec, diags = compile.Compile(comp, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	got = augment.Diagnose(comp, spec, augment.Options{})
	require.Len(t, got, 1, "%v", got)
	assert.Contains(t, got[0].Message, "component schemas IdempotencyProblem")
	compLines = strings.Split(compSrc, "\n")
	assert.Equal(t, "The problem code.", compLines[got[0].Pos.Line-1][got[0].Pos.Col-1:], "at the value that differs")

	again, diags := augment.Augment(path, augment.Options{})
	require.NotNil(t, again, "%v", diags)
	current := writeTemp(t, "openapi.yaml", again.Spec)
	spec, diags = compile.Compile(current, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Empty(t, augment.Diagnose(current, spec, augment.Options{Strict: true}))
}

// stable augments src, then augments the result again: the second run
// changes nothing and Diagnose -strict finds nothing in the first result.
func stable(t *testing.T, src string) string {
	t.Helper()
	path := writeTemp(t, "openapi.yaml", []byte(src))
	first := run(t, specCase{spec: path})
	p1 := writeTemp(t, "openapi.yaml", first.Spec)
	spec, diags := compile.Compile(p1, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Empty(t, augment.Diagnose(p1, spec, augment.Options{Strict: true}))
	again := run(t, specCase{spec: p1})
	assert.Zero(t, again.Actions)
	assert.Equal(t, string(first.Spec), string(again.Spec))
	return string(first.Spec)
}

// TestSharedBodyMember: a body key member two operations reach (one
// requestBody component) gets one note naming both, written once: spec is
// stable and the augmented spec is not stale.
func TestSharedBodyMember(t *testing.T) {
	src := `openapi: 3.0.3
info: {title: M, version: "1"}
paths:
  /b:
    post:
      operationId: createB
      x-idempotency: {semantics: strict, window: 24h, key: {body: /key}}
      requestBody: {$ref: '#/components/requestBodies/Req'}
      responses: {'201': {description: created}}
  /a:
    post:
      operationId: createA
      x-idempotency: {semantics: strict, window: 24h, key: {body: /key}}
      requestBody: {$ref: '#/components/requestBodies/Req'}
      responses: {'201': {description: created}}
components:
  requestBodies:
    Req:
      required: true
      content:
        application/json:
          schema: {$ref: '#/components/schemas/Req'}
  schemas:
    Req:
      type: object
      required: [key]
      properties:
        key: {type: string}
`
	out := stable(t, src)
	assert.Contains(t, out, "Idempotency key of POST /a, POST /b:")
	assert.Equal(t, 1, strings.Count(out, "Idempotency key of"))

	// A note edited since is stale, reported at its marker.
	staleSrc := strings.Replace(out, "new for each logical call", "new for each call", 1)
	path := writeTemp(t, "openapi.yaml", []byte(staleSrc))
	spec, diags := compile.Compile(path, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	got := augment.Diagnose(path, spec, augment.Options{})
	require.Len(t, got, 1, "%v", got)
	assert.Contains(t, got[0].Message, "the key note in the description of the body member /key")
	lines := strings.Split(staleSrc, "\n")
	require.Positive(t, got[0].Pos.Line)
	line := lines[got[0].Pos.Line-1]
	assert.True(t, strings.HasPrefix(line[got[0].Pos.Col-1:], augment.BeginMarker), "%s: %q", got[0].Pos, line)
}

// TestSpecStaleOwnHeadersAndParam: idemgen's header components and key
// parameter, once out of date, are reported stale at their definitions and
// replaced in place (not joined by IdempotencyRetryAfter2 while the
// responses keep referring to the old one).
func TestSpecStaleOwnHeadersAndParam(t *testing.T) {
	src := `openapi: 3.0.3
info: {title: M, version: "1"}
paths:
  /a:
    post:
      operationId: createA
      x-idempotency: {semantics: strict, window: 1h, key: {header: Idempotency-Key, max-length: 64}}
      responses:
        '201': {description: created}
`
	fresh := stable(t, src)
	for _, tc := range []struct{ name, old, new string }{
		{"headers IdempotencyRetryAfter", "description: Seconds to wait before retrying", "description: Older words. Seconds to wait before retrying"},
		{"headers IdempotentReplayed", "description: 'true when this response is the stored response", "description: 'Older words. true when this response is the stored response"},
		{"parameters IdempotencyKey", "description: 'Idempotency key: a string", "description: 'Older words. Idempotency key: a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, 1, strings.Count(fresh, tc.old))
			staleSrc := strings.Replace(fresh, tc.old, tc.new, 1)
			path := writeTemp(t, "openapi.yaml", []byte(staleSrc))
			spec, diags := compile.Compile(path, compile.Options{})
			require.False(t, diags.HasErrors(), "%v", diags)
			got := augment.Diagnose(path, spec, augment.Options{Strict: true})
			require.Len(t, got, 1, "%v", got)
			assert.Equal(t, augment.RuleSpecStale, got[0].Rule)
			assert.Contains(t, got[0].Message, "component "+tc.name)
			lines := strings.Split(staleSrc, "\n")
			// At the value that differs, in the component's definition.
			assert.True(t, strings.HasPrefix(strings.Trim(lines[got[0].Pos.Line-1][got[0].Pos.Col-1:], "'"), "Older words"), "%s: %q", got[0].Pos, lines[got[0].Pos.Line-1])
			assert.Contains(t, strings.Join(lines[:got[0].Pos.Line], "\n"), "\n    "+strings.Fields(tc.name)[1]+":\n")

			again := stable(t, staleSrc)
			assert.NotContains(t, again, "Older words")
			assert.NotContains(t, again, strings.Fields(tc.name)[1]+"2", "replaced, not joined by another")
			assert.Equal(t, strings.Count(fresh, "$ref"), strings.Count(again, "$ref"))
		})
	}
}

// TestMergedContainers: parameters, responses and response headers an
// operation has only through a merge key (`<<: *op`) keep what is merged
// when idemgen adds to them (an own key would override the merged one).
func TestMergedContainers(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"params", `openapi: 3.0.3
info: {title: M, version: "1"}
x-common:
  op: &op
    parameters:
      - {name: tenant, in: query, required: true, schema: {type: string}}
    responses: {'201': {description: created, headers: {Location: {schema: {type: string}}}}}
paths:
  /a:
    post:
      <<: *op
      operationId: createA
      x-idempotency: {semantics: strict, window: 24h, key: {header: Idempotency-Key}}
`},
		{"seqh", `openapi: 3.0.3
info: {title: M, version: "1"}
x-p:
  hdr: &hdr {in: header, required: true, schema: {type: string, maxLength: 64}}
  resp: &resp {description: created, headers: {Location: {schema: {type: string}}}}
paths:
  /a:
    post:
      operationId: createA
      x-idempotency: {semantics: strict, window: 1h, key: {header: Idempotency-Key, max-length: 64}}
      parameters:
        - {<<: *hdr, name: Idempotency-Key}
        - {name: tenant, in: query, required: true, schema: {type: string}}
      responses:
        '201': {<<: *resp}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := stable(t, tc.src)
			var doc struct {
				Paths map[string]map[string]struct {
					Parameters []map[string]any
					Responses  map[string]struct {
						Description string
						Ref         string `yaml:"$ref"`
						Headers     map[string]any
					}
				}
			}
			require.NoError(t, yaml.Unmarshal([]byte(out), &doc))
			op := doc.Paths["/a"]["post"]
			var names []string
			for _, p := range op.Parameters {
				if p["$ref"] != nil {
					names = append(names, p["$ref"].(string))
				} else {
					names = append(names, p["name"].(string))
				}
			}
			assert.Contains(t, names, "tenant")
			assert.Len(t, names, 2, "%v", names)
			created := op.Responses["201"]
			assert.Equal(t, "created", created.Description)
			assert.Contains(t, created.Headers, "Location")
			assert.Contains(t, created.Headers, "Idempotent-Replayed")
			for _, code := range []string{"400", "409", "422", "503"} {
				assert.NotEmpty(t, op.Responses[code].Ref, code)
			}
		})
	}
}

// TestKeepsMultilineScalars: idemgen spec in place keeps the text of
// untouched multi-line flow scalars (quoted or plain values broken over
// lines), which the encoder alone would join on one line, in LF and CRLF
// files, also in the operation it changes.
func TestKeepsMultilineScalars(t *testing.T) {
	src := `openapi: 3.0.3
info:
  title: T
  version: '1'
  description: 'first line
    continues here

    second paragraph'
paths:
  /a:
    get:
      description: "double quoted
        spanning lines"
      summary: a plain scalar
        on two lines
      responses:
        '200': {description: ok}
  /b:
    post:
      operationId: makeB
      summary: "the changed operation's
        own summary"
      x-idempotency: {semantics: strict}
      responses:
        '200': {description: ok}
`
	for _, eol := range []string{"\n", "\r\n"} {
		spec := writeTemp(t, "openapi.yaml", []byte(strings.ReplaceAll(src, "\n", eol)))
		res, diags := augment.Augment(spec, augment.Options{})
		require.NotNil(t, res, "%v", diags)
		out := string(res.Spec)
		for _, keep := range []string{
			"  description: 'first line\n    continues here\n\n    second paragraph'\n",
			"      description: \"double quoted\n        spanning lines\"\n",
			"      summary: a plain scalar\n        on two lines\n",
			"      summary: \"the changed operation's\n        own summary\"\n",
		} {
			assert.Contains(t, out, strings.ReplaceAll(keep, "\n", eol))
		}
		again := writeTemp(t, "openapi.yaml", res.Spec)
		res2, diags := augment.Augment(again, augment.Options{})
		require.NotNil(t, res2, "%v", diags)
		assert.Equal(t, out, string(res2.Spec), "idempotent")
	}
}

// TestLastBlockScalarWithoutFinalNewline: a spec whose last value is a
// block scalar, in a file without a final newline (its last line white
// space), keeps that value's final line break.
func TestLastBlockScalarWithoutFinalNewline(t *testing.T) {
	src := `openapi: 3.0.3
info:
  title: T
  version: '1'
paths:
  /b:
    post:
      operationId: makeB
      x-idempotency: {semantics: strict}
      responses:
        '200': {description: ok}
components:
  schemas:
    X: {type: string}
tags:
  - name: t
    description: |
      The last line of the file.
    `
	res, diags := augment.Augment(writeTemp(t, "openapi.yaml", []byte(src)), augment.Options{})
	require.NotNil(t, res, "%v", diags)
	assert.True(t, strings.HasSuffix(string(res.Spec), "tags:\n  - name: t\n    description: |\n      The last line of the file.\n"), "%s", res.Spec)
	var spec struct {
		Tags []struct{ Description string }
	}
	require.NoError(t, yaml.Unmarshal(res.Spec, &spec))
	assert.Equal(t, "The last line of the file.\n", spec.Tags[0].Description)
	res2, diags := augment.Augment(writeTemp(t, "openapi.yaml", res.Spec), augment.Options{})
	require.NotNil(t, res2, "%v", diags)
	assert.Equal(t, string(res.Spec), string(res2.Spec), "idempotent")
}

// sameDocument asserts that YAML (or JSON) documents a and b hold the same
// data, in whichever order their mappings list it.
func sameDocument(t *testing.T, a, b []byte) {
	t.Helper()
	var va, vb any
	require.NoError(t, yaml.Unmarshal(a, &va))
	require.NoError(t, yaml.Unmarshal(b, &vb))
	if !assert.ObjectsAreEqual(va, vb) {
		la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
		i := 0
		for i < len(la) && i < len(lb) && la[i] == lb[i] {
			i++
		}
		t.Errorf("the documents differ from line %d:\n%s\nvs\n%s", i+1, strings.Join(la[i:min(i+15, len(la))], "\n"), strings.Join(lb[i:min(i+15, len(lb))], "\n"))
	}
}

// TestNoReplayedHeader: with NoReplayedHeader, idemgen spec declares no
// Idempotent-Replayed header (so oapi-codegen's strict response types
// keep their shape), and the option round-trips: on a spec augmented with
// the header, it removes exactly those declarations (check reports them as
// spec-stale, -strict as errors), and without the option a spec augmented
// with it gains them back, byte for byte what augmenting the source gives.
func TestNoReplayedHeader(t *testing.T) {
	for _, c := range cases(t)[:4] { // coupons, orders-json, crlf, petstore
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			augmentFile := func(path string, overlays []string, no bool) *augment.Result {
				t.Helper()
				res, diags := augment.Augment(path, augment.Options{Overlays: overlays, NoReplayedHeader: no})
				require.NotNil(t, res, "%v", diags)
				return res
			}
			ext := filepath.Ext(c.spec)
			with := augmentFile(c.spec, c.overlays, false)
			without := augmentFile(c.spec, c.overlays, true)
			require.Contains(t, string(with.Spec), "Idempotent-Replayed:")
			require.Contains(t, string(with.Spec), "IdempotentReplayed")
			assert.NotContains(t, strings.ReplaceAll(string(without.Spec), "`Idempotent-Replayed: true`", ""), "Idempotent-Replayed")
			assert.NotContains(t, string(without.Spec), "IdempotentReplayed")

			// With -> without: exactly the declarations go.
			withPath := writeTemp(t, "with"+ext, with.Spec)
			removed := augmentFile(withPath, nil, true)
			sameDocument(t, without.Spec, removed.Spec)
			assert.Positive(t, removed.Actions)
			// Without -> with: they come back.
			withoutPath := writeTemp(t, "without"+ext, without.Spec)
			added := augmentFile(withoutPath, nil, false)
			sameDocument(t, with.Spec, added.Spec)
			// Both are fixed points.
			assert.Zero(t, augmentFile(withoutPath, nil, true).Actions)
			assert.Zero(t, augmentFile(withPath, nil, false).Actions)

			// check: the option's own spec is clean under -strict; the other
			// one is stale with the option, and clean without it (no rule
			// requires the header).
			diagnose := func(path string, no bool) diag.List {
				d, spec, diags := compile.LoadAndCompile(path, load.Options{}, compile.Options{})
				require.NotNil(t, spec, "%v", diags)
				return augment.DiagnoseDocument(d, spec, augment.Options{Strict: true, NoReplayedHeader: no})
			}
			assert.Empty(t, diagnose(withoutPath, true))
			assert.Empty(t, diagnose(withPath, false))
			assert.Empty(t, diagnose(withoutPath, false))
			stale := diagnose(withPath, true)
			require.NotEmpty(t, stale)
			for _, d := range stale {
				assert.Equal(t, augment.RuleSpecStale, d.Rule, "%s", d)
				assert.Equal(t, diag.Error, d.Severity, "%s", d)
				assert.Contains(t, d.Message, "Idempotent-Replayed")
			}
		})
	}
}

// A key compile refuses or reports is not reported again as
// key-param-missing: not for a key in a cookie (refused: the operation has
// no key, not the default header), not for an undeclared query key
// (key-undeclared says it, with the same hint).
func TestNoKeyParamMissingOnTopOfCompileErrors(t *testing.T) {
	for name, want := range map[string]string{"key-in-cookie": "key-in-cookie", "key-undeclared": "key-undeclared"} {
		spec := filepath.Join("..", "..", "testdata", "contract", name, "openapi.yaml")
		s, diags := compile.Compile(spec, compile.Options{})
		require.NotNil(t, s, name)
		diags = append(diags, augment.Diagnose(spec, s, augment.Options{})...)
		var rules []string
		for _, d := range diags {
			rules = append(rules, d.Rule)
		}
		assert.Contains(t, rules, want, name)
		assert.NotContains(t, rules, augment.RuleKeyParamMissing, name)
	}
}

// TestAliasedResponses: a response an operation gives as an alias
// (`'200': *ok`) keeps what the alias stands for when idemgen adds
// Idempotent-Replayed or Retry-After to it (the overlay would replace the
// alias with the additions alone), and the anchored original is left as
// it was for its other users: the result is a valid OpenAPI document and
// augmenting it again changes nothing.
func TestAliasedResponses(t *testing.T) {
	src := `openapi: 3.0.3
info: {title: M, version: "1"}
x-shared:
  down: &down {description: down for now}
  gone: &gone {description: gone}
paths:
  /a:
    post:
      operationId: createA
      x-idempotency: {semantics: strict, window: 24h, key: {header: Idempotency-Key}}
      responses:
        '201': &ok
          description: created
          content:
            application/json:
              schema: {type: object, properties: {n: {type: integer}}}
        '409': &busy
          description: busy
  /b:
    post:
      operationId: createB
      x-idempotency: {semantics: loose, window: 1h, key: {header: Idempotency-Key}}
      responses:
        '200': *ok
        '409': *busy
        '503': *down
  /c:
    get:
      operationId: getC
      responses:
        '200': *ok
        '503': *down
        '410': *gone
`
	out := stable(t, src)
	doc, err := openapi3.NewLoader().LoadFromData([]byte(out))
	require.NoError(t, err)
	assert.NoError(t, doc.Validate(context.Background()), "%s", out)

	b := doc.Paths.Find("/b").Post.Responses
	ok := b.Status(200).Value
	require.NotNil(t, ok.Description)
	assert.Equal(t, "created", *ok.Description)
	assert.Contains(t, ok.Content, "application/json")
	assert.Contains(t, ok.Headers, "Idempotent-Replayed")
	for code, desc := range map[int]string{409: "busy", 503: "down for now"} {
		r := b.Status(code).Value
		require.NotNil(t, r.Description, "%d", code)
		assert.Equal(t, desc, *r.Description, "%d", code)
		assert.Contains(t, r.Headers, "Retry-After", "%d", code)
	}
	// The anchored original outside the operations is not changed for
	// its other users (GET /c is not idempotent).
	assert.Contains(t, out, "  down: &down {description: down for now}\n")
	c := doc.Paths.Find("/c").Get.Responses
	assert.Empty(t, c.Status(503).Value.Headers)
	assert.Contains(t, out, "        '503': *down\n        '410': *gone\n")
	// POST /a's own 201 carries the anchor GET /c uses: what is added to
	// it is not added to GET /c's 200.
	assert.Contains(t, doc.Paths.Find("/a").Post.Responses.Status(201).Value.Headers, "Idempotent-Replayed")
	assert.NotContains(t, c.Status(200).Value.Headers, "Idempotent-Replayed")
	require.NotNil(t, c.Status(200).Value.Description)
	assert.Equal(t, "created", *c.Status(200).Value.Description)
	assert.Contains(t, c.Status(200).Value.Content, "application/json")
}

// TestKeyParamMissingPointer: key-param-missing points at the operation's
// method key with the operation's full JSON pointer, not one relative to
// its path item.
func TestKeyParamMissingPointer(t *testing.T) {
	src := `openapi: 3.0.3
info: {title: P, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotency: {semantics: strict}
      responses: {'201': {description: ok}}
`
	path := writeTemp(t, "openapi.yaml", []byte(src))
	spec, diags := compile.Compile(path, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	var found bool
	for _, d := range augment.Diagnose(path, spec, augment.Options{}) {
		if d.Rule != augment.RuleKeyParamMissing {
			continue
		}
		found = true
		assert.Equal(t, "/paths/~1orders/post", d.Pos.Pointer)
		assert.Equal(t, 5, d.Pos.Line)
		assert.Equal(t, 5, d.Pos.Col)
	}
	assert.True(t, found, "key-param-missing reported")
}

// TestExternalPathItem: an operation whose path item is a $ref to another
// document is checked as it is written there (check reports what it lacks
// at that document's positions, with no hint to run idemgen spec, which
// does not change that document), and spec says what to declare there.
func TestExternalPathItem(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "paths"), 0o755))
	spec := filepath.Join(dir, "openapi.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("openapi: 3.0.3\ninfo: {title: M, version: \"1\"}\npaths:\n  /orders:\n    $ref: ./paths/orders.yaml\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "paths", "orders.yaml"), []byte(`post:
  operationId: createOrder
  x-idempotency: {semantics: strict}
  responses:
    '201': {description: created}
    '503': {description: down}
`), 0o644))
	ext := filepath.Join(dir, "paths", "orders.yaml")
	s, cd := compile.Compile(spec, compile.Options{})
	require.NotNil(t, s, "%v", cd)
	diags := augment.Diagnose(spec, s, augment.Options{Strict: true})
	got := map[string]diag.Diagnostic{}
	for _, d := range diags {
		got[d.Rule] = d
		assert.NotContains(t, d.Message, "run idemgen spec", "%s", d)
		assert.Equal(t, diag.Error, d.Severity, "%s", d)
	}
	require.Contains(t, got, augment.RuleKeyParamMissing)
	assert.Equal(t, ext, got[augment.RuleKeyParamMissing].Pos.File)
	assert.Equal(t, 1, got[augment.RuleKeyParamMissing].Pos.Line)
	require.Contains(t, got, augment.RuleProblemResponseMissing)
	assert.Equal(t, 5, got[augment.RuleProblemResponseMissing].Pos.Line)
	assert.Contains(t, got[augment.RuleProblemResponseMissing].Message, "400, 409, 422")
	require.Contains(t, got, augment.RuleRetryAfterMissing)
	assert.Equal(t, 6, got[augment.RuleRetryAfterMissing].Pos.Line)

	res, adiags := augment.Augment(spec, augment.Options{})
	require.NotNil(t, res, "%v", adiags)
	assert.Zero(t, res.Actions)
	var msgs []string
	for _, d := range adiags {
		if d.Rule == augment.RuleNotAugmented {
			msgs = append(msgs, d.Message)
			assert.Equal(t, ext, d.Pos.File)
		}
	}
	require.Len(t, msgs, 1)
	for _, want := range []string{"name: Idempotency-Key, in: header, required: true", "maxLength: 255", "400, 409, 422", "Retry-After", "on the 503 response"} {
		assert.Contains(t, msgs[0], want)
	}
}

// TestExternalResponseRetryAfter: a response given as a $ref to another
// document without Retry-After is reported with no hint to run idemgen
// spec (which cannot change that document), and spec reports it as
// spec-not-augmented naming the document; one that declares it there is
// not reported.
func TestExternalResponseRetryAfter(t *testing.T) {
	src := filepath.Join(testdata, "check", "external-response-retry-after")
	dir := t.TempDir()
	for _, f := range []string{"openapi.yaml", "common.yaml"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), readFile(t, filepath.Join(src, f)), 0o644))
	}
	spec := filepath.Join(dir, "openapi.yaml")
	s, cd := compile.Compile(spec, compile.Options{})
	require.NotNil(t, s, "%v", cd)
	diags := augment.Diagnose(spec, s, augment.Options{})
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, augment.RuleRetryAfterMissing, diags[0].Rule)
	assert.Equal(t, 12, diags[0].Pos.Line)
	assert.NotContains(t, diags[0].Message, "idemgen spec,")
	assert.Contains(t, diags[0].Message, "common.yaml#/responses/TooMany")

	res, adiags := augment.Augment(spec, augment.Options{})
	require.NotNil(t, res, "%v", adiags)
	require.Len(t, adiags, 1, "%v", adiags)
	assert.Equal(t, augment.RuleNotAugmented, adiags[0].Rule)
	assert.Contains(t, adiags[0].Message, "common.yaml#/responses/TooMany")
	assert.Contains(t, adiags[0].Message, "Retry-After")
}

// The 409 IdempotencyConflict component, whose IDEMPOTENCY_RESPONSE_UNAVAILABLE
// answer carries Idempotent-Replayed: true, declares that header, unless
// replayed-header is false.
func TestConflictDeclaresReplayed(t *testing.T) {
	c := cases(t)[0]
	for _, no := range []bool{false, true} {
		res, diags := augment.Augment(c.spec, augment.Options{Overlays: c.overlays, NoReplayedHeader: no})
		require.NotNil(t, res, "%v", diags)
		doc, err := openapi3.NewLoader().LoadFromData(res.Spec)
		require.NoError(t, err)
		conflict := doc.Components.Responses["IdempotencyConflict"]
		require.NotNil(t, conflict)
		_, ok := conflict.Value.Headers["Idempotent-Replayed"]
		assert.Equal(t, !no, ok, "NoReplayedHeader %v", no)
		assert.Contains(t, conflict.Value.Headers, "Retry-After")
	}
}
