package fingerprint_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

func base() fingerprint.Input {
	return fingerprint.Input{
		Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false",
		Header:      http.Header{"X-Tenant": {"acme"}, "X-Other": {"ignored"}},
		ContentType: "application/json", Body: []byte(`{"a":1,"b":[1,2]}`),
	}
}

// Pairs of requests that must have equal fingerprints, or different ones.
func TestSumEquality(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Headers: []string{"x-tenant", "X-Request-Mode"}})
	tests := []struct {
		name  string
		edit  func(*fingerprint.Input)
		equal bool
	}{
		{"same request", func(*fingerprint.Input) {}, true},
		{"member order and white space", func(in *fingerprint.Input) { in.Body = []byte(` { "b" : [1, 2], "a" : 1.0 } `) }, true},
		{"content type parameters and case", func(in *fingerprint.Input) { in.ContentType = "Application/JSON; charset=utf-8" }, true},
		{"unnamed header", func(in *fingerprint.Input) { in.Header.Set("X-Other", "changed") }, true},
		{"query order of different names", func(in *fingerprint.Input) { in.RawQuery = "dry_run=false&" }, true},

		{"method", func(in *fingerprint.Input) { in.Method = "PATCH" }, false},
		{"method case", func(in *fingerprint.Input) { in.Method = "post" }, false},
		{"operation", func(in *fingerprint.Input) { in.Operation = "createOrderV2" }, false},
		{"query value", func(in *fingerprint.Input) { in.RawQuery = "dry_run=true" }, false},
		{"query added", func(in *fingerprint.Input) { in.RawQuery = "dry_run=false&x=1" }, false},
		{"named header value", func(in *fingerprint.Input) { in.Header.Set("X-Tenant", "other") }, false},
		{"named header added", func(in *fingerprint.Input) { in.Header.Set("X-Request-Mode", "") }, false},
		{"named header second value", func(in *fingerprint.Input) { in.Header.Add("X-Tenant", "acme") }, false},
		{"named header removed", func(in *fingerprint.Input) { in.Header.Del("X-Tenant") }, false},
		{"body value", func(in *fingerprint.Input) { in.Body = []byte(`{"a":2,"b":[1,2]}`) }, false},
		{"array order", func(in *fingerprint.Input) { in.Body = []byte(`{"a":1,"b":[2,1]}`) }, false},
		{"other json media type", func(in *fingerprint.Input) { in.ContentType = "application/merge-patch+json" }, false},
		{"same bytes as text", func(in *fingerprint.Input) { in.ContentType = "text/plain" }, false},
	}
	want := h.Sum(ptr(base()))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Header = in.Header.Clone()
			tt.edit(&in)
			if tt.equal {
				assert.Equal(t, want, h.Sum(&in))
			} else {
				assert.NotEqual(t, want, h.Sum(&in))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Parts never run into each other: moving bytes between fields changes
// the fingerprint.
func TestSumFraming(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Headers: []string{"A", "B"}})
	inputs := []fingerprint.Input{
		{Method: "POST", Operation: "op"},
		{Method: "POS", Operation: "Top"},
		{Method: "POSTop"},
		{Operation: "POSTop"},
		{Method: "POST", Operation: "op", RawQuery: "a=b"},
		{Method: "POST", Operation: "op", RawQuery: "a", Body: []byte("=b")},
		{Method: "POST", Operation: "op", Header: http.Header{"A": {"x"}}},
		{Method: "POST", Operation: "op", Header: http.Header{"B": {"x"}}},
		{Method: "POST", Operation: "op", Header: http.Header{"A": {"x", "y"}}},
		{Method: "POST", Operation: "op", Header: http.Header{"A": {"x"}, "B": {"y"}}},
		{Method: "POST", Operation: "op", Header: http.Header{"A": {"xy"}}},
		{Method: "POST", Operation: "op", Header: http.Header{"A": {""}}},
		{Method: "POST", Operation: "op", ContentType: "text/plain"},
		{Method: "POST", Operation: "op", ContentType: "text/plain", Body: []byte{}},
		{Method: "POST", Operation: "op", ContentType: "text/plainx"},
		{Method: "POST", Operation: "op", ContentType: "text/plain", Body: []byte("x")},
		{Method: "POST", Operation: "op", ContentType: "application/json", Body: []byte(`"x"`)},
		{Method: "POST", Operation: "op", ContentType: "application/json", Body: []byte(`"x`)},
		{Method: "POST", Operation: "op", ContentType: "application/x-www-form-urlencoded", Body: []byte("a=b")},
		{Method: "POST", Operation: "op", ContentType: "application/x-www-form-urlencoded", Body: []byte("a=b%")},
	}
	seen := map[fingerprint.Fingerprint]int{}
	for i := range inputs {
		f := h.Sum(&inputs[i])
		if j, dup := seen[f]; dup {
			// The two empty bodies are the same request.
			if !(i == 13 && j == 12) {
				t.Errorf("inputs %d and %d collide: %+v %+v", j, i, inputs[j], inputs[i])
			}
		}
		seen[f] = i
	}
}

