package memstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestArenaBlocks: random allocations and frees of every size; a block
// keeps what was written to it until it is freed (no two live blocks
// overlap), sizes are rounded up to their class, and once everything is
// freed the arena holds no block and at most its spare region.
func TestArenaBlocks(t *testing.T) {
	a := &arena{big: map[uintptr]bool{}}
	rng := rand.New(rand.NewPCG(5, 6))
	type held struct {
		b    []byte
		fill byte
	}
	var live []held
	check := func(h held) {
		if n := bytes.Count(h.b, []byte{h.fill}); n != len(h.b) {
			t.Fatalf("block of %d bytes: %d bytes were overwritten", len(h.b), len(h.b)-n)
		}
	}
	// Fresh pages are slow to touch (page faults), so large blocks are rare.
	for step := 0; step < 10000; step++ {
		if len(live) > 0 && rng.IntN(5) < 2 {
			k := rng.IntN(len(live))
			check(live[k])
			a.free(live[k].b)
			live = append(live[:k], live[k+1:]...)
			continue
		}
		var n int
		switch rng.IntN(50) {
		case 0:
			n = maxBlock + 1 + rng.IntN(maxBlock)
		case 1, 2, 3, 4, 5:
			n = 1 + rng.IntN(maxBlock)
		default:
			n = 1 + rng.IntN(3*minBlock)
		}
		b := a.alloc(n)
		if len(b) < n || len(b) != cap(b) {
			t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		if n <= maxBlock && len(b) != minBlock<<class(n) {
			t.Fatalf("alloc(%d): %d bytes, not its class's", n, len(b))
		}
		h := held{b, byte(step)}
		b[0] = h.fill
		for k := 1; k < len(b); k *= 2 {
			copy(b[k:], b[:k])
		}
		live = append(live, h)
	}
	for _, h := range live {
		check(h)
		a.free(h.b)
	}
	if a.used != 0 {
		t.Errorf("%d bytes still in use after every block was freed", a.used)
	}
	if a.cur != nil {
		// The current region is released only when another takes its place.
		if a.cur.live != 0 {
			t.Errorf("current region has %d live bytes", a.cur.live)
		}
	}
	if got, most := len(a.regions), 2; got > most { // the current region and the spare
		t.Errorf("%d regions still mapped after every block was freed, want at most %d", got, most)
	}
	if len(a.big) != 0 {
		t.Errorf("%d large blocks still mapped", len(a.big))
	}
}

// TestArenaClasses: class rounds a size up to the next power of two.
func TestArenaClasses(t *testing.T) {
	for n, want := range map[int]int{1: 0, minBlock: 0, minBlock + 1: 1, 2 * minBlock: 1, 48 << 10: 4, 64 << 10: 4, maxBlock: numClasses - 1} {
		if got := class(n); got != want {
			t.Errorf("class(%d) = %d, want %d", n, got, want)
		}
	}
	if minBlock<<(numClasses-1) != maxBlock || chunkMin != minBlock || chunkMax != maxBlock {
		t.Error("the classes do not span the chunk sizes")
	}
	if unsafe.Sizeof(expiryPage{}) != 16<<10 || slotPageBytes-unsafe.Sizeof(slotPage{}) >= unsafe.Sizeof(slot{}) {
		t.Error("a page does not fill its block") // (that it fits is checked when compiling)
	}
}

// TestStoreMemoryReturned: the arena memory of a Store that is no longer
// reachable goes back to the arena.
func TestStoreMemoryReturned(t *testing.T) {
	used := func() int64 {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		return mem.used
	}
	// Stores that earlier tests left unreachable give their memory back
	// as the collector finds them: let that end first, or it would hide
	// part of what this store holds.
	settle := func() int64 {
		prev := int64(-1)
		for range 200 {
			runtime.GC()
			time.Sleep(5 * time.Millisecond)
			u := used()
			if u == prev {
				break
			}
			prev = u
		}
		return prev
	}
	before := settle()
	fill := func() {
		s := New(Options{SweepInterval: -1})
		ctx := context.Background()
		resp := make([]byte, 300)
		for i := range 20000 {
			k := fmt.Sprint("key-", i)
			if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(ctx, k, 1, idem.StateCompleted, resp); err != nil {
				t.Fatal(err)
			}
		}
		if got := used() - before; got < 20000*300 {
			t.Fatalf("the store holds %d bytes of the arena, want at least %d", got, 20000*300)
		}
	}
	fill()
	deadline := time.Now().Add(10 * time.Second)
	for used() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := used(); got > before {
		t.Fatalf("%d bytes of an unreachable store's memory are still in use", got-before)
	}
}

// TestNewPagesAreZero: slot and expiry pages and indexes are zeroed even when their block
// is reused dirty. A slot made but not yet written must read as free: add
// stores the slot's key before it writes the slot, and storing may compact
// the shard, which reads every slot made (a dirty one indexed chunks at
// random).
func TestNewPagesAreZero(t *testing.T) {
	for _, size := range []int{int(unsafe.Sizeof(slotPage{})), int(unsafe.Sizeof(expiryPage{})), minBlock} {
		b := mem.alloc(size)
		for i := range b {
			b[i] = 0x41
		}
		mem.free(b)
	}
	sp, hp, x := newSlotPage(), newExpiryPage(), newIndex(minBlock/8)
	defer mem.free(pageBlock(sp))
	defer mem.free(pageBlock(hp))
	defer mem.free(idxBlock(x))
	for name, b := range map[string][]byte{"slot": pageBlock(sp)[:unsafe.Sizeof(slotPage{})], "heap": pageBlock(hp), "index": idxBlock(x)} {
		if n := bytes.Count(b, []byte{0}); n != len(b) {
			t.Errorf("a new %s page has %d non-zero bytes", name, len(b)-n)
		}
	}
}

// TestChunksStayInTheArena: a value larger than the chunk a small shard
// would make gets a chunk that holds it, so storing it never moves the chunk
// onto the Go heap (its arena block would be lost for good), and the
// shard's accounting stays exact: once its records are gone, it holds no
// chunk bytes and the arena has its blocks back.
func TestChunksStayInTheArena(t *testing.T) {
	used := func() int64 {
		mem.mu.Lock()
		defer mem.mu.Unlock()
		return mem.used
	}
	s := New(Options{Shards: 1, SweepInterval: -1})
	sh := &s.shards[0]
	ctx := context.Background()
	var base int64
	for i := range 200 {
		k := fmt.Sprint("key-", i)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			base = used() - int64(minBlock) // the pages, not the key's chunk
		}
		if err := s.Finish(ctx, k, 1, idem.StateCompleted, bytes.Repeat([]byte{byte(i)}, 5<<10+i*300)); err != nil {
			t.Fatal(err)
		}
		sh.mu.Lock()
		for c, b := range sh.chunks {
			if b == nil {
				continue
			}
			mem.mu.Lock()
			owned := mem.regionOf(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) != nil || mem.big[uintptr(unsafe.Pointer(unsafe.SliceData(b)))]
			mem.mu.Unlock()
			if !owned {
				sh.mu.Unlock()
				t.Fatalf("record %d: chunk %d (%d bytes) left the arena", i, c, cap(b))
			}
		}
		_, h := s.shard(k)
		sh.remove(sh.find(k, h))
		sh.mu.Unlock()
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.chunkBytes < 0 || sh.dataBytes != 0 {
		t.Errorf("chunkBytes %d, dataBytes %d after every record is gone", sh.chunkBytes, sh.dataBytes)
	}
	if got := used() - base; got > int64(sh.chunkBytes) {
		t.Errorf("the arena lends %d bytes beyond the pages, the shard's chunks hold %d", got, sh.chunkBytes)
	}
}

// TestIndexInTheArena: a shard's index is an arena block at every size,
// from the first (one minBlock) through sizes past maxBlock (a mapping of
// its own), and every record is found through it after each growth; the
// blocks of the indexes it outgrew go back to the arena.
func TestIndexInTheArena(t *testing.T) {
	s := New(Options{Shards: 1, SweepInterval: -1})
	defer s.Close()
	sh := &s.shards[0]
	ctx := context.Background()
	const n = 50000 // an index of 65536 words: 512 KiB > maxBlock
	size := 0
	for i := range n {
		k := fmt.Sprint("key-", i)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		sh.mu.Lock()
		grew := len(sh.idx) != size
		size = len(sh.idx)
		p := uintptr(unsafe.Pointer(unsafe.SliceData(sh.idx)))
		sh.mu.Unlock()
		if !grew {
			continue
		}
		mem.mu.Lock()
		owned := mem.regionOf(p) != nil || mem.big[p]
		mem.mu.Unlock()
		if !owned {
			t.Fatalf("after %d records, the index (%d words) is not in the arena", i+1, size)
		}
		for j := 0; j <= i; j += 1 + j/64 {
			if _, ok, _ := s.Get(ctx, fmt.Sprint("key-", j)); !ok {
				t.Fatalf("after %d records and a growth to %d words, key-%d is lost", i+1, size, j)
			}
		}
	}
	if size*8 <= maxBlock {
		t.Fatalf("the index grew to %d words only", size)
	}
	for i := range n {
		if _, ok, _ := s.Get(ctx, fmt.Sprint("key-", i)); !ok {
			t.Fatalf("key-%d is lost", i)
		}
	}
}

// TestGrowingStoreTails: what a growing store holds beside its records'
// bytes stays small: each shard's current chunk, that appends go to, is at
// most a 32nd of the shard's live bytes (rounded up to its block class),
// a shard's last slot page at most 16 KiB and its last expiry queue page
// at most 4 KiB; memory that is backed and
// carved, but half empty on average, in each of the shards (32 by default).
func TestGrowingStoreTails(t *testing.T) {
	s := New(Options{SweepInterval: -1, Shards: 4})
	defer s.Close()
	ctx := context.Background()
	resp := make([]byte, 300)
	for i := range 8000 {
		k := fmt.Sprintf("i1p0:11:createOrderk36:%036d", i)
		tok := idem.Token(i + 1)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, k, tok, idem.StateCompleted, resp); err != nil {
			t.Fatal(err)
		}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		cur := cap(sh.chunks[sh.cur])
		most := minBlock << class(int(sh.dataBytes/32))
		page := unsafe.Sizeof(*sh.pages[0])
		qpage := unsafe.Sizeof(*sh.queue[0])
		sh.mu.Unlock()
		if cur > most {
			t.Errorf("shard %d: a current chunk of %d bytes for %d live bytes, want at most %d", i, cur, sh.dataBytes, most)
		}
		if page > 16<<10 {
			t.Errorf("slot pages of %d bytes", page)
		}
		if qpage > 4<<10 {
			t.Errorf("expiry queue pages of %d bytes", qpage)
		}
	}
}
