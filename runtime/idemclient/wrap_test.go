package idemclient

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type wrapping struct{ next *Doer }

func (w wrapping) Do(req *http.Request) (*http.Response, error) { return w.next.Do(req) }

// An SDK's HttpRequestDoer that does not say which Doer it wraps
// (DoerWrapper).
type opaque struct{ next HTTPDoer }

func (o opaque) Do(req *http.Request) (*http.Response, error) { return o.next.Do(req) }

func (w wrapping) IdempotentDoer() *Doer { return w.next }

func TestFindDoer(t *testing.T) {
	d := NewDoer(http.DefaultClient, Policy{})
	assert.Same(t, d, FindDoer(d))
	assert.Same(t, d, FindDoer(wrapping{d}))
	assert.Nil(t, FindDoer(opaque{d}))
	assert.Nil(t, FindDoer(http.DefaultClient))
	assert.Nil(t, FindDoer(nil))
}

// A Doer that receives another Doer's attempts passes them through and
// says so once, on its logger: its own options do not apply. (Before, it
// said nothing.)
func TestNestedDoerWarnsOnce(t *testing.T) {
	srv := newRecServer(t, nil)
	var buf bytes.Buffer
	inner := NewDoer(http.DefaultClient, Policy{}, WithLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	outer := NewDoer(opaque{inner}, Policy{})
	for range 3 {
		ctx, _ := Start(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/pay?token=secret", strings.NewReader(`{}`))
		resp, err := outer.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Len(t, srv.Seen(), 3)
	assert.Equal(t, 1, strings.Count(buf.String(), "receives the attempts of another Doer"), buf.String())
	assert.NotContains(t, buf.String(), "secret")
}