func TestSumDomains(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	sum := func(ct, body string) fingerprint.Fingerprint {
		return h.Sum(&fingerprint.Input{Method: "POST", ContentType: ct, Body: []byte(body)})
	}
	// JSON: any +json type.
	assert.Equal(t, sum("application/problem+json", `{"b":1,"a":2}`), sum("application/problem+json", `{"a":2,"b":1}`))
	assert.Equal(t, sum("application/vnd.api+JSON ; x=y", `[1.0]`), sum("application/vnd.api+json", `[1]`))
	// Invalid JSON is hashed raw, deterministically, and apart from valid JSON.
	assert.Equal(t, sum("application/json", `{"a":`), sum("application/json", `{"a":`))
	assert.NotEqual(t, sum("application/json", `{"a": `), sum("application/json", `{"a":`))
	// Other media types are raw bytes: white space counts.
	assert.NotEqual(t, sum("text/plain", `{"a":1}`), sum("text/plain", `{ "a":1}`))
	assert.NotEqual(t, sum("", `{"a":1}`), sum("", `{ "a":1}`))
	assert.NotEqual(t, sum("application/jsonx", `{"a":1}`), sum("application/jsonx", `{ "a":1}`))
	assert.NotEqual(t, sum("+json", `{"a":1}`), sum("+json", `{ "a":1}`), "a bare suffix is not a media type")
	// Forms.
	form := "application/x-www-form-urlencoded"
	assert.Equal(t, sum(form, "b=2&a=1"), sum(form, "a=1&b=2"))
	assert.Equal(t, sum(form, "a=x+y&c=%41"), sum(form, "c=A&a=x%20y"))
	assert.NotEqual(t, sum(form, "a=1&a=2"), sum(form, "a=2&a=1"))
	assert.Equal(t, sum(form, "a=%zz"), sum(form, "a=%zz"))
	assert.NotEqual(t, sum(form, "a=%zz"), sum(form, "a=%25zz"))
}

func TestSumNeverPanics(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Volatile: []string{"/a"}, Unordered: []string{"/b"}, Headers: []string{"X"}})
	assert.Equal(t, byte(fingerprint.Version), h.Sum(nil)[0])
	assert.Equal(t, h.Sum(nil), h.Sum(&fingerprint.Input{}))
	for _, body := range []string{"", "\x00", "{", "[[[[", `{"a":"\ud800"}`, strings.Repeat("[", 100000), strings.Repeat(`{"a":`, 100000)} {
		for _, ct := range []string{"application/json", "application/x-www-form-urlencoded", ""} {
			f := h.Sum(&fingerprint.Input{ContentType: ct, Body: []byte(body)})
			assert.Equal(t, byte(fingerprint.Version), f[0])
		}
	}
}

func TestFingerprintString(t *testing.T) {
	f := mustNew(t, fingerprint.Options{}).Sum(&fingerprint.Input{Method: "POST"})
	s := f.String()
	assert.True(t, strings.HasPrefix(s, fmt.Sprintf("v%d:", fingerprint.Version)), s)
	assert.Len(t, s, 3+64)
	for _, v := range []int{0, -1, fingerprint.Version + 1} {
		_, ok := mustNew(t, fingerprint.Options{}).SumVersion(&fingerprint.Input{}, v)
		assert.False(t, ok, "a version this package does not compute: %d", v)
	}
}

