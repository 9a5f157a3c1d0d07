// Package fingerprinttest provides deterministic, realistic request bodies
// for the tests and benchmarks of package fingerprint and for comparing it
// with other canonicalizers (the bench module uses it, so that every
// contender hashes the very same bytes). A service never needs it.
package fingerprinttest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// SampleVolatile and SampleUnordered are pointers that apply to the bodies
// of SampleBody, for benchmarks with pointers active.
var (
	SampleVolatile  = []string{"/client_time", "/request_id", "/metadata/trace_id", "/items/*/added_at", "/items/*/note"}
	SampleUnordered = []string{"/coupon_ids", "/items", "/items/*/discounts", "/items/*/tags"}
)

var (
	firstNames = []string{"Ada", "José", "Zoë", "Li", "Mary-Jane", "Oluwaseun", "Åsa", "Ren"}
	lastNames  = []string{"Lovelace", "Müller", "O'Brien", "Nguyễn", "Smith", "García", "Kowalski", "Chen"}
	cities     = []string{"Berlin", "São Paulo", "Zürich", "New York", "Kraków", "東京", "Lagos", "Montréal"}
	words      = []string{"fast", "blue", "widget", "gadget", "deluxe", "pro", "mini", "eco", "smart",
		"classic", "ultra", "set", "pack", "kit", "travel", "home", "garden", "office"}
)

// DenseBody returns a JSON request body of about size bytes (never less
// than about 600), always the same for the same size: an order with short
// names and values (about one token per seven bytes), the hardest case for
// a tokenizer. Members are in struct (not sorted) order; there are
// nested objects, an array of item objects, integers, decimals, an
// exponent, strings with escapes (\", \n, \u003c as Go's encoding/json
// writes for '<', \u00e9) and raw UTF-8, and some white space: the top
// level is indented, one nested object uses ": " and ", ", the rest is
// compact.
func DenseBody(size int) []byte {
	r := rand.New(rand.NewPCG(uint64(size), 0x1de3_9e17))
	var b strings.Builder
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	name := func() string { return pick(firstNames) + " " + pick(lastNames) }
	price := func() string {
		return strconv.Itoa(r.IntN(500)) + "." + fmt.Sprintf("%02d", r.IntN(100))
	}

	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"request_id\": \"req_%016x\",\n", r.Uint64())
	fmt.Fprintf(&b, "  \"order_id\": \"ord_%08x\",\n", r.Uint32())
	fmt.Fprintf(&b, "  \"customer\": {\"id\":%d,\"name\":%q,\"email\":\"%s@example.com\",\"address\":{\"line1\":\"%d %s Street, Apt. \\u0023%d\",\"city\":%q,\"postal_code\":\"%05d\",\"country\":\"DE\"},\"vip\":%t},\n",
		r.Int64N(1e12), name(), strings.ToLower(pick(words)), r.IntN(999)+1, pick(words), r.IntN(90)+1, pick(cities), r.IntN(100000), r.IntN(2) == 0)
	b.WriteString("  \"currency\": \"EUR\",\n")
	fmt.Fprintf(&b, "  \"client_time\": %d,\n", 1714564800000+r.Int64N(1e9))
	fmt.Fprintf(&b, "  \"metadata\": { \"source\": \"web\", \"campaign\": \"spring\\/2024 \\u003cB\\u003e\", \"trace_id\": \"%016x%016x\", \"ab\": { \"variant\": \"B\", \"weight\": 0.5, \"epsilon\": 1e-7 } },\n", r.Uint64(), r.Uint64())
	fmt.Fprintf(&b, "  \"coupon_ids\": [\"c_%d\", \"c_%d\", \"c_%d\"],\n", r.IntN(1000), r.IntN(1000), r.IntN(1000))
	fmt.Fprintf(&b, "  \"description\": \"Please deliver to the back door.\\nCall \\\"%s\\\" first; caf\\u00e9 next door \\u2013 thanks!\",\n", name())
	fmt.Fprintf(&b, "  \"total\": %s,\n", price())
	b.WriteString("  \"items\": [")
	const tail = "]\n}\n"
	for k := 0; ; k++ {
		var it strings.Builder
		if k > 0 {
			it.WriteByte(',')
		}
		fmt.Fprintf(&it, "{\"sku\":\"SKU-%06d\",\"name\":\"%s %s \\\"%s\\\"\",\"quantity\":%d,\"unit_price\":%s,\"discount\":%s,\"weight_kg\":%d.%d,\"tags\":[\"%s\",\"%s\"],\"attributes\":{\"color\":\"%s\",\"size\":\"%s\",\"fragile\":%t},\"note\":%q,\"warehouse\":{\"id\":%d,\"city\":%q}}",
			r.IntN(1e6), pick(words), pick(words), pick(words), r.IntN(20)+1, price(), []string{"0", "0.1", "0.25", "0.05"}[r.IntN(4)],
			r.IntN(30), r.IntN(10), pick(words), pick(words), pick(words), []string{"S", "M", "L", "XL"}[r.IntN(4)], r.IntN(2) == 0,
			"gift wrap for "+name(), r.IntN(100), pick(cities))
		if k > 0 && b.Len()+it.Len()+len(tail) > size {
			break
		}
		b.WriteString(it.String())
	}
	b.WriteString(tail)
	return []byte(b.String())
}
