package idem_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestKeyTooLongDetail: the problem detail of a key longer than allowed
// says the limit (the operation's MaxLength); the code stays
// IDEMPOTENCY_KEY_INVALID.
func TestKeyTooLongDetail(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	spec := strictSpec()
	spec.Key.MaxLength = 64
	h := f.eng.Handler(mustCompile(t, spec), f.createOrder())
	w := send(h, req{key: strings.Repeat("k", 65), body: `{}`})
	require.Equal(t, http.StatusBadRequest, w.Code)
	var prob struct{ Code, Detail string }
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &prob))
	assert.Equal(t, idem.CodeKeyInvalid, prob.Code)
	assert.Equal(t, "the idempotency key is longer than the 64 characters allowed", prob.Detail)
}