// The stream is exactly the one the package documentation describes: an
// independent encoder of the documented format gives the same digest. And a
// golden value pins each version: a change to the canonical form or to the
// stream must come with a new Version, and SumVersion computes the old ones
// as they were.
func TestSumDocumentedStream(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Volatile: []string{"/client_time"}, Unordered: []string{"/tags"}, Headers: []string{"x-tenant", "X-Absent"}})
	in := &fingerprint.Input{
		Method: "POST", Operation: "claimCoupon", Path: "/coupons/SPRING/claims", RawQuery: "b=2&a=1&a=0+%21",
		Header:      http.Header{"X-Tenant": {"acme", "two"}},
		ContentType: "Application/JSON; charset=utf-8",
		Body:        []byte(`{"coupon":"SPRING","client_time":1714564800,"tags":["b","a"],"amount":1.50}`),
	}
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	stream := func(v int) []byte {
		var st []byte
		st = fmt.Appendf(st, "idemgen-fingerprint\x00v%d\x00", v)
		st = str(append(st, 'M'), "POST")
		st = str(append(st, 'O'), "claimCoupon")
		st = append(st, 'Q', 'F', 3)
		st = str(str(st, "a"), "1")
		st = str(str(st, "a"), "0 !")
		st = str(str(st, "b"), "2")
		st = append(st, 'H', 2)
		st = append(str(st, "X-Absent"), 0)
		st = append(str(st, "X-Tenant"), 2)
		st = str(str(st, "acme"), "two")
		if v >= 2 {
			st = str(append(st, 'P'), "/coupons/SPRING/claims")
		}
		st = str(append(st, 'B'), "application/json")
		if v >= 3 {
			st = append(st, 'F', 0) // a JSON type's parameters are left out
		}
		return str(append(st, 'J'), `{"amount":1.5,"coupon":"SPRING","tags":["a","b"]}`)
	}
	golden := map[int]string{
		1: "v1:ee729b01540fa7068d69960f629a2bfa14f33c4101ae76ceea31bac49644b012",
		2: "v2:3aabad372dac11b29e1cfce8298b2f5536f47b1938fad64aa37ae042f4accfcb",
		3: "v3:14f6c9e680a4e7f74465c19d72b2bf9a9218030775367846f038823d86a50547",
	}
	for v := 1; v <= fingerprint.Version; v++ {
		got, ok := h.SumVersion(in, v)
		assert.True(t, ok)
		if v == fingerprint.Version {
			assert.Equal(t, h.Sum(in), got)
		}
		want := sha256.Sum256(stream(v))
		assert.Equal(t, byte(v), got[0])
		assert.Equal(t, want[:], got[1:], "version %d", v)
		assert.Equal(t, fmt.Sprintf("v%d:%s", v, hex.EncodeToString(want[:])), got.String())
		assert.Equal(t, golden[v], got.String(), "golden value of version %d", v)
	}
}

// A top-level object is hashed as it closes, header first; what follows
// it still decides: data after it makes the body raw bytes. And a long
// header (query) goes first all the same.
func TestSumTopLevelObject(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	stream := func(query, domain, body string) fingerprint.Fingerprint {
		str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
		var st []byte
		st = append(st, "idemgen-fingerprint\x00v3\x00"...)
		st = str(append(st, 'M'), "POST")
		st = str(append(st, 'O'), "op")
		st = append(st, 'Q', 'R')
		st = str(st, query)
		st = append(st, 'H', 0)
		st = append(st, 'P', 0)
		st = str(append(st, 'B'), "application/json")
		st = append(st, 'F', 0)
		st = str(append(st, domain...), body)
		var f fingerprint.Fingerprint
		f[0] = 3
		d := sha256.Sum256(st)
		copy(f[1:], d[:])
		return f
	}
	long := strings.Repeat("%zz", 1000) // not a form: raw
	for _, q := range []string{"%zz", long} {
		for _, tt := range []struct{ in, domain, want string }{
			{`{"b":1,"a":[2, 3],"c":{"y":"\u0041","x":1}}`, "J", `{"a":[2,3],"b":1,"c":{"x":1,"y":"A"}}`},
			{`{}`, "J", `{}`},
			{` { } `, "J", `{}`},
			{`{"a\u0000":` + `"` + strings.Repeat("x", 3000) + `"}`, "J", `{"a\u0000":"` + strings.Repeat("x", 3000) + `"}`},
			{`{"b":1,"a":2} x`, "R", `{"b":1,"a":2} x`},
			{`{"b":1,"a":2}}`, "R", `{"b":1,"a":2}}`},
		} {
			got := h.Sum(&fingerprint.Input{Method: "POST", Operation: "op", RawQuery: q, ContentType: "application/json", Body: []byte(tt.in)})
			assert.Equal(t, stream(q, tt.domain, tt.want), got, "%q", tt.in)
		}
	}
}

