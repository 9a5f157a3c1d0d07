package compile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/idemgen/idemgen/generator/compile"
)

func ExampleCompile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	spec := filepath.Join(dir, "openapi.yaml")
	_ = os.WriteFile(spec, []byte(`openapi: 3.0.3
info: {title: Coupons, version: 1.0.0}
paths:
  /coupons/{couponId}/claims:
    post:
      operationId: claimCoupon
      parameters:
        - {name: couponId, in: path, required: true, schema: {type: string}}
      x-idempotency:
        semantics: strict
        window: 2s
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                client_time: {type: string, format: date-time}
      responses:
        '201': {description: claimed}
`), 0o644)
	ir, diags := compile.Compile(spec, compile.Options{})
	for _, d := range diags {
		d.Pos.File = filepath.Base(d.Pos.File)
		fmt.Println(d)
	}
	op := ir.Operations[0]
	fmt.Println(op.Method, op.Path, op.GoName, op.Names.RequestObject, op.Key.Name, op.Policy.InFlight.Lease)
	// Output:
	// openapi.yaml:10:9: warning: body member /client_time of POST /coupons/{couponId}/claims looks volatile (a clock, retry counter or trace id) but is not declared volatile; a retry that changes it looks like another request: a conflict [volatile-candidate]
	// openapi.yaml:11:17: error: window 2s is shorter than in-flight.lease 30s: a key could be forgotten while its first request still runs [window-shorter-than-lease]
	// openapi.yaml:11:17: error: window 2s is shorter than 1.5 × the client's longest retry span 3.5s (= 5.25s): a late retry would run the operation again [window-shorter-than-retry]
	// POST /coupons/{couponId}/claims ClaimCoupon ClaimCouponRequestObject Idempotency-Key 30s
}
