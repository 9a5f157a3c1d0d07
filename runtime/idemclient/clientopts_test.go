package idemclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Client-wide call options must not say WithoutKey: every call of the
// client, those of operations that require a key included, would go
// without one (and a window operation's calls would be deduped by their
// fingerprint alone). Refused as a client-wide WithKey is.
func TestCheckClientOptionsWithoutKey(t *testing.T) {
	assert.Error(t, CheckClientOptions(WithoutKey()))
	assert.Error(t, CheckClientOptions(WithKey("k")))
	assert.NoError(t, CheckClientOptions(WithPolicyOverride(func(*Policy) {})))
}
