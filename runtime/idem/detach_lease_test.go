package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// A detached handler that runs well past its lease after its
// client went away keeps its lease (heartbeats), so a retry is answered
// in flight rather than taking the key over and running a second time.
func TestDetachHandlerHeartbeatPastLease(t *testing.T) {
	f := newFixture(t, idem.Options{DetachHandler: 10 * time.Second})
	s := replaySpec()
	s.InFlight.Lease = 300 * time.Millisecond
	p := mustCompile(t, s)
	ended := make(chan error, 4)
	srv := httptest.NewServer(slowStrict(f, p, 1200*time.Millisecond, ended))
	defer srv.Close()
	_, err := detachPost(&http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/orders", "k1")
	require.Error(t, err)
	time.Sleep(800 * time.Millisecond) // more than two leases after the claim
	resp, err := detachPost(srv.Client(), srv.URL+"/orders", "k1")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "in flight, not taken over")
	assert.NoError(t, <-ended, "the detached run finished")
	<-ended
	resp, err = detachPost(srv.Client(), srv.URL+"/orders", "k1")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "%s", b)
	assert.Equal(t, int32(1), f.calls.Load())
}
