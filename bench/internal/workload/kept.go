package workload

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Kept runs a first-request benchmark (run, over one implementation whose
// records are made for it alone) and reports the memory its records keep,
// per record (b.N records): "heap-B/rec", the growth of the live Go heap
// (after a collection, before and after run); "offheap-B/rec", the growth of
// what offHeap reports (the bytes an implementation keeps outside the Go
// heap, as memstore does in mapped memory; nil for none); "rss-B/rec", the
// growth of the process's resident memory, which counts both and the
// heap's headroom, and is the noisiest (pages the runtime kept from an
// earlier benchmark can absorb growth).
func Kept(b *testing.B, offHeap func() int64, run func()) {
	firstBodies() // made once per process: not a record's
	h0, o0, r0 := heapLive(), off(offHeap), rss()
	run()
	h1, o1, r1 := heapLive(), off(offHeap), rss()
	if b.N > 0 {
		n := float64(b.N)
		b.ReportMetric(float64(h1-h0)/n, "heap-B/rec")
		b.ReportMetric(float64(o1-o0)/n, "offheap-B/rec")
		if r0 >= 0 && r1 >= 0 {
			b.ReportMetric(float64(r1-r0)/n, "rss-B/rec")
		}
	}
}

func off(f func() int64) int64 {
	if f == nil {
		return 0
	}
	return f()
}

func heapLive() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// rss is the resident set size in bytes (/proc/self/statm), or -1.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
