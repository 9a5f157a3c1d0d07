package redisstore

import "strings"

// Key layout: <prefix>{<scope key>}. The braces make the scope key the
// Redis Cluster hash tag, so everything stored for one scope key lives in one
// slot whatever the prefix, and the prefix cannot move records between slots.
//
// A hash tag ends at the first '}' after the first '{', so a scope key that
// contains braces would cut its own tag short (and "{}" would disable it).
// Such keys are escaped: '%' -> %25, '{' -> %7B, '}' -> %7D. The mapping is
// injective, so distinct scope keys never share a Redis key; keys without
// those three bytes (the common case) are used verbatim.

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "idem:"

func (s *Store) key(scope string) string {
	if !strings.ContainsAny(scope, "{}%") {
		return s.prefix + "{" + scope + "}"
	}
	return string(s.appendKey(nil, scope))
}

// appendKey appends the Redis key of scope to b.
func (s *Store) appendKey(b []byte, scope string) []byte {
	b = append(b, s.prefix...)
	b = append(b, '{')
	if !strings.ContainsAny(scope, "{}%") {
		b = append(b, scope...)
		return append(b, '}')
	}
	for i := 0; i < len(scope); i++ {
		switch c := scope[i]; c {
		case '%':
			b = append(b, "%25"...)
		case '{':
			b = append(b, "%7B"...)
		case '}':
			b = append(b, "%7D"...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '}')
}
