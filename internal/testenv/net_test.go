package testenv

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBlackhole(t *testing.T) {
	c, err := net.DialTimeout("tcp", Blackhole(t), time.Second)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("PING\r\n"))
	require.NoError(t, err, "it accepts and reads")
	require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout(), "it never answers: %v", err)
}

func TestCountingDialer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var n atomic.Int64
	c, err := CountingDialer(&n)(context.Background(), "tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	for range 3 {
		_, err := c.Write([]byte("x"))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(3), n.Load())

	_, err = CountingDialer(&n)(context.Background(), "tcp", FreeAddr(t))
	assert.Error(t, err, "a port nobody listens on")
}
