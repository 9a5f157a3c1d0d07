package client_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emit/client"
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
