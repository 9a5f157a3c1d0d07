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

// TestKeyFormatDetailOfWrongUUID: a key that is no UUID, and a UUID of
// another version than the operation's format, are both refused with
// KeyFormatDetail (the header's name and the version it must be), not the
// generic "a UUID of a version this operation does not accept"; the nil
// UUID keeps its own detail.
func TestKeyFormatDetailOfWrongUUID(t *testing.T) {
	f := newFixture(t, idem.Options{Principal: idem.Anonymous})
	spec := strictSpec()
	spec.Key.Name, spec.Key.Format = "Cashout-Request-Id", idem.FormatUUIDv7
	p := mustCompile(t, spec)
	h := f.eng.Handler(p, f.createOrder())
	want := "the Cashout-Request-Id header must be a version 7 UUID (RFC 9562) in canonical 8-4-4-4-12 form"
	for key, detail := range map[string]string{
		"9b2f6c1e-4d7a-4c3b-8e2f-1a2b3c4d5e6f": want, // version 4
		"9b2f6c1e-4d7a-1c3b-8e2f-1a2b3c4d5e6f": want, // version 1
		"9b2f6c1e-4d7a-7c3b-cf2f-1a2b3c4d5e6f": want, // variant 0b110
		"not-a-uuid":                           want,
		"00000000-0000-0000-0000-000000000000": "the idempotency key is the nil or max UUID",
	} {
		w := send(h, req{header: http.Header{"Cashout-Request-Id": {key}}, body: `{}`})
		require.Equal(t, http.StatusBadRequest, w.Code, key)
		var prob struct{ Code, Detail string }
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &prob))
		assert.Equal(t, idem.CodeKeyInvalid, prob.Code, key)
		assert.Equal(t, detail, prob.Detail, key)
	}
}
