package idem

import (
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
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

// appendRecordHeadScanAll is appendRecordHead as it was before the scan
// for names set in another case skipped the names of another length than
// every allowlisted name missing: it must store the same fields.
func appendRecordHeadScanAll(dst []byte, status int, h http.Header, allow []string) []byte {
	dst = append(dst, recordVersion, 0)
	dst = binary.AppendUvarint(dst, uint64(status))
	at := len(dst)
	dst = append(dst, 0)
	n, found, missed := 0, 0, false
	for _, name := range allow {
		vs, ok := h[name]
		if !ok {
			missed = true
			continue
		}
		found++
		var full bool
		if dst, n, full = appendRecordFields(dst, n, name, vs); full {
			dst[at] = byte(n)
			return dst
		}
	}
	if missed && len(h) > found {
		for k, vs := range h {
			name := foldedName(k, allow)
			if name == "" {
				continue
			}
			if _, ok := h[name]; ok {
				continue
			}
			var full bool
			if dst, n, full = appendRecordFields(dst, n, name, vs); full {
				break
			}
		}
	}
	dst[at] = byte(n)
	return dst
}

// The header scan's length filter changes nothing: random headers, some
// allowlisted names spelled in another case (at most one other spelling
// each, and too few values to reach maxRecordHeaders, so that the fields
// do not depend on the map's order but for the order of the names found
// by the scan, which the comparison ignores), others of the same lengths
// as allowlisted ones, and names of 63 bytes and more (one bit of the
// filter).
func TestRecordHeadLengthFilter(t *testing.T) {
	long := func(n int) string { return "X-" + strings.Repeat("l", n-2) }
	pool := []string{
		"Content-Type", "Content-Encoding", "Location", "Link", "Etag", long(63), long(64), long(70),
		"X-Request-Id", "Cache-Control", "X-Locationn", "Set-Cookie", "Vary", "X-Abc", long(65), "X-" + strings.Repeat("m", 68),
	}
	otherCase := func(rng *rand.Rand, s string) string {
		b := []byte(s)
		for {
			for i, c := range b {
				if rng.IntN(2) == 0 {
					if 'a' <= c && c <= 'z' {
						b[i] = c - 'a' + 'A'
					} else if 'A' <= c && c <= 'Z' {
						b[i] = c - 'A' + 'a'
					}
				}
			}
			if string(b) != s {
				return string(b)
			}
		}
	}
	sorted := func(fs []headerField) []headerField {
		fs = slices.Clone(fs)
		slices.SortStableFunc(fs, func(a, b headerField) int { return strings.Compare(a.name, b.name) })
		return fs
	}
	rng := rand.New(rand.NewPCG(3, 9))
	folded := 0
	for i := 0; i < 5000; i++ {
		allow := []string{"Content-Type", "Content-Encoding"}
		for _, name := range pool[2:] {
			if rng.IntN(3) == 0 {
				allow = append(allow, name)
			}
		}
		h := http.Header{}
		for _, name := range pool {
			switch rng.IntN(4) {
			case 0: // absent
			case 1:
				h[name] = []string{"a" + strconv.Itoa(i)}
			case 2:
				h[otherCase(rng, name)] = []string{"b", "c"}
			case 3:
				h[name] = []string{"d"}
				h[otherCase(rng, name)] = nil
			}
		}
		want := appendRecordHeadScanAll(nil, 201, h, allow)
		got := appendRecordHead(nil, 201, h, allow)
		var ws, gs storedResponse
		require.NoError(t, decodeRecord(want, &ws, nil))
		require.NoError(t, decodeRecord(got, &gs, nil))
		require.Equal(t, sorted(ws.header), sorted(gs.header), "headers %v allow %v", h, allow)
		for _, f := range ws.header {
			if _, ok := h[f.name]; !ok {
				folded++
				break
			}
		}
	}
	require.Greater(t, folded, 500, "too few records with a name found by the scan")
}

// insertContentType adds a Content-Type to an encoded record (head and
// body): first, after the Content-Type fields it holds, or in place of the
// one empty field that stands for a Content-Type present with no value; a
// full head drops its last field. replaySniffs tells the heads net/http
// sniffs a replay of.
func TestRecordInsertContentType(t *testing.T) {
	allow := []string{"Content-Type", "Content-Encoding", "Location"}
	for _, tc := range []struct {
		name   string
		status int
		h      http.Header
		v      string
		sniffs bool // replaySniffs of the head before
		want   []headerField
	}{
		{"none", 200, http.Header{"Location": {"/a"}}, "text/plain", true,
			[]headerField{{"Content-Type", "text/plain"}, {"Location", "/a"}}},
		{"none, nothing", 200, http.Header{"Location": {"/a"}}, "", true,
			[]headerField{{"Content-Type", ""}, {"Location", "/a"}}},
		{"blank encoding", 201, http.Header{"Content-Encoding": {""}, "Location": {"/a"}}, "text/html", true,
			[]headerField{{"Content-Type", "text/html"}, {"Content-Encoding", ""}, {"Location", "/a"}}},
		{"encoding", 200, http.Header{"content-encoding": {"gzip"}}, "application/x-gzip", false,
			[]headerField{{"Content-Type", "application/x-gzip"}, {"Content-Encoding", "gzip"}}},
		{"after another", 200, http.Header{"Location": {"/a"}, "content-type": {"a/b", "c/d"}}, "text/html", false,
			[]headerField{{"Location", "/a"}, {"Content-Type", "a/b"}, {"Content-Type", "c/d"}, {"Content-Type", "text/html"}}},
		{"in place of none", 200, http.Header{"content-type": nil, "Location": {"/a"}}, "text/html", false,
			[]headerField{{"Location", "/a"}, {"Content-Type", "text/html"}}},
		{"no body", 204, http.Header{"Location": {"/a"}}, "", false,
			[]headerField{{"Content-Type", ""}, {"Location", "/a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := appendRecordHead(nil, tc.status, tc.h, allow)
			assert.Equal(t, tc.sniffs, replaySniffs(b))
			head := len(b)
			b = append(b, "body"...)
			b, head = insertContentType(b, head, tc.v)
			var sr storedResponse
			require.NoError(t, decodeRecord(b, &sr, nil))
			assert.Equal(t, tc.want, sr.header)
			assert.Equal(t, "body", string(sr.body))
			assert.Equal(t, "body", string(b[head:]))
			assert.Equal(t, tc.status, sr.status)
			assert.False(t, replaySniffs(b[:head]))
		})
	}
	t.Run("full", func(t *testing.T) {
		h := http.Header{"Location": make([]string, maxRecordHeaders+3)}
		for i := range h["Location"] {
			h["Location"][i] = "/" + strconv.Itoa(i)
		}
		b := appendRecordHead(nil, 200, h, allow)
		head := len(b)
		b = append(b, "body"...)
		b, head = insertContentType(b, head, "text/plain")
		var sr storedResponse
		require.NoError(t, decodeRecord(b, &sr, nil))
		require.Len(t, sr.header, maxRecordHeaders)
		assert.Equal(t, headerField{"Content-Type", "text/plain"}, sr.header[0])
		assert.Equal(t, headerField{"Location", "/" + strconv.Itoa(maxRecordHeaders-2)}, sr.header[maxRecordHeaders-1])
		assert.Equal(t, "body", string(sr.body))
		assert.Equal(t, "body", string(b[head:]))
		h["Content-Type"] = []string{"text/plain"}
		assert.Equal(t, appendRecordHead(nil, 200, h, allow), b[:head], "as if the handler had set it")
	})
}
