package idemclient

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A RESPONSE_UNAVAILABLE problem's original_status is read into
// ProblemError.OriginalStatus, which docs/client.md tells users to read
// (before, ProblemError had no such field); a member of another type
// leaves it 0 without spoiling the code, and a body cut within the
// attempt keeps it when it comes before the cut.
func TestProblemOriginalStatus(t *testing.T) {
	h := http.Header{"Content-Type": {"application/problem+json"}}
	body := `{"type":"t","title":"x","status":409,"code":"IDEMPOTENCY_RESPONSE_UNAVAILABLE","original_status":201}`
	pe := ParseProblem(409, h, []byte(body))
	require.NotNil(t, pe)
	assert.Equal(t, 201, pe.OriginalStatus)
	assert.Contains(t, pe.Error(), "original-status=201")

	pe = ParseProblem(409, h, []byte(`{"code":"IDEMPOTENCY_RESPONSE_UNAVAILABLE","original_status":"201"}`))
	require.NotNil(t, pe)
	assert.Equal(t, CodeResponseUnavailable, pe.Code)
	assert.Zero(t, pe.OriginalStatus)

	cut := `{"code":"IDEMPOTENCY_RESPONSE_UNAVAILABLE","original_status":202,"detail":"` + strings.Repeat("x", 100)
	pe = parseProblem(409, h, []byte(cut), true, time.Now())
	require.NotNil(t, pe)
	assert.Equal(t, 202, pe.OriginalStatus)
}
