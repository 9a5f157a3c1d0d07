package idemclient

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/idemgen/idemgen/runtime/internal/httpsyntax"
	"github.com/idemgen/idemgen/runtime/internal/keysyntax"
)

// NewKey creates a key in format f: a UUID version 4 for [FormatUUIDv4], a
// UUID version 7 otherwise (uuid, uuidv7, token and the zero value).
func NewKey(f KeyFormat) (string, error) {
	var (
		u   uuid.UUID
		err error
	)
	if f == FormatUUIDv4 {
		u, err = uuid.NewRandom()
	} else {
		u, err = uuid.NewV7()
	}
	if err != nil {
		return "", fmt.Errorf("idemclient: creating a key: %w", err)
	}
	return u.String(), nil
}

// parsePointer splits an RFC 6901 JSON pointer naming an object member.
func parsePointer(p string) ([]string, error) {
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("key pointer %q: want an RFC 6901 pointer to a member, like /idempotency_key", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, fmt.Errorf("key pointer %q: bad escape in %q", p, t)
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		toks[i] = b.String()
	}
	return toks, nil
}

// nilUUID is what oapi-codegen's client sends for a required key parameter
// typed openapi_types.UUID that the caller left unset: never a key (every
// such request would share it), so it counts as no key and is replaced.
const nilUUID = "00000000-0000-0000-0000-000000000000"

// carried returns k unless it stands for no key: "" or the nil UUID.
func carried(k string) string {
	if k == nilUUID {
		return ""
	}
	return k
}

// headerKey returns the key a request already carries in header name.
func headerKey(h http.Header, name string) string { return carried(h.Get(name)) }

// queryKey returns the key the raw query carries in parameter name: the
// first value that carries one (pairs with an empty value or the nil UUID
// carry none), "" if none does; pairs is the number of pairs named name and
// others tells whether a later pair carries another key. It reads the query
// as the server does (runtime/idem, and net/url.ParseQuery, which a handler's
// r.URL.Query() uses): a pair holding a semicolon is skipped, so a key
// spelled request_id=K;x counts as none, and is replaced, rather than being
// reported as the call's key while the server sees no key at all. So does a
// badly escaped value (request_id=%zz), which the server refuses (400, the
// key parameter not properly escaped) where the raw text used to be sent
// as the call's key.
func queryKey(rawQuery, name string) (key string, pairs int, others bool) {
	for k, raw := range httpsyntax.QueryPairs(rawQuery) {
		if k != name {
			continue
		}
		pairs++
		v, ok := httpsyntax.UnescapeValue(raw)
		if !ok {
			v = "" // badly escaped: the server refuses it (400), no key
		}
		switch v = carried(v); {
		case v == "":
		case key == "":
			key = v
		case v != key:
			others = true
		}
	}
	return key, pairs, others
}

// setQueryKey returns rawQuery with name=key appended, keeping every other
// pair exactly as spelled and dropping every pair of the same name, so
// that the request carries one key (the server refuses a key parameter
// given twice). It builds the query in one buffer (one allocation when
// neither name nor key needs escaping).
func setQueryKey(rawQuery, name, key string) string {
	var b strings.Builder
	b.Grow(len(rawQuery) + len(name) + len(key) + 2)
	if writeWithoutQueryKey(&b, rawQuery, name) {
		b.WriteByte('&')
	}
	b.WriteString(url.QueryEscape(name))
	b.WriteByte('=')
	b.WriteString(url.QueryEscape(key))
	return b.String()
}

// withoutQueryKey returns rawQuery without the pairs named name, every
// other pair exactly as spelled.
func withoutQueryKey(rawQuery, name string) string {
	var b strings.Builder
	writeWithoutQueryKey(&b, rawQuery, name)
	return b.String()
}

// writeWithoutQueryKey writes rawQuery without the pairs named name to b,
// every other pair exactly as spelled, and tells whether it wrote any.
func writeWithoutQueryKey(b *strings.Builder, rawQuery, name string) bool {
	wrote := false
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, _, _ := strings.Cut(pair, "=")
		if uk, err := url.QueryUnescape(k); err == nil && uk == name {
			continue
		}
		if wrote {
			b.WriteByte('&')
		}
		b.WriteString(pair)
		wrote = true
	}
	return wrote
}

