//go:build linux

package fingerprint_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

// The guard-page tests place each body (and query) so that its last byte
// is the last byte of a readable page followed by a PROT_NONE page (cap ==
// len), and again so that its first byte is the first byte of a readable
// page preceded by a PROT_NONE page: a read past either end of the body
// (the unsafe loads of fastMembers, putShort and putObjects, or a slice of
// the body up to its capacity) faults and kills the test binary, instead of
// reading another request's bytes. Each result is also compared with the
// same call over a copy of the body on the heap.
//
// By default the test runs the golden bodies, the fuzz corpus in
// testdata/fuzz, generated runs of objects alike and forms, and the
// prefixes near the end of some of them, in a few seconds (under -race
// too). -guard.long takes every prefix and suffix of every golden body
// (or a sample of the end positions of the largest) and more generated
// bodies; -guard.stress=2m adds random bodies for that long;
// -guard.corpus=DIR,DIR adds fuzz corpus directories (such as
// $(go env GOCACHE)/fuzz/.../FuzzCanonicalJSON).
var (
	guardLong   = flag.Bool("guard.long", false, "guard-page test: every prefix and suffix of every golden body, more generated bodies")
	guardStress = flag.Duration("guard.stress", 0, "guard-page test: random bodies for this long")
	guardCorpus = flag.String("guard.corpus", "", "guard-page test: comma-separated fuzz corpus directories to add")
)

// guarded is a readable region [lo, hi) of mem between two PROT_NONE pages.
type guarded struct {
	mem    []byte
	lo, hi int
}

// fit makes the region hold at least size bytes.
func (g *guarded) fit(t testing.TB, size int) {
	if size > g.hi-g.lo {
		*g = *newGuarded(t, 2*size)
	}
}