func TestConcurrentSum(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Volatile: fingerprinttest.SampleVolatile, Unordered: fingerprinttest.SampleUnordered})
	bodies := [][]byte{fingerprinttest.SampleBody(1 << 10), fingerprinttest.SampleBody(8 << 10), fingerprinttest.DenseBody(4 << 10)}
	want := make([]fingerprint.Fingerprint, len(bodies))
	for i, b := range bodies {
		want[i] = h.Sum(jsonInput(b))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 50 {
				i := (g + k) % len(bodies)
				if got := h.Sum(jsonInput(bodies[i])); got != want[i] {
					t.Errorf("goroutine %d: body %d: %v != %v", g, i, got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSumAllocs checks that Sum allocates nothing once warm (the pooled
// state has grown its buffers and cached the body's shapes), on every path:
// each case names the one it is there for (checked with a coverage profile
// of the case alone).
func TestSumAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	h := mustNew(t, fingerprint.Options{
		Volatile: fingerprinttest.SampleVolatile, Unordered: fingerprinttest.SampleUnordered, Headers: []string{"X-Tenant"},
	})
	plain := mustNew(t, fingerprint.Options{})
	declared := mustNew(t, fingerprint.Options{MediaTypes: []string{"application/json; charset=utf-8", "*/*"}})
	unordered := mustNew(t, fingerprint.Options{Unordered: []string{"/*", "/*/*/k"}})
	deep := strings.Repeat(`{"z":1,"y":[`, 200) + strings.Repeat(`]}`, 200)
	json := func(query string, body []byte) *fingerprint.Input {
		return &fingerprint.Input{Method: "POST", RawQuery: query, ContentType: "application/json", Body: body}
	}
	// A query of over 1 KB that needs no decoding: the header is written
	// to the hash before the body's stage.
	var long []string
	for k := range 40 {
		long = append(long, fmt.Sprintf("param_%02d=%s", k, strings.Repeat("v", 30)))
	}
	longQuery := strings.Join(long, "&")
	for _, c := range []struct {
		name string
		h    *fingerprint.Hasher
		in   *fingerprint.Input
	}{
		{"sample", h, &fingerprint.Input{Method: "POST", RawQuery: "b=1&a=%41", Header: http.Header{"X-Tenant": {"a"}}, ContentType: "application/json", Body: fingerprinttest.SampleBody(16 << 10)}},
		{"dense", h, json("", fingerprinttest.DenseBody(16<<10))},
		{"deep", h, json("", []byte(deep))},
		{"numbers", h, json("", []byte(`{"x":[1e400,"\u00e9\ud83d\ude00",0.10]}`))},
		{"form", h, &fingerprint.Input{Method: "POST", ContentType: "application/x-www-form-urlencoded", Body: []byte("z=1&a=2&m=%41+b")}},
		// appendParams: a raw type's parameters (version 3).
		{"raw parameters", h, &fingerprint.Input{Method: "POST", ContentType: `multipart/form-data; Boundary="a b"; x=1`, Body: []byte("--a b--\r\n")}},
		{"invalid", h, json("", []byte(`{"broken":`))},
		// Declared media types (Options.MediaTypes): a declared JSON body,
		// and a form body the list leaves out, hashed raw.
		{"declared json", declared, json("", []byte(`{"b":1,"a":[2,3]}`))},
		{"undeclared form", declared, &fingerprint.Input{Method: "POST", ContentType: "application/x-www-form-urlencoded; charset=utf-8", Body: []byte(`{"a":"&","b":1}`)}},
		// appendPlainQuery, with pairs.
		{"plain query", plain, json("a=1&b=two&c&d=x=y", []byte(`{"a":1}`))},
		// A top-level object hashed as it closes (hashObject), then data
		// after it: the body is hashed again, as raw bytes.
		{"hashed then invalid", plain, json("", []byte(`{"b":1,"a":2} x`))},
		// closeArray's sorts: by insertion, by comparison, by radix.
		{"unordered/small", unordered, json("", unorderedBody(10, 1))},
		{"unordered/100", unordered, json("", unorderedBody(100, 2))},
		{"unordered/radix", unordered, json("", unorderedBody(2000, 3))},
		// order's sort by radix: one-byte names (all duplicates), and
		// long names sharing their first bytes (runs sorted after).
		{"object/radix", plain, json("", manyMembersBody(16<<10))},
		{"object/radix long names", plain, json("", longNamesBody(1000, 4))},
		// Nested objects of cached shapes written flat (flatObject).
		{"flat shapes", plain, json("", []byte(flatShapeBody))},
		// hashObject's stage flushed to the hash: a long value, a full
		// stage, a long header.
		{"flushed/long value", plain, json("", longValueBody(600))},
		{"flushed/full stage", plain, json("", sortedMembersBody(300))},
		{"flushed/long query", plain, json(longQuery, []byte(`{"a":1,"b":[1,2]}`))},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.h.Sum(c.in)
			allocs := testing.AllocsPerRun(100, func() { c.h.Sum(c.in) })
			assert.Zero(t, allocs, "%s %.40q", c.in.ContentType, c.in.Body)
		})
		// The process-local variant takes the same paths, with its own
		// digest.
		t.Run(c.name+"/local", func(t *testing.T) {
			lv := fingerprint.Local(fingerprint.Version)
			if _, ok := c.h.SumVersion(c.in, lv); !ok {
				t.Fatal("local version not computed")
			}
			allocs := testing.AllocsPerRun(100, func() { c.h.SumVersion(c.in, lv) })
			assert.Zero(t, allocs, "%s %.40q", c.in.ContentType, c.in.Body)
		})
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct {
		opts   fingerprint.Options
		option string
	}{
		{fingerprint.Options{Volatile: []string{"a"}}, "Volatile"},
		{fingerprint.Options{Volatile: []string{""}}, "Volatile"},
		{fingerprint.Options{Volatile: []string{"/a~2"}}, "Volatile"},
		{fingerprint.Options{Unordered: []string{"/ok", "/a/~"}}, "Unordered"},
	} {
		_, err := fingerprint.New(tt.opts)
		var pe *fingerprint.PointerError
		require.True(t, errors.As(err, &pe), "%+v: %v", tt.opts, err)
		assert.Equal(t, tt.option, pe.Option)
		assert.Contains(t, err.Error(), tt.option)
	}
}

func TestCheckPointer(t *testing.T) {
	for p, ok := range map[string]bool{
		"": true, "/": true, "/a": true, "/a/*/b": true, "/~0~1": true, "/*": true, "/0": true,
		"a": false, "/~": false, "/a~2": false, "/~x/b": false,
	} {
		err := fingerprint.CheckPointer(p)
		if ok {
			assert.NoError(t, err, p)
			continue
		}
		var pe *fingerprint.PointerError
		require.True(t, errors.As(err, &pe), "%q", p)
		assert.Equal(t, p, pe.Pointer)
	}
	err := fingerprint.CheckPointer("/ab~3")
	assert.EqualError(t, err, `fingerprint: JSON pointer "/ab~3": "~" must be followed by "0" or "1" (at byte 3)`)
}

// Many overlapping wildcard pointers compile (and stay correct).
func TestManyPointers(t *testing.T) {
	var vol []string
	for i := range 12 {
		vol = append(vol, fmt.Sprintf("/*/%d/*/k%d", i, i), fmt.Sprintf("/a/*/%d", i))
	}
	h := mustNew(t, fingerprint.Options{Volatile: vol})
	assert.Equal(t, `{"a":{"x":{"12":1}},"b":[[{},{"k1":1}],[{}]]}`,
		canon(t, h, `{"a":{"x":{"3":1,"12":1}},"b":[[{"k0":1},{"k1":1}],[{"k1":2}]]}`))
}

// A body larger than what the pool keeps works and is released.
func TestLargeBody(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	a := []byte(`{"list":[`)
	b := []byte(`{"list":[`)
	for i := range 100000 {
		if i > 0 {
			a, b = append(a, ','), append(b, ',')
		}
		n := strconv.Itoa(i)
		a = append(append(append(append(a, `{"id":`...), n...), `,"name":"item`...), `","tags":["x","y"]}`...)
		b = append(append(append(append(b, `{"tags":["x","y"],"name":"item`...), `","id":`...), n...), `.0}`...)
	}
	a, b = append(a, `]}`...), append(b, `]}`...)
	require.Greater(t, len(a), 4<<20)
	assert.Equal(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(b)))
	assert.NotEqual(t, h.Sum(jsonInput(a)), h.Sum(jsonInput(a[:len(a)-1])))
}

func TestSyntaxError(t *testing.T) {
	_, err := fingerprint.Canonical(nil, []byte(`{"a":tru}`))
	assert.EqualError(t, err, "fingerprint: body is not canonical-form JSON: invalid character at offset 5")
}
