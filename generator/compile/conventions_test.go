package compile

import "testing"

// The business-key heuristic looks at the last word of the name, split at
// separators and changes of case: a single word that merely ends in "id"
// (rid, uuid) or "no" (memo) is not a business identifier.
func TestLooksLikeBusinessID(t *testing.T) {
	for name, want := range map[string]bool{
		"order_id": true, "orderId": true, "OrderID": true, "X-Order-Id": true, "user_id": true,
		"paymentNumber": true, "invoice-ref": true, "payment_uuid": true, "promo_code": true, "order.no": true,
		"rid": false, "uuid": false, "id": false, "Id": false, "paid": false, "memo": false, "promocode": false,
		"Idempotency-Key": false, "request_id": false, "PayPal-Request-Id": false, "X-Request-Id": false,
		"token": false, "key": false, "orderId2": false,
	} {
		if got := looksLikeBusinessID(name); got != want {
			t.Errorf("looksLikeBusinessID(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestNameWords(t *testing.T) {
	for name, want := range map[string]string{
		"order_id": "order id", "orderId": "order id", "OrderID": "order id", "HTTPServerID": "http server id",
		"X-Order-Id": "x order id", "rid": "rid", "v2Key": "v2 key", "": "",
	} {
		got := ""
		for i, w := range nameWords(name) {
			if i > 0 {
				got += " "
			}
			got += w
		}
		if got != want {
			t.Errorf("nameWords(%q) = %q, want %q", name, got, want)
		}
	}
}
