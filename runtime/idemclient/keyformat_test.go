package idemclient

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
)

// EnforceKeyFormat refuses exactly the keys runtime/idem's ParseKey
// refuses, for every format.
func TestEnforceKeyFormatAgreesWithServer(t *testing.T) {
	keys := []string{
		"",
		"00000000-0000-0000-0000-000000000000", // nil
		"ffffffff-ffff-ffff-ffff-ffffffffffff", // max
		"FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
		"12345678-1234-0234-8234-123456789abc", // version 0
		"12345678-1234-9234-8234-123456789abc", // version 9
		"12345678-1234-f234-8234-123456789abc", // version 15
		"12345678-1234-4234-0234-123456789abc", // NCS variant
		"12345678-1234-7234-c234-123456789abc", // Microsoft variant
		"12345678-1234-7234-8234-123456789ABC",
		"12345678-1234-4234-b234-123456789abc",
		"{12345678-1234-7234-8234-123456789abc}",
		"urn:uuid:12345678-1234-7234-8234-123456789abc",
		"1234567812347234823412345678abc0",
		`"12345678-1234-7234-8234-123456789abc"`,
		`"abc`, `abc"`, `"a\b"`, `"a"b"`, `""`, `"a\"b"`, `"a\\b"`, `"a b"`, "\"a\x01\"",
		`a"b`, "tok-en_1", "a b", "a\x7f", "é",
		strings.Repeat("a", 255), strings.Repeat("a", 256),
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "0123456789abcdefABCDEF-\"\\ xz{}"
	for range 3000 {
		b := []byte("12345678-1234-7234-8234-123456789abc")
		for range 1 + r.IntN(3) {
			b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
		if r.IntN(4) == 0 {
			keys = append(keys, `"`+string(b)+`"`)
		}
	}
	formats := map[KeyFormat]idem.Format{FormatUUID: idem.FormatUUID, FormatUUIDv4: idem.FormatUUIDv4, FormatUUIDv7: idem.FormatUUIDv7, FormatToken: idem.FormatToken}
	for f, sf := range formats {
		for _, k := range keys {
			err := checkKey(k, Policy{KeyFormat: f, EnforceKeyFormat: true, KeyMaxLength: 255})
			_, serr := idem.ParseKey(k, sf, 255)
			if (err == nil) != (serr == nil) {
				t.Errorf("format %s key %q: client error %v, server error %v", f, k, err, serr)
			}
		}
	}
}
