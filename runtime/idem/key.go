package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/idemgen/idemgen/runtime/internal/httpsyntax"
	"github.com/idemgen/idemgen/runtime/internal/keysyntax"
)

// Key is the idempotency key as a caller hands it to Engine.Begin.
//
// The zero value, RequestKey, tells the engine to read the key from the
// request where the policy says it travels (header, query or JSON body).
// Generated strict-server wrappers, which already have the typed parameters,
// pass KeyFrom or KeyFromPtr instead.
type Key struct {
	value string
	given bool // the caller decided (present or absent); do not read the request
	set   bool // a value is present
	// orNone (with given false): a body that is not JSON carries no key,
	// rather than being refused (EmptyBodyKey).
	orNone bool
}

// RequestKey reads the key from the request, as the policy's KeySpec says.
var RequestKey = Key{}

// KeyFrom is a key value as received (bare or as an RFC 8941 sf-string); it
// is validated against the policy like a key read from the request.
func KeyFrom(v string) Key { return Key{value: v, given: true, set: true} }

// KeyFromPtr is KeyFrom(*v), or "no key" when v is nil (an optional parameter
// left out).
func KeyFromPtr(v *string) Key {
	if v == nil {
		return Key{given: true}
	}
	return KeyFrom(*v)
}

// NoKey says that the request carries no key.
var NoKey = Key{given: true}

// EmptyBodyKey is a body-carried key that a decoder gave as "", which
// stands for an absent member, null and "" alike: the engine reads the
// member from the request body's bytes, as RequestKey does, to tell them
// apart (absent or null: no key; "": an invalid key), and takes it as
// absent when those bytes are not JSON (a body that a middleware inside
// CaptureBody decompresses), where RequestKey refuses the request.
var EmptyBodyKey = Key{orNone: true}

var errKeyMissing = errors.New("idem: no idempotency key")

// keyDetail explains why a key is invalid (constant strings: no
// allocation). The key's syntax, shared with runtime/idemclient, is
// keysyntax's.
type keyDetail = keysyntax.Detail

const (
	detailEmpty               = keysyntax.Empty
	detailBadChar             = keysyntax.BadChar
	detailBadSF               = keysyntax.BadSF
	detailNotUUID             = keysyntax.NotUUID
	detailUUIDVer             = keysyntax.UUIDVer
	detailNilUUID             = keysyntax.NilUUID
	detailMany      keyDetail = "the idempotency key is given more than once"
	detailNotString keyDetail = "the idempotency key member of the body is not a JSON string"
	detailBadJSON   keyDetail = "the request body is not JSON, so it carries no idempotency key"
	detailBadQuery  keyDetail = "the idempotency key query parameter is not properly escaped"
)

// keyTooLong is the error of a key longer than its limit (the limit).
type keyTooLong = keysyntax.TooLong

// ParseKey validates a raw key value (bare, or an RFC 8941 sf-string with \"
// and \\ escapes) against a format and a maximum length, and returns the
// normalized key (UUIDs in lower case). It never panics; errors are
// human-readable, and constant but for that of a key too long, which says
// the limit. runtime/idemclient's EnforceKeyFormat checks keys with the
// same code (runtime/internal/keysyntax).
func ParseKey(raw string, format Format, maxLength int) (string, error) {
	if maxLength <= 0 || maxLength > DefaultMaxKeyLength {
		maxLength = DefaultMaxKeyLength
	}
	return keysyntax.Parse(raw, keysyntax.Format(format), maxLength)
}

// visibleASCII reports whether every byte of s is 0x21 to 0x7E.
func visibleASCII(s string) bool { return keysyntax.VisibleASCII(s) }

// parseUUID checks the canonical form, variant and version of a UUID key
// and lowercases it (keysyntax.ParseUUID).
func parseUUID(s string, format Format) (string, error) {
	return keysyntax.ParseUUID(s, keysyntax.Format(format))
}

