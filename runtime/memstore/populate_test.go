package memstore

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// withoutPopulateWrite has the arenas act as on a system without
// MADV_POPULATE_WRITE (darwin, the BSDs, Linux before 5.14) for the rest of
// the test; the process's arena asks for it again after.
func withoutPopulateWrite(t *testing.T) {
	noPopulateWrite.Store(true)
	t.Cleanup(func() {
		noPopulateWrite.Store(false)
		waitPopulated(t, &mem)
		mem.mu.Lock()
		mem.noPopulateWrite = false
		mem.mu.Unlock()
	})
}

// waitPopulated waits for arena a's populating goroutine, if any.
func waitPopulated(t *testing.T, a *arena) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		a.mu.Lock()
		busy := a.preparing
		a.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("still populating after 10 s")
		}
	}
}

// TestArenaPopulatingKeepsCarvedBlocks: blocks carved and written while
// the arena has memory backed ahead keep what was written, with
// MADV_POPULATE_WRITE or without it (then a write per page, which must
// never reach memory already handed out).
func TestArenaPopulatingKeepsCarvedBlocks(t *testing.T) {
	for _, without := range []bool{false, true} {
		t.Run(fmt.Sprint("withoutPopulateWrite=", without), func(t *testing.T) {
			if without {
				withoutPopulateWrite(t)
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the populating goroutine runs when this one yields
			// Whether the populating goroutine runs before or after the
			// writes is the scheduler's: a few rounds.
			for range 5 {
				populatingKeepsCarvedBlocks(t)
			}
		})
	}
}

// populatingKeepsCarvedBlocks is a round of TestArenaPopulatingKeepsCarvedBlocks.
func populatingKeepsCarvedBlocks(t *testing.T) {
	a := &arena{big: map[uintptr]bool{}}
	var held [][]byte
	defer func() {
		for _, b := range held {
			a.free(b)
		}
	}()
	// Carve past where populating starts (either way) and write
	// each block as it is carved, as requests do.
	started := false
	for a.cur == nil || a.cur.carved < populateUnit+64*minBlock {
		b := a.alloc(minBlock)
		for i := range b {
			b[i] = 0xAB
		}
		held = append(held, b)
		a.mu.Lock()
		started = started || a.preparing
		a.mu.Unlock()
	}
	if !started {
		t.Fatal("no populating started")
	}
	waitPopulated(t, a)
	bad := 0
	for _, b := range held {
		for _, c := range b {
			if c != 0xAB {
				bad++
				break
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d blocks written before the populating finished were overwritten", bad, len(held))
	}
}

// TestStorePopulatingKeepsRecords: the same through a Store: records made
// while the arena has memory backed ahead are all found, intact.
func TestStorePopulatingKeepsRecords(t *testing.T) {
	for _, without := range []bool{false, true} {
		t.Run(fmt.Sprint("withoutPopulateWrite=", without), func(t *testing.T) {
			if without {
				withoutPopulateWrite(t)
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			for range 3 { // a few rounds, as above
				populatingKeepsRecords(t)
			}
		})
	}
}

// populatingKeepsRecords is a round of TestStorePopulatingKeepsRecords.
func populatingKeepsRecords(t *testing.T) {
	s := New(Options{Shards: 1, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	resp := make([]byte, 300)
	for i := range resp {
		resp[i] = 'x'
	}
	const n = 30000
	for i := range n {
		k := fmt.Sprintf("key-%08d", i)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: idem.Token(i + 1), Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, k, idem.Token(i+1), idem.StateCompleted, resp); err != nil {
			t.Fatal(err)
		}
	}
	waitPopulated(t, &mem)
	lost, badResp := 0, 0
	for i := range n {
		rec, ok, _ := s.Get(ctx, fmt.Sprintf("key-%08d", i))
		if !ok {
			lost++
			continue
		}
		for _, c := range rec.Response {
			if c != 'x' {
				badResp++
				break
			}
		}
	}
	if lost+badResp > 0 {
		t.Errorf("%d of %d records lost, %d responses corrupted", lost, n, badResp)
	}
}
