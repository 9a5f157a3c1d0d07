package idem_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// timedStore is a store wrapped for metrics the way users write it: the
// embedded interface forwards Begin, Finish and Get, and hides every
// optional interface of the store inside.
type timedStore struct{ idem.Store }

// New warns, once, when heartbeats are on and the store cannot extend a
// lease (a wrapper that hides ExtendLease): a long handler would be taken
// over and run twice.
func TestNewWarnsStoreWithoutLeaseExtender(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store idem.Store
		opts  idem.Options
		warn  bool
	}{
		{"wrapped", timedStore{memstore.New(memstore.Options{})}, idem.Options{}, true},
		{"memstore", memstore.New(memstore.Options{}), idem.Options{}, false},
		{"wrapped, heartbeats off", timedStore{memstore.New(memstore.Options{})}, idem.Options{DisableHeartbeat: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			tc.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			tc.opts.Principal = idem.Anonymous
			idem.New(tc.store, tc.opts)
			got := logs.String()
			n := strings.Count(got, "does not implement idem.LeaseExtender")
			if tc.warn {
				if n != 1 || !strings.Contains(got, "level=WARN") || !strings.Contains(got, "idem.Watcher") ||
					!strings.Contains(got, "run it a second time") && !strings.Contains(got, "runs it a second time") ||
					!strings.Contains(got, "idem_test.timedStore") {
					t.Errorf("want one warning naming the consequence, the fix and the store; logs:\n%s", got)
				}
			} else if got != "" {
				t.Errorf("want no log; got:\n%s", got)
			}
		})
	}
}
