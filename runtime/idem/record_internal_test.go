package idem

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Content-Type present with no value is stored as one empty value (a
// field every release decodes: the format does not change); other headers
// present with no value store nothing, as before.
func TestRecordNilContentType(t *testing.T) {
	h := http.Header{"Content-Type": nil, "Content-Encoding": {}, "Location": nil}
	b := appendRecordHead(nil, 201, h, []string{"Content-Type", "Content-Encoding", "Location"})
	var sr storedResponse
	require.NoError(t, decodeRecord(b, &sr, nil))
	assert.Equal(t, []headerField{{"Content-Type", ""}}, sr.header)
	assert.Equal(t, appendRecordHead(nil, 201, http.Header{"Content-Type": {""}}, []string{"Content-Type"}), b)
}
