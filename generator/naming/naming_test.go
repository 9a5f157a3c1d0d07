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
		assert.Equal(t, tt.want, naming.Default.Operation(tt.id, tt.method, tt.path), "%q %s %s", tt.id, tt.method, tt.path)
	}
}

func TestParamAndSchema(t *testing.T) {
	assert.Equal(t, "IdempotencyKey", naming.Default.Param("Idempotency-Key", ""))
	assert.Equal(t, "IdemKey", naming.Default.Param("Idempotency-Key", "IdemKey"))
	assert.Equal(t, "PayPalRequestId", naming.Default.Param("PayPal-Request-Id", ""))
	assert.Equal(t, "petId", naming.ParamVariable("PetId"))
	assert.Equal(t, "pType", naming.ParamVariable("Type"))
	assert.Equal(t, []string{"petId", "keyArg", "keyArgArg", "keyArg2", "optsArg"},
		naming.ArgVariables([]string{"PetId", "Key", "KeyArg", "Key", "Opts"}, "key", "opts"))
	assert.Equal(t, "NewPet", naming.Default.SchemaRef("#/components/schemas/NewPet", ""))
	assert.Equal(t, "Pet", naming.Default.SchemaRef("#/components/schemas/new_pet", "Pet"))
	assert.Equal(t, "", naming.Default.SchemaRef("other.yaml#/Pet", ""))
	assert.True(t, naming.IsJSONMediaType("application/merge-patch+json"))
	assert.True(t, naming.IsJSONMediaType("application/json; charset=utf-8"))
	assert.False(t, naming.IsJSONMediaType("application/x-www-form-urlencoded"))
}

func ExampleNamer_Operation() {
	fmt.Println(naming.Default.Operation("post-transfers", "POST", "/transfers"))
	fmt.Println(naming.Default.Operation("", "POST", "/coupons/{couponId}/claims"))
	n := naming.Names(naming.Default.Operation("claimCoupon", "POST", "/coupons/{couponId}/claims"))
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
				where := op.Where()
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
					if p.GoType != "" {
						assert.Regexp(t, `\n\s*`+p.GoName+`\s+`+star+regexp.QuoteMeta(p.GoType)+"[ `]", block, "%s: key field type", where)
					}
				}
				for _, p := range op.PathParams {
					assert.True(t, has(`\b`+naming.ParamVariable(p.GoName)+` `), "%s: path param %s", where, p.GoName)
				}
				// The path arguments of the client's method have the types the IR says.
				m := regexp.MustCompile(`func \(c \*ClientWithResponses\) ` + n.WithResponse + `\(ctx context\.Context, ([^)]*)\)`).FindStringSubmatch(code)
				require.NotNil(t, m, "%s: %s", where, n.WithResponse)
				args := strings.Split(m[1], ", ")
				require.Greater(t, len(args), len(op.PathParams), "%s", where)
				for i, p := range op.PathParams {
					assert.NotEmpty(t, p.GoType, "%s: path param %s", where, p.Name)
					assert.Equal(t, naming.ParamVariable(p.GoName)+" "+p.GoType, args[i], "%s: path param %s", where, p.Name)
				}
			}
		})
	}
}

// findShared returns testdata/specs, the real public specs copied into the repo.
func findShared(t *testing.T) string {
	return testenv.SpecsDir(t)
}

