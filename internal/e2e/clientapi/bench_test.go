package clientapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// inProcess is an http.RoundTripper that serves requests with a handler,
// without a network, so a benchmark measures the client and server code.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// BenchmarkClaimCoupon measures what the client side adds to one call: a
// claim answered 201 by a fixed in-process handler (no network, no engine),
// through oapi-codegen's ClientWithResponses with the key set by hand
// (Plain), and through the generated helper over NewIdempotentDoer (Helper:
// a Call, the key made and written into the params, the Doer's attempt
// with its buffered response, the problem check).
func BenchmarkClaimCoupon(b *testing.B) {
	receipt := []byte(`{"count":1,"id":"claimCoupon-1"}`)
	hc := &http.Client{Transport: inProcess{http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(receipt)
	})}}
	body := claim("u1")
	ctx := context.Background()
	b.Run("Plain", func(b *testing.B) {
		c, err := api.NewClientWithResponses("http://shop", api.WithHTTPClient(hc))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			k, _ := idemclient.NewKey(idemclient.FormatUUID)
			var p api.ClaimCouponParams
			_ = p.IdempotencyKey.UnmarshalText([]byte(k))
			resp, err := c.ClaimCouponWithResponse(ctx, "c1", &p, body)
			if err != nil || resp.StatusCode() != http.StatusCreated {
				b.Fatal(err, resp.StatusCode())
			}
		}
	})
	b.Run("Helper", func(b *testing.B) {
		c, err := api.NewIdempotentClient("http://shop", api.WithHTTPClient(hc))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			resp, _, err := c.ClaimCoupon(ctx, "c1", nil, body)
			if err != nil || resp.StatusCode() != http.StatusCreated {
				b.Fatal(err, resp.StatusCode())
			}
		}
	})
}
