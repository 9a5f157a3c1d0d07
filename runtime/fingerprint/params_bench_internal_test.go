package fingerprint

import "testing"

// BenchmarkAppendParams encodes the parameters of raw Content-Types.
func BenchmarkAppendParams(b *testing.B) {
	for _, c := range []struct{ name, ct string }{
		{"boundary", "multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW"},
		{"three", `multipart/related; type="application/json"; start="<root@x>"; boundary=A`},
		{"malformed", "text/plain; charset=utf-8; x"},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				buf = appendParams(buf[:0], c.ct)
			}
		})
	}
}
