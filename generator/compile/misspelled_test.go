package compile

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestMisspelledExtension(t *testing.T) {
	const contract = "{semantics: strict, window: 10m}"
	for _, c := range []struct {
		key, value string
		want       bool
	}{
		{"x-idempotency", contract, false},
		// Case and '_' for '-': whatever the value.
		{"x-Idempotency", contract, true},
		{"X-IDEMPOTENCY", "true", true},
		{"x_idempotency", "{}", true},
		// Near misses with a contract for value.
		{"x-idempotancy", contract, true},
		{"x-idempotent", "{key: {header: Idempotency-Key}}", true},
		{"idempotency", "{in-flight: {response: 409}}", true},
		{"xidempotency", "{failures: replay}", true},
		{"x-idempotenc", "{<<: {window: 1h}}", true},
		// Near misses that are other extensions: other values.
		{"x-idempotent", "true", false},
		{"x-idempotent", "false", false},
		{"x-idempotent", "{}", false},
		{"x-idempotancy", "yes", false},
		{"x-idempotence", "{required: true}", false},
		{"x-idempotence", "[semantics]", false},
		{"x-idempotency2", "true", false},
		{"x-idempotency2", "{enabled: true}", false},
		{"x-idempotency-v", "2", false},
		{"x-idempotency-v", "{version: 2}", false},
		// Too far.
		{"x-idempotency-key", contract, false},
		{"x-idempotence-id", contract, false},
		{"description", contract, false},
		{"x-internal", "true", false},
		{"parameters", "[]", false},
	} {
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(c.value), &doc), c.value)
		assert.Equal(t, c.want, misspelledExtension(c.key, doc.Content[0]), "%s: %s", c.key, c.value)
	}
}

// TestContractFields: the near-miss check knows the fields of a contract
// from package contract.
func TestContractFields(t *testing.T) {
	for _, f := range []string{"semantics", "window", "key", "in-flight", "failures"} {
		assert.Contains(t, contractFields, f)
	}
}
