package idem

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

func fpInput(body string) *fingerprint.Input {
	return &fingerprint.Input{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "application/json",
		Header: http.Header{"X-Tenant": {"t1"}, "X-Other": {"o"}}, Body: []byte(body)}
}

// The cache answers exactly what Sum answers, for every input that differs
// in one of the things the fingerprint reads.
func TestFPCacheAgreesWithSum(t *testing.T) {
	p := MustCompile(Spec{Operation: "op", Semantics: Strict, FingerprintHeaders: []string{"x-tenant"}, Volatile: []string{"/t"}})
	q := MustCompile(Spec{Operation: "op", Semantics: Strict})
	variants := map[string]func(*fingerprint.Input){
		"base":          func(*fingerprint.Input) {},
		"body":          func(in *fingerprint.Input) { in.Body = []byte(`{"a":2}`) },
		"body reorder":  func(in *fingerprint.Input) { in.Body = []byte(`{"b":1,"a":1}`) },
		"volatile":      func(in *fingerprint.Input) { in.Body = []byte(`{"a":1,"b":1,"t":9}`) },
		"method":        func(in *fingerprint.Input) { in.Method = "PUT" },
		"path":          func(in *fingerprint.Input) { in.Path = "/orders/o2/items" },
		"query":         func(in *fingerprint.Input) { in.RawQuery = "a=2" },
		"content type":  func(in *fingerprint.Input) { in.ContentType = "text/plain" },
		"header":        func(in *fingerprint.Input) { in.Header = http.Header{"X-Tenant": {"t2"}} },
		"header values": func(in *fingerprint.Input) { in.Header = http.Header{"X-Tenant": {"t1", "t1"}} },
		"other header":  func(in *fingerprint.Input) { in.Header = http.Header{"X-Tenant": {"t1"}, "X-Other": {"x"}} },
		"no body":       func(in *fingerprint.Input) { in.Body = nil },
	}
	c := newFPCache(fingerprint.Version, fingerprint.Version)
	for round := range 2 { // the second round answers from the cache
		for name, change := range variants {
			for _, pol := range []*Policy{p, q} {
				in := fpInput(`{"a":1,"b":1}`)
				change(in)
				assert.Equal(t, pol.hasher.Sum(in), c.sum(pol, in), "round %d, %s, policy %d", round, name, pol.id)
			}
		}
	}
}

// A cache computes its Engine's fingerprint version.
func TestFPCacheVersion(t *testing.T) {
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	for _, v := range []int{1, 2, fingerprint.Version} {
		c := newFPCache(v, v)
		for range 2 { // computed, then from the cache
			in := fpInput(`{"a":1}`)
			want, ok := p.hasher.SumVersion(in, v)
			require.True(t, ok)
			got := c.sum(p, in)
			assert.Equal(t, want, got)
			assert.Equal(t, byte(v), got[0])
		}
	}
}

func TestFPCacheHits(t *testing.T) {
	p := MustCompile(Spec{Operation: "op", Semantics: Strict, FingerprintHeaders: []string{"X-Tenant"}})
	c := newFPCache(fingerprint.Version, fingerprint.Version)
	in := fpInput(`{"a":1}`)
	h1, n := c.digest(p, in), uint64(len(in.Body))
	_, ok := c.slots[h1%fpCacheSlots].get(h1, n, p.id)
	require.False(t, ok, "empty cache")
	want := c.sum(p, in)
	got, ok := c.slots[h1%fpCacheSlots].get(h1, n, p.id)
	require.True(t, ok, "kept")
	assert.Equal(t, want, got)

	// A header the policy does not fingerprint does not change the digest; one it does, does.
	other := fpInput(`{"a":1}`)
	other.Header = http.Header{"X-Tenant": {"t1"}, "X-Other": {"changed"}}
	assert.Equal(t, h1, c.digest(p, other))
	other.Header = http.Header{"X-Tenant": {"t2"}}
	assert.NotEqual(t, h1, c.digest(p, other))

	// Length prefixes keep fields apart.
	a, b := fpInput(""), fpInput("")
	a.Method, a.RawQuery = "POSTa", ""
	b.Method, b.RawQuery = "POST", "a"
	assert.NotEqual(t, c.digest(p, a), c.digest(p, b))
}

