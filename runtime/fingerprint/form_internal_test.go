package fingerprint

import (
	"encoding/binary"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decoded returns the pairs of parseForm as name=value strings.
func decoded(t *testing.T, q string) ([]string, bool) {
	t.Helper()
	s := getState()
	defer putState(s)
	n, sorted, ok := parseForm(s, q)
	if !ok {
		return nil, false
	}
	enc := s.appendPairs(nil, n, sorted)
	count, k := binary.Uvarint(enc)
	require.Equal(t, uint64(n), count)
	enc = enc[k:]
	var out []string
	for range n {
		ns, ne := field(enc, 0)
		vs, ve := field(enc, ne)
		out = append(out, string(enc[ns:ne])+"="+string(enc[vs:ve]))
		enc = enc[ve:]
	}
	require.Empty(t, enc)
	return out, true
}

func TestParseForm(t *testing.T) {
	tests := []struct {
		in   string
		want []string // nil: malformed
	}{
		{"", []string{}},
		{"a=1", []string{"a=1"}},
		{"b=2&a=1", []string{"a=1", "b=2"}},
		{"a=2&b=0&a=1", []string{"a=2", "a=1", "b=0"}},
		{"a", []string{"a="}},
		{"a=&a", []string{"a=", "a="}},
		{"&&a=1&&", []string{"a=1"}},
		{"=x", []string{"=x"}},
		{"a=b=c", []string{"a=b=c"}},
		{"a+b=c+d", []string{"a b=c d"}},
		{"%41%62=%e2%82%AC", []string{"Ab=€"}},
		{"a=%2B%26%3D", []string{"a=+&="}},
		{"a=1;b=2", []string{"a=1;b=2"}},
		// An empty pair ("=") adds no bytes: the next pair starts where
		// it does; equal names keep their order all the same (past
		// twelve pairs, where the sort is not by insertion).
		{"00&0&0&0&=&=0&0&0&0&0&0&0&0", []string{"=", "=0", "0=", "0=", "0=", "0=", "0=", "0=", "0=", "0=", "0=", "0=", "00="}},
		// Fields of up to 127 bytes and no escape are copied as they
		// are; longer ones take two bytes of length.
		{strings.Repeat("n", 127) + "=" + strings.Repeat("v", 127), []string{strings.Repeat("n", 127) + "=" + strings.Repeat("v", 127)}},
		{"b=" + strings.Repeat("v", 128) + "&" + strings.Repeat("n", 128), []string{"b=" + strings.Repeat("v", 128), strings.Repeat("n", 128) + "="}},
		{"a=%", nil},
		{"a=%4", nil},
		{"a=%zz", nil},
		{"%g0=1", nil},
	}
	for _, tt := range tests {
		got, ok := decoded(t, tt.in)
		if tt.want == nil {
			assert.False(t, ok, "%q", tt.in)
			continue
		}
		require.True(t, ok, "%q", tt.in)
		assert.Equal(t, tt.want, append([]string{}, got...), "%q", tt.in)
	}
}

// net/url is the oracle: where it parses a query without error, the pairs
// agree (per name, the same values in the same order; names sorted); where
// a percent escape is malformed, both reject it.
func TestParseFormAgainstNetURL(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	alphabet := "ab=&+%2F41zé;"
	for range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(string([]rune(alphabet)[r.IntN(len([]rune(alphabet)))]))
		}
		q := b.String()
		got, ok := decoded(t, q)
		want, err := url.ParseQuery(q)
		if strings.Contains(q, ";") {
			continue // net/url rejects ';', which is a plain byte here
		}
		if err != nil {
			assert.False(t, ok, "%q: net/url: %v", q, err)
			continue
		}
		require.True(t, ok, "%q", q)
		var names []string
		values := map[string][]string{}
		for _, kv := range got {
			name, value, _ := strings.Cut(kv, "=")
			if len(names) == 0 || names[len(names)-1] != name {
				names = append(names, name)
			}
			values[name] = append(values[name], value)
		}
		assert.True(t, slices.IsSorted(names), "%q: %v", q, names)
		assert.Equal(t, len(want), len(values), "%q", q)
		for name, vs := range want {
			assert.Equal(t, vs, values[name], "%q: %q", q, name)
		}
	}
}

// Pairs with equal names keep their order of arrival, for queries of many
// pairs (sorted by comparison, not by insertion) with empty names and
// values among them.
func TestParseFormStable(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	parts := []string{"", "=", "=0", "=1", "a", "a=", "a=0", "a=1", "b=", "b=0", "0", "00"}
	for range 5000 {
		var q []string
		for range r.IntN(40) {
			q = append(q, parts[r.IntN(len(parts))])
		}
		want := []string{}
		for _, part := range q {
			if part == "" {
				continue
			}
			name, value, _ := strings.Cut(part, "=")
			want = append(want, name+"="+value)
		}
		slices.SortStableFunc(want, func(a, b string) int {
			an, _, _ := strings.Cut(a, "=")
			bn, _, _ := strings.Cut(b, "=")
			return strings.Compare(an, bn)
		})
		got, ok := decoded(t, strings.Join(q, "&"))
		require.True(t, ok)
		require.Equal(t, want, append([]string{}, got...), "%q", strings.Join(q, "&"))
	}
}

