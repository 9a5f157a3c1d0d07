package idem

import (
	"net/http"
	"testing"
)

// BenchmarkRecordHead encodes the head of a response (appendRecordHead)
// under the allowlist of BenchmarkFirstRequest's policy (Content-Type,
// Content-Encoding, Location): "allowlisted" sets only names of it (no
// header scan), "other" two more (X-Request-Id, Cache-Control: the scan
// for a name spelled in another case runs and finds none), "folded" one of
// them spelled in lower case (the scan finds it).
func BenchmarkRecordHead(b *testing.B) {
	allow := []string{"Content-Type", "Content-Encoding", "Location"}
	for _, bc := range []struct {
		name string
		h    http.Header
	}{
		{"allowlisted", http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/ord_7d1f9c2a"}}},
		{"other", http.Header{"Content-Type": {"application/json"}, "Location": {"/orders/ord_7d1f9c2a"},
			"X-Request-Id": {"req_5c1e0a9b7f3d"}, "Cache-Control": {"no-store"}}},
		{"folded", http.Header{"Content-Type": {"application/json"}, "location": {"/orders/ord_7d1f9c2a"},
			"X-Request-Id": {"req_5c1e0a9b7f3d"}, "Cache-Control": {"no-store"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				buf = appendRecordHead(buf[:0], 201, bc.h, allow)
			}
		})
	}
}
