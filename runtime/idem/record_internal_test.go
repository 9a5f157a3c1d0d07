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

// A name of the allowlist set in another case is stored under its
// canonical name; one set canonically too is stored once, as spelled so.
func TestRecordNonCanonicalName(t *testing.T) {
	allow := []string{"Content-Type", "Content-Encoding", "Location"}
	for _, tc := range []struct {
		h    http.Header
		want []headerField
	}{
		{http.Header{"location": {"/a"}, "X-Other": {"x"}}, []headerField{{"Location", "/a"}}},
		{http.Header{"Content-Type": {"a/b"}, "LOCATION": {"/a", "/b"}}, []headerField{{"Content-Type", "a/b"}, {"Location", "/a"}, {"Location", "/b"}}},
		{http.Header{"Location": {"/a"}, "location": {"/b"}}, []headerField{{"Location", "/a"}}},
		{http.Header{"content-type": nil, "Set-Cookie": {"c"}}, []headerField{{"Content-Type", ""}}},
		{http.Header{"Set-Cookie": {"c"}, "X-Locationn": {"x"}}, nil},
	} {
		var sr storedResponse
		require.NoError(t, decodeRecord(appendRecordHead(nil, 200, tc.h, allow), &sr, nil))
		assert.Equal(t, tc.want, sr.header, "%v", tc.h)
	}
}
