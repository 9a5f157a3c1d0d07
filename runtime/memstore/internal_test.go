package memstore

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestSlotSize: a record's slot is what every record costs beside its key
// and response; keep it at 80 bytes.
func TestSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(slot{}); n != 80 {
		t.Fatalf("slot is %d bytes, want 80", n)
	}
}

// TestExpiryOrder: the expiry queue and heap keep their order through
// pushes in and out of time order (the first join the queue, the heap's
// skip their parent), removals (of the soonest and of any) and fixes,
// across pages: minExp is the soonest expiry of the records scheduled,
// soonest returns one that has it, each entry's slot points back to it, and
// the queue holds at most about twice its live entries.
func TestExpiryOrder(t *testing.T) {
	for _, c := range []struct {
		outOfOrder int  // one push in outOfOrder goes back in time (0: none)
		expire     bool // the soonest is removed as often as any record (else only the latter: dead entries pile up in the queue)
	}{{0, true}, {3, true}, {50, true}, {0, false}, {50, false}} {
		outOfOrder := c.outOfOrder
		sh := &shard{head: none, tail: none, cur: none, minExp: math.MaxInt64, qlast: math.MinInt64}
		rng := rand.New(rand.NewPCG(3, uint64(outOfOrder)))
		compactions := 0
		var live []int32
		check := func(step int) {
			t.Helper()
			for j := 1; j < sh.nheap; j++ {
				if sh.hp(j).exp < sh.hp((j-1)/2).exp {
					t.Fatalf("step %d: heap entry %d expires before its parent", step, j)
				}
			}
			for j := 0; j < sh.nheap; j++ {
				if e := sh.at(sh.hp(j).slot); e.queued || int(e.expiryPos) != j || e.exp != sh.hp(j).exp {
					t.Fatalf("step %d: slot of heap entry %d does not point back", step, j)
				}
			}
			n, last := 0, int64(math.MinInt64)
			for p := sh.qlo; p != sh.qhi; p++ {
				q := *sh.qe(p)
				if q == none {
					continue
				}
				n++
				e := sh.at(q)
				if e.exp < last {
					t.Fatalf("step %d: queue entry %d expires before the one ahead", step, p)
				}
				last = e.exp
				if !e.queued || uint32(e.expiryPos) != p {
					t.Fatalf("step %d: slot of queue entry %d does not point back", step, p)
				}
			}
			if sh.qlo != sh.qhi && *sh.qe(sh.qlo) == none {
				t.Fatalf("step %d: the queue's front is dead", step)
			}
			if n != sh.qlive || n+sh.nheap != len(live) {
				t.Fatalf("step %d: %d live in the queue (counted %d), %d in the heap, want %d in all", step, n, sh.qlive, sh.nheap, len(live))
			}
			if sh.qhi-sh.qlo > 2*uint32(n)+queueSlack {
				t.Fatalf("step %d: the queue holds %d entries for %d live", step, sh.qhi-sh.qlo, n)
			}
			want := int64(math.MaxInt64)
			for _, i := range live {
				want = min(want, sh.at(i).exp)
			}
			if sh.minExp != want {
				t.Fatalf("step %d: minExp %d, want %d", step, sh.minExp, want)
			}
			if len(live) > 0 && sh.at(sh.soonest()).exp != want {
				t.Fatalf("step %d: soonest expires at %d, want %d", step, sh.at(sh.soonest()).exp, want)
			}
		}
		drop := func(k int) {
			sh.expiryRemove(live[k])
			sh.at(live[k]).exp = 0
			sh.free = append(sh.free, live[k])
			live = append(live[:k], live[k+1:]...)
		}
		exp := int64(0)
		for step := 0; step < 60000; step++ {
			switch op := rng.IntN(20); {
			case op < 9 || len(live) == 0:
				var i int32
				if n := len(sh.free); n > 0 {
					i, sh.free = sh.free[n-1], sh.free[:n-1]
				} else {
					i = sh.nslots
					if int(i)/slotsPerPage == len(sh.pages) {
						sh.pages = append(sh.pages, new(slotPage))
					}
					sh.nslots++
				}
				if outOfOrder > 0 && rng.IntN(outOfOrder) == 0 {
					exp -= int64(rng.IntN(1000)) // out of time order
				} else {
					exp += int64(rng.IntN(10))
				}
				sh.at(i).exp = exp
				sh.expiryPush(i, exp)
				live = append(live, i)
			case op < 13:
				drop(rng.IntN(len(live))) // evicted, taken over...
			case op < 17 && c.expire:
				s := sh.soonest() // expired
				drop(slices.Index(live, s))
			case op < 17:
				qhi := sh.qhi
				drop(rng.IntN(len(live)))
				if sh.qhi != qhi && sh.qlive > 0 { // only compaction moves the end back
					compactions++
				}
			default:
				i := live[rng.IntN(len(live))]
				if rng.IntN(2) == 0 {
					sh.at(i).exp = exp + int64(rng.IntN(20)) // past every entry pushed so far
				} else {
					sh.at(i).exp += int64(rng.IntN(2000)) - 1000
				}
				sh.expiryFix(i)
			}
			if step < 5000 || step%61 == 0 { // every step costs a minute under -race
				check(step)
			}
		}
		check(-1)
		if !c.expire && outOfOrder == 0 && compactions == 0 {
			t.Errorf("%+v: the queue never compacted", c)
		}
	}
}