// Inputs whose small fields overflow digest's buffer take the streaming
// hash: each input always gets the same digest, distinct inputs distinct
// ones, around the size where one way gives way to the other.
func TestFPCacheDigestWays(t *testing.T) {
	p := MustCompile(Spec{Operation: "op", Semantics: Strict, FingerprintHeaders: []string{"X-Tenant"}})
	c := newFPCache(fingerprint.Version, fingerprint.Version)
	seen := map[uint64]string{}
	for n := 0; n < 400; n += 7 {
		for _, where := range []string{"query", "header"} {
			in := fpInput(`{"a":1}`)
			long := strings.Repeat("q", n)
			if where == "query" {
				in.RawQuery = long
			} else {
				in.Header = http.Header{"X-Tenant": {"t", long}}
			}
			d := c.digest(p, in)
			require.Equal(t, d, c.digest(p, in), "%s of %d bytes", where, n)
			id := fmt.Sprint(where, n)
			if prev, dup := seen[d]; dup {
				t.Fatalf("%s and %s have the same digest", prev, id)
			}
			seen[d] = id
			assert.Equal(t, p.hasher.Sum(in), c.sum(p, in), id)
		}
	}
	_, fits := appendDigestStr(make([]byte, 0, 256), strings.Repeat("q", 300))
	require.False(t, fits, "the test reaches the streaming way")
}

// Concurrent readers and writers of the same slots: a reader gets the right
// fingerprint or a miss, never a torn one (run with -race).
func TestFPCacheConcurrent(t *testing.T) {
	p := MustCompile(Spec{Operation: "op", Semantics: Strict})
	c := newFPCache(fingerprint.Version, fingerprint.Version)
	// Inputs that share one slot, so that writers replace each other.
	var inputs []*fingerprint.Input
	slot := c.digest(p, fpInput(`{"n":0}`)) % fpCacheSlots
	for i := 0; len(inputs) < 4 && i < 100000; i++ {
		in := fpInput(fmt.Sprintf(`{"n":%d}`, i))
		if c.digest(p, in)%fpCacheSlots == slot {
			inputs = append(inputs, in)
		}
	}
	require.Len(t, inputs, 4)
	want := make([]Fingerprint, len(inputs))
	for i := range inputs {
		want[i] = p.hasher.Sum(inputs[i])
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := (i + g) % len(inputs)
				if got := c.sum(p, inputs[k]); got != want[k] {
					t.Errorf("input %d: wrong fingerprint", k)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkFPCache(b *testing.B) {
	p := MustCompile(Spec{Operation: "op", Semantics: Strict, Volatile: []string{"/t"}})
	body := []byte(`{"customer":"cus_8f2b","items":[` + repeatJSON(`{"sku":"sku-1000","qty":1,"price":9.99}`, 24) + `],"t":"2025"}`)
	in := &fingerprint.Input{Method: "POST", Operation: "op", ContentType: "application/json", Body: body}
	b.Run("sum", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			p.hasher.Sum(in)
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := newFPCache(fingerprint.Version, fingerprint.Version)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			c.sum(p, in)
		}
	})
}

func repeatJSON(s string, n int) string {
	out := s
	for i := 1; i < n; i++ {
		out += "," + s
	}
	return out
}

// sum is the cache's lookup as Call.begin makes it (key, get, compute on a
// miss), for these tests.
func (c *fpCache) sum(p *Policy, in *fingerprint.Input) Fingerprint {
	k := c.key(p, in, false)
	if fp, ok := c.get(k); ok {
		return fp
	}
	return c.compute(p, in, k)
}