// headerKey returns the single value of a header, errKeyMissing, or an error
// when it is repeated.
func headerKey(h http.Header, name string) (string, error) {
	v := h[name]
	switch len(v) {
	case 0:
		return "", errKeyMissing
	case 1:
		return v[0], nil
	}
	return "", detailMany
}

// queryKey finds the single parameter name in a raw query without building
// a map. It reads the query as net/url.ParseQuery (r.URL.Query(), what the
// handler sees) does: a pair holding a semicolon is skipped, as is one whose
// name is badly escaped; a badly escaped value of the parameter is refused
// (detailBadQuery), where ParseQuery drops it, once the whole query is
// read: a parameter given more than once is refused as such (detailMany),
// whatever its values, as a repeated header is.
func queryKey(rawQuery, name string) (string, error) {
	found, badValue := false, false
	var val string
	for k, raw := range httpsyntax.QueryPairs(rawQuery) {
		if k != name {
			continue
		}
		if found {
			return "", detailMany
		}
		found = true
		v, ok := httpsyntax.UnescapeValue(raw)
		if !ok {
			badValue = true
			continue
		}
		val = v
	}
	switch {
	case !found:
		return "", errKeyMissing
	case badValue:
		return "", detailBadQuery
	}
	return val, nil
}

// parsePointer splits an RFC 6901 JSON pointer into unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, errors.New("JSON pointer " + p + " does not start with /")
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, errors.New("JSON pointer " + p + " has a ~ not followed by 0 or 1")
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// bodyKey finds the string member at ptr in a JSON body. A missing member or
// null is errKeyMissing.
//
// It decodes with encoding/json; the body carrier is the rare case (the
// header is preferred), so it is not on the hot path.
func bodyKey(body []byte, ptr []string) (string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", errKeyMissing
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", detailBadJSON
	}
	for _, tok := range ptr {
		switch v := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = v[tok]; !ok {
				return "", errKeyMissing
			}
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(v) {
				return "", errKeyMissing
			}
			doc = v[i]
		default:
			return "", errKeyMissing
		}
	}
	switch v := doc.(type) {
	case nil:
		return "", errKeyMissing
	case string:
		return v, nil
	}
	return "", detailNotString
}

func arrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
		n = n*10 + int(tok[i]-'0')
	}
	return n, true
}

// KeyFormatDetail is the detail of a problem refusing a key that is not in
// the policy's format, naming where the key travels and what it must be,
// e.g. "the Idempotency-Key header must be a UUID (RFC 9562) in canonical
// 8-4-4-4-12 form". Generated server wrappers send it for a key parameter
// the router refused (oapi-codegen's uuid binding), whose own message
// speaks of Go types.
func (p *Policy) KeyFormatDetail() string {
	k := p.spec.Key
	var where string
	switch k.Carrier {
	case CarrierQuery:
		where = "the " + k.Name + " query parameter"
	case CarrierBody:
		where = "the body member " + k.Name
	default:
		where = "the " + k.Name + " header"
	}
	switch k.Format {
	case FormatUUID:
		return where + " must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form"
	case FormatUUIDv4:
		return where + " must be a version 4 UUID (RFC 9562) in canonical 8-4-4-4-12 form"
	case FormatUUIDv7:
		return where + " must be a version 7 UUID (RFC 9562) in canonical 8-4-4-4-12 form"
	}
	return where + " must be 1 to " + strconv.Itoa(p.maxKey) + " visible ASCII characters"
}

// invalidKeyDetail is the detail of the problem refusing a key ParseKey
// refused with err: for a key that is no UUID, or a UUID of another
// version, KeyFormatDetail (where the key travels and the format it must
// have, as the generated wrappers say of a key the router refused), so
// that a version 4 UUID sent where a version 7 is required is told so as
// precisely as a key that is no UUID at all; err's own text otherwise.
func (p *Policy) invalidKeyDetail(err error) string {
	if err == detailNotUUID || err == detailUUIDVer {
		return p.KeyFormatDetail()
	}
	return err.Error()
}
