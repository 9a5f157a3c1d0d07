package testenv

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// Blackhole returns the address of a loopback server that accepts
// connections, reads everything and never answers, like a hung server. It
// and its connections are closed at the end of the test.
func Blackhole(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c) }()
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	return l.Addr().String()
}

// CountingDialer returns a dialer (the signature of go-redis's
// Options.Dialer and pgx's DialFunc) whose connections count their writes in
// n. Those clients send a command, or a whole pipeline or batch, with one
// Write and then wait for the reply, so the count is the round trips.
func CountingDialer(n *atomic.Int64) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{Conn: c, n: n}, nil
	}
}

type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}
