package idemclient_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

// TestFixKeyLowersOnlyUUIDFormats: FixKey lower-cases a supplied
// upper-case UUID only under a policy whose key format is a UUID one. A
// policy without a format (the contract's default, token: case-sensitive
// keys) keeps the key as given, as the Doer's header path sends it.
func TestFixKeyLowersOnlyUUIDFormats(t *testing.T) {
	const upper = "0189ABCD-1234-7234-8234-123456789ABC"
	for _, tc := range []struct {
		format idemclient.KeyFormat
		want   string
	}{
		{"", upper},
		{idemclient.FormatToken, upper},
		{idemclient.FormatUUID, "0189abcd-1234-7234-8234-123456789abc"},
		{idemclient.FormatUUIDv7, "0189abcd-1234-7234-8234-123456789abc"},
	} {
		_, call := idemclient.Policy{KeyFormat: tc.format}.Start(context.Background(), idemclient.WithKey(upper))
		k, err := call.FixKey("")
		require.NoError(t, err, "format %q", tc.format)
		require.Equal(t, tc.want, k, "format %q", tc.format)
	}
}
