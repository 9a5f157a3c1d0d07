package docs_test

import (
	"fmt"
	"path/filepath"
	"strings"

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