func newGuarded(t testing.TB, size int) *guarded {
	page := os.Getpagesize()
	n := (size + page - 1) / page * page
	if n == 0 {
		n = page
	}
	mem, err := syscall.Mmap(-1, 0, n+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[:page], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[page+n:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return &guarded{mem: mem, lo: page, hi: page + n}
}

// atEnd copies b so that it ends where the guard page after the region
// starts, with cap == len.
func (g *guarded) atEnd(b []byte) []byte {
	if len(b) > g.hi-g.lo {
		panic("body larger than the guarded region")
	}
	s := g.mem[g.hi-len(b) : g.hi : g.hi]
	copy(s, b)
	return s
}

// atStart copies b so that it starts where the guard page before the
// region ends, with cap == len.
func (g *guarded) atStart(b []byte) []byte {
	if len(b) > g.hi-g.lo {
		panic("body larger than the guarded region")
	}
	s := g.mem[g.lo : g.lo+len(b) : g.lo+len(b)]
	copy(s, b)
	return s
}

func guardString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// guardHashers are the option sets of the guard-page tests: none, the
// golden ones, and pointers into the generated runs (volatile members of
// their objects, unordered arrays of them).
func guardHashers(t testing.TB) []*fingerprint.Hasher {
	g := goldenHashers(t)
	return []*fingerprint.Hasher{g[0], g[1],
		mustNew(t, fingerprint.Options{Volatile: []string{"/z/*/k1", "/*/k2", "/0/k1"}, Unordered: []string{"/z/*/k3", "/y"}}),
		g[2],
		mustNew(t, fingerprint.Options{Unordered: []string{"/z", "/z/*/k3"}})}
}

// guardPrefixHashers: the prefixes and suffixes of the golden bodies run
// with the first three of guardHashers (none, the golden pointers, pointers
// into the generated runs).
const guardPrefixHashers = 3

// guardRun checks every hasher's Sum (SHA-256 and local digests) and
// Canonical over body placed at the end and at the start of the guarded
// region, as JSON and as a form (body and query), against the same calls
// over a heap copy. It returns how many calls it made.
func guardRun(t *testing.T, g *guarded, hs []*fingerprint.Hasher, body []byte, form bool) int {
	t.Helper()
	g.fit(t, len(body))
	heap := make([]byte, len(body))
	copy(heap, body)
	lv := fingerprint.Local(fingerprint.Version)
	calls := 0
	for _, place := range []func([]byte) []byte{g.atEnd, g.atStart} {
		for _, h := range hs {
			var ins [2]*fingerprint.Input
			if form {
				ins[0] = &fingerprint.Input{Method: "POST", Operation: "op", ContentType: "application/x-www-form-urlencoded", Body: heap, RawQuery: string(heap)}
			} else {
				ins[0] = jsonInput(heap)
			}
			want := h.Sum(ins[0])
			wantLocal, _ := h.SumVersion(ins[0], lv)
			var wantCanon []byte
			var wantErr error
			if !form {
				wantCanon, wantErr = h.Canonical(nil, heap)
			}
			b := place(body)
			in := *ins[0]
			in.Body = b
			if form {
				in.RawQuery = guardString(b)
			}
			if got := h.Sum(&in); got != want {
				t.Errorf("%.80q (%d bytes): Sum %v over the guarded body, %v over a copy", body, len(body), got, want)
			}
			if got, _ := h.SumVersion(&in, lv); got != wantLocal {
				t.Errorf("%.80q (%d bytes): local Sum %v over the guarded body, %v over a copy", body, len(body), got, wantLocal)
			}
			calls += 2
			if !form {
				got, err := h.Canonical(nil, b)
				if !bytes.Equal(got, wantCanon) || (err == nil) != (wantErr == nil) {
					t.Errorf("%.80q (%d bytes): Canonical %.80q, %v over the guarded body, %.80q, %v over a copy", body, len(body), got, err, wantCanon, wantErr)
				}
				calls++
			}
		}
	}
	return calls
}

// guardRunsBody returns a JSON body with runs of objects alike: objects of
// m members (1 to 70: a shape caches up to 64) with names of 1 to 40 bytes
// (fastMembers compares texts `"name":` of up to 24 bytes), values near
// every fast path's limits (a member of 32 bytes for putShort, strings
// around 16 and 18 bytes, numbers of 1 to 17 digits, fractions), now and
// then an object that differs (a value, white space, a member less or
// more), in an array that ends the body or nearly.
func guardRunsBody(r *rand.Rand) []byte {
	m := 1 + r.IntN(70)
	if r.IntN(2) == 0 {
		m = 1 + r.IntN(6)
	}
	names := make([]string, m)
	seen := map[string]bool{}
	for k := range names {
		for {
			var name string
			switch r.IntN(6) {
			case 0:
				name = fmt.Sprintf("k%d", 1+r.IntN(3))
			case 1:
				name = strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(40))
			case 2:
				// Around the 21-byte limit of a compared name.
				name = fmt.Sprintf("%0*d", 19+r.IntN(5), r.IntN(1000))
			default:
				name = fmt.Sprintf("%s%d", strings.Repeat("n", r.IntN(12)), r.IntN(100))
			}
			if !seen[name] {
				seen[name] = true
				names[k] = name
				break
			}
		}
	}
	values := make([]string, m)
	for k, name := range names {
		values[k] = guardValue(r, 32-len(name)-3)
	}
	var b []byte
	switch r.IntN(4) {
	case 0:
		b = append(b, '[')
	case 1:
		b = append(b, `{"y":[3,1],"z":[`...)
	case 2:
		b = append(b, `{"z":[`...)
	default:
		b = append(b, `[[`...)
	}
	objs := 1 + r.IntN(max(2, min(60, 300/m))) // up to some 10 KB
	order := r.Perm(m)
	sorted := r.IntN(3) == 0
	for o := range objs {
		if o > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		vary := r.IntN(8) == 0
		for j := range m {
			k := j
			if !sorted {
				k = order[j]
			}
			if vary && r.IntN(m) == 0 {
				switch r.IntN(5) {
				case 0:
					continue // a member less
				case 1:
					b = append(b, ' ')
				case 2:
					b = fmt.Appendf(b, `"extra%d":1,`, r.IntN(3))
				}
			}
			if j > 0 && b[len(b)-1] != ',' {
				b = append(b, ',')
			}
			v := values[k]
			if vary && r.IntN(m) == 0 {
				v = guardValue(r, 40)
			}
			b = fmt.Appendf(b, `"%s":%s`, names[k], v)
		}
		if vary && r.IntN(3) == 0 {
			b = append(b, "\n "...)
		}
		if b[len(b)-1] == ',' {
			b = b[:len(b)-1]
		}
		b = append(b, '}')
	}
	switch b[0] {
	case '{':
		b = append(b, ']')
		if r.IntN(2) == 0 {
			b = fmt.Appendf(b, `,"y":%s`, guardValue(r, 20))
		}
		b = append(b, '}')
	default:
		if b[1] == '[' {
			b = append(b, ']')
		}
		b = append(b, ']')
	}
	return b
}

// guardEdgeBodies returns bodies that end where the fast paths' limits
// are: runs of objects alike (putObjects, and putShort for the object a
// run stops in) and a long object (putShort) whose last member, of every
// length up to 32 bytes, ends one to three bytes before the body's end;
// arrays of scalars (fastMembers's element loop, from the body itself in
// the member loop of an object whose shape is cached) whose last element
// (numbers of 1 to 17 digits, fractions, strings of 0 to 20 bytes with an
// escape or UTF-8 sequence at their end, literals) ends just before the
// body's end. Each is summed over a heap copy first (guardRun), which
// caches its shapes and hints in the state the guarded call takes.
func guardEdgeBodies() [][]byte {
	var out [][]byte
	for _, objs := range []int{1, 2, 3, 5, 8, 9, 16, 17, 31, 32, 33, 40} {
		for l := 5; l <= 33; l++ {
			last := guardMember(l)
			for _, shape := range []string{`{"a":1,"c":22,%s}`, `{"c":1,"a":"yy",%s}`, `{"k2":1.5,%s}`} {
				for _, wrap := range [][2]string{{"[", "]"}, {`{"z":[`, "]}"}, {`{"y":[{"a":1}],"z":[`, "]}"}} {
					b := []byte(wrap[0])
					for o := range objs {
						if o > 0 {
							b = append(b, ',')
						}
						b = fmt.Appendf(b, shape, last)
					}
					out = append(out, append(b, wrap[1]...))
				}
			}
		}
	}
	for l := 5; l <= 33; l++ {
		var o []byte
		for k := range 10 {
			o = fmt.Appendf(o, `"m%d":"%s",`, 9-k, strings.Repeat("v", 20+k))
		}
		last := guardMember(l)
		out = append(out,
			fmt.Appendf(nil, `{"o":{%s%s}}`, o, last),
			fmt.Appendf(nil, `{"p":[{%s%s},{%s%s}]}`, o, last, o, last),
			fmt.Appendf(nil, `{"o":{%s%s},"z":1}`, o, last))
	}
	var lasts []string
	for d := 1; d <= 17; d++ {
		lasts = append(lasts, strings.Repeat("9", d), "0."+strings.Repeat("5", min(d, 10)), "1"+strings.Repeat("0", d-1)+".25")
	}
	for l := range 21 {
		x := strings.Repeat("x", l)
		lasts = append(lasts, `"`+x+`"`, `"`+x+`\n"`, `"`+x+`é"`, `"`+x+`€"`)
	}
	lasts = append(lasts, "true", "false", "null", "[]")
	for _, v := range lasts {
		for _, lead := range []string{"", "1,", `"s",2.5,`, "12345678,1,"} {
			for _, f := range []string{`{"a":1,"b":[%s%s]}`, `{"a":1,"b":%s%s}`, `[{"a":1,"b":[%s%s]},{"a":1,"b":[%s%s]}]`, `{"a":1,"b":[%s%s] }`} {
				if strings.Count(f, "%s") == 4 {
					out = append(out, fmt.Appendf(nil, f, lead, v, lead, v))
				} else if lead == "" || f[12] == '[' {
					out = append(out, fmt.Appendf(nil, f, lead, v))
				}
			}
		}
	}
	return out
}

// guardMember returns a member "b":value of l bytes (5 or more).
func guardMember(l int) string {
	if l < 8 {
		return `"b":` + strings.Repeat("7", l-4)
	}
	return `"b":"` + strings.Repeat("x", l-6) + `"`
}

// guardValue returns a JSON value whose text is about room bytes or near
// one of the fast paths' limits.
func guardValue(r *rand.Rand, room int) string {
	if room < 1 {
		room = 1
	}
	switch r.IntN(10) {
	case 0, 1:
		// A string of ASCII (now and then an escape or UTF-8).
		l := max(0, room-2+r.IntN(5)-2)
		if r.IntN(3) == 0 {
			l = 14 + r.IntN(6)
		}
		s := []byte(strings.Repeat("x", l))
		if l > 0 && r.IntN(4) == 0 {
			switch r.IntN(4) {
			case 0:
				s = append(s[:l-1], `\n`...)
			case 1:
				s = append(s[:l-1], "é"...)
			case 2:
				s = append(s[:l-1], "€"...)
			default:
				s = append(s[:l-1], `\u00e9`...)
			}
		}
		return `"` + string(s) + `"`
	case 2, 3:
		// An integer of 1 to 17 digits.
		d := 1 + r.IntN(17)
		if r.IntN(2) == 0 {
			d = max(1, min(17, room+r.IntN(3)-1))
		}
		s := strconv.Itoa(1 + r.IntN(9))
		for len(s) < d {
			s += strconv.Itoa(r.IntN(10))
		}
		return s
	case 4:
		// A fraction, now and then not canonical.
		f := strings.Repeat("5", 1+r.IntN(10))
		if r.IntN(4) == 0 {
			f += "0"
		}
		return fmt.Sprintf("%d.%s", r.IntN(10000000), f)
	case 5:
		return []string{"true", "false", "null", "[]", "{}", "0", "-1", "1e5", "0.000001"}[r.IntN(9)]
	case 6:
		// An array of scalars (fastMembers takes each element with
		// the limits of a member's value, from the element's start).
		var s []string
		for range 1 + r.IntN(8) {
			v := guardValue(r, r.IntN(24))
			if v[0] == '[' || v[0] == '{' {
				v = strconv.Itoa(r.IntN(1 << 20))
			}
			s = append(s, v)
		}
		return "[" + strings.Join(s, ",") + "]"
	case 7:
		return fmt.Sprintf(`{"a":%d,"b":"%s"}`, r.IntN(10), strings.Repeat("y", r.IntN(20)))
	default:
		return `"` + strings.Repeat("v", max(0, room-2)) + `"`
	}
}

// guardForm returns a form body: pairs with escapes, '+', empty names and
// values, and separators, cut anywhere by the prefixes.
func guardForm(r *rand.Rand) []byte {
	var b []byte
	for range r.IntN(12) {
		if len(b) > 0 || r.IntN(4) == 0 {
			b = append(b, "&&;"[r.IntN(3)])
		}
		for range r.IntN(20) {
			switch r.IntN(8) {
			case 0:
				b = fmt.Appendf(b, "%%%02X", r.IntN(256))
			case 1:
				b = append(b, '+')
			case 2:
				b = append(b, "%"[:r.IntN(2)]...)
			default:
				b = append(b, byte('a'+r.IntN(26)))
			}
		}
		if r.IntN(5) > 0 {
			b = append(b, '=')
			for range r.IntN(40) {
				switch r.IntN(6) {
				case 0:
					b = fmt.Appendf(b, "%%%02x", r.IntN(256))
				case 1:
					b = append(b, '+')
				default:
					b = append(b, byte('0'+r.IntN(75)))
				}
			}
		}
	}
	if r.IntN(4) == 0 {
		b = append(b, "%%4"[:1+r.IntN(2)]...)
	}
	return b
}

// guardCorpusBodies reads the inputs of the fuzz corpus files in dir (the
// first []byte or string argument of each).
func guardCorpusBodies(t *testing.T, dir string) [][]byte {
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			line := sc.Text()
			var lit string
			switch {
			case strings.HasPrefix(line, "[]byte(") && strings.HasSuffix(line, ")"):
				lit = line[len("[]byte(") : len(line)-1]
			case strings.HasPrefix(line, "string(") && strings.HasSuffix(line, ")"):
				lit = line[len("string(") : len(line)-1]
			default:
				continue
			}
			s, err := strconv.Unquote(lit)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, []byte(s))
			break
		}
	}
	return out
}

