package clientapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// The generated server and client over a network that loses the first
// response after the server handled the request: the helper retries with
// the same key, the server replays its first answer, the coupon is claimed
// once. The key is reported before the first attempt (persist it there to
// resume after a crash) and returned with the response.
func ExampleNewIdempotentClient() {
	x := api.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous}) // one caller here
	defer x.Close()
	srv := httptest.NewServer(x.StrictHandler(newShop(), nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{}))
	defer srv.Close()

	lossy := &http.Client{Transport: faultnet.NewTransport(nil, faultnet.Script(faultnet.DropFault))}
	doer := api.NewIdempotentDoer(lossy,
		idemclient.WithClock(newVClock()), // for the example: backoff waits take no time
		idemclient.WithAttemptHook(func(_ context.Context, a idemclient.Attempt) {
			fmt.Printf("attempt %d: status %d, retry %v\n", a.N, a.Status, a.Retry)
		}))
	c, err := api.NewIdempotentClient(srv.URL, api.WithHTTPClient(doer))
	if err != nil {
		fmt.Println(err)
		return
	}
	var saved string
	resp, key, err := c.ClaimCoupon(context.Background(), "c1", nil, api.Claim{UserId: "u1"},
		idemclient.WithKeyObserver(func(k string) { saved = k }))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode(), "replayed:", resp.HTTPResponse.Header.Get("Idempotent-Replayed"),
		"executions:", resp.JSON201.Count, "key persisted:", key == saved)
	// Output:
	// attempt 1: status 0, retry true
	// attempt 2: status 201, retry false
	// 201 replayed: true executions: 1 key persisted: true
}
