//go:build !race

package idem_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestReplayAllocs: over memstore, a replay through Engine.Handler
// allocates only what it hands the ResponseWriter: its header values and the
// bytes they alias, in one allocation when they are few (two stored fields) and short, in two
// otherwise (and then one more for the decoded fields of a record of more
// than four). (Not under the race detector, whose sync.Pool drops items.)
// Spec.CompatibleFingerprints costs a replay nothing.
func TestReplayAllocs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields int // stored header fields besides Content-Type and Location
		want   float64
		compat []idem.FingerprintSpec
	}{
		{"few", 0, 1, nil},
		{"many", 4, 3, nil},
		{"compatible", 0, 1, []idem.FingerprintSpec{{Volatile: []string{"/customer"}}, {FingerprintHeaders: []string{"X-Tenant"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := memstore.New(memstore.Options{SweepInterval: -1})
			defer s.Close()
			allow := []string{"Location"}
			for i := range tc.fields {
				allow = append(allow, "X-Extra-"+strconv.Itoa(i))
			}
			eng := idem.New(s, idem.Options{Principal: idem.Anonymous})
			p := idem.MustCompile(idem.Spec{Operation: "createOrder", Semantics: idem.Strict,
				Response: idem.ResponseSpec{Headers: allow}, CompatibleFingerprints: tc.compat})
			h := eng.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for _, name := range allow[1:] {
					w.Header().Set(name, "value of "+name)
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Location", "/orders/ord_7d1f9c2a")
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{"id":"ord_7d1f9c2a"}`))
			}))
			payload := []byte(`{"customer":"cus_8f2b"}`)
			body := &bytes.Reader{}
			r, _ := http.NewRequest("POST", "http://api.example/orders", nil)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Idempotency-Key", "0190b2a4-6c2e-7d3a-9f11-2b3c4d5e6f70")
			w := &discardWriter{h: http.Header{}}
			serve := func() {
				body.Reset(payload)
				r.Body = readCloser{body}
				clear(w.h)
				w.status = 0
				h.ServeHTTP(w, r)
			}
			serve()
			require.Equal(t, http.StatusCreated, w.status)
			n := testing.AllocsPerRun(200, serve)
			require.Equal(t, "true", w.h.Get("Idempotent-Replayed"))
			require.Equal(t, "/orders/ord_7d1f9c2a", w.h.Get("Location"))
			require.Equal(t, tc.want, n)
		})
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
