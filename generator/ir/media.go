package ir

import "strings"

// Reading is how the runtime's fingerprint reads a request body.
type Reading int

// The readings of a request body (runtime/fingerprint).
const (
	// ReadRaw: byte for byte, with the Content-Type's parameters.
	ReadRaw Reading = iota
	// ReadJSON: as JSON data (member order, white space and number
	// spelling aside; volatile and unordered apply).
	ReadJSON
	// ReadForm: as form fields, in any order.
	ReadForm
)

// MediaTypeReading returns the reading that the fingerprint gives a body
// sent with the media type of ct, a key of an operation's requestBody
// content, when the operation declares ct (the generated policy passes the
// keys as idem.RequestSpec.MediaTypes; runtime/fingerprint's newMediaSet
// and mediaType decide): ReadJSON for application/json and any
// type/subtype ending in "+json", ReadForm for
// application/x-www-form-urlencoded, parameters left out, in any case;
// ReadRaw for any other, for a range ("application/*+json", "*/*") and
// for an entry that is not an RFC 9110 type "/" subtype of tokens. (A body
// sent with a media type the operation does not declare is read
// ReadRaw.) A test in generator/emit/docs pins it to the runtime.
func MediaTypeReading(ct string) Reading {
	mt := mediaType(ct)
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || !isToken(typ) || !isToken(sub) || strings.IndexByte(mt, '*') >= 0 {
		return ReadRaw
	}
	switch {
	case strings.EqualFold(mt, "application/json"):
		return ReadJSON
	case len(sub) >= 5 && strings.EqualFold(sub[len(sub)-5:], "+json"):
		return ReadJSON
	case strings.EqualFold(mt, "application/x-www-form-urlencoded"):
		return ReadForm
	}
	return ReadRaw
}

// MediaEssence returns the media type of ct, a key of an operation's
// requestBody content, without its parameters and in ASCII lower case: what
// the runtime compares a request's media type with (two keys with one
// essence are one declaration to it).
func MediaEssence(ct string) string {
	return strings.ToLower(mediaType(ct))
}

// mediaType is ct without its parameters, trimmed of spaces and tabs.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.Trim(mt, " \t")
}

// String names the reading in messages: "as JSON", "as form fields",
// "byte for byte".
func (r Reading) String() string {
	switch r {
	case ReadJSON:
		return "as JSON"
	case ReadForm:
		return "as form fields"
	}
	return "byte for byte"
}

// isToken reports whether s is an RFC 9110 token: tchars, at least one.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