// appendPlainQuery either declines or appends exactly what parseForm and
// appendPairs would.
func TestAppendPlainQuery(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	alphabet := "abAB=&+%2F41zé;"
	queries := []string{"", "a", "a=", "=", "=x", "a=1&b=2", "b=2&a=1", "a=2&a=1", "a=1&", "&a=1", "a=1&&b=2",
		"dry_run=false&lang=en", "a=b=c", strings.Repeat("x", 127), strings.Repeat("x", 128),
		"a=" + strings.Repeat("x", 125), "a=" + strings.Repeat("x", 126), strings.Repeat("a&", 127), strings.Repeat("a&", 128)}
	for range 50000 {
		var b strings.Builder
		for range r.IntN(16) {
			b.WriteString(string([]rune(alphabet)[r.IntN(len([]rune(alphabet)))]))
		}
		queries = append(queries, b.String())
	}
	plainSeen := 0
	for _, q := range queries {
		dst := []byte("prefix")
		got, ok := appendPlainQuery(dst, q)
		if !ok {
			assert.Equal(t, "prefix", string(got[:len("prefix")]), "%q", q)
			continue
		}
		plainSeen++
		s := getState()
		n, sorted, ok := parseForm(s, q)
		require.True(t, ok, "%q", q)
		want := s.appendPairs([]byte("prefix"), n, sorted)
		putState(s)
		assert.Equal(t, string(want), string(got), "%q", q)
	}
	assert.Greater(t, plainSeen, 5000)
}

// sortPairs orders the records by name, then arrival, as a stable sort
// by name does: forms of short names over few bytes (NULs too, which the
// keys pad names with), of long names sharing their first bytes (the sort
// by next bytes), of names of 128 bytes or more (two-byte lengths), with
// few or many pairs (sorts by comparison and by radix), and with every
// layout of keys (few bytes of name for big offsets).
func TestSortPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	name := func(kind int) string {
		switch kind {
		case 0: // short, from a small alphabet with NUL
			var b strings.Builder
			for range r.IntN(4) {
				b.WriteString([]string{"a", "b", "%00", "%01"}[r.IntN(4)])
			}
			return b.String()
		case 1: // a long common part, then short
			return strings.Repeat("p", r.IntN(3)*7+5) + strings.Repeat("%00", r.IntN(2)) + string(rune('a'+r.IntN(3)))
		default: // long: a repetition cut anywhere
			return strings.Repeat("q", 100+r.IntN(60)) + strings.Repeat("r", r.IntN(3))
		}
	}
	for round := range 400 {
		kind := round % 3
		n := r.IntN(20)
		if round%4 == 0 {
			n = 300 + r.IntN(400)
		}
		var pairs []string
		for i := range n {
			pairs = append(pairs, name(kind)+"="+strconv.Itoa(i))
		}
		q := strings.Join(pairs, "&")
		for _, off := range []int{0, 21, 30, 38, 47, 54} {
			s := getState()
			n, _, ok := parseForm(s, q)
			require.True(t, ok)
			// The records in arrival order, sorted stably by name.
			var want []string
			type rec struct{ name, all string }
			var recs []rec
			for at := 0; at < len(s.buf); {
				ns, ne := field(s.buf, at)
				end := record(s.buf, at)
				recs = append(recs, rec{string(s.buf[ns:ne]), string(s.buf[at:end])})
				at = end
			}
			slices.SortStableFunc(recs, func(a, b rec) int { return strings.Compare(a.name, b.name) })
			for _, rc := range recs {
				want = append(want, rc.all)
			}
			var got []string
			if off == 0 {
				for _, k := range s.sortPairs(n) {
					at := int(k & s.formLayout.offMask)
					got = append(got, string(s.buf[at:record(s.buf, at)]))
				}
			} else {
				l := layoutFor(off)
				keys := make([]uint64, 2*n)
				for i, at := 0, 0; i < n; i++ {
					keys[i] = uint64(at)
					at = record(s.buf, at)
				}
				sortKeys(s.buf, keys[:n], keys[n:], 0, &l)
				for _, k := range keys[:n] {
					at := int(k & l.offMask)
					got = append(got, string(s.buf[at:record(s.buf, at)]))
				}
			}
			putState(s)
			require.Equal(t, want, got, "off %d: %q", off, q)
		}
	}
}
