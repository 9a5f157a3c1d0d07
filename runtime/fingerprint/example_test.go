package fingerprint_test

import (
	"fmt"
	"net/http"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// A retry that differs only in white space, member order, number spelling,
// volatile members and the order of an unordered array is the same request;
// a changed amount is not.
func Example() {
	h, err := fingerprint.New(fingerprint.Options{
		Volatile:  []string{"/client_time", "/items/*/note"},
		Unordered: []string{"/coupon_ids"},
		Headers:   []string{"X-Tenant"},
	})
	if err != nil {
		panic(err)
	}
	req := func(body string) *fingerprint.Input {
		return &fingerprint.Input{
			Method:      http.MethodPost,
			Operation:   "claimCoupon",
			RawQuery:    "lang=en",
			Header:      http.Header{"X-Tenant": {"acme"}},
			ContentType: "application/json",
			Body:        []byte(body),
		}
	}
	first := h.Sum(req(`{"coupon_ids":["c1","c2"],"amount":10.50,"client_time":1714564800,"items":[{"sku":"A","note":"gift"}]}`))
	retry := h.Sum(req(`{ "amount": 1.05e1, "items": [ {"note": "GIFT!", "sku": "A"} ], "coupon_ids": ["c2", "c1"], "client_time": 1714564812 }`))
	other := h.Sum(req(`{"coupon_ids":["c1","c2"],"amount":11,"client_time":1714564800,"items":[{"sku":"A"}]}`))

	fmt.Println(first == retry)
	fmt.Println(first == other)
	// Output:
	// true
	// false
}

// Canonical shows the canonical text that Sum hashes for a JSON body.
func ExampleHasher_Canonical() {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/trace_id"}, Unordered: []string{"/tags"}})
	if err != nil {
		panic(err)
	}
	out, err := h.Canonical(nil, []byte(`{"tags":["b","a"],"trace_id":"x","name":"caf\u00e9","n":[1.50,-0,1e21,0.0000001]}`))
	fmt.Println(string(out), err)
	// Output:
	// {"n":[1.5,0,1e+21,1e-7],"name":"café","tags":["a","b"]} <nil>
}

func ExampleCheckPointer() {
	fmt.Println(fingerprint.CheckPointer("/items/*/note"))
	fmt.Println(fingerprint.CheckPointer("items/note"))
	// Output:
	// <nil>
	// fingerprint: JSON pointer "items/note": must be empty or start with "/" (at byte 0)
}