func TestParamType(t *testing.T) {
	str := func(format string) *openapi3.SchemaRef {
		return openapi3.NewStringSchema().WithFormat(format).NewRef()
	}
	enum := openapi3.NewStringSchema().WithEnum("a", "b")
	withExt := func(s *openapi3.Schema, k string, v any) *openapi3.Schema {
		s.Extensions = map[string]any{k: v}
		return s
	}
	param := func(name string, s *openapi3.SchemaRef) *openapi3.Parameter {
		return &openapi3.Parameter{Name: name, In: "path", Required: true, Schema: s}
	}
	nullable := openapi3.NewStringSchema()
	nullable.Nullable = true
	tests := []struct {
		name   string
		ref    string
		p      *openapi3.Parameter
		shared bool
		is31   bool
		want   string
	}{
		{"string", "", param("id", str("")), false, false, "string"},
		{"uuid", "", param("id", str("uuid")), false, false, "openapi_types.UUID"},
		{"date-time", "", param("at", str("date-time")), false, false, "time.Time"},
		{"unknown format", "", param("id", str("slug")), false, false, "string"},
		{"int64", "", param("n", openapi3.NewInt64Schema().NewRef()), false, false, "int64"},
		{"integer", "", param("n", openapi3.NewIntegerSchema().NewRef()), false, false, "int"},
		{"number", "", param("x", openapi3.NewFloat64Schema().NewRef()), false, false, "float32"},
		{"double", "", param("x", openapi3.NewFloat64Schema().WithFormat("double").NewRef()), false, false, "float64"},
		{"bool", "", param("b", openapi3.NewBoolSchema().NewRef()), false, false, "bool"},
		{"array", "", param("ids", openapi3.NewArraySchema().WithItems(openapi3.NewStringSchema().WithFormat("uuid")).NewRef()), false, false, "[]openapi_types.UUID"},
		{"enum", "", param("accounts_type", enum.NewRef()), false, false, "ClaimCouponParamsAccountsType"},
		{"enum array", "", param("kinds", openapi3.NewArraySchema().WithItems(enum).NewRef()), false, false, "[]ClaimCouponParamsKinds"},
		{"enum x-go-type-name", "", param("k", withExt(openapi3.NewStringSchema().WithEnum("a"), "x-go-type-name", "Kind").NewRef()), false, false, "Kind"},
		{"enum on the path item", "", param("k", enum.NewRef()), true, false, ""},
		{"schema ref", "", param("id", openapi3.NewSchemaRef("#/components/schemas/coupon_id", openapi3.NewStringSchema())), false, false, "CouponId"},
		{"schema ref x-go-name", "", param("id", openapi3.NewSchemaRef("#/components/schemas/coupon_id", withExt(openapi3.NewStringSchema(), "x-go-name", "CID"))), false, false, "CID"},
		{"component parameter", "#/components/parameters/Idempotency-Key", param("Idempotency-Key", str("")), false, false, "IdempotencyKey"},
		{"component parameter x-go-name", "#/components/parameters/Idempotency-Key", &openapi3.Parameter{Name: "K", In: "header", Schema: str(""), Extensions: map[string]any{"x-go-name": "Key"}}, false, false, "Key"},
		{"component parameter, inline enum", "#/components/parameters/Kind", param("kind", enum.NewRef()), false, false, ""},
		{"x-go-type", "", param("id", withExt(openapi3.NewStringSchema(), "x-go-type", "mypkg.ID").NewRef()), false, false, ""},
		{"object", "", param("o", openapi3.NewObjectSchema().WithProperty("a", openapi3.NewStringSchema()).NewRef()), false, false, ""},
		{"oneOf", "", param("o", openapi3.NewOneOfSchema(openapi3.NewStringSchema(), openapi3.NewIntegerSchema()).NewRef()), false, false, ""},
		{"nullable", "", param("o", nullable.NewRef()), false, false, ""},
		{"content, not JSON", "", &openapi3.Parameter{Name: "c", In: "path", Content: openapi3.NewContentWithSchema(openapi3.NewIntegerSchema(), []string{"text/plain"})}, false, false, "string"},
		{"content, JSON", "", &openapi3.Parameter{Name: "c", In: "path", Content: openapi3.NewContentWithJSONSchema(openapi3.NewInt32Schema())}, false, false, "int32"},
		{"3.1 binary", "", param("f", func() *openapi3.SchemaRef {
			s := openapi3.NewStringSchema()
			s.ContentMediaType = "image/png"
			return s.NewRef()
		}()), false, true, "openapi_types.File"},
		{"3.1 type with null", "", param("f", &openapi3.SchemaRef{Value: &openapi3.Schema{Type: &openapi3.Types{"string", "null"}}}), false, true, ""},
		{"no parameter", "", nil, false, false, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, naming.Default.ParamType(tt.ref, tt.p, "ClaimCoupon", tt.shared, tt.is31), tt.name)
	}
}

