package specfile_test

import (
	"fmt"

	"github.com/idemgen/idemgen/generator/specfile"
)

// Read a file, change its tree, write it back in its own format.
func ExampleEncode() {
	src := []byte("openapi: 3.0.3   # the version\npaths:\n- a\n- b\n")
	doc, err := specfile.Parse(src)
	if err != nil {
		panic(err)
	}
	f := specfile.Detect(src, doc)
	doc.Content[0].Content[3].Content[1].Value = "c"
	out, _ := specfile.Encode(doc, f)
	fmt.Print(string(out))
	// Output:
	// openapi: 3.0.3 # the version
	// paths:
	// - a
	// - c
}
