package idemclient

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func urlErr(err error) error { return &url.Error{Op: "Post", URL: "http://x/y", Err: err} }

func opErr(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
}

func TestClassifySynthetic(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ClassNone},
		{"refused", urlErr(opErr("dial", syscall.ECONNREFUSED)), ClassConnection},
		{"reset", urlErr(opErr("read", syscall.ECONNRESET)), ClassConnection},
		{"aborted", urlErr(opErr("read", syscall.ECONNABORTED)), ClassConnection},
		{"broken pipe", urlErr(opErr("write", syscall.EPIPE)), ClassConnection},
		{"unreachable", urlErr(opErr("dial", syscall.EHOSTUNREACH)), ClassConnection},
		{"EOF", urlErr(io.EOF), ClassConnection},
		{"unexpected EOF mid-body", fmt.Errorf("reading the response body: %w", io.ErrUnexpectedEOF), ClassConnection},
		{"timeout", urlErr(timeoutErr{}), ClassConnection},
		{"dns temporary", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", IsTemporary: true}}), ClassConnection},
		{"dns not found", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}), ClassPermanent},
		{"other op error", urlErr(&net.OpError{Op: "read", Err: errors.New("use of closed network connection")}), ClassConnection},
		{"http2 lost", urlErr(errors.New("http2: client connection lost")), ClassConnection},
		{"idle closed", urlErr(errors.New("http: server closed idle connection")), ClassConnection},
		{"canceled", urlErr(context.Canceled), ClassCanceled},
		{"deadline", urlErr(context.DeadlineExceeded), ClassCanceled},
		{"unknown authority", urlErr(x509.UnknownAuthorityError{}), ClassPermanent},
		{"hostname", urlErr(x509.HostnameError{Host: "x"}), ClassPermanent},
		{"tls alert", urlErr(errors.New("remote error: tls: handshake failure")), ClassPermanent},
		{"unsupported scheme", urlErr(errors.New(`unsupported protocol scheme "ftp"`)), ClassPermanent},
		{"invalid header", urlErr(errors.New(`net/http: invalid header field name "a b"`)), ClassPermanent},
		{"unknown", errors.New("boom"), ClassPermanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Classify(tc.err))
		})
	}
}

// Real errors from net/http, as a Doer meets them.
func TestClassifyReal(t *testing.T) {
	client := &http.Client{Timeout: 5 * time.Second}

	t.Run("dial refused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close()
		_, err = client.Get("http://" + addr + "/")
		require.Error(t, err)
		assert.Equal(t, ClassConnection, Classify(err), "%v", err)
	})
	t.Run("closed without a response", func(t *testing.T) {
		_, err := client.Get("http://" + hangUp(t, false) + "/")
		require.Error(t, err)
		assert.Equal(t, ClassConnection, Classify(err), "%v", err)
	})
	t.Run("reset", func(t *testing.T) {
		_, err := client.Get("http://" + hangUp(t, true) + "/")
		require.Error(t, err)
		assert.Equal(t, ClassConnection, Classify(err), "%v", err)
	})
	t.Run("unexpected EOF mid-body", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte("short"))
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
		}))
		defer srv.Close()
		resp, err := client.Get(srv.URL)
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Error(t, err)
		assert.Equal(t, ClassConnection, Classify(err), "%v", err)
	})
	t.Run("certificate", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		defer srv.Close()
		_, err := client.Get(srv.URL) // the test CA is not trusted
		require.Error(t, err)
		assert.Equal(t, ClassPermanent, Classify(err), "%v", err)
	})
	t.Run("TLS to a plain server", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		_, err := client.Get("https://" + srv.Listener.Addr().String())
		require.Error(t, err)
		assert.Equal(t, ClassPermanent, Classify(err), "%v", err)
	})
	t.Run("unsupported scheme", func(t *testing.T) {
		_, err := client.Get("ftp://example.invalid/")
		require.Error(t, err)
		assert.Equal(t, ClassPermanent, Classify(err), "%v", err)
	})
	t.Run("client timeout", func(t *testing.T) {
		block := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
		defer srv.Close()
		defer close(block)
		c := &http.Client{Timeout: 20 * time.Millisecond}
		_, err := c.Get(srv.URL)
		require.Error(t, err)
		assert.Equal(t, ClassConnection, Classify(err), "%v", err)
	})
	// A body that stalls after the headers: http.Client.Timeout fires
	// during the read ("Client.Timeout or context cancellation while
	// reading body"), a caller's cancellation there is still the caller's.
	midBody := func(t *testing.T) string {
		block := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
			_, _ = w.Write([]byte("{"))
			w.(http.Flusher).Flush()
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(block) })
		return srv.URL
	}
	t.Run("client timeout while reading the body", func(t *testing.T) {
		c := &http.Client{Timeout: 50 * time.Millisecond}
		resp, err := c.Get(midBody(t))
		require.NoError(t, err)
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Error(t, err)
		assert.Equal(t, ClassConnection, Classify(err), "%v", err)
	})
	t.Run("canceled by the caller while reading the body", func(t *testing.T) {
		c := &http.Client{Timeout: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, midBody(t), nil)
		resp, err := c.Do(req)
		require.NoError(t, err)
		cancel()
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Error(t, err)
		assert.Equal(t, ClassCanceled, Classify(err), "%v", err)
	})
	t.Run("canceled by the caller", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
		_, err := client.Do(req)
		require.Error(t, err)
		assert.Equal(t, ClassCanceled, Classify(err), "%v", err)
	})
}

// hangUp returns the address of a server that reads the first request and
// closes the connection without a response: with reset, abortively (an RST
// instead of a FIN).
func hangUp(t *testing.T, reset bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 1024)
		_, _ = c.Read(buf)
		if reset {
			_ = c.(*net.TCPConn).SetLinger(0)
		}
		c.Close()
	}()
	return l.Addr().String()
}
