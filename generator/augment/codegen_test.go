package augment_test

import (
	"regexp"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// generate runs oapi-codegen in process (models, client, strict server)
// on a spec and returns the code with runs of blanks collapsed.
func generate(t *testing.T, spec []byte) string {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	require.NoError(t, err)
	code, err := codegen.Generate(doc, codegen.Configuration{
		PackageName:   "api",
		Generate:      codegen.GenerateOptions{Strict: true, StdHTTPServer: true, Client: true, Models: true},
		OutputOptions: codegen.OutputOptions{SkipFmt: true},
	})
	require.NoError(t, err)
	return regexp.MustCompile(`[ \t]+`).ReplaceAllString(code, " ")
}

// TestOapiCodegenTypedKey: oapi-codegen, run on the augmented spec, gives
// every operation whose key travels in a header or query parameter a
// typed IdempotencyKey (or RequestToken) field in <Op>Params, and the
// problem responses a typed body.
func TestOapiCodegenTypedKey(t *testing.T) {
	for _, c := range []struct {
		name   string
		params map[string]string // <Op>Params -> field
		before []string          // <Op>Params that have no key field before augmentation
	}{
		{"coupons", map[string]string{
			"ClaimCouponParams":    `IdempotencyKey (openapi_types.UUID|IdempotencyKey\d*)`,
			"UpdateCouponParams":   `IdempotencyKey (openapi_types.UUID|IdempotencyKey\d*)`,
			"CreateTransferParams": `RequestToken \*string`,
		}, []string{"ClaimCouponParams"}},
		{"petstore", map[string]string{"AddPetParams": `IdempotencyKey (openapi_types.UUID|IdempotencyKey\d*)`}, []string{"AddPetParams"}},
		{"orders-json", map[string]string{"CreateOrderParams": `IdempotencyKey (openapi_types.UUID|IdempotencyKey\d*)`, "CancelOrderParams": `IdempotencyKey (openapi_types.UUID|IdempotencyKey\d*)`}, []string{"CancelOrderParams"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sc specCase
			for _, x := range cases(t) {
				if x.name == c.name {
					sc = x
				}
			}
			res := run(t, sc)
			code := generate(t, res.Spec)
			for params, field := range c.params {
				m := regexp.MustCompile(`(?s)type ` + params + ` struct \{(.*?)\n\}`).FindStringSubmatch(code)
				require.NotNil(t, m, "no type %s", params)
				assert.Regexp(t, `\n `+field+" ?`", m[1], params)
			}
			assert.Regexp(t, `type IdempotencyProblem struct`, code)
			assert.Regexp(t, `type IdempotencyProblemCode string`, code)
			assert.Regexp(t, `IDEMPOTENCYKEYINUSE IdempotencyProblemCode = "IDEMPOTENCY_KEY_IN_USE"`, code)

			// Before augmentation, the key was not (or not everywhere) a typed parameter.
			src := readFile(t, sc.spec)
			if len(sc.overlays) > 0 {
				return // the overlays add contracts only; the raw spec is checked below for coupons
			}
			plain := generate(t, src)
			for _, params := range c.before {
				m := regexp.MustCompile(`(?s)type ` + params + ` struct \{(.*?)\n\}`).FindStringSubmatch(plain)
				if m != nil {
					assert.NotContains(t, m[1], "IdempotencyKey", params)
				}
			}
		})
	}
}
