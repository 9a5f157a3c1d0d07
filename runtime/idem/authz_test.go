package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestReplaySkipsHandlerAuthorization pins what docs/security.md says (a
// security trial's finding): a replay never runs the handler, so with the
// principal a tenant a viewer who sends an admin's key gets the admin's
// stored response although the handler refuses viewers; authorizing in a
// middleware in front of the engine, or making the role part of the
// principal, refuses the viewer.
func TestReplaySkipsHandlerAuthorization(t *testing.T) {
	p := mustCompile(t, idem.Spec{Operation: "payout", Semantics: idem.Strict})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Role") != "admin" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"payout":"po_1","iban":"DE89 3704 0044 0532 0130 00"}`))
	})
	authz := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Role") != "admin" {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	tenant := func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
	tenantRole := func(r *http.Request) (string, error) {
		return r.Header.Get("X-Tenant") + "/" + r.Header.Get("X-Role"), nil
	}
	for _, tc := range []struct {
		name      string
		principal func(*http.Request) (string, error)
		front     bool // authorize in front of the engine
		viewer    int  // the viewer's status with the admin's key
	}{
		{"authorization in the handler, principal the tenant", tenant, false, http.StatusCreated},
		{"authorization in front of the engine", tenant, true, http.StatusForbidden},
		{"the role part of the principal", tenantRole, false, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := idem.New(memstore.New(memstore.Options{}), idem.Options{Principal: tc.principal})
			var h http.Handler = e.Handler(p, handler)
			if tc.front {
				h = authz(h)
			}
			do := func(role string) *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/payouts", strings.NewReader(`{"amount":100}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("X-Tenant", "acme")
				r.Header.Set("X-Role", role)
				r.Header.Set("Idempotency-Key", "0d6a3f8e-admin-key")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			if w := do("admin"); w.Code != http.StatusCreated {
				t.Fatalf("admin: %d %s", w.Code, w.Body)
			}
			w := do("viewer")
			if w.Code != tc.viewer || (w.Code == http.StatusCreated) != strings.Contains(w.Body.String(), "iban") {
				t.Fatalf("viewer with the admin's key: %d %q %s, want %d", w.Code, w.Header(), w.Body, tc.viewer)
			}
		})
	}
}
