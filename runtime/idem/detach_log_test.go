package idem_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// The grace ending a detached handler's context is logged (Info), naming
// the operation and the key.
func TestDetachHandlerGraceLogged(t *testing.T) {
	logs := &lockedBuffer{}
	f := newFixture(t, idem.Options{DetachHandler: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	p := mustCompile(t, replaySpec())
	ended := make(chan error, 4)
	srv := httptest.NewServer(slowStrict(f, p, 10*time.Second, ended))
	defer srv.Close()
	_, err := detachPost(&http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/orders", "k1")
	require.Error(t, err)
	require.Error(t, <-ended)
	out := logs.String()
	assert.Contains(t, out, "level=INFO msg=\"idem: the client went away Options.DetachHandler ago")
	assert.Contains(t, out, "key=k1")
}

// Without heartbeats a detached run that outlives its lease is taken over
// and runs twice: New warns.
func TestDetachHandlerWithoutHeartbeatWarns(t *testing.T) {
	for _, tc := range []struct {
		opts idem.Options
		warn bool
	}{
		{idem.Options{DetachHandler: time.Minute, DisableHeartbeat: true}, true},
		{idem.Options{DetachHandler: time.Minute}, false},
		{idem.Options{DisableHeartbeat: true}, false},
	} {
		logs := &lockedBuffer{}
		tc.opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
		ms := memstore.New(memstore.Options{SweepInterval: -1})
		e := idem.New(ms, tc.opts)
		assert.Equal(t, tc.warn, strings.Contains(logs.String(), "DetachHandler without heartbeats"), "%+v: %s", tc.opts, logs.String())
		_ = e
		_ = ms.Close()
	}
}