// setBodyKey places key at the member named by pointer toks in the JSON
// object body, splicing bytes: everything else keeps its exact spelling.
// A member already holding a non-empty string is the caller's key and is
// returned as existing (body unchanged); an empty string, the nil UUID or
// null is replaced; a missing member is inserted first in its parent object.
// Parents that exist must be objects; missing ones are created as objects,
// each inserted first in its parent, but not when the token looked up in
// it may be an array index (digits or "-"): the pointer may mean an array,
// which is not invented. An existing object takes any member name. An
// object on the path that names the member looked up in it twice is
// refused ([duplicateOnPath]).
func setBodyKey(body []byte, toks []string, key string) (out []byte, existing string, err error) {
	return spliceBodyKey(body, toks, key, true)
}

// fillBodyKey is setBodyKey for a request that must not gain a member it
// does not carry (an ambiguous one): it fails, instead of inserting, when
// the member or one of its parents is missing.
func fillBodyKey(body []byte, toks []string, key string) (out []byte, existing string, err error) {
	return spliceBodyKey(body, toks, key, false)
}

// spliceBodyKey is setBodyKey, and fillBodyKey when create is false.
func spliceBodyKey(body []byte, toks []string, key string, create bool) (out []byte, existing string, err error) {
	if !json.Valid(body) {
		return nil, "", fmt.Errorf("%w: request body is not valid JSON", ErrBadKeyCarrier)
	}
	if where, dup := duplicateOnPath(body, toks); dup {
		return nil, "", fmt.Errorf("%w: body has member %q more than once (which one counts depends on the parser)", ErrBadKeyCarrier, where)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var where strings.Builder
	for depth, tok := range toks {
		last := depth == len(toks)-1
		t, err := dec.Token()
		if err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrBadKeyCarrier, err)
		}
		if t != json.Delim('{') {
			return nil, "", fmt.Errorf("%w: body value at %q is not an object", ErrBadKeyCarrier, where.String())
		}
		objStart := int(dec.InputOffset()) // just past '{'
		members := 0
		found := false
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, "", fmt.Errorf("%w: %w", ErrBadKeyCarrier, err)
			}
			members++
			if kt.(string) == tok {
				found = true
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, "", fmt.Errorf("%w: %w", ErrBadKeyCarrier, err)
			}
		}
		where.WriteString("/" + escapeToken(tok))
		if !found && !create {
			return nil, "", fmt.Errorf("%w: body has no member %q", ErrBadKeyCarrier, where.String())
		}
		if !found {
			// Create the missing members: {"tok":{"next":…{"last":"key"}}}.
			// A created parent is an object, so the token looked up in
			// it must not be one that may index an array (the pointer
			// may mean one, which is not invented); the existing object
			// takes any name.
			rest := toks[depth:]
			for i := 1; i < len(rest); i++ {
				if arrayIndex(rest[i]) {
					return nil, "", fmt.Errorf("%w: body has no member %q (not created as an object: the next token %q may be an array index)", ErrBadKeyCarrier, where.String()+pointerOf(rest[1:i]), rest[i])
				}
			}
			ins := jsonString(key)
			for i := len(rest) - 1; i >= 0; i-- {
				ins = jsonString(rest[i]) + ":" + ins
				if i > 0 {
					ins = "{" + ins + "}"
				}
			}
			if members > 0 {
				ins += ","
			}
			out = make([]byte, 0, len(body)+len(ins))
			out = append(out, body[:objStart]...)
			out = append(out, ins...)
			return append(out, body[objStart:]...), "", nil
		}
		if !last {
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrBadKeyCarrier, err)
		}
		end := int(dec.InputOffset())
		start := end - len(raw)
		if !bytes.Equal(raw, []byte("null")) {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, "", fmt.Errorf("%w: body member %q is not a string", ErrBadKeyCarrier, where.String())
			}
			if carried(s) != "" {
				return body, s, nil
			}
		}
		val := jsonString(key)
		out = make([]byte, 0, len(body)-len(raw)+len(val))
		out = append(out, body[:start]...)
		out = append(out, val...)
		return append(out, body[end:]...), "", nil
	}
	return nil, "", errors.New("idemclient: empty key pointer")
}

// duplicateOnPath reports whether an object on the path of toks in the
// valid JSON body names the member looked up in it more than once, and
// which (as a pointer). Parsers disagree on which of two such members
// counts: encoding/json, as a Go server decodes the body, takes the last,
// while setBodyKey would key the first. Other duplicates are not looked at.
func duplicateOnPath(body []byte, toks []string) (string, bool) {
	// Cheap exclusion first: in valid UTF-8 without a backslash every
	// member name is spelled as it reads, so a token that occurs in quotes
	// at most once cannot name two members.
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		many := false
		for _, tok := range toks {
			if quotedCount(body, tok) > 1 {
				many = true
				break
			}
		}
		if !many {
			return "", false
		}
	}
	obj := body
	for i, tok := range toks {
		dec := json.NewDecoder(bytes.NewReader(obj))
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return "", false // not an object: setBodyKey says so
		}
		var next json.RawMessage
		found := 0
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", false
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return "", false
			}
			if kt.(string) == tok {
				found++
				next = v
			}
		}
		switch {
		case found > 1:
			return pointerOf(toks[:i+1]), true
		case found == 0:
			return "", false
		}
		obj = next
	}
	return "", false
}

