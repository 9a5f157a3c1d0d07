package compile

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMisspelledExtension(t *testing.T) {
	for key, want := range map[string]bool{
		"x-idempotency":     false,
		"x-Idempotency":     true,
		"X-IDEMPOTENCY":     true,
		"x_idempotency":     true,
		"x-idempotancy":     true,
		"x-idempotent":      true,
		"idempotency":       true,
		"xidempotency":      true,
		"x-idempotency-key": false,
		"x-idempotence-id":  false,
		"description":       false,
		"x-internal":        false,
		"parameters":        false,
	} {
		assert.Equal(t, want, misspelledExtension(key), key)
	}
}
