package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// shareRun drives a steady, legitimate workload: one new key a second, each
// completed at once with a small response, a 24 h window (idem's
// DefaultWindow), principals taken in turn from who. The store is smaller
// than a window's worth (the regime the package doc sizes for: records
// older than MinRetention are evicted to admit new claims). It returns
// how many claims were refused, and with what.
func shareRun(t *testing.T, share float64, who []string, n int) (principalFull, full int) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000, MinRetention: time.Minute, MaxPrincipalShare: share})
	ctx := context.Background()
	for i := range n {
		c.Add(time.Second)
		key := fmt.Sprint("k-", i)
		res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Token: 7, Lease: time.Minute, TTL: 24 * time.Hour, Principal: who[i%len(who)]})
		switch {
		case err == nil:
			if !res.Acquired {
				t.Fatalf("%s not acquired", key)
			}
			if err := s.Finish(ctx, key, 7, idem.StateCompleted, []byte(`{"ok":true}`)); err != nil {
				t.Fatal(err)
			}
		case errors.Is(err, memstore.ErrPrincipalFull):
			principalFull++
		case errors.Is(err, memstore.ErrFull):
			full++
		default:
			t.Fatal(err)
		}
	}
	return
}

// TestShareSteadyStateRefusesNormalLoad: three principals sharing the load
// evenly, no flood. With the share off, every claim is admitted for ever
// (the store evicts records older than MinRetention). With the default
// share too: once the store is half full (500 s in) each principal holds
// a third of it (> 1/8), and records older than MinRetention are evicted
// from half full on. (Before the fix every new key was refused 429 from
// then until records expired, 24 h: the refusal came before makeRoom.)
func TestShareSteadyStateRefusesNormalLoad(t *testing.T) {
	who := []string{"alice", "bob", "carol"}
	pf, f := shareRun(t, -1, who, 5000)
	t.Logf("share off: %d ErrPrincipalFull, %d ErrFull of 5000", pf, f)
	if pf+f != 0 {
		t.Fatalf("share off refused %d", pf+f)
	}
	pf, f = shareRun(t, 0, who, 5000)
	t.Logf("default share: %d ErrPrincipalFull, %d ErrFull of 5000", pf, f)
	if pf+f != 0 {
		t.Errorf("default share refused %d of 5000 claims of a normal load that the store (evicting records older than MinRetention) admits in full", pf+f)
	}
}

// TestShareSteadyStateDominantTenant: one tenant makes half the requests,
// 100 small ones the rest. The dominant tenant is refused nothing (before
// the fix: nearly all its new keys once the store was half full, though
// old records abounded).
func TestShareSteadyStateDominantTenant(t *testing.T) {
	who := make([]string, 0, 200)
	for i := range 100 {
		who = append(who, "big", fmt.Sprint("small-", i))
	}
	pf, f := shareRun(t, 0, who, 5000)
	t.Logf("default share: %d ErrPrincipalFull, %d ErrFull of 5000", pf, f)
	if pf+f != 0 {
		t.Errorf("the dominant tenant was refused %d new keys under a normal load", pf)
	}
}
