package naming_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/internal/testenv"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/naming"
)

func TestOperation(t *testing.T) {
	tests := []struct{ id, method, path, want string }{
		{"claimCoupon", "POST", "/x", "ClaimCoupon"},
		{"post-transfers-transferId-returns", "POST", "/x", "PostTransfersTransferIdReturns"},
		{"find pet by id", "GET", "/x", "FindPetById"},
		{"create_payment.v2", "POST", "/x", "CreatePaymentV2"},
		{"2fa_enroll", "POST", "/x", "N2faEnroll"},
		{"", "POST", "/pets/{petId}/claims", "PostPetsPetIdClaims"},
		{"", "patch", "/", "Patch"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, naming.Operation(tt.id, tt.method, tt.path), "%q %s %s", tt.id, tt.method, tt.path)
	}
}

func TestParamAndSchema(t *testing.T) {
	assert.Equal(t, "IdempotencyKey", naming.Param("Idempotency-Key", ""))
	assert.Equal(t, "IdemKey", naming.Param("Idempotency-Key", "IdemKey"))
	assert.Equal(t, "PayPalRequestId", naming.Param("PayPal-Request-Id", ""))
	assert.Equal(t, "petId", naming.ParamVariable("PetId"))
	assert.Equal(t, "pType", naming.ParamVariable("Type"))
	assert.Equal(t, "NewPet", naming.SchemaRef("#/components/schemas/NewPet", ""))
	assert.Equal(t, "Pet", naming.SchemaRef("#/components/schemas/new_pet", "Pet"))
	assert.Equal(t, "", naming.SchemaRef("other.yaml#/Pet", ""))
	assert.True(t, naming.IsJSONMediaType("application/merge-patch+json"))
	assert.True(t, naming.IsJSONMediaType("application/json; charset=utf-8"))
	assert.False(t, naming.IsJSONMediaType("application/x-www-form-urlencoded"))
}

func ExampleOperation() {
	fmt.Println(naming.Operation("post-transfers", "POST", "/transfers"))
	fmt.Println(naming.Operation("", "POST", "/coupons/{couponId}/claims"))
	n := naming.Names(naming.Operation("claimCoupon", "POST", "/coupons/{couponId}/claims"))
	fmt.Println(n.RequestObject, n.Params, n.WithResponse, n.JSONRequestBody)
	// Output:
	// PostTransfers
	// PostCouponsCouponIdClaims
	// ClaimCouponRequestObject ClaimCouponParams ClaimCouponWithResponse ClaimCouponJSONRequestBody
}

// TestAgainstOapiCodegen generates code with oapi-codegen itself for the
// shared specs (annotated) and checks that every identifier the IR names
// is declared there with that name.
func TestAgainstOapiCodegen(t *testing.T) {
	specs := findShared(t)
	ovDir := filepath.Join("..", "..", "testdata", "overlays")
	for _, c := range []struct{ name, spec string }{
		{"petstore", "petstore-expanded.yaml"},
		{"adyen", "adyen-transfers-v4.json"},
		{"modern-treasury", "modern-treasury.yaml"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "modern-treasury" {
				if testing.Short() {
					t.Skip("modern-treasury: slow; skipped under -short")
				}
				testenv.SkipUnderRace(t, "oapi-codegen on modern-treasury")
			}
			path := filepath.Join(specs, c.spec)
			spec, diags := compile.Compile(path, compile.Options{Overlays: []string{filepath.Join(ovDir, c.name+".overlay.yaml")}})
			require.False(t, diags.HasErrors(), "%v", diags)
			loader := openapi3.NewLoader()
			loader.IsExternalRefsAllowed = true
			doc, err := loader.LoadFromFile(path)
			require.NoError(t, err)
			code, err := codegen.Generate(doc, codegen.Configuration{
				PackageName:   "api",
				Generate:      codegen.GenerateOptions{Strict: true, StdHTTPServer: true, Client: true, Models: true},
				OutputOptions: codegen.OutputOptions{SkipFmt: true},
			})
			require.NoError(t, err)
			code = regexp.MustCompile(`[ \t]+`).ReplaceAllString(code, " ")
			has := func(pattern string) bool { return regexp.MustCompile(pattern).MatchString(code) }
			for _, op := range spec.Operations {
				n := op.Names
				where := op.Method + " " + op.Path
				assert.True(t, has(`type `+n.RequestObject+` struct`), "%s: %s", where, n.RequestObject)
				assert.True(t, has(`\b`+n.Handler+`\(ctx context.Context, request `+n.RequestObject), "%s: strict handler %s", where, n.Handler)
				assert.True(t, has(`func \(c \*ClientWithResponses\) `+n.WithResponse+`\(`), "%s: %s", where, n.WithResponse)
				assert.True(t, has(`type `+n.ResponseType+` struct`), "%s: %s", where, n.ResponseType)
				if n.WithBodyWithResponse != "" {
					assert.True(t, has(`func \(c \*ClientWithResponses\) `+n.WithBodyWithResponse+`\(`), "%s: %s", where, n.WithBodyWithResponse)
				}
				if n.Params != "" {
					assert.True(t, has(`type `+n.Params+` struct`), "%s: %s", where, n.Params)
				}
				if n.JSONRequestBody != "" && op.Body != nil && op.Body.GoType != "" {
					eq := " "
					if op.Body.Alias {
						eq = " = "
					}
					assert.True(t, has(`type `+n.JSONRequestBody+eq+regexp.QuoteMeta(op.Body.GoType)+`\n`), "%s: %s%s%s", where, n.JSONRequestBody, eq, op.Body.GoType)
				}
				if p := op.Key.Param; p != nil && n.Params != "" {
					star := ""
					if p.Pointer {
						star = `\*`
					}
					start := strings.Index(code, "type "+n.Params+" struct")
					require.GreaterOrEqual(t, start, 0, "%s: %s", where, n.Params)
					block := code[start:]
					block = block[:strings.Index(block, "\n}")]
					assert.Regexp(t, `\n\s*`+p.GoName+`\s+`+star+`\w`, block, "%s: key field", where)
				}
				for _, p := range op.PathParams {
					assert.True(t, has(`\b`+naming.ParamVariable(p.GoName)+` `), "%s: path param %s", where, p.GoName)
				}
			}
		})
	}
}

// findShared returns testdata/specs, the real public specs copied into the repo.
func findShared(t *testing.T) string {
	return testenv.SpecsDir(t)
}
