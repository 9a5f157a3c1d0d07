package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestBeginWidenCompactsNewSlot: a new key with a long fingerprint whose
// widenKeySpan compacts the shard (its key fits the current chunk, key and
// fingerprint do not, and the chunks are sparse): the new slot must be
// compacted too (Begin marks it PENDING before setFP; compaction skips
// free slots).
func TestBeginWidenCompactsNewSlot(t *testing.T) {
	s := New(Options{Shards: 1, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	var fp idem.Fingerprint
	for i := range fp {
		fp[i] = byte(i + 1) // version 1: SHA-256 form, kept long
	}
	for i := range 50 {
		k := fmt.Sprint("old-", i)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: idem.Token(i + 1), Fingerprint: fp, Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	sh := &s.shards[0]
	key := "new-key"
	sh.mu.Lock()
	c := sh.chunks[sh.cur]
	sh.chunks[sh.cur] = c[:cap(c)-(len(key)+tagBytes)] // dead bytes: the key fits, key and fingerprint do not
	sh.chunkBytes += 8 << 20                           // sparse: the next new chunk compacts first
	sh.mu.Unlock()
	if _, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Token: 1000, Fingerprint: fp, Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, "old-0", "old-49"} {
		rec, ok, _ := s.Get(ctx, k)
		if !ok || rec.Fingerprint != fp {
			t.Errorf("%s: found %v, fingerprint %x", k, ok, rec.Fingerprint)
		}
	}
}
