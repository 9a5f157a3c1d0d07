package idemclient

// DoerWrapper is implemented by an HTTP doer that wraps a [*Doer]: an
// SDK's own HttpRequestDoer that adds a User-Agent or a tracing span
// around the Doer it was built with (above the Doer, it sees each call
// once, not each attempt: a span per attempt belongs in the HTTP client
// below the Doer). A generated NewIdempotentClient given such a doer
// (WithHTTPClient) keeps it as it is, as it keeps a bare *Doer, instead of wrapping it in a second,
// default Doer whose attempts the wrapped one would pass through (its
// options, an attempt hook, a logger, a per-attempt timeout, a
// Retry-After limit, silently unused). [*Doer] implements it too.
//
//	type sdkDoer struct{ next *idemclient.Doer }
//
//	func (d sdkDoer) Do(req *http.Request) (*http.Response, error) {
//		req.Header.Set("User-Agent", "pay-sdk/1.2")
//		return d.next.Do(req)
//	}
//
//	func (d sdkDoer) IdempotentDoer() *idemclient.Doer { return d.next }
type DoerWrapper interface {
	HTTPDoer
	// IdempotentDoer returns the Doer the HTTP doer sends its requests
	// through.
	IdempotentDoer() *Doer
}

// IdempotentDoer returns d: a *Doer wraps itself ([DoerWrapper]).
func (d *Doer) IdempotentDoer() *Doer { return d }

// FindDoer returns the [*Doer] that d is, or that it wraps
// ([DoerWrapper]); nil when d is neither (a plain *http.Client), or nil.
// A generated NewIdempotentClient wraps an HTTP client's doer in a new
// Doer only when FindDoer finds none.
func FindDoer(d HTTPDoer) *Doer {
	if w, ok := d.(DoerWrapper); ok {
		return w.IdempotentDoer()
	}
	return nil
}
