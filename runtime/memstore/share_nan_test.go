package memstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestShareNaNShare: MaxPrincipalShare NaN is the default (before the fix,
// neither "negative or >= 1"
// (off) nor 0 (default): the limits became 1 record and EntryOverhead bytes).
func TestShareNaNShare(t *testing.T) {
	s, _ := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000, MaxPrincipalShare: math.NaN()})
	ctx := context.Background()
	for i := range 501 {
		_, _ = s.Begin(ctx, &idem.BeginRequest{Key: fmt.Sprint("anon-", i), Token: 1, Lease: time.Minute, TTL: time.Hour})
	}
	var err error
	n := 0
	for ; n < 10 && err == nil; n++ {
		err = claimAs(t, s, "p", fmt.Sprint("p-", n), time.Hour, nil)
	}
	t.Logf("NaN share: principal refused after %d claims: %v", n-1, err)
	if err != nil {
		t.Errorf("NaN share limits a principal to %d record(s)", n-1)
	}
}