// TestShardCount: Options.Shards is rounded up to a power of two, then
// lowered until each shard has room for MinShardRecords records.
func TestShardCount(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want int
	}{
		{Options{}, 32},
		{Options{Shards: 3}, 4},
		{Options{Shards: 1024}, 1024},
		{Options{Shards: 8192}, 2048}, // 1,000,000 / 256 = 3906
		{Options{MaxEntries: 64}, 1},
		{Options{MaxEntries: 511}, 1},
		{Options{MaxEntries: 512}, 2},
		{Options{MaxEntries: 8191}, 16},
		{Options{MaxEntries: 8192}, 32},
		{Options{MaxBytes: 80<<10 - 1}, 1},
		{Options{MaxBytes: 80 << 10}, 2},
		{Options{MaxBytes: 1280 << 10}, 32},
		{Options{MaxEntries: 1 << 20, MaxBytes: 160 << 10, Shards: 64}, 4},
	} {
		s := New(Options{Shards: c.o.Shards, MaxEntries: c.o.MaxEntries, MaxBytes: c.o.MaxBytes, SweepInterval: -1})
		if len(s.shards) != c.want {
			t.Errorf("%+v: %d shards, want %d", c.o, len(s.shards), c.want)
		}
		_ = s.Close()
	}
}

// TestBoundsExact: the shards' shares of MaxEntries and MaxBytes add up to
// them exactly, so they bound the store. (Each shard's share was rounded up:
// MaxEntries 10 over 32 shards held up to 32 records, 29 in a test.)
func TestBoundsExact(t *testing.T) {
	for _, o := range []Options{
		{MaxEntries: 10},
		{MaxEntries: 1001, Shards: 2},
		{MaxEntries: 1_000_003},
		{MaxEntries: 99_999, Shards: 7},
		{MaxBytes: 81_921},
		{MaxBytes: 256<<20 + 31},
		{MaxBytes: 10_000_001, Shards: 3},
	} {
		o.SweepInterval = -1
		s := New(o)
		var entries, bytes int64
		for i := range s.shards {
			entries += int64(s.shards[i].maxEntries)
			bytes += s.shards[i].maxBytes
		}
		wantEntries, wantBytes := int64(o.MaxEntries), o.MaxBytes
		if wantEntries == 0 {
			wantEntries = DefaultMaxEntries
		}
		if wantBytes == 0 {
			wantBytes = DefaultMaxBytes
		}
		if entries != wantEntries || bytes != wantBytes {
			t.Errorf("%+v: %d shards hold %d records and %d bytes, want %d and %d", o, len(s.shards), entries, bytes, wantEntries, wantBytes)
		}
		_ = s.Close()
	}
}

// TestPrefetchBounds: the prefetches of a claim and of its response stay
// within what exists: a shard without slot pages, chunk or queue, a chunk
// filled to its capacity, a slot page filled to its end, a free slot.
func TestPrefetchBounds(t *testing.T) {
	shards := []shard{{head: none, tail: none, cur: none, minExp: math.MaxInt64, qlast: math.MinInt64,
		maxEntries: 1 << 30, maxBytes: 1 << 40, seed: maphash.MakeSeed()}}
	sh := &shards[0]
	defer freeShards(shards)
	sh.prefetchClaim(64)
	sh.prefetchAppend(prefetchResponse)
	key := make([]byte, 100)
	for i := range slotsPerPage + 1 {
		key[0], key[1] = byte(i), byte(i>>8)
		sh.add(string(key), maphash.Bytes(sh.seed, key), 1, 0)
		sh.prefetchClaim(len(key)) // at the end of a page: no slot made yet
		sh.prefetchAppend(prefetchResponse)
	}
	// The current chunk filled to its capacity.
	c := sh.cur
	store(sh, make([]byte, cap(sh.chunks[c])-len(sh.chunks[c])))
	if sh.cur != c || len(sh.chunks[c]) != cap(sh.chunks[c]) {
		t.Fatalf("chunk %d not full (cur %d)", c, sh.cur)
	}
	sh.prefetchAppend(prefetchResponse)
	sh.prefetchClaim(len(key))
	// A free slot is the next one taken.
	sh.remove(3)
	sh.prefetchClaim(len(key))
}

