package augment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/generator/augment"
	"github.com/idemgen/idemgen/generator/ir"
	"github.com/idemgen/idemgen/generator/specfile"
)

func fuzzOp(method, path string, carrier uint8, name string) *ir.Operation {
	c := []ir.Carrier{ir.CarrierHeader, ir.CarrierQuery, ir.CarrierBody}[int(carrier)%3]
	if c == ir.CarrierBody && !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return &ir.Operation{
		Method: strings.ToUpper(method), Path: path, OperationID: "op", GoName: "Op",
		Key: ir.Key{Carrier: c, Name: name, Required: carrier&4 == 0, Format: []string{ir.FormatToken, ir.FormatUUID}[int(carrier>>3)%2], MaxLength: 64},
		Policy: ir.Policy{
			Semantics: []ir.Semantics{ir.Strict, ir.Loose, ir.Window}[int(carrier>>4)%3], Window: time.Hour, Scope: []string{"principal"},
			ConflictStatus: []int{422, 409}[int(carrier>>6)%2], Failures: ir.FailuresRetry,
			InFlight: ir.InFlight{Status: 409, RetryAfter: 2 * time.Second, Lease: 30 * time.Second},
			Retry:    ir.Retry{MaxAttempts: 4, Backoff: ir.Backoff{Initial: time.Second, Max: 8 * time.Second, Multiplier: 2, Jitter: ir.JitterFull}},
		},
	}
}

// FuzzApply augments arbitrary YAML trees: it never panics, the result
// can be written as YAML and JSON, and a second run changes nothing.
func FuzzApply(f *testing.F) {
	f.Add([]byte("paths:\n  /a:\n    post:\n      responses:\n        '201': {description: ok}\n"), "post", "/a", uint8(0), "Idempotency-Key")
	f.Add([]byte("paths:\n  /a:\n    post:\n      description: x\n      parameters: [{name: k, in: query}]\n      responses: {}\ncomponents: {responses: {IdempotencyConflict: {description: theirs}}}\n"), "post", "/a", uint8(1), "k")
	f.Add([]byte("paths:\n  /a:\n    patch:\n      requestBody: {content: {application/json: {schema: {properties: {k: {type: string}}}}}}\n      responses: {'409': {$ref: '#/components/responses/R'}}\ncomponents: {responses: {R: {description: r}}}\n"), "patch", "/a", uint8(2), "/k")
	f.Add([]byte("paths: {/a: {post: {description: \"<!-- idemgen:contract -->\", responses: []}}}"), "post", "/a", uint8(0), "K")
	f.Add([]byte("a: &x {b: *x}"), "post", "/a", uint8(0), "K")
	f.Fuzz(func(t *testing.T, data []byte, method, path string, carrier uint8, name string) {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			return
		}
		root := doc.Content[0]
		ops := []*ir.Operation{fuzzOp(method, path, carrier, name)}
		n, err := augment.Apply(root, ops)
		require.NoError(t, err)
		if n == 0 {
			return
		}
		again, err := augment.Apply(root, ops)
		require.NoError(t, err)
		require.Zero(t, again, "a second run changes nothing")
		_, _ = specfile.Encode(&doc, specfile.DefaultYAML)
		_, _ = specfile.Encode(&doc, specfile.Format{JSON: true, Indent: 2})
	})
}
