package client_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emit/client"
	"github.com/idemgen/idemgen/generator/ir"
)

// A window operation with an optional key whose fingerprint covers a
// header is not KeylessDedupe: the header (Authorization, refreshed or
// re-signed below the Doer) may change between attempts, so a keyless
// retry is another fingerprint and would run the operation again; the
// call given WithoutKey is sent once.
func TestKeylessDedupeFingerprintHeaders(t *testing.T) {
	spec, diags := compile.Compile(clientCase(t, "shop"), compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	for _, op := range spec.Operations {
		if op.OperationID != "recordEvent" {
			continue
		}
		p := client.Policy(op)
		require.True(t, p.KeyOptional)
		require.True(t, p.KeylessDedupe, "window, optional key, no fingerprint headers")
		op.Policy.FingerprintHeaders = []string{"Authorization"}
		p = client.Policy(op)
		assert.True(t, p.KeyOptional)
		assert.False(t, p.KeylessDedupe, "a fingerprint header may change between attempts")
		return
	}
	t.Fatal("no recordEvent")
}

// A key the contract makes optional but whose parameter the spec declares
// required (a parameter idemgen spec wrote from an earlier contract, which
// the compiler does not compare) is not optional for the client:
// oapi-codegen always sends the parameter, the zero UUID when unset, which
// the server refuses (400); so the policy is not KeyOptional, and
// WithoutKey is refused before anything is sent. An optional parameter
// without a pointer (x-go-type-skip-optional-pointer) keeps KeyOptional:
// the Doer drops the zero value it carries.
func TestKeyOptionalSpecRequiredParam(t *testing.T) {
	spec, diags := compile.Compile(clientCase(t, "shop"), compile.Options{})
	require.False(t, diags.HasErrors(), "%v", diags)
	for _, op := range spec.Operations {
		if op.OperationID != "recordEvent" {
			continue
		}
		require.True(t, client.Policy(op).KeyOptional)
		op.Key.Param = &ir.Param{Name: op.Key.Name, In: "header", GoName: "XRequestKey", Required: true, GoType: "openapi_types.UUID"}
		p := client.Policy(op)
		assert.False(t, p.KeyOptional, "the spec requires the parameter")
		assert.False(t, p.KeylessDedupe)
		op.Key.Param.Required = false // and Pointer false: skip-optional-pointer
		p = client.Policy(op)
		assert.True(t, p.KeyOptional)
		assert.True(t, p.KeylessDedupe)
		return
	}
	t.Fatal("no recordEvent")
}
