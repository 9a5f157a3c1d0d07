package fingerprint_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/fingerprint/fingerprinttest"
)

// The benchmark bodies: "order" is fingerprinttest.SampleBody (a realistic
// order, about one token per fifteen bytes), "dense" is DenseBody (short
// names and values, about one token per seven bytes: the hard case).
type benchBody struct {
	name string
	data []byte
}

func benchBodies() []benchBody {
	var out []benchBody
	for _, n := range []int{1 << 10, 16 << 10, 256 << 10} {
		out = append(out, benchBody{fmt.Sprintf("order/%dKB", n>>10), fingerprinttest.SampleBody(n)})
	}
	for _, n := range []int{1 << 10, 16 << 10, 256 << 10} {
		out = append(out, benchBody{fmt.Sprintf("dense/%dKB", n>>10), fingerprinttest.DenseBody(n)})
	}
	return out
}

// BenchmarkSHA256 is the yardstick: SHA-256 over the same bytes.
func BenchmarkSHA256(b *testing.B) {
	for _, bd := range benchBodies() {
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				sha256.Sum256(bd.data)
			}
		})
	}
}

func benchSum(b *testing.B, opts fingerprint.Options) {
	h, err := fingerprint.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	for _, bd := range benchBodies() {
		in := &fingerprint.Input{Method: "POST", Operation: "createOrder", RawQuery: "dry_run=false&lang=en",
			ContentType: "application/json", Body: bd.data}
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				h.Sum(in)
			}
		})
	}
}

// BenchmarkSum fingerprints a JSON request without pointers.
func BenchmarkSum(b *testing.B) { benchSum(b, fingerprint.Options{}) }

// BenchmarkSumPointers fingerprints the same requests with volatile and
// unordered pointers active (including the array of line items as a
// multiset) and a named header.
func BenchmarkSumPointers(b *testing.B) {
	benchSum(b, fingerprint.Options{
		Volatile:  fingerprinttest.SampleVolatile,
		Unordered: fingerprinttest.SampleUnordered,
		Headers:   []string{"X-Tenant"},
	})
}

// BenchmarkCanonical measures canonicalization alone.
func BenchmarkCanonical(b *testing.B) {
	for _, bd := range benchBodies() {
		buf := make([]byte, 0, 2*len(bd.data))
		b.Run(bd.name, func(b *testing.B) {
			b.SetBytes(int64(len(bd.data)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = fingerprint.Canonical(buf[:0], bd.data)
			}
		})
	}
}

// Worst cases: the largest bodies idem accepts by default (1 MiB) with the
// most work per byte.

// manyMembersBody returns a JSON object of about size bytes with very many
// short members: names of one or two lower-case letters (so most are
// duplicates) and one-digit values, in random order.
func manyMembersBody(size int) []byte {
	r := rand.New(rand.NewPCG(uint64(size), 0x3e3b))
	b := make([]byte, 0, size+16)
	b = append(b, '{')
	for len(b) < size-8 {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"', byte('a'+r.IntN(26)))
		if r.IntN(2) == 0 {
			b = append(b, byte('a'+r.IntN(26)))
		}
		b = append(b, '"', ':', byte('0'+r.IntN(10)))
	}
	return append(b, '}')
}

// tinyElementsBody returns {"a":[...]} of about size bytes, an array of
// very many tiny elements (integers below 1000, and some one-letter
// strings, literals and empty containers), for Unordered: ["/*"].
func tinyElementsBody(size int) []byte {
	r := rand.New(rand.NewPCG(uint64(size), 0x7a11))
	b := make([]byte, 0, size+16)
	b = append(b, `{"a":[`...)
	for len(b) < size-8 {
		if b[len(b)-1] != '[' {
			b = append(b, ',')
		}
		switch k := r.IntN(16); {
		case k < 12:
			b = strconv.AppendInt(b, int64(r.IntN(1000)), 10)
		case k == 12:
			b = append(b, '"', byte('a'+r.IntN(26)), '"')
		case k == 13:
			b = append(b, "true"...)
		case k == 14:
			b = append(b, "null"...)
		default:
			b = append(b, "{}"...)
		}
	}
	return append(b, "]}"...)
}

// BenchmarkWorstCase fingerprints the worst cases: one object of about
// 150k short members, and an unordered array of about 270k tiny elements.
func BenchmarkWorstCase(b *testing.B) {
	cases := []struct {
		name string
		opts fingerprint.Options
		body []byte
	}{
		{"members/1MB", fingerprint.Options{}, manyMembersBody(1 << 20)},
		{"unordered/1MB", fingerprint.Options{Unordered: []string{"/*"}}, tinyElementsBody(1 << 20)},
	}
	for _, c := range cases {
		h, err := fingerprint.New(c.opts)
		if err != nil {
			b.Fatal(err)
		}
		in := jsonInput(c.body)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				h.Sum(in)
			}
		})
	}
}