// TestNormalizers checks each Namer against oapi-codegen's own
// SchemaNameToTypeName under the same name-normalizer (which oapi-codegen
// reads from the package state codegen.Generate sets).
func TestNormalizers(t *testing.T) {
	doc := &openapi3.T{OpenAPI: "3.0.3", Info: &openapi3.Info{Title: "t", Version: "1"}, Paths: openapi3.NewPaths()}
	gen := func(normalizer string, initialisms []string) {
		_, err := codegen.Generate(doc, codegen.Configuration{PackageName: "api", Generate: codegen.GenerateOptions{Models: true},
			OutputOptions: codegen.OutputOptions{SkipFmt: true, NameNormalizer: normalizer, AdditionalInitialisms: initialisms}})
		require.NoError(t, err)
	}
	t.Cleanup(func() { gen("", nil) })
	inputs := []string{"createOrderRefundById", "post-api-userId-short-urls", "http_url", "create_json_import_v2x", "3ds_check",
		"-minus", "_under", "$", "", "order_id", "OrderID", "user.uuid", "ipAddress", "a2b", "XMLHttpRequest", "PostApiUserIdShortUrls"}
	for _, normalizer := range naming.Normalizers {
		for _, extra := range [][]string{nil, {"V2X"}} {
			if extra != nil && normalizer != "ToCamelCaseWithInitialisms" {
				continue
			}
			gen(normalizer, extra)
			n, err := naming.New(normalizer, extra)
			require.NoError(t, err)
			for _, in := range inputs {
				assert.Equal(t, codegen.SchemaNameToTypeName(in), n.TypeName(in), "%s %v: %q", normalizer, extra, in)
			}
		}
	}
	n, err := naming.New("ToCamelCaseWithInitialisms", nil)
	require.NoError(t, err)
	assert.Equal(t, "CreateOrderRefundByID", n.Operation("createOrderRefundById", "POST", "/x"))
	assert.Equal(t, "PostAPIUserIDShortUrls", n.Operation("", "POST", "/api/{userId}/short-urls"))
	assert.Equal(t, "OrderID", n.Param("orderId", ""))
	_, err = naming.New("ToCamelCase", []string{"ABC"})
	assert.Error(t, err)
}

// TestStringAndChange: how a Namer names, and what changed between two,
// in the words of oapi-codegen's settings (check -base's summary line and
// rollout-operation-renamed).
func TestStringAndChange(t *testing.T) {
	def := naming.Default
	ini, err := naming.New("ToCamelCaseWithInitialisms", nil)
	require.NoError(t, err)
	keys, err := naming.New("ToCamelCaseWithInitialisms", []string{"KEYS", "K8S", "KEYS"})
	require.NoError(t, err)
	assert.Equal(t, "name-normalizer ToCamelCase", def.String())
	assert.Equal(t, "name-normalizer ToCamelCaseWithInitialisms, additional-initialisms [K8S, KEYS]", keys.String())
	assert.Equal(t, "", ini.Change(ini))
	assert.Equal(t, "the name normalizer changed from ToCamelCase to ToCamelCaseWithInitialisms", ini.Change(def))
	assert.Equal(t, "additional-initialisms changed from [] to [K8S, KEYS]", keys.Change(ini))
	assert.Equal(t, "the name normalizer changed from ToCamelCaseWithInitialisms to ToCamelCase and additional-initialisms changed from [K8S, KEYS] to []", def.Change(keys))
}
