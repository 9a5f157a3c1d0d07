// Package fingerprint compares runtime/fingerprint with peers that are kept
// out of the product's go.mod: go-json-experiment's jsontext
// Value.Canonicalize (RFC 8785 canonical JSON) followed by SHA-256, over the
// same bodies (fingerprinttest.SampleBody and DenseBody). Run:
//
//	cd bench && go test -run '^$' -bench . -benchmem ./fingerprint/
package fingerprint
