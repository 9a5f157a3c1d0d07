package memstore

import (
	"cmp"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The arena holds what the shards keep per record (slot pages, expiry queue
// and expiry pages, indexes and the chunks of keys and responses) outside the
// Go heap, in regions mapped from the operating system.
//
// Why: a store grows by about half a kilobyte per record for as long as its
// window lasts. On the Go heap, each byte it keeps raises the garbage
// collector's heap goal by as much again (GOGC=100), so the process touches
// about two fresh bytes of memory per byte kept, and each fresh 4 KiB page
// is a page fault (14 µs each on the virtual machines of docs/benchmarks.md,
// more than the rest of a first request's bookkeeping). Mapped here, records
// leave the heap goal where the requests' own garbage puts it, and regions
// are advised to use transparent huge pages (Linux), so the store grows by
// one fault per 2 MiB (Linux 6.7 and later place a 4 MiB anonymous mapping
// on a 2 MiB boundary, so a region is two huge pages; on older kernels it
// is often one, and 4 KiB pages around it).
//
// Memory is backed before it is needed, a unit of 2 MiB (a huge page) at a
// time: once less than 1 MiB of what is backed is left to carve, a
// goroutine has the system back the next unit with memory
// (MADV_POPULATE_WRITE), the current region's second half, or the first
// half of the next region, which it maps, so that the page faults of a
// growing store (on these machines, one 2 MiB huge page cleared in about
// 5 ms, for about 4,000 records) happen beside the requests instead of
// inside one of them. The process's CPU time is the same; a request no
// longer waits for it. It keeps at most 3 MiB resident ahead of the store's
// growth, 2 MiB on average (a whole region ahead would be 4 MiB on average:
// every byte backed and never used costs as much as one a record takes),
// and only once a store has grown past 1 MiB. Where the system has no
// MADV_POPULATE_WRITE (darwin, the BSDs, Linux before 5.14), memory is
// backed by a write per page, which must never reach a block handed out:
// then, once the current region is half carved, the goroutine maps the
// next region and writes to each of its pages before the arena knows of it
// (a whole region ahead, 4 MiB). Where MADV_POPULATE_WRITE fails otherwise
// (ENOMEM, EINTR), a unit of the current region is left to the requests'
// page faults, while a next region being prepared (not yet known to the
// arena) is backed by writing to each page instead.
//
// What it costs: a block is reused as soon as it is freed, so nothing
// outside a shard's lock may hold a slice of it: a Record's Response is a
// copy. The Go runtime does not count this memory (GOMEMLIMIT,
// runtime/metrics); Options.MaxBytes bounds it.
//
// Blocks are powers of two from minBlock to maxBlock, carved from regions of
// regionSize and kept on a free list per size once freed; a region whose
// blocks are all free is unmapped (one is kept, empty, for the next
// allocation). A larger block has a mapping of its own, unmapped when freed.
// The arena is shared by every Store of the process: a small store costs no
// region of its own.
const (
	regionSize = 4 << 20
	minBlock   = 4 << 10
	maxBlock   = 256 << 10
	numClasses = 7 // minBlock << (numClasses-1) == maxBlock
	pageBytes  = 4 << 10
)

type arena struct {
	mu      sync.Mutex
	regions []*region                    // mapped, by base address
	big     map[uintptr]bool             // the large blocks mapped, by address
	cur     *region                      // the region blocks are carved from, or nil
	spare   *region                      // an empty region kept mapped, or nil
	blocks  [numClasses][]unsafe.Pointer // free blocks, by class
	mapped  int64                        // bytes mapped: regions and large blocks
	used    int64                        // bytes of the blocks handed out
	// preparing: a goroutine is populating the current region's next unit
	// (populateUnit) or mapping and populating the next region (prepare),
	// to become the spare one.
	preparing bool
	// noPopulateWrite: the system has no MADV_POPULATE_WRITE (it said so
	// once): the arena populates whole regions before it registers them.
	noPopulateWrite bool
}

type region struct {
	base   uintptr
	mem    []byte // the mapping, as sysMap returned it
	carved int    // bytes carved so far from the region's start
	live   int    // bytes of its blocks handed out
	// populated: the region's first populated bytes are backed by memory,
	// or being backed (populating), or, in the first unit of a region
	// that was not prepared, left to the requests' page faults; a multiple
	// of populateUnit. While populating, the region is not unmapped
	// (releaseLater: release it once done).
	populated    int
	populating   bool
	releaseLater bool
}

// The arena has memory backed ahead of its carving one populateUnit (a
// huge page) at a time, starting when less than populateAhead of what is
// backed is left to carve: the current region's next unit, else the first
// unit of the next region (prepare). It keeps at most populateUnit plus
// populateAhead backed ahead (3 MiB), not a whole region.
const (
	populateUnit  = regionSize / 2
	populateAhead = populateUnit / 2
)

// noPopulateWrite: tests set it to have sysPopulateWrite act as on a
// system without MADV_POPULATE_WRITE (darwin, the BSDs, Linux before 5.14).
var noPopulateWrite atomic.Bool

// The outcomes of sysPopulateWrite.
const (
	populated           = iota // the memory is backed
	populateFailed             // not backed (ENOMEM, EINTR): page faults back it
	populateUnsupported        // the system has no MADV_POPULATE_WRITE
)

// mem is the process's arena.
var mem = arena{big: map[uintptr]bool{}}

// class returns the size class of an n-byte block (n <= maxBlock).
func class(n int) int {
	if n <= minBlock {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(minBlock-1)
}

// alloc returns a block of at least n bytes (n > 0), len == cap == its size.
// Its contents are unspecified.
func (a *arena) alloc(n int) []byte {
	if n > maxBlock {
		size := (n + pageBytes - 1) &^ (pageBytes - 1)
		b, ok := sysMap(size)
		if !ok {
			return make([]byte, n) // no mapping: the Go heap takes it
		}
		a.mu.Lock()
		a.big[uintptr(unsafe.Pointer(unsafe.SliceData(b)))] = true
		a.mapped += int64(size)
		a.used += int64(size)
		a.mu.Unlock()
		return b
	}
	c := class(n)
	size := minBlock << c
	a.mu.Lock()
	defer a.mu.Unlock()
	var p unsafe.Pointer
	if l := a.blocks[c]; len(l) > 0 {
		p = l[len(l)-1]
		a.blocks[c] = l[:len(l)-1]
	} else {
		if a.cur == nil || regionSize-a.cur.carved < size {
			r := a.newRegion()
			if r == nil {
				return make([]byte, size) // no mapping: the Go heap takes it
			}
			if old := a.cur; old != nil {
				a.carveRest(old)
				a.cur = r
				if old.live == 0 {
					a.release(old)
				}
			}
			a.cur = r
		}
		p = unsafe.Pointer(&a.cur.mem[a.cur.carved])
		a.cur.carved += size
		if r := a.cur; !a.preparing && sysPopulates {
			switch {
			case a.noPopulateWrite:
				// A whole region, populated by writes before it is
				// registered.
				if r.carved >= regionSize/2 && a.spare == nil {
					a.preparing = true
					go a.prepare(regionSize, false)
				}
			case r.carved < r.populated-populateAhead:
			case r.populated < regionSize:
				// The region's next unit, in the background.
				a.preparing, r.populating = true, true
				go a.populateUnit(r, r.populated)
				r.populated += populateUnit
			case a.spare == nil:
				a.preparing = true
				go a.prepare(populateUnit, true)
			}
		}
	}
	a.regionOf(uintptr(p)).live += size
	a.used += int64(size)
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), size)
}

// free gives back a block that alloc returned (the whole of it: its cap is
// its size), or ignores a block of the Go heap.
func (a *arena) free(b []byte) {
	size := cap(b)
	if size == 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	a.mu.Lock()
	defer a.mu.Unlock()
	if size > maxBlock {
		if a.big[uintptr(p)] {
			delete(a.big, uintptr(p))
			sysUnmap(b[:size:size])
			a.mapped -= int64(size)
			a.used -= int64(size)
		}
		return
	}
	r := a.regionOf(uintptr(p))
	if r == nil {
		return // allocated from the Go heap
	}
	a.used -= int64(size)
	r.live -= size
	a.blocks[class(size)] = append(a.blocks[class(size)], p)
	if r.live == 0 && r != a.cur {
		a.release(r)
	}
}

// carveRest puts what is left of region r on the free lists (it is a
// multiple of minBlock: every block is).
func (a *arena) carveRest(r *region) {
	for rest := regionSize - r.carved; rest >= minBlock; rest = regionSize - r.carved {
		c := min(class(rest+1)-1, numClasses-1) // the largest class that fits
		a.blocks[c] = append(a.blocks[c], unsafe.Pointer(&r.mem[r.carved]))
		r.carved += minBlock << c
	}
}

// newRegion returns the spare region or maps one; nil when the system
// refuses.
func (a *arena) newRegion() *region {
	if r := a.spare; r != nil {
		a.spare = nil
		return r
	}
	m, ok := sysMap(regionSize)
	if !ok {
		return nil
	}
	sysHugePages(m)
	r := a.addRegion(m)
	r.populated = populateUnit // faulted by the requests that carve it
	return r
}

// addRegion registers m, a mapping of regionSize bytes, as a region.
func (a *arena) addRegion(m []byte) *region {
	r := &region{base: uintptr(unsafe.Pointer(unsafe.SliceData(m))), mem: m}
	i, _ := slices.BinarySearchFunc(a.regions, r.base, cmpBase)
	a.regions = slices.Insert(a.regions, i, r)
	a.mapped += regionSize
	return r
}

// prepare maps a region, has its first n bytes (a multiple of
// populateUnit) backed with memory, with MADV_POPULATE_WRITE if
// populateWrite, else (or if that fails) by a write per page, and makes it
// the spare region (that newRegion hands out next), unless one became
// spare meanwhile (a region freed): then it is unmapped again. The region
// is registered only once populated: nothing of it is handed out before.
func (a *arena) prepare(n int, populateWrite bool) {
	m, ok := sysMap(regionSize)
	res := populateUnsupported
	if ok {
		sysHugePages(m)
		if populateWrite {
			res = sysPopulateWrite(m[:n])
		}
		if res != populated {
			touch(m[:n])
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.preparing = false
	if populateWrite && res == populateUnsupported {
		a.noPopulateWrite = true
	}
	if !ok {
		return
	}
	if a.spare != nil {
		sysUnmap(m)
		return
	}
	a.spare = a.addRegion(m)
	a.spare.populated = n
}

// populateUnit has the system back the unit of region r at off with
// memory (r.populating, set by the caller with a.preparing), with
// MADV_POPULATE_WRITE only: r's blocks are in use, and a write could
// undo a request's. Where the system has no such call, the unit is left to
// page faults, and the arena prepares whole regions from then on.
func (a *arena) populateUnit(r *region, off int) {
	res := sysPopulateWrite(r.mem[off : off+populateUnit])
	a.mu.Lock()
	defer a.mu.Unlock()
	a.preparing, r.populating = false, false
	if res == populateUnsupported {
		a.noPopulateWrite = true
	}
	if r.releaseLater {
		r.releaseLater = false
		if r.live == 0 && r != a.cur {
			a.release(r)
		}
	}
}

func cmpBase(r *region, p uintptr) int { return cmp.Compare(r.base, p) }

// regionOf returns the region that holds address p, or nil.
func (a *arena) regionOf(p uintptr) *region {
	i, found := slices.BinarySearchFunc(a.regions, p, cmpBase)
	if !found {
		i-- // the last region that starts before p
	}
	if i >= 0 && p-a.regions[i].base < regionSize {
		return a.regions[i]
	}
	return nil
}

// release takes region r's blocks off the free lists; r becomes the spare
// region, or is unmapped.
func (a *arena) release(r *region) {
	if r.populating {
		r.releaseLater = true // populateUnit releases it
		return
	}
	for c := range a.blocks {
		l := a.blocks[c][:0]
		for _, p := range a.blocks[c] {
			if uintptr(p)-r.base >= regionSize { // not in r (no overflow at the top of the address space)
				l = append(l, p)
			}
		}
		a.blocks[c] = l
	}
	r.carved = 0
	if a.spare == nil {
		a.spare = r
		return
	}
	i, _ := slices.BinarySearchFunc(a.regions, r.base, cmpBase)
	a.regions = slices.Delete(a.regions, i, i+1)
	a.mapped -= regionSize
	sysUnmap(r.mem)
}

// Typed pages in arena blocks. Their types hold no pointers, so the garbage
// collector has nothing to look for in them.

const (
	slotPageBytes = 16 << 10
	// slotsPerPage: the slot table grows by pages of 16 KiB (slots are 80
	// bytes: TestSlotSize), never copied. Small pages: each shard's last
	// page is half empty on average, memory backed for nothing (32 shards
	// of 64 KiB pages kept 1 MiB so).
	slotsPerPage = slotPageBytes / 80
	// entriesPerExpiryPage: the expiry heap grows by pages of 16 KiB
	// (entries are 16 bytes), never copied (append's growth would allocate
	// five times what the heap holds); entriesPerQueuePage: the expiry
	// queue by pages of 4 KiB, of slot numbers (4 bytes: what every record
	// costs in the queue, beside its slot; small pages, as the slot
	// table's: each shard's last one is half empty on average).
	entriesPerExpiryPage = 1024
	entriesPerQueuePage  = 1024
)

type (
	slotPage   [slotsPerPage]slot
	expiryPage [entriesPerExpiryPage]expiryEntry
	queuePage  [entriesPerQueuePage]int32
)

// A page must fit its block (a negative array length does not compile).
var (
	_ [slotPageBytes - unsafe.Sizeof(slotPage{})]byte
	_ [16<<10 - unsafe.Sizeof(expiryPage{})]byte
	_ [4<<10 - unsafe.Sizeof(queuePage{})]byte
)

// newSlotPage and newExpiryPage return zeroed pages, as new would: a reused
// block holds what was there before, and a slot made but not yet written
// (add stores its key first, which may compact the shard) must read as
// free.
func newSlotPage() *slotPage {
	b := mem.alloc(int(unsafe.Sizeof(slotPage{})))
	clear(b)
	return (*slotPage)(unsafe.Pointer(unsafe.SliceData(b)))
}

func newExpiryPage() *expiryPage {
	b := mem.alloc(int(unsafe.Sizeof(expiryPage{})))
	clear(b)
	return (*expiryPage)(unsafe.Pointer(unsafe.SliceData(b)))
}

// newQueuePage returns a page of the expiry queue (its contents
// unspecified: the queue writes an entry before it reads it).
func newQueuePage() *queuePage {
	return (*queuePage)(unsafe.Pointer(unsafe.SliceData(mem.alloc(int(unsafe.Sizeof(queuePage{}))))))
}

// newIndex returns a zeroed index of n words (n*8 a power of two, at least
// minBlock).
func newIndex(n int) []uint64 {
	b := mem.alloc(n * 8)
	clear(b)
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// idxBlock returns the arena block that holds index x (nil for nil).
func idxBlock(x []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 8*len(x))
}

// pageBlock returns the arena block that holds page p of type T.
func pageBlock[T slotPage | expiryPage | queuePage](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), minBlock<<class(int(unsafe.Sizeof(*p))))
}
