package compatfpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/e2e/compatfpapi"
	"github.com/idemgen/idemgen/runtime/idem"
)

// The contract's compatible-fingerprints reach the runtime: each entry in
// full (a list it leaves out is the current one), in the contract's
// order; an operation without them has none.
func TestPreviousInSpec(t *testing.T) {
	x := compatfpapi.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	p := x.Policy("createTransfer")
	require.NotNil(t, p)
	s := p.Spec()
	assert.Equal(t, []string{"/client_time", "/trace_id"}, s.Volatile)
	assert.Equal(t, []idem.FingerprintSpec{
		{Volatile: []string{"/client_time"}, Unordered: []string{"/tags"}, FingerprintHeaders: []string{"X-Tenant-Id"}},
		{Volatile: []string{"/client_time"}},
	}, s.CompatibleFingerprints)
	r := x.Policy("createRefund")
	require.NotNil(t, r)
	assert.Nil(t, r.Spec().CompatibleFingerprints)
}

type service struct{ runs int }

func (s *service) CreateTransfer(context.Context, compatfpapi.CreateTransferRequestObject) (compatfpapi.CreateTransferResponseObject, error) {
	s.runs++
	id := "t1"
	return compatfpapi.CreateTransfer201JSONResponse{Id: &id}, nil
}

func (s *service) CreateRefund(context.Context, compatfpapi.CreateRefundRequestObject) (compatfpapi.CreateRefundResponseObject, error) {
	s.runs++
	id := "r1"
	return compatfpapi.CreateRefund201JSONResponse{Id: &id}, nil
}

// The wrapper with compatible fingerprints serves as any other: a retry
// with the same key and body is replayed (the runtime's use of CompatibleFingerprints,
// for a record of another fingerprint, is tested with the runtime).
func TestServes(t *testing.T) {
	x := compatfpapi.NewIdempotency(nil, idem.Options{Principal: idem.Anonymous})
	defer x.Close()
	svc := &service{}
	h := x.StrictHandler(svc, nil, compatfpapi.StrictHTTPServerOptions{}, compatfpapi.StdHTTPServerOptions{})
	send := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/transfers", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "0190b7a4-3c2e-7d3f-8a1b-2c3d4e5f6a7b")
		r.Header.Set("X-Tenant-Id", "t1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := send(`{"amount": 5, "trace_id": "a", "tags": ["x", "y"]}`)
	require.Equal(t, http.StatusCreated, first.Code, first.Body.String())
	again := send(`{"amount": 5, "trace_id": "b", "tags": ["y", "x"]}`)
	assert.Equal(t, http.StatusCreated, again.Code, again.Body.String())
	assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"))
	assert.Equal(t, 1, svc.runs)
}
