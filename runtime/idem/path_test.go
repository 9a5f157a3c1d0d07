package idem_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// itemsSpec is an operation on a resource named in the path
// (POST /orders/{orderId}/items).
func itemsSpec(sem idem.Semantics) idem.Spec {
	return idem.Spec{
		Operation: "addItem", Method: "POST", Path: "/orders/{orderId}/items",
		Semantics: sem,
		Response:  idem.ResponseSpec{Headers: []string{"Location"}},
	}
}

// The same key and body sent to another resource of the operation is
// another request: under strict semantics a conflict, never the other
// resource's response.
func TestSameKeyOtherPathStrict(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder())
	const key = "0190b2a4-6c2e-7d3a-8b1f-000000000001"
	body := `{"item":"book"}`

	w := send(h, req{target: "/orders/o1/items", key: key, body: body})
	require.Equal(t, http.StatusCreated, w.Code)
	w = send(h, req{target: "/orders/o1/items", key: key, body: body})
	require.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "the same request again")

	w = send(h, req{target: "/orders/o2/items", key: key, body: body})
	requireProblem(t, w, http.StatusUnprocessableEntity, idem.CodeKeyReused)
	assert.Equal(t, int32(1), f.calls.Load())
}

// Without a key (window semantics), the fingerprint is the record's name:
// the same body sent to two resources is two requests, each executed.
func TestWindowOtherPathExecutes(t *testing.T) {
	f := newFixture(t, idem.Options{})
	h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Window)), f.createOrder())
	body := `{"item":"book"}`
	for _, target := range []string{"/orders/o1/items", "/orders/o2/items"} {
		w := send(h, req{target: target, body: body})
		require.Equal(t, http.StatusCreated, w.Code, target)
		assert.Empty(t, w.Header().Get("Idempotent-Replayed"), target)
	}
	assert.Equal(t, int32(2), f.calls.Load())
	w := send(h, req{target: "/orders/o2/items", body: body})
	assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "the same request again, within the window")
}

// olderService stands for a service of an older idemgen, whose records
// carry fingerprint version 1 (no path): it claims with the fingerprint
// that version computed.
type olderService struct {
	idem.Store
	fp idem.Fingerprint
}

func (s olderService) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	r := *req
	r.Fingerprint = s.fp
	return s.Store.Begin(ctx, &r)
}

// A retry that comes after an upgrade finds the record an older version
// made (fingerprint version 1): it is the same request and is replayed (or,
// after a failure that freed the key, executed); another body under the key
// is still a conflict.
func TestRecordOfFingerprintV1(t *testing.T) {
	const key = "0190b2a4-6c2e-7d3a-8b1f-000000000002"
	body := `{"item":"book"}`
	h1, err := fingerprint.New(fingerprint.Options{})
	require.NoError(t, err)
	v1, ok := h1.SumVersion(&fingerprint.Input{Method: "POST", Operation: "addItem", ContentType: "application/json", Body: []byte(body)}, 1)
	require.True(t, ok)

	for _, failed := range []bool{false, true} {
		name := map[bool]string{false: "completed", true: "failed, free to retry"}[failed]
		t.Run(name, func(t *testing.T) {
			s := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = s.Close() })
			older := newFixtureStore(t, s, olderService{s, v1}, idem.Options{})
			handler := older.createOrder()
			if failed {
				handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					older.calls.Add(1)
					http.Error(w, "down", http.StatusServiceUnavailable)
				})
			}
			w := send(older.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), handler), req{target: "/orders/o1/items", key: key, body: body})
			require.Equal(t, map[bool]int{false: 201, true: 503}[failed], w.Code)
			rec, found, err := s.Get(context.Background(), scopeOf(t, s, key))
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, v1, rec.Fingerprint, "the older service's record")

			f := newFixtureStore(t, s, s, idem.Options{})
			h := f.eng.Handler(mustCompile(t, itemsSpec(idem.Strict)), f.createOrder())
			w = send(h, req{target: "/orders/o1/items", key: key, body: body})
			require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
			if failed {
				assert.Empty(t, w.Header().Get("Idempotent-Replayed"), "the failed attempt is retried")
				assert.Equal(t, int32(1), f.calls.Load())
			} else {
				assert.Equal(t, "true", w.Header().Get("Idempotent-Replayed"), "replayed, not refused")
				assert.Equal(t, int32(0), f.calls.Load())
			}
			// A version 1 record cannot tell paths apart: until it expires,
			// it keeps the meaning it was made with.
			w = send(h, req{target: "/orders/o1/items", key: key, body: `{"item":"pen"}`})
			requireProblem(t, w, http.StatusUnprocessableEntity, idem.CodeKeyReused)
		})
	}
}

// scopeOf is the scope key of key for operation addItem and the anonymous
// principal, as runtime/idem/scope.go encodes it.
func scopeOf(t *testing.T, _ *memstore.Store, key string) string {
	t.Helper()
	return "i1p0:7:addItemk" + strconv.Itoa(len(key)) + ":" + key
}
