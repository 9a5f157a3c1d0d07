package augment_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemgen/idemgen/generator/augment"
)

// Augment a spec: the result is the spec in its own format, and the same
// changes as an overlay.
func ExampleAugment() {
	res, diags := augment.Augment(filepath.Join("..", "..", "testdata", "augment", "coupons", "openapi.yaml"), augment.Options{})
	if res == nil {
		_ = diags.WriteText(os.Stderr)
		return
	}
	fmt.Println(res.Actions, "changes; JSON:", res.Format.JSON)
	// Output: 7 changes; JSON: false
}

func ExampleReplaceBlock() {
	once := augment.ReplaceBlock("Claims a coupon.", "Safe to retry.")
	twice := augment.ReplaceBlock(once, "Safe to retry.")
	fmt.Print(twice)
	fmt.Println(once == twice)
	// Output:
	// Claims a coupon.
	//
	// <!-- idemgen:contract -->
	// Safe to retry.
	// <!-- /idemgen:contract -->
	// true
}
