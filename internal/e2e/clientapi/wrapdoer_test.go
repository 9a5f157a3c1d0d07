package clientapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// sdkDoer is an SDK's own HttpRequestDoer around the Doer it configured:
// it sets a User-Agent and says which Doer it wraps.
type sdkDoer struct{ next *idemclient.Doer }

func (d sdkDoer) Do(req *http.Request) (*http.Response, error) {
	req.Header.Set("User-Agent", "pay-sdk/1.2")
	return d.next.Do(req)
}

func (d sdkDoer) IdempotentDoer() *idemclient.Doer { return d.next }

// An SDK that wraps its configured Doer in an HttpRequestDoer of its own
// (idemclient.DoerWrapper) keeps it: NewIdempotentClient does not wrap
// it in a second, default Doer whose attempts the SDK's would pass
// through, its attempt hook unused. (Before, the hook saw nothing.)
func TestWrappedDoerKept(t *testing.T) {
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	t.Cleanup(func() { _ = x.Close() })
	srv := httptest.NewServer(x.StrictHandler(newShop(), nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{}))
	t.Cleanup(srv.Close)

	lossy := &http.Client{Transport: faultnet.NewTransport(nil, faultnet.Script(faultnet.DropFault))}
	m, err := api.IdempotentMatcher(srv.URL)
	require.NoError(t, err)
	var hooked atomic.Int32
	inner := api.NewIdempotentDoer(lossy, idemclient.WithMatcher(m), idemclient.WithClock(newVClock()),
		idemclient.WithAttemptHook(func(context.Context, idemclient.Attempt) { hooked.Add(1) }))
	c, err := api.NewIdempotentClient(srv.URL, api.WithHTTPClient(sdkDoer{inner}))
	require.NoError(t, err)
	resp, _, err := c.ClaimCoupon(context.Background(), "c1", nil, api.Claim{UserId: "u1"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode())
	assert.Equal(t, int32(2), hooked.Load(), "the SDK's Doer ran the attempts: a dropped one and its retry")
	assert.Equal(t, "pay-sdk/1.2", resp.HTTPResponse.Request.Header.Get("User-Agent"))
}
