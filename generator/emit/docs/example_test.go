package docs_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/idemgen/idemgen/generator/compile"
	"github.com/idemgen/idemgen/generator/emit/docs"
)

// Render a spec's documentation page; here, its operation headings.
func ExampleRender() {
	spec, _ := compile.Compile(filepath.Join("..", "..", "..", "testdata", "augment", "coupons", "openapi.yaml"), compile.Options{})
	page, err := docs.Render(spec)
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, "### ") {
			fmt.Println(line)
		}
	}
	// Output:
	// ### PATCH /coupons/{couponId} — updateCoupon
	// ### POST /coupons/{couponId}/claims — claimCoupon
	// ### POST /redemptions — redeem
	// ### POST /transfers — createTransfer
}

func ExampleAnchor() {
	fmt.Println(docs.Anchor("POST /coupons/{couponId}/claims — claimCoupon"))
	// Output: post-couponscouponidclaims--claimcoupon
}

func ExampleFormatDuration() {
	for _, d := range []time.Duration{500 * time.Millisecond, 90 * time.Second, 10 * time.Minute, 24 * time.Hour, 7 * 24 * time.Hour} {
		fmt.Println(docs.FormatDuration(d))
	}
	// Output:
	// 500ms
	// 1m30s
	// 10m
	// 24h
	// 7d
}
