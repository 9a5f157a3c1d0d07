package fingerprinttest

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

var (
	titles = []string{"Organic Cotton T-Shirt – Slim Fit", "Stainless Steel Water Bottle 750 ml", "Wireless Noise-Cancelling Headphones",
		"Merino Wool Hiking Socks (3 pairs)", "Ceramic Pour-Over Coffee Dripper", "Recycled Nylon Travel Backpack 28 L",
		"Bamboo Cutting Board, Large", "LED Desk Lamp with USB-C Charging", "Cast Iron Skillet 26 cm", "Yoga Mat \"Grip Pro\" 6 mm"}
	streets  = []string{"Friedrichstraße", "Rue de Rivoli", "Calle de Alcalá", "Baker Street", "Via del Corso", "Nowy Świat"}
	messages = []string{"Happy birthday!\nLove, Grandma", "Please leave the parcel with the neighbour (\"Schmidt\", 2nd floor).",
		"Gift – no invoice in the box, please.", "Call before delivery: +49 30 1234567", ""}
	agents = []string{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		"okhttp/4.12.0", "Go-http-client/2.0"}
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

func ulid(r *rand.Rand) string {
	var b [26]byte
	for i := range b {
		b[i] = crockford[r.IntN(32)]
	}
	return string(b[:])
}

func uuid(r *rand.Rand) string {
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", r.Uint32(), r.IntN(1<<16), r.IntN(1<<12), 0x8000|r.IntN(1<<14), r.Int64N(1<<48))
}

func timestamp(r *rand.Rand) string {
	return fmt.Sprintf("2024-%02d-%02dT%02d:%02d:%02d.%03dZ", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1000))
}

func money(r *rand.Rand) string {
	// As encoding/json or JavaScript write a float64: no trailing zeros.
	c := 100 + r.IntN(50000)
	s := fmt.Sprintf("%d.%02d", c/100, c%100)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// SampleBody returns a JSON request body of about size bytes (never less
// than about 1 KB), always the same for the same size: an order as a web
// or Go client sends it. Members are in struct or insertion order (not
// sorted); bodies under 2 KB leave out the addresses, payment and
// metadata parts. There are nested objects, an array of line item objects, and
// the strings real APIs carry (ULIDs and UUIDs, timestamps, e-mail
// addresses, URLs, product titles, a user agent), integers, decimals, an
// exponent, strings with escapes (\", \n, \u003c as Go's encoding/json
// writes '<', \u00e9) and raw UTF-8, and some white space: the top level is
// indented as JSON.stringify(v, null, 2) does, the addresses use ": " and
// ", ", the line items are compact. About one token per fifteen bytes.
func SampleBody(size int) []byte {
	r := rand.New(rand.NewPCG(uint64(size), 0x0bde_2024))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	var b strings.Builder
	address := func() string {
		return fmt.Sprintf(`{ "name": %q, "line1": "%s %d", "line2": "Apt. \u0023%d", "city": %q, "postal_code": "%05d", "country": "DE", "phone": "+49 30 %07d" }`,
			pick(firstNames)+" "+pick(lastNames), pick(streets), 1+r.IntN(200), 1+r.IntN(90), pick(cities), r.IntN(100000), r.IntN(1e7))
	}
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"id\": \"ord_%s\",\n", ulid(r))
	fmt.Fprintf(&b, "  \"request_id\": %q,\n", uuid(r))
	fmt.Fprintf(&b, "  \"created_at\": %q,\n", timestamp(r))
	fmt.Fprintf(&b, "  \"client_time\": %d,\n", 1714564800000+r.Int64N(1e9))
	fmt.Fprintf(&b, "  \"customer\": {\"id\":\"cus_%s\",\"email\":\"%s.%s@example.com\",\"first_name\":%q,\"last_name\":%q,\"locale\":\"de-DE\",\"marketing_opt_in\":%t,\"loyalty_points\":%d},\n",
		ulid(r), strings.ToLower(pick(words)), strings.ToLower(pick(words)), pick(firstNames), pick(lastNames), r.IntN(2) == 0, r.IntN(100000))
	full := size >= 2048 // a small body has fewer parts
	if full {
		fmt.Fprintf(&b, "  \"shipping_address\": %s,\n", address())
		fmt.Fprintf(&b, "  \"billing_address\": %s,\n", address())
	}
	fmt.Fprintf(&b, "  \"currency\": \"EUR\",\n")
	fmt.Fprintf(&b, "  \"coupon_ids\": [\"SPRING24\", \"WELCOME-%d\", \"FREESHIP\"],\n", r.IntN(1000))
	if full {
		fmt.Fprintf(&b, "  \"payment\": {\"method\":\"card\",\"token\":\"tok_%s\",\"save_for_later\":false,\"three_d_secure\":{\"version\":\"2.2.0\",\"exemption\":null}},\n", ulid(r))
		fmt.Fprintf(&b, "  \"metadata\": {\"source\":\"web\",\"user_agent\":%q,\"trace_id\":\"%016x%016x\",\"campaign\":\"spring\\/2024 \\u003cB\\u003e\",\"ab\":{\"variant\":\"B\",\"weight\":0.5,\"epsilon\":1e-7}},\n",
			pick(agents), r.Uint64(), r.Uint64())
	}
	fmt.Fprintf(&b, "  \"note\": \"Please deliver to the back door.\\nCall \\\"%s\\\" first; caf\\u00e9 next door \\u2013 thanks!\",\n", pick(firstNames))
	fmt.Fprintf(&b, "  \"totals\": {\"subtotal\":%s,\"tax\":%s,\"shipping\":4.9,\"discount\":0,\"total\":%s},\n", money(r), money(r), money(r))
	b.WriteString("  \"items\": [")
	const tail = "]\n}\n"
	for k := 0; ; k++ {
		var it strings.Builder
		if k > 0 {
			it.WriteByte(',')
		}
		title := pick(titles)
		slug := strings.ToLower(strings.NewReplacer(" ", "-", "\"", "", "(", "", ")", "", ",", "", "–", "").Replace(title))
		fmt.Fprintf(&it, "{\"id\":\"li_%s\",\"product_id\":%q,\"title\":%q,\"sku\":\"%s-%04d\",\"quantity\":%d,\"unit_price\":%s,\"tax_rate\":0.19,\"discounts\":[{\"code\":\"SPRING24\",\"amount\":%s}],\"image_url\":\"https://cdn.example.com/images/products/%s.jpg?v=%d\",\"properties\":{\"gift_message\":%q,\"engraving\":null},\"requires_shipping\":%t,\"added_at\":%q}",
			ulid(r), uuid(r), title, strings.ToUpper(slug[:3]), r.IntN(10000), 1+r.IntN(5), money(r), money(r), slug, 1714000000+r.IntN(1e6),
			pick(messages), r.IntN(5) != 0, timestamp(r))
		if k > 0 && b.Len()+it.Len()+len(tail) > size {
			break
		}
		b.WriteString(it.String())
	}
	b.WriteString(tail)
	return []byte(b.String())
}
