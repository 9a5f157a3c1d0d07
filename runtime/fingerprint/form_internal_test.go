package fingerprint

import (
	"math/rand/v2"
	"net/url"
	"slices"
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
	pairs, ok := parseForm(s, q)
	if !ok {
		return nil, false
	}
	var out []string
	for _, p := range pairs {
		out = append(out, string(s.buf[p.noff:p.noff+p.nlen])+"="+string(s.buf[p.voff:p.voff+p.vlen]))
	}
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
		pairs, ok := parseForm(s, q)
		require.True(t, ok, "%q", q)
		want := appendPairs([]byte("prefix"), s.buf, pairs)
		putState(s)
		assert.Equal(t, string(want), string(got), "%q", q)
	}
	assert.Greater(t, plainSeen, 5000)
}
