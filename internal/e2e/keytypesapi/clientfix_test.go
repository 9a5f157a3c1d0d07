package keytypesapi_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/keytypesapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// WithCallOptions refuses a client-wide key: every call would share it.
func TestWithCallOptionsRefusesKey(t *testing.T) {
	_, _, c := setup(t)
	defer func() {
		r := recover()
		require.NotNil(t, r, "WithCallOptions(WithKey) did not panic")
		assert.Contains(t, r.(string), "WithKey")
	}()
	c.WithCallOptions(idemclient.WithKey("shared-key"))
}

// A typed helper's policy override edits the call's copy of the
// operation's policy, once per call.
func TestPolicyOverrideKeepsOperationPolicy(t *testing.T) {
	_, _, c := setup(t)
	before, ok := api.IdempotentClientPolicy(api.IdempotentClientOpCastVote)
	require.True(t, ok)
	want := slices.Clone(before.On.Statuses)
	runs := 0
	_, _, err := c.CastVote(t.Context(), nil, idemclient.WithPolicyOverride(func(p *idemclient.Policy) {
		runs++
		p.On.Statuses = slices.DeleteFunc(p.On.Statuses, func(s int) bool { return s == 409 })
	}))
	require.NoError(t, err)
	after, _ := api.IdempotentClientPolicy(api.IdempotentClientOpCastVote)
	assert.Equal(t, want, after.On.Statuses, "the operation's policy after one call's override")
	assert.Equal(t, 1, runs, "the override's runs")
}

// Errors before anything is sent are *idemclient.Error too: a key
// generator's, an empty generated key, a request editor's.
func TestErrorsBeforeSendingAreError(t *testing.T) {
	s, w, c := setup(t)
	calls := 0
	for _, gen := range []idemclient.KeyGenerator{
		func(idemclient.KeyFormat) (string, error) { calls++; return "", errors.New("boom") },
		func(idemclient.KeyFormat) (string, error) { calls++; return "", nil },
	} {
		calls = 0
		_, _, err := c.CastVote(t.Context(), nil, idemclient.WithKeyGenerator(gen))
		var e *idemclient.Error
		assert.True(t, errors.As(err, &e), "%v is a %T", err, err)
		assert.ErrorIs(t, err, idemclient.ErrKeyGenerator)
		assert.Equal(t, 1, calls, "the generator's calls")
	}
	editorErr := errors.New("no token")
	_, key, err := c.CastVote(t.Context(), nil, idemclient.WithRequestEditors(func(context.Context, *http.Request) error { return editorErr }))
	var e *idemclient.Error
	if assert.True(t, errors.As(err, &e), "%v is a %T", err, err) {
		assert.Equal(t, key, e.Key)
	}
	assert.ErrorIs(t, err, editorErr)
	assert.ErrorIs(t, err, idemclient.ErrRequestNotBuilt)

	_, _, err = c.MakePayment(t.Context(), nil, idemclient.WithKey("x"))
	assert.True(t, errors.As(err, &e), "%v is a %T", err, err)
	assert.ErrorIs(t, err, idemclient.ErrInvalidKey)

	assert.Empty(t, w.Keys(), "no request was sent")
	s.mu.Lock()
	assert.Empty(t, s.execs)
	s.mu.Unlock()
}

// An upper-case UUID given with WithKey to a helper with a typed UUID
// key parameter is the lower-case key, as the server reads it.
func TestWithKeyUpperCaseUUID(t *testing.T) {
	s, w, c := setup(t)
	upper := "3B241101-E2BB-4255-8CAF-4136C566A962"
	resp, got, err := c.MakePayment(t.Context(), nil, idemclient.WithKey(upper))
	require.NoError(t, err)
	lower := strings.ToLower(upper)
	assert.Equal(t, lower, got)
	check(t, s, w, "makePayment", lower, resp.HTTPResponse, resp.JSON201)
}

// A request editor that sets the key header of a helper whose key travels
// in a typed parameter conflicts with the key the helper wrote there.
func TestEditorSetsKeyOfTypedParameter(t *testing.T) {
	_, w, c := setup(t)
	_, _, err := c.CreateNote(t.Context(), nil, api.CreateNoteJSONRequestBody{},
		idemclient.WithRequestEditors(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Idempotency-Key", "from-editor")
			return nil
		}))
	assert.ErrorIs(t, err, idemclient.ErrKeyConflict)
	assert.Empty(t, w.Keys(), "no request was sent")
}