// quotedCount counts the occurrences of "tok" (in quotes, as is) in body.
func quotedCount(body []byte, tok string) int {
	t := []byte(tok)
	n := 0
	for i := 0; i < len(body); {
		j := bytes.Index(body[i:], t)
		if j < 0 {
			break
		}
		j += i
		if j > 0 && body[j-1] == '"' && j+len(t) < len(body) && body[j+len(t)] == '"' {
			n++
		}
		i = j + 1
	}
	return n
}

// arrayIndex reports whether t, as a JSON pointer token, may index an array.
func arrayIndex(t string) bool {
	if t == "-" {
		return true
	}
	if t == "" {
		return false
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func pointerOf(toks []string) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString("/" + escapeToken(t))
	}
	return b.String()
}

func escapeToken(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// checkKey reports why the server would refuse the call's key under p:
// longer than p.KeyMaxLength (0: no limit here), or, under
// p.EnforceKeyFormat, any key runtime/idem's ParseKey refuses under
// p.KeyFormat (the same code, runtime/internal/keysyntax: an empty key, a
// malformed RFC 8941 sf-string, a key that is not in the format, the nil
// or max UUID, a UUID of a version or variant RFC 9562 does not define,
// a key longer than the server's 255 characters). A key given as an sf-string
// ("...") is read as the server reads it, unquoted. Without
// EnforceKeyFormat the format is left to the server: a Policy's KeyFormat
// is then the format of the keys the helper creates (DefaultPolicy's
// FormatUUID included), not always the one the server requires.
func checkKey(key string, p Policy) error {
	k := key
	if u, ok := keysyntax.UnquoteSFString(key); ok {
		k = u
	}
	if !p.EnforceKeyFormat {
		if p.KeyMaxLength > 0 && len(k) > p.KeyMaxLength {
			return fmt.Errorf("the key is %d characters long, longer than the policy's KeyMaxLength %d (the contract's key.max-length)", len(k), p.KeyMaxLength)
		}
		return nil
	}
	maxLength := p.KeyMaxLength
	if maxLength <= 0 || maxLength > maxServerKeyLength {
		maxLength = maxServerKeyLength
	}
	f := cmp.Or(p.KeyFormat, FormatUUID)
	_, err := keysyntax.Parse(key, syntaxFormat(f), maxLength)
	var tooLong keysyntax.TooLong
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLong) && int(tooLong) == p.KeyMaxLength:
		return fmt.Errorf("the key is %d characters long, longer than the policy's KeyMaxLength %d (the contract's key.max-length)", len(k), p.KeyMaxLength)
	case errors.As(err, &tooLong):
		return fmt.Errorf("the key is %d characters long, longer than the %d the server accepts", len(k), maxServerKeyLength)
	case err == keysyntax.NotUUID:
		return fmt.Errorf("the key %q is not a UUID in canonical form, which the policy's key format %s requires", k, f)
	case err == keysyntax.BadChar:
		return fmt.Errorf("the key %q holds a character other than visible ASCII, which the policy's key format token refuses", k)
	case err == keysyntax.UUIDVer:
		u, perr := uuid.Parse(k)
		want := map[KeyFormat]uuid.Version{FormatUUIDv4: 4, FormatUUIDv7: 7}[f]
		if perr == nil && u.Variant() == uuid.RFC4122 && u.Version() >= 1 && u.Version() <= 8 && want != 0 {
			return fmt.Errorf("the key %q is a UUID of version %d, not %d, which the policy's key format %s requires", k, u.Version(), want, f)
		}
		return fmt.Errorf("the key %q is not an RFC 9562 UUID (variant 10xx, version 1 to 8), which the server refuses", k)
	}
	return fmt.Errorf("the key %q: %w", key, err)
}

// maxServerKeyLength is the longest key the server accepts whatever its
// contract says (runtime/idem's DefaultMaxKeyLength).
const maxServerKeyLength = 255

// syntaxFormat is f as keysyntax names it.
func syntaxFormat(f KeyFormat) keysyntax.Format {
	switch f {
	case FormatToken:
		return keysyntax.Token
	case FormatUUIDv4:
		return keysyntax.UUIDv4
	case FormatUUIDv7:
		return keysyntax.UUIDv7
	}
	return keysyntax.UUID
}
