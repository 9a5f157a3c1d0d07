package augment_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/compile"
)

// problemContentSpec declares, at statuses idemgen's runtime answers with
// a problem, the API's own responses: an inline 422 as application/json,
// a shared 409 (a component two operations use) as application/json, a
// 503 without content, and on the other operation a 422 that already
// declares application/problem+json.
const problemContentSpec = `openapi: 3.0.3
info: {title: T, version: 1.0.0}
x-idempotency: {semantics: strict, window: 24h}
paths:
  /ledgers:
    post:
      operationId: createLedger
      x-idempotency: true
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses:
        '201': {description: created}
        '400': {description: bad, content: {application/json: {schema: {$ref: '#/components/schemas/Err'}}}}
        '409': {$ref: '#/components/responses/Conflict'}
        '422': {description: invalid, content: {application/json: {schema: {$ref: '#/components/schemas/Err'}}}}
        '503': {description: down}
  /accounts:
    post:
      operationId: createAccount
      x-idempotency: true
      parameters:
        - {name: Idempotency-Key, in: header, required: true, schema: {type: string}}
      requestBody: {required: true, content: {application/json: {schema: {type: object}}}}
      responses:
        '201': {description: created}
        '409': {$ref: '#/components/responses/Conflict'}
        '422':
          description: invalid
          content:
            application/problem+json: {schema: {type: object}}
components:
  schemas:
    Err: {type: object, properties: {message: {type: string}}}
  responses:
    Conflict:
      description: conflict
      content: {application/json: {schema: {$ref: '#/components/schemas/Err'}}}
`

// TestProblemContent: an existing response, at a status idemgen's runtime
// answers with application/problem+json, that declares other content gains
// a problem+json entry (inline, or once on a shared component); its own
// content stays. check reports it [problem-response-missing] until then.
// A response without content, or one that declares problem+json, is left
// as it is. oapi-codegen then decodes the runtime's problem into
// ApplicationproblemJSON<code> and keeps the API's JSON<code> and its
// strict response types.
func TestProblemContent(t *testing.T) {
	path := writeTemp(t, "openapi.yaml", []byte(problemContentSpec))
	s, diags := compile.Compile(path, compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	var msgs []string
	for _, d := range augment.Diagnose(path, s, augment.Options{}) {
		if strings.Contains(d.Message, "application/problem+json content") {
			assert.Equal(t, augment.RuleProblemResponseMissing, d.Rule)
			msg, _, _ := strings.Cut(d.Message, " (run idemgen spec")
			msgs = append(msgs, msg)
		}
	}
	assert.ElementsMatch(t, []string{
		"the 400 response of POST /ledgers declares no application/problem+json content, which idemgen's runtime answers with: oapi-codegen's client would not decode its problems",
		"the 409 response of POST /ledgers declares no application/problem+json content, which idemgen's runtime answers with: oapi-codegen's client would not decode its problems",
		"the 422 response of POST /ledgers declares no application/problem+json content, which idemgen's runtime answers with: oapi-codegen's client would not decode its problems",
		"the 409 response of POST /accounts declares no application/problem+json content, which idemgen's runtime answers with: oapi-codegen's client would not decode its problems",
	}, msgs)

	out := stable(t, problemContentSpec)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Ref     string         `yaml:"$ref"`
				Content map[string]any `yaml:"content"`
			}
		}
		Components struct {
			Responses map[string]struct {
				Content map[string]any `yaml:"content"`
			}
		}
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &doc))
	media := func(content map[string]any) []string {
		var out []string
		for m := range content {
			out = append(out, m)
		}
		slices.Sort(out)
		return out
	}
	both := []string{"application/json", "application/problem+json"}
	ledger := doc.Paths["/ledgers"]["post"].Responses
	assert.Equal(t, both, media(ledger["400"].Content))
	assert.Equal(t, both, media(ledger["422"].Content))
	assert.Equal(t, "#/components/responses/Conflict", ledger["409"].Ref)
	assert.Equal(t, both, media(doc.Components.Responses["Conflict"].Content))
	assert.Empty(t, ledger["503"].Content, "a response without content is left without")
	assert.Equal(t, []string{"application/problem+json"}, media(doc.Paths["/accounts"]["post"].Responses["422"].Content))

	code := generate(t, []byte(out))
	for _, want := range []string{
		`JSON422 \*Err\b`, `ApplicationproblemJSON422 \*IdempotencyProblem\b`,
		`JSON409 \*ConflictApplicationJSON\b`, `ApplicationproblemJSON409 \*ConflictApplicationProblemPlusJSON\b`,
		`type CreateLedger422JSONResponse struct \{\s*Body Err\b`, `type CreateLedger422ApplicationProblemPlusJSONResponse struct \{\s*Body IdempotencyProblem\b`,
		`type CreateLedger503Response struct`,
	} {
		assert.Regexp(t, regexp.MustCompile(want), code)
	}
}
