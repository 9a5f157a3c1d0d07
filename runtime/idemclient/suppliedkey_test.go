package idemclient

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// helperPolicy is a generated helper's policy: a UUID key in a header,
// the format enforced, 36 characters at most.
var helperPolicy = Policy{
	MaxAttempts: 2, KeyFormat: FormatUUID, EnforceKeyFormat: true,
	KeyCarrier: CarrierHeader, KeyName: "Idempotency-Key", KeyMaxLength: 36,
}

// TestEmptySuppliedKeyFails: WithKey("") (a resume whose saved key was
// lost) fails with ErrInvalidKey, nothing sent, instead of making a new
// key and running the operation again: through FixKey (a generated
// helper's path) and through Start and the Doer.
func TestEmptySuppliedKeyFails(t *testing.T) {
	_, call := helperPolicy.Start(context.Background(), WithKey(""))
	k, err := call.FixKey("")
	require.ErrorIs(t, err, ErrInvalidKey)
	require.Empty(t, k)
	var e *Error
	require.ErrorAs(t, err, &e)

	srv := newRecServer(t, nil)
	d := NewDoer(http.DefaultClient, Policy{})
	for _, p := range []*Policy{nil, &helperPolicy} {
		opts := []CallOption{WithKey("")}
		if p != nil {
			opts = append(opts, WithPolicy(*p))
		}
		ctx, call := Start(context.Background(), opts...)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/pay", strings.NewReader(`{}`))
		resp, err := d.Do(req)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrInvalidKey)
		require.Equal(t, 0, call.Attempts())
	}
	require.Empty(t, srv.Seen(), "nothing sent")
	require.Error(t, CheckClientOptions(WithKey("")), "a client-wide WithKey(\"\") is a supplied key too")
}

// TestFixKeyEnforcesFormat: under EnforceKeyFormat, FixKey refuses a
// supplied or generated key the server would refuse with ErrInvalidKey
// (not the ErrBadKeyCarrier of a typed parameter that cannot hold it).
func TestFixKeyEnforcesFormat(t *testing.T) {
	bad := []string{
		"order-42",
		"0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3dXX",
		"{0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d}",
		"00000000-0000-0000-0000-000000000000",
		" ",
	}
	for _, k := range bad {
		_, call := helperPolicy.Start(context.Background(), WithKey(k))
		_, err := call.FixKey("")
		require.ErrorIs(t, err, ErrInvalidKey, "WithKey(%q)", k)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, k, e.Key, "the error names the supplied key")
	}
	gen := WithKeyGenerator(func(KeyFormat) (string, error) { return "order-42", nil })
	_, call := helperPolicy.Start(context.Background(), gen)
	_, err := call.FixKey("")
	require.ErrorIs(t, err, ErrInvalidKey, "a generated key")

	// Too long without EnforceKeyFormat: KeyMaxLength still holds.
	_, call = Policy{KeyFormat: FormatToken, KeyMaxLength: 4}.Start(context.Background(), WithKey("abcde"))
	_, err = call.FixKey("")
	require.ErrorIs(t, err, ErrInvalidKey)

	// Good keys pass, upper case lower-cased; a second FixKey returns the first's.
	_, call = helperPolicy.Start(context.Background(), WithKey("0190B4A2-7C1E-7D3F-9A4B-2C6E8F0A1B3D"))
	k, err := call.FixKey("")
	require.NoError(t, err)
	require.Equal(t, "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", k)
	k2, err := call.FixKey("other")
	require.NoError(t, err)
	require.Equal(t, k, k2)
	// A token policy keeps its keys as given.
	_, call = Policy{KeyFormat: FormatToken, EnforceKeyFormat: true}.Start(context.Background(), WithKey("order-42"))
	k, err = call.FixKey("")
	require.NoError(t, err)
	require.Equal(t, "order-42", k)
}