// prefixesSuffixes returns prefixes of b: with long, every one (of a body
// of up to 1 KB; else those that end in its first and last 512 bytes and
// 500 others), else those that end in its last 48 bytes or first 16; and
// the suffixes of the same lengths.
func prefixesSuffixes(b []byte, long bool, r *rand.Rand) (pre, suf [][]byte) {
	add := func(l int) {
		pre = append(pre, b[:l])
		suf = append(suf, b[len(b)-l:])
	}
	switch {
	case long && len(b) <= 1024:
		for l := range len(b) {
			add(l)
		}
	case long:
		// Every end in the first and last 512 bytes, and 500 others.
		for l := range 512 {
			add(l)
			add(len(b) - 1 - l)
		}
		for range 500 {
			add(r.IntN(len(b)))
		}
	default:
		for l := range min(16, len(b)) {
			add(l)
		}
		for l := max(16, len(b)-48); l < len(b); l++ {
			add(l)
		}
	}
	return pre, suf
}

func TestGuardPage(t *testing.T) {
	long := *guardLong
	g := newGuarded(t, 1<<17)
	hs := guardHashers(t)
	r := rand.New(rand.NewPCG(0x6a, 0x7d))
	var calls, bodies int
	start := time.Now()
	section := func(name string) {
		t.Logf("%s: %d bodies, %d calls so far, %v", name, bodies, calls, time.Since(start).Round(time.Millisecond))
	}
	run := func(b []byte, form bool, hs []*fingerprint.Hasher) {
		calls += guardRun(t, g, hs, b, form)
		bodies++
		if t.Failed() {
			t.FailNow()
		}
	}

	// The golden bodies, every tenth one whole, the prefixes and suffixes
	// near the ends of every hundredth (all, and all their prefixes and
	// suffixes, with -guard.long).
	step, gen := 10, 60
	if long {
		step, gen = 1, 3000
	} else if raceEnabled {
		step, gen = 100, 12
	}
	for k, b := range goldenBodies() {
		if k%step != 0 {
			continue
		}
		set := hs
		if len(b) > 4096 && !long {
			set = hs[:1]
		}
		run(b, false, set)
		if long || k%(10*step) == 0 && len(b) <= 4096 {
			pre, suf := prefixesSuffixes(b, long, r)
			for _, p := range append(pre, suf...) {
				run(p, false, hs[:guardPrefixHashers])
			}
		}
	}
	section("golden bodies")
	// Bodies the other tests single out for the fast paths near the end.
	near := hs[:2]
	if raceEnabled && !long {
		near = hs[:1]
	}
	for _, b := range [][]byte{[]byte(flatShapeBody), longNamesBody(300, 1), unorderedBody(300, 2), fingerprinttest.SampleBody(1 << 10), fingerprinttest.DenseBody(1 << 10)} {
		pre, suf := prefixesSuffixes(b, long, r)
		run(b, false, hs)
		for _, p := range append(pre, suf...) {
			run(p, false, near)
		}
	}

	// Bodies that end where the fast paths' limits are (every third
	// under -race, for time).
	for k, b := range guardEdgeBodies() {
		if raceEnabled && !long && k%3 != 0 {
			continue
		}
		run(b, false, hs[k%len(hs):][:1])
	}
	section("bodies near the fast paths' limits")
	// The fuzz corpus, whole, its prefixes and suffixes; as JSON and
	// forms.
	dirs := []string{"testdata/fuzz/FuzzCanonicalJSON", "testdata/fuzz/FuzzForm"}
	if *guardCorpus != "" {
		dirs = append(dirs, strings.Split(*guardCorpus, ",")...)
	}
	for _, dir := range dirs {
		for _, b := range guardCorpusBodies(t, dir) {
			pre, suf := prefixesSuffixes(b, true, r)
			for _, p := range append(append(pre, suf...), b) {
				run(p, false, hs)
				run(p, true, hs[:1])
			}
		}
	}

	section("fuzz corpus")
	// Generated runs of objects alike, and forms: each whole and cut
	// near its end.
	for range gen {
		b := guardRunsBody(r)
		pre, _ := prefixesSuffixes(b, long, r)
		run(b, false, hs)
		for j, p := range pre {
			run(p, false, hs[j%len(hs):][:1]) // each with one hasher, in turn
		}
		f := guardForm(r)
		for l := range len(f) + 1 {
			if long || len(f)-l < 8 || r.IntN(len(f)) < 8 {
				run(f[:l], true, hs[:1])
			}
		}
	}

	section("generated runs and forms")
	// The random stress: generated bodies, random spellings of random
	// values, and their prefixes, for *guardStress.
	if d := *guardStress; d > 0 {
		seed := uint64(time.Now().UnixNano())
		t.Logf("stress seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 0x7d))
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			var b []byte
			switch r.IntN(3) {
			case 0:
				b = spell(r, randValue(r, 2+r.IntN(4)), r.IntN(2) == 0)
			default:
				b = guardRunsBody(r)
			}
			run(b, false, hs)
			pre, suf := prefixesSuffixes(b, r.IntN(4) == 0, r)
			for _, p := range append(pre, suf...) {
				run(p, false, hs[r.IntN(len(hs)):][:1])
			}
			f := guardForm(r)
			for l := range len(f) + 1 {
				run(f[:l], true, hs[:1])
			}
		}
	}
	section("done")
}