// TestPrefetchEvict: the prefetches of a claim into a full shard
// (prefetchEvict, from ReadLocal's miss) stay within what exists, whichever
// record the claim then drops: a reclaimable FAILED one, a finished one, one
// whose key has a chunk of its own, none (only PENDING records); and the
// claims that follow make room as before.
func TestPrefetchEvict(t *testing.T) {
	ctx := context.Background()
	s := New(Options{Shards: 1, MaxEntries: 3, SweepInterval: -1, MinRetention: time.Nanosecond})
	defer s.Close()
	claim := func(key string) error {
		s.ReadLocal(key, nil) // a miss: prefetchClaim, and prefetchEvict when full
		_, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Token: 1, Lease: time.Minute, TTL: time.Hour})
		return err
	}
	big := strings.Repeat("k", bigValue+1) // a key in a chunk of its own
	for _, k := range []string{"a", "b", "c"} {
		if err := claim(k); err != nil {
			t.Fatal(err)
		}
	}
	// Full of PENDING records: no record to drop.
	if err := claim("d"); !errors.Is(err, ErrFull) {
		t.Fatalf("claim into a shard of PENDING records: %v, want ErrFull", err)
	}
	mustFinish := func(key string, state idem.State, resp []byte) {
		if err := s.Finish(ctx, key, 1, state, resp); err != nil {
			t.Fatal(err)
		}
	}
	mustFinish("a", idem.StateCompleted, []byte("response"))
	mustFinish("b", idem.StateFailed, nil) // reclaimable: dropped first
	time.Sleep(time.Millisecond)           // older than MinRetention
	for _, k := range []string{big, "e", "f", "g"} {
		if err := claim(k); err != nil {
			t.Fatalf("claim %.8q: %v", k, err)
		}
		mustFinish(k, idem.StateCompleted, []byte("response of "+k[:1]))
		time.Sleep(time.Millisecond)
	}
	st := s.Stats()
	if st.Entries != 3 || st.EvictedFailed != 1 || st.Evicted != 3 {
		t.Fatalf("stats %+v, want 3 entries, 1 reclaimable FAILED and 3 finished records evicted", st)
	}
	// c stays PENDING; a, big and e went, oldest first.
	for _, k := range []string{"f", "g"} {
		if rec, ok := s.ReadLocal(k, nil); !ok || string(rec.Response) != "response of "+k {
			t.Fatalf("%s: %v %q", k, ok, rec.Response)
		}
	}
	if rec, ok := s.ReadLocal("c", nil); !ok || rec.State != idem.StatePending {
		t.Fatalf("c: %v %v, want PENDING", ok, rec.State)
	}
}

// TestPageElemOutOfRange: at, qe and hp compute an entry's address from
// its page's (no load from the page), and an index out of range still
// panics, none and negative ones included, instead of addressing memory
// outside the pages.
func TestPageElemOutOfRange(t *testing.T) {
	sh := &shard{pages: []*slotPage{new(slotPage)}, queue: []*queuePage{new(queuePage)}, heap: []*expiryPage{new(expiryPage)}}
	if sh.at(slotsPerPage-1) != &sh.pages[0][slotsPerPage-1] || sh.qe(5) != &sh.queue[0][5] || sh.hp(7) != &sh.heap[0][7] {
		t.Fatal("an entry's address is not its page's element")
	}
	for name, f := range map[string]func(){
		"at(none)":                 func() { sh.at(none) },
		"at(slotsPerPage)":         func() { sh.at(slotsPerPage) },
		"qe(qbase-1)":              func() { sh.qe(sh.qbase - 1) },
		"qe(entriesPerQueuePage)":  func() { sh.qe(entriesPerQueuePage) },
		"hp(-1)":                   func() { sh.hp(-1) },
		"hp(entriesPerExpiryPage)": func() { sh.hp(entriesPerExpiryPage) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}
