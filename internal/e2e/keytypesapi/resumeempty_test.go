package keytypesapi_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/keytypesapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// A resume through the typed (pointer) key parameter whose saved key is ""
// (a NULL column read into a non-nil pointer) is refused with
// ErrInvalidKey, nothing sent, as WithKey("") is: a new key would run the
// operation again. A nil pointer still lets the helper make the key.
func TestResumeEmptyTypedPointer(t *testing.T) {
	s, _, c := setup(t)
	_, k1, err := c.OpenTicket(t.Context(), nil)
	require.NoError(t, err)
	require.NotEmpty(t, k1)
	saved := api.TicketKey("") // the key was lost
	_, k2, err := c.OpenTicket(t.Context(), &api.OpenTicketParams{RequestId: &saved})
	require.ErrorIs(t, err, idemclient.ErrInvalidKey)
	assert.Empty(t, k2)
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Len(t, s.execs, 1, "one ticket: a second would be opened under a new key: %v", s.execs)
}