// workloadBody is the request body of bench/internal/workload (Payload):
// an order of 1 KB with a volatile member, "sent_at".
func workloadBody() []byte {
	type item struct {
		SKU   string  `json:"sku"`
		Qty   int     `json:"qty"`
		Price float64 `json:"price"`
	}
	type body struct {
		Customer string            `json:"customer"`
		SentAt   string            `json:"sent_at"`
		Items    []item            `json:"items"`
		Note     string            `json:"note"`
		Meta     map[string]string `json:"meta"`
	}
	in := body{Customer: "cus_8f2b", SentAt: "2025-06-01T12:00:00.000Z",
		Meta: map[string]string{"channel": "web", "campaign": "spring"}}
	for i := 0; len(in.Items) < 12; i++ {
		in.Items = append(in.Items, item{SKU: "sku-" + strconv.Itoa(1000+i), Qty: i + 1, Price: 9.99 + float64(i)})
	}
	b, _ := json.Marshal(in)
	in.Note = strings.Repeat("n", 1024-len(b))
	b, _ = json.Marshal(in)
	return b
}

// BenchmarkSumWorkload is the path runtime/idem takes for the bench
// module's workload: SumVersion of the 1 KB order, with "/sent_at"
// volatile and the request's path, as the Engine computes it, for an
// operation that declares application/json (as generated policies do).
func BenchmarkSumWorkload(b *testing.B) {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/sent_at"}, MediaTypes: []string{"application/json"}})
	if err != nil {
		b.Fatal(err)
	}
	data := workloadBody()
	in := &fingerprint.Input{Method: "POST", Operation: "createOrder", Path: "/orders",
		ContentType: "application/json", Body: data}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		h.SumVersion(in, fingerprint.Version)
	}
}

// BenchmarkSumWorkloadLocal is BenchmarkSumWorkload in the process-local
// variant, which the Engine computes over a LocalReader store (memstore).
func BenchmarkSumWorkloadLocal(b *testing.B) {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/sent_at"}, MediaTypes: []string{"application/json"}})
	if err != nil {
		b.Fatal(err)
	}
	data := workloadBody()
	in := &fingerprint.Input{Method: "POST", Operation: "createOrder", Path: "/orders",
		ContentType: "application/json", Body: data}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		h.SumVersion(in, fingerprint.Local(fingerprint.Version))
	}
}

// Form worst cases: bodies of idem's default limit (1 MiB) and queries of
// half that, with the most pairs or the costliest sort. Each generator
// returns about size bytes of application/x-www-form-urlencoded text.
var formShapes = []struct {
	name string
	gen  func(size int) []byte
}{
	// "a&a&...": the most pairs (one a two bytes), in order.
	{"same", func(size int) []byte { return []byte(strings.Repeat("a&", size/2)) }},
	// "b&a&b&a&...": as many pairs, out of order, two names.
	{"alternating", func(size int) []byte { return []byte(strings.Repeat("b&a&", size/4)) }},
	// Names of one or two random letters, one-digit values (the form of
	// manyMembersBody).
	{"members", func(size int) []byte {
		r := rand.New(rand.NewPCG(uint64(size), 0xf0))
		b := make([]byte, 0, size+8)
		for len(b) < size-8 {
			b = append(b, byte('a'+r.IntN(26)))
			if r.IntN(2) == 0 {
				b = append(b, byte('a'+r.IntN(26)))
			}
			b = append(b, '=', byte('0'+r.IntN(10)), '&')
		}
		return b
	}},
	// Names that share their first 64 bytes, then one or two random
	// letters: every comparison reads past the common part.
	{"prefix", func(size int) []byte {
		r := rand.New(rand.NewPCG(uint64(size), 0xf1))
		common := strings.Repeat("p", 64)
		b := make([]byte, 0, size+80)
		for len(b) < size-80 {
			b = append(b, common...)
			b = append(b, byte('a'+r.IntN(26)))
			if r.IntN(2) == 0 {
				b = append(b, byte('a'+r.IntN(26)))
			}
			b = append(b, '&')
		}
		return b
	}},
	// Escaped one-byte names ("%5b&%41&..."), random, empty values.
	{"escaped", func(size int) []byte {
		r := rand.New(rand.NewPCG(uint64(size), 0xf2))
		b := make([]byte, 0, size+8)
		for len(b) < size-8 {
			b = fmt.Appendf(b, "%%%02x=&", r.IntN(256))
		}
		return b
	}},
}

