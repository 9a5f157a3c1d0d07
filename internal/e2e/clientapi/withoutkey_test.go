package clientapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// recordEvent has window semantics and an optional key: with
// idemclient.WithoutKey a double click (the same event twice) runs once,
// the second answered with the first's replay, as the server dedupes
// requests without a key by their fingerprint; and a lost response is
// retried without a key, deduped the same way. (Before, every helper call
// carried a new key: the second click ran again.) An operation whose key
// is required refuses WithoutKey, nothing sent.
func TestWithoutKeyWindowDedupe(t *testing.T) {
	e := newEnv(t)
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()
	var keys []string
	for range 2 {
		resp, key, err := c.RecordEvent(ctx, api.Event{Name: "click"}, idemclient.WithoutKey())
		require.NoError(t, err)
		assert.Equal(t, http.StatusAccepted, resp.StatusCode())
		keys = append(keys, key, resp.HTTPResponse.Request.Header.Get("X-Request-Key"))
	}
	assert.Equal(t, []string{"", "", "", ""}, keys, "no key returned nor sent")
	assert.Equal(t, 1, e.shop.Total(), "the second click was the first's replay")

	lossy := &http.Client{Transport: faultnet.NewTransport(nil, faultnet.Script(faultnet.DropFault))}
	c2 := newClient(t, e.srv.URL, lossy)
	resp, _, err := c2.RecordEvent(ctx, api.Event{Name: "other"}, idemclient.WithoutKey())
	require.NoError(t, err)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode())
	assert.Len(t, c2.attempts, 2, "the dropped response retried")
	assert.Equal(t, 2, e.shop.Total(), "once per event")

	_, key, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithoutKey())
	assert.ErrorIs(t, err, idemclient.ErrInvalidKey)
	assert.Empty(t, key)
	assert.Equal(t, 2, e.shop.Total())
}
