package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestShareDefaultsDocClaim: the package doc says a store with the defaults
// (1,000,000 records, 256 MiB, 24h windows, 32 shards) serving 256-byte
// responses "is refused nothing below about 150 [new keys] a second".
// Three principals, 10 new keys a second between them, 256-byte
// responses, 24 h windows, 16 hours (the fake clock), on one shard of
// such a store (its 1/32 of the bounds, a 32nd of the load): nothing is
// refused with the share off or at its default, though the shard passes
// half its bytes about 8 hours in (before the fix, most claims were
// refused from then on).
func TestShareDefaultsDocClaim(t *testing.T) {
	for _, share := range []float64{-1, 0} {
		s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: memstore.DefaultMaxEntries / 32,
			MaxBytes: memstore.DefaultMaxBytes / 32, MaxPrincipalShare: share})
		ctx := context.Background()
		resp := make([]byte, 256)
		refused := 0
		firstAt := time.Duration(0)
		const every, hours = 3200 * time.Millisecond, 16 // 10 a second over 32 shards
		n := int(hours * time.Hour / every)
		for i := range n {
			c.Add(every)
			key := fmt.Sprintf("i1p0:11:createOrderk36:%036d", i)
			res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Token: 7, Lease: time.Minute, TTL: 24 * time.Hour,
				Principal: []string{"acme", "globex", "initech"}[i%3]})
			if err != nil {
				if refused == 0 {
					firstAt = time.Duration(i) * every
				}
				refused++
				continue
			}
			if !res.Acquired {
				t.Fatal("not acquired")
			}
			if err := s.Finish(ctx, key, 7, idem.StateCompleted, resp); err != nil {
				t.Fatal(err)
			}
		}
		st := s.Stats()
		t.Logf("share %v: refused %d of %d (first after %v); %+v", share, refused, n, firstAt, st)
		if refused != 0 {
			t.Errorf("share %v: %d claims refused at 10 new keys a second (the doc: nothing below about 150)", share, refused)
		}
	}
}
