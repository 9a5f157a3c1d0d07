// Package httpsyntax holds the pieces of HTTP syntax that more than one
// runtime package reads: RFC 9110's character classes (idem checks stored
// header names, fingerprint parses Content-Type parameters) and the pairs
// of a raw query as net/url reads them (idem and idemclient find a query
// key).
package httpsyntax

import "strings"

// IsTchar reports whether c is an RFC 9110 tchar (a byte of a token): a
// table lookup.
func IsTchar(c byte) bool { return tchars[c] }

// tchars holds the tchars: ALPHA, DIGIT and "!#$%&'*+-.^_`|~".
var tchars = func() (t [256]bool) {
	for c := range t {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			t[c] = true
		default:
			t[c] = strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
		}
	}
	return t
}()
