package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/getkin/kin-openapi/openapi3"
)

// DefaultRemoteMaxBytes is Options.RemoteMaxBytes when it is zero.
const DefaultRemoteMaxBytes = 64 << 20

// remoteClient is the client that reads the remote documents $refs name:
// each within timeout, from the request to the end of the body, and of at
// most maxBytes, so that a server that never answers or never stops does
// not hang idemgen or fill its memory.
func remoteClient(opts Options) *http.Client {
	max := int64(cmp.Or(opts.RemoteMaxBytes, DefaultRemoteMaxBytes))
	return &http.Client{
		Timeout:   cmp.Or(opts.RemoteTimeout, DefaultRemoteTimeout),
		Transport: limitTransport{next: http.DefaultTransport, max: max},
	}
}

// readRemote reads a remote document with remoteClient(opts). A document
// not read in time fails with one message, whichever step the time ran out
// in (net/http says "Client.Timeout exceeded" while it waits for the
// headers and "context deadline exceeded" while it reads the body).
func readRemote(opts Options) openapi3.ReadFromURIFunc {
	timeout := cmp.Or(opts.RemoteTimeout, DefaultRemoteTimeout)
	read := openapi3.ReadFromHTTP(remoteClient(opts))
	return func(l *openapi3.Loader, loc *url.URL) ([]byte, error) {
		data, err := read(l, loc)
		var ne net.Error
		if err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
			return nil, fmt.Errorf("remote document %s not read within %s: timeout", loc.Redacted(), timeout)
		}
		return data, err
	}
}

// limitTransport bounds the bodies of the responses of next.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (t limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

// limitedBody reads rc and fails once it has given max bytes and more
// follow.
type limitedBody struct {
	rc        io.ReadCloser
	left, max int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte tells a body of exactly max bytes from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, fmt.Errorf("remote document larger than %d bytes (load.Options.RemoteMaxBytes)", b.max)
		}
		return b.rc.Read(p[:0])
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
