package httpsyntax

import (
	"iter"
	"net/url"
	"strings"
)

// QueryPairs yields the pairs of a raw query (URL.RawQuery) as
// net/url.ParseQuery reads them, which a handler's r.URL.Query() uses: a
// pair holding a semicolon is skipped ("invalid semicolon separator in
// query"), as is one whose name is badly escaped. Names are unescaped;
// values are yielded raw (as spelled, for UnescapeValue). An empty pair
// (a&&b) is yielded with an empty name, which names no parameter. It reads
// the query in place, without building a map: idem (the server's key) and
// idemclient (the key a request carries) read a query key alike.
func QueryPairs(rawQuery string) iter.Seq2[string, string] {
	return func(yield func(name, rawValue string) bool) {
		for q := rawQuery; q != ""; {
			var part string
			part, q, _ = strings.Cut(q, "&")
			if strings.IndexByte(part, ';') >= 0 {
				continue
			}
			k, v, _ := strings.Cut(part, "=")
			if strings.ContainsAny(k, "%+") {
				uk, err := url.QueryUnescape(k)
				if err != nil {
					continue
				}
				k = uk
			}
			if !yield(k, v) {
				return
			}
		}
	}
}

// UnescapeValue unescapes a raw value QueryPairs yielded; ok is false when
// it is badly escaped (which ParseQuery drops).
func UnescapeValue(raw string) (v string, ok bool) {
	if !strings.ContainsAny(raw, "%+") {
		return raw, true
	}
	v, err := url.QueryUnescape(raw)
	return v, err == nil
}
