// Package cli implements the idemgen command line: flags in, exit code out.
package cli

import (
	"fmt"
	"io"
)

// Main runs idemgen with args (without the program name) and returns the exit
// code: 0 success (warnings allowed), 1 errors found, 2 usage.
func Main(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idemgen: not implemented yet")
	return 2
}
