package fingerprint_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

// documentedSum is the fingerprint of in as the package documentation
// defines it, built independently of Sum: the stream written out (the
// query and a form body decoded by decodeForm, the headers as documented,
// the media type and the domain it selects) with Canonical's output as the
// payload of a JSON body, then SHA-256.
func documentedSum(h *fingerprint.Hasher, headers []string, in *fingerprint.Input) fingerprint.Fingerprint {
	return documentedSumVersion(h, headers, in, fingerprint.Version)
}

// documentedSumVersion is documentedSum in format v: version 1 has no path,
// versions 1 and 2 no parameters; a process-local version (fingerprint.Local)
// is the stream of its format, digested whole by fingerprint.LocalStreamSum.
func documentedSumVersion(h *fingerprint.Hasher, headers []string, in *fingerprint.Input, version byte) fingerprint.Fingerprint {
	return documentedSumDeclared(h, headers, nil, in, version)
}

// documentedSumDeclared is documentedSumVersion for a hasher built with
// Options.MediaTypes declared (nil: without the list), as the package
// documentation says ("Declared media types"): the JSON and form domains
// only for a media type declared exactly.
func documentedSumDeclared(h *fingerprint.Hasher, headers, declared []string, in *fingerprint.Input, version byte) fingerprint.Fingerprint {
	sum := func(_ byte, st []byte) fingerprint.Fingerprint { return sum(version, st) }
	v := version &^ 0x80 // the stream's format
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	// pairs appends 'F' pairs(x), or 'R' str(x) if x is malformed.
	pairs := func(b []byte, x string) []byte {
		ps, ok := decodeForm(x)
		if !ok {
			return str(append(b, 'R'), x)
		}
		slices.SortStableFunc(ps, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
		b = binary.AppendUvarint(append(b, 'F'), uint64(len(ps)))
		for _, p := range ps {
			b = str(str(b, p[0]), p[1])
		}
		return b
	}
	st := []byte(fmt.Sprintf("idemgen-fingerprint\x00v%d\x00", v))
	st = str(append(st, 'M'), in.Method)
	st = str(append(st, 'O'), in.Operation)
	st = pairs(append(st, 'Q'), in.RawQuery)
	var names []string
	for _, n := range headers {
		names = append(names, http.CanonicalHeaderKey(strings.TrimSpace(n)))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	st = binary.AppendUvarint(append(st, 'H'), uint64(len(names)))
	for _, n := range names {
		st = binary.AppendUvarint(str(st, n), uint64(len(in.Header[n])))
		for _, v := range in.Header[n] {
			st = str(st, v)
		}
	}
	if v >= 2 {
		st = str(append(st, 'P'), in.Path)
	}
	media, _, _ := strings.Cut(in.ContentType, ";")
	media = asciiLower(strings.Trim(media, " \t"))
	st = str(append(st, 'B'), media)
	read := declared == nil || declaresMedia(declared, media)
	if v >= 3 {
		if read {
			st = append(st, documentedParams(media, in.ContentType)...)
		} else {
			st = append(st, documentedParams("", in.ContentType)...) // "": parameters as a raw type's
		}
	}
	switch {
	case !read:
	case media == "application/json" || strings.HasSuffix(media, "+json") && strings.IndexByte(media, '/') > 0:
		if canon, err := h.Canonical(nil, in.Body); err == nil {
			return sum(v, str(append(st, 'J'), string(canon)))
		}
	case media == "application/x-www-form-urlencoded":
		if p := pairs(nil, string(in.Body)); p[0] == 'F' {
			return sum(v, str(append(st, 'F'), string(p[1:])))
		}
	}
	return sum(v, str(append(st, 'R'), string(in.Body)))
}

// documentedMediaType is an RFC 9110 type "/" subtype, both tokens.
var documentedMediaType = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// declaresMedia reports whether the declared media types list media (a
// request's, lower case, without parameters): an entry up to its ';',
// trimmed of SP and HTAB, in ASCII lower case, equal to it, and neither a
// range (a '*') nor anything but a media type.
func declaresMedia(declared []string, media string) bool {
	for _, d := range declared {
		d, _, _ = strings.Cut(d, ";")
		d = asciiLower(strings.Trim(d, " \t"))
		if d == media && !strings.Contains(d, "*") && documentedMediaType.MatchString(d) {
			return true
		}
	}
	return false
}

// sum is the fingerprint of the stream st in version v.
func sum(v byte, st []byte) fingerprint.Fingerprint {
	if fingerprint.IsLocal(int(v)) {
		return fingerprint.LocalStreamSum(v, st)
	}
	f := fingerprint.Fingerprint{v}
	d := sha256.Sum256(st)
	copy(f[1:], d[:])
	return f
}

// memberNames are names the pointers of TestSumMatchesCanonical reach.
var memberNames = []string{"a", "b", "id", "name", "items", "x", "k", "é", "/", "~", "tags", "attribute_name"}

// randObject returns an object of n members with unique names, some of
// memberNames and the others random (with escapes when spelled at random),
// and random values of depth up to depth.
func randObject(r *rand.Rand, n, depth int) jobj {
	var o jobj
	seen := map[string]bool{}
	for len(o) < n {
		name := memberNames[r.IntN(len(memberNames))]
		switch r.IntN(3) {
		case 0:
			name = randString(r, 6)
		case 1:
			if n > len(memberNames) {
				name = fmt.Sprintf("%s_%d", name, r.IntN(4*n))
			}
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		o = append(o, jmember{name, randValue(r, depth)})
	}
	return o
}

// differentialBodies returns the bodies of TestSumMatchesCanonical: mostly
// top-level objects (hashed as they close, by hashObject), of every size
// (over 256 members, sorted by radix; over 2 KB, with hashObject's stage
// flushed), with long names and values on both sides of the stage's
// limits (32 bytes, 512 bytes), cached shapes written flat, unordered
// arrays, and other values; and some of them made invalid by a byte more
// or less (the body hashed first, then again as raw bytes).
func differentialBodies(rounds int) [][]byte {
	r := rand.New(rand.NewPCG(11, 12))
	var out [][]byte
	for _, n := range []int{1 << 10, 4 << 10, 16 << 10, 64 << 10} {
		out = append(out, fingerprinttest.SampleBody(n), fingerprinttest.DenseBody(n))
	}
	out = append(out, manyMembersBody(1<<10), manyMembersBody(16<<10), tinyElementsBody(4<<10))
	for _, n := range []int{31, 32, 33, 500, 511, 512, 513, 1100, 2040, 2050, 5000} {
		out = append(out, longValueBody(n))
	}
	for _, n := range []int{10, 100, 200, 300, 1000} {
		out = append(out, sortedMembersBody(n), longNamesBody(n, uint64(n)), unorderedBody(n, uint64(n)))
	}
	out = append(out, []byte(flatShapeBody), []byte(flatShapeBody), []byte(`{}`), []byte(` { } `), []byte(`{"a":{}}`), []byte(`[{"a":1}]`), []byte(`"x"`))
	for k := range rounds {
		var v jv
		switch {
		case k%50 == 0:
			// A large object: 257 to 2000 members.
			v = randObject(r, 257+r.IntN(1744), 1)
		case k%10 == 0:
			// Long names and values (some 32 bytes or so, some 512).
			o := randObject(r, 1+r.IntN(20), 2)
			for range 1 + r.IntN(4) {
				l := []int{28 + r.IntN(10), 500 + r.IntN(30), 30 + r.IntN(3000)}[r.IntN(3)]
				name := strings.Repeat("n", 1+r.IntN(40))
				o = append(o, jmember{name + "_" + fmt.Sprint(len(o)), jstr(strings.Repeat("v", l))})
			}
			v = o
		case k%10 == 1:
			v = randValue(r, 4) // not always an object
		default:
			v = randObject(r, r.IntN(12), 3)
		}
		b := spell(r, v, k%3 != 0)
		out = append(out, b)
		// The same object again, spelled otherwise: shapes cached by
		// the last body, or not quite.
		if k%4 == 0 {
			out = append(out, spell(r, v, true))
		}
		switch k % 16 {
		case 3:
			out = append(out, append(slices.Clip(b), " x"...))
		case 7:
			out = append(out, append(slices.Clip(b), '}'))
		case 11:
			if len(b) > 1 {
				out = append(out, b[:len(b)-1])
			}
		case 15:
			out = append(out, append(append([]byte("\n "), b...), " \t\r\n"...))
		}
	}
	return out
}

// TestSumMatchesCanonical checks Sum, which hashes a top-level object as
// it closes (hashObject, from where its members' texts are, header
// first), against the documented stream built from Canonical's output,
// for many bodies under several option sets, queries (decoded, plain,
// raw, long enough to go to the hash before the body) and headers. Each
// body is summed before and after Canonical sees it, so with the shapes
// of the previous body cached and then its own.
func TestSumMatchesCanonical(t *testing.T) {
	rounds := 1500
	if testing.Short() || raceEnabled {
		rounds = 400
	}
	bodies := differentialBodies(rounds)
	sets := []fingerprint.Options{
		{},
		{Volatile: fingerprinttest.SampleVolatile, Unordered: fingerprinttest.SampleUnordered, Headers: []string{"X-Tenant", " x-request-id ", "x-tenant"}},
		{Volatile: []string{"/a", "/*/b", "/items/1", "/id"}, Unordered: []string{"/*", "/*/*", "/*/*/*"}},
		{Volatile: []string{"/name", "/~1", "/*/~0", "/é", "/x/*", "/customer/email"}, Unordered: []string{"/b", "/*/a", "/items", "/tags"}, Headers: []string{"Accept"}},
		{Unordered: []string{"/*", "/*/*/k"}, Headers: []string{"X-Absent", "X-Tenant"}},
	}
	var long []string
	for k := range 40 {
		long = append(long, fmt.Sprintf("p%02d=%s", k, strings.Repeat("v", 30)))
	}
	queries := []string{"", "a=1&b=2", "b=2&a=1&a=0+%21", "x", "%zz", "00&0&0&0&=&=0&0&0&0&0&0&0&0", strings.Join(long, "&"), strings.Repeat("%zz", 400), "a=" + strings.Repeat("w", 1100)}
	headers := []http.Header{nil, {"X-Tenant": {"acme"}}, {"X-Tenant": {"acme", ""}, "X-Request-Id": {"r1"}, "Accept": {"application/json"}}}
	types := []string{"application/json", "Application/JSON; charset=utf-8", " application/merge-patch+json ;x=y", "application/vnd.api+json"}
	r := rand.New(rand.NewPCG(13, 14))
	for k, opts := range sets {
		h := mustNew(t, opts)
		for i, body := range bodies {
			// The body with bytes past its end (within its capacity):
			// they must not count.
			padded := make([]byte, len(body), len(body)+64)
			copy(padded, body)
			for j := len(body); j < cap(padded); j++ {
				padded[:cap(padded)][j] = byte(r.IntN(256))
			}
			in := &fingerprint.Input{
				Method: []string{"POST", "PUT", "patch"}[r.IntN(3)], Operation: []string{"op", "", "createOrder"}[r.IntN(3)],
				Path:     []string{"", "/orders", "/orders/o1/items", "/orders/o%2F1/items", "/é"}[r.IntN(5)],
				RawQuery: queries[r.IntN(len(queries))], Header: headers[r.IntN(len(headers))],
				ContentType: types[r.IntN(len(types))], Body: padded,
			}
			before := h.Sum(in)
			want := documentedSum(h, opts.Headers, in)
			if after := h.Sum(in); before != want || after != want {
				t.Fatalf("option set %d, body %d (%d bytes), query %.30q, type %q: Sum %v then %v, want %v; body %.300q",
					k, i, len(body), in.RawQuery, in.ContentType, before, after, want, body)
			}
			// Versions 1 and 2, between two sums of the current version
			// (its header is cached): the same stream without the path,
			// or the parameters.
			for v := 1; v < fingerprint.Version; v++ {
				old, ok := h.SumVersion(in, v)
				if wantOld := documentedSumVersion(h, opts.Headers, in, byte(v)); !ok || old != wantOld {
					t.Fatalf("option set %d, body %d: SumVersion %d %v, want %v", k, i, v, old, wantOld)
				}
				if again := h.Sum(in); again != want {
					t.Fatalf("option set %d, body %d: Sum after SumVersion %d %v, want %v", k, i, v, again, want)
				}
			}
			// The process-local variants: the same streams, digested
			// with maphash (streamed, or the stage in one piece).
			for v := 1; v <= fingerprint.Version; v++ {
				lv := fingerprint.Local(v)
				got, ok := h.SumVersion(in, lv)
				if wantLocal := documentedSumVersion(h, opts.Headers, in, byte(lv)); !ok || got != wantLocal {
					t.Fatalf("option set %d, body %d (%d bytes): SumVersion local %d %v, want %v", k, i, len(body), v, got, wantLocal)
				}
			}
		}
		// Form bodies, and bodies of other types (raw).
		for i, q := range queries {
			for _, ct := range []string{"application/x-www-form-urlencoded", "Application/X-WWW-Form-URLEncoded ; charset=utf-8", "text/plain", "", "application/json+x"} {
				in := &fingerprint.Input{Method: "POST", RawQuery: queries[(i+1)%len(queries)], ContentType: ct, Body: []byte(q)}
				if got, want := h.Sum(in), documentedSum(h, opts.Headers, in); got != want {
					t.Fatalf("option set %d, body %.30q, type %q: Sum %v, want %v", k, q, ct, got, want)
				}
				lv := fingerprint.Local(fingerprint.Version)
				if got, _ := h.SumVersion(in, lv); got != documentedSumVersion(h, opts.Headers, in, byte(lv)) {
					t.Fatalf("option set %d, body %.30q, type %q: local SumVersion differs from the documented stream", k, q, ct)
				}
			}
		}
	}
}

// TestSumReadsOnlyTheBody checks that Sum and Canonical read no byte of the
// body's array past its length (a caller may be writing there: a body
// sliced from a larger buffer). It needs the race detector, which reports
// a read of those bytes while another goroutine writes them.
func TestSumReadsOnlyTheBody(t *testing.T) {
	if !raceEnabled {
		t.Skip("needs the race detector")
	}
	hashers := []*fingerprint.Hasher{
		mustNew(t, fingerprint.Options{}),
		mustNew(t, fingerprint.Options{Volatile: fingerprinttest.SampleVolatile, Unordered: []string{"/*", "/*/*/k"}}),
	}
	var nearEnd [][]byte // fastMembers's loads from the body's end
	for d := range 40 {
		nearEnd = append(nearEnd,
			[]byte(`{"a":1,"b":"`+strings.Repeat("x", d)+`"}`),
			[]byte(`{"a":"x","bb":`+strings.Repeat("7", d+1)+`}`),
			[]byte(`{"a":"x","b":1.`+strings.Repeat("5", d+1)+`}`),
			[]byte(`{"a":"x","`+strings.Repeat("b", d+1)+`":true}`),
			[]byte(`{"a":[1,"`+strings.Repeat("x", d)+`"]}`),
			[]byte(`{"a":[`+strings.Repeat("1,", d)+`1]}`),
			[]byte(`{"a":[`+strings.Repeat("1.5,", d)+`1.5]}`),
			[]byte(`{"a":[`+strings.Repeat(`"x",`, d)+`"x"]}`),
			[]byte(`{"a":1,"b": `+strings.Repeat("7", d+1)+`}`),
			[]byte(`{"a":1,"b":`+strings.Repeat(" ", d)+`7}`))
	}
	// Bodies cut short after a shape is cached: every prefix of some
	// (one with a name of 21 bytes, whose text "name": is as long as
	// fastMembers compares, 24 bytes: its value would start at the end).
	truncated := map[string]bool{}
	for _, full := range []string{`{"a":1,"b": "xyz","c":22,"d":[1,2],"e":true}`, `{"a":1,"` + strings.Repeat("b", 21) + `":2}`} {
		for l := range len(full) {
			truncated[full[:l]] = true
			nearEnd = append(nearEnd, []byte(full), []byte(full[:l]))
		}
	}
	for _, body := range append([][]byte{
		[]byte(`{"a":1,"b":"x"}`), []byte(`{"b":"x","a":1}`), []byte(`{"a":1,"b":{"d":2,"c":3}}`), []byte(`{"a":[3,1,2]}`),
		[]byte(`{"a":"\u00e9","b":1.50}`), []byte(`[{"b":1,"a":2},"x"]`), []byte(flatShapeBody), []byte(flatShapeBody),
		fingerprinttest.SampleBody(1 << 10), fingerprinttest.DenseBody(1 << 10), longNamesBody(300, 1), unorderedBody(300, 2),
		// Objects alike, names out of order, the last member of the
		// last a few bytes from the end, in an object far enough from
		// it that flatShapes reads the body, not a copy.
		[]byte(`{"z":[{"c":1,"b":"` + strings.Repeat("b", 300) + `","a":2},{"c":1,"b":"` + strings.Repeat("b", 300) + `","a":2}]}`),
		[]byte(`{"z":[{"c":1,"b":"` + strings.Repeat("b", 300) + `","a":2},{"c":1,"b":"` + strings.Repeat("b", 300) + `","a":2}],"y":"0123456789"}`),
	}, nearEnd...) {
		buf := make([]byte, len(body)+64)
		copy(buf, body)
		in := jsonInput(buf[:len(body)])
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			for {
				select {
				case <-done:
					return
				default:
				}
				for j := len(body); j < len(buf); j++ {
					buf[j]++
				}
			}
		}()
		for _, h := range hashers {
			for range 5 {
				h.Sum(in)
				if _, err := h.Canonical(nil, in.Body); err != nil && !truncated[string(body)] {
					t.Errorf("%.40q: %v", body, err)
				}
			}
		}
		close(done)
		<-stopped
	}
}

// TestSumHeaderCache checks Sum against the documented stream for requests
// in a row that differ in one header field only, or in where the bytes of
// two fields part (the same bytes in all), with and without named headers,
// each summed three times: a state reuses the header of the last request
// when the fields are the same (and from its second reuse on, the digest's
// state after its whole blocks), and must not when they are not. The
// bodies take every way to the hash: a small object in the stage, a large
// one flushed, an array, a body that is not JSON, a form.
func TestSumHeaderCache(t *testing.T) {
	long := "q=" + strings.Repeat("v", 1500) // a header longer than the stage's half
	ins := []fingerprint.Input{
		{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "application/json"},
		{Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false&lang=en", ContentType: "application/json"},
		{Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false&lang=en", ContentType: "application/json"},
		{Method: "POS", Operation: "TcreateOrder", RawQuery: "dry_run=false&lang=en", ContentType: "application/json"},
		{Method: "POST", Operation: "createOrderd", RawQuery: "ry_run=false&lang=en", ContentType: "application/json"},
		{Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false&lang=em", ContentType: "application/json"},
		{Method: "POST", Operation: "op", RawQuery: "a=2", ContentType: "application/json"},
		{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "application/jsoN"},
		{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "text/plain"},
		{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "text/plain; charset=utf-8"},
		{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "text/plain; charset=latin1"},
		{Method: "POST", Operation: "op", RawQuery: "a=1&b", ContentType: "application/x-www-form-urlencoded"},
		{Method: "POST", Operation: "op", RawQuery: "a=1", ContentType: "application/json", Header: http.Header{"X-Tenant": {"t"}}},
		{Method: "POST", Operation: "op", RawQuery: long, ContentType: "application/json"},
		{Method: "POST", Operation: "op", RawQuery: long[:1000], ContentType: "application/json"},
		{},
		{Method: "PUT", Operation: "op", RawQuery: "%zz", ContentType: "application/json"},
	}
	bodies := [][]byte{
		[]byte(`{"b":1,"a":[2,"x"]}`),
		fingerprinttest.DenseBody(4096), // flushed: over the stage's size
		[]byte(` [{"b":1,"a":2}, 3] `),
		[]byte(`{"a":1} x`),
		[]byte(`{"a":1}`),
	}
	for _, headers := range [][]string{nil, {"X-Tenant"}} {
		h := mustNew(t, fingerprint.Options{Headers: headers})
		other := mustNew(t, fingerprint.Options{Headers: []string{"X-Tenant"}})
		for round := range 2 {
			for k := range ins {
				for b, body := range bodies {
					in := ins[k]
					in.Body = body
					if in.ContentType == "application/x-www-form-urlencoded" {
						in.Body = []byte("b=2&a=1")
					}
					want := documentedSum(h, headers, &in)
					lv := fingerprint.Local(fingerprint.Version)
					wantLocal := documentedSumVersion(h, headers, &in, byte(lv))
					for n := range 3 {
						if h.Sum(&in) != want {
							t.Fatalf("headers %q, round %d, input %d, body %d, sum %d: Sum differs from the documented stream", headers, round, k, b, n)
						}
						// The local variant, with the header cached
						// (and its SHA-256 state saved) by the SHA-256 sum.
						if got, _ := h.SumVersion(&in, lv); got != wantLocal {
							t.Fatalf("headers %q, round %d, input %d, body %d, sum %d: local SumVersion differs from the documented stream", headers, round, k, b, n)
						}
					}
					if round == 1 {
						// Another hasher in between, with named headers.
						if want := documentedSum(other, []string{"X-Tenant"}, &in); other.Sum(&in) != want {
							t.Fatalf("headers %q, input %d, body %d: Sum with named headers differs from the documented stream", headers, k, b)
						}
					}
				}
			}
		}
	}
}

// TestSumFirstBlockCache checks Sum against the documented stream for
// requests in a row whose streams share their first 64-byte block or part
// inside it (a state hashes a first block it saw in the stream before once,
// then resumes from the digest's state after it), with versions (other
// stream prefixes) mixed in: each sequence goes through a block seen once,
// seen again (the state saved), reused, and replaced.
func TestSumFirstBlockCache(t *testing.T) {
	h := mustNew(t, fingerprint.Options{Volatile: []string{"/sent_at"}})
	long := strings.Repeat("n", 200)
	body := func(customer, note string) []byte {
		return []byte(`{"customer":"` + customer + `","sent_at":"x","note":"` + note + `","qty":1}`)
	}
	ins := []fingerprint.Input{
		// The first block is the header: the bodies part after it.
		{Method: "POST", Operation: "createOrderWithALongName", Path: "/orders", ContentType: "application/json"},
		// The body starts inside the first block.
		{Method: "POST", Operation: "o", ContentType: "application/json"},
		{Method: "POST", Operation: "o", Path: "/p", ContentType: "application/json"},
	}
	bodies := [][]byte{
		body("c1", long), body("c1", long), body("c1", long+"x"), body("c2", long),
		body("c2", long), body("c1", long), []byte(`{"a":1}`), body("c1", long),
	}
	for _, v := range []int{fingerprint.Version, 2, fingerprint.Local(fingerprint.Version), fingerprint.Version, fingerprint.Local(2), 1} {
		for k := range ins {
			for b, bd := range bodies {
				in := ins[k]
				in.Body = bd
				want := documentedSumVersion(h, nil, &in, byte(v))
				for n := range 3 {
					if got, _ := h.SumVersion(&in, v); got != want {
						t.Fatalf("version %d, input %d, body %d, sum %d: Sum differs from the documented stream", v, k, b, n)
					}
				}
			}
		}
	}
}