// BenchmarkWorstCaseForm fingerprints the form worst cases, as a body
// and as a query. The queries alternate between two that differ in their
// first byte, so that each is parsed (the state's header cache misses).
func BenchmarkWorstCaseForm(b *testing.B) {
	h, err := fingerprint.New(fingerprint.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range formShapes {
		body := c.gen(1 << 20)
		in := &fingerprint.Input{Method: "POST", Operation: "op", ContentType: "application/x-www-form-urlencoded", Body: body}
		b.Run("body/"+c.name+"/1MB", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				h.Sum(in)
			}
		})
	}
	for _, c := range formShapes {
		q := c.gen(512 << 10)
		q2 := append([]byte{'~'}, q[1:]...)
		ins := [2]*fingerprint.Input{
			{Method: "POST", Operation: "op", RawQuery: string(q), ContentType: "application/json", Body: []byte(`{}`)},
			{Method: "POST", Operation: "op", RawQuery: string(q2), ContentType: "application/json", Body: []byte(`{}`)},
		}
		b.Run("query/"+c.name+"/512KB", func(b *testing.B) {
			b.SetBytes(int64(len(q)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h.Sum(ins[i&1])
				i++
			}
		})
	}
}

// TestFormBytesPerSum bounds what Sum allocates for the form worst cases:
// at most twice the input and 64 KiB, warm (a 1 MiB body, a 512 KiB query)
// and for a body too large for the pooled scratch to keep (8 MiB, pairs in
// order). Before, every pair cost a 32-byte record grown by append, which
// the pool dropped past 131,072 pairs: about 100 bytes a byte of input.
func TestFormBytesPerSum(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	h, err := fingerprint.New(fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	form := "application/x-www-form-urlencoded"
	perSum := func(ins ...*fingerprint.Input) uint64 {
		for _, in := range ins {
			h.Sum(in)
		}
		// The least of three rounds: a collection during one empties
		// the pool.
		least := uint64(math.MaxUint64)
		for range 3 {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			const runs = 4
			for i := range runs {
				h.Sum(ins[i%len(ins)])
			}
			runtime.ReadMemStats(&m1)
			least = min(least, (m1.TotalAlloc-m0.TotalAlloc)/runs)
		}
		return least
	}
	check := func(name string, size int, got uint64) {
		t.Logf("%s: %d bytes: %d allocated a Sum", name, size, got)
		if limit := uint64(2*size + 64<<10); got > limit {
			t.Errorf("%s: %d bytes: %d allocated a Sum, want at most %d", name, size, got, limit)
		}
	}
	for _, c := range formShapes {
		body := c.gen(1 << 20)
		check("body/"+c.name, len(body), perSum(&fingerprint.Input{Method: "POST", ContentType: form, Body: body}))
		q := c.gen(512 << 10)
		q2 := append([]byte{'~'}, q[1:]...)
		check("query/"+c.name, len(q), perSum(
			&fingerprint.Input{Method: "POST", RawQuery: string(q), ContentType: "application/json", Body: []byte(`{}`)},
			&fingerprint.Input{Method: "POST", RawQuery: string(q2), ContentType: "application/json", Body: []byte(`{}`)}))
	}
	big := formShapes[0].gen(8 << 20)
	check("body/same/8MB", len(big), perSum(&fingerprint.Input{Method: "POST", ContentType: form, Body: big}))
}

// BenchmarkSumWorkloadCold is BenchmarkSumWorkload in the conditions of
// the bench module's first requests, which cycle through 4096 distinct
// bodies (4 MiB): bodies, each body out of the caches when it is summed;
// evict, besides, 256 KiB of other memory written between two sums (more
// than a handler's encoding/json touches), which evicts the state, tables
// and scratch of the previous sum; evict-only, that eviction alone, to
// subtract from evict.
func BenchmarkSumWorkloadCold(b *testing.B) {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/sent_at"}})
	if err != nil {
		b.Fatal(err)
	}
	data := workloadBody()
	at := bytes.Index(data, []byte(`"note":"`)) + len(`"note":"`)
	bodies := make([][]byte, 4096)
	for i := range bodies {
		bodies[i] = bytes.Clone(data)
		hex.Encode(bodies[i][at:at+8], binary.BigEndian.AppendUint32(nil, uint32(i)))
	}
	other := make([]byte, 256<<10)
	for _, mode := range []string{"bodies", "evict", "evict-only"} {
		evict, sum := mode != "bodies", mode != "evict-only"
		b.Run(mode, func(b *testing.B) {
			in := &fingerprint.Input{Method: "POST", Operation: "createOrder", Path: "/orders",
				ContentType: "application/json"}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			i := 0
			var sink byte
			for b.Loop() {
				if evict {
					for j := 0; j < len(other); j += 64 {
						other[j]++
					}
				}
				in.Body = bodies[i%len(bodies)]
				i++
				if sum {
					fp, _ := h.SumVersion(in, fingerprint.Version)
					sink ^= fp[1]
				}
			}
			_ = sink
		})
	}
}
