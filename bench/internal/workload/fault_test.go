//go:build linux

package workload

import (
	"os"
	"syscall"
	"testing"
)

// BenchmarkPageFault measures what the first touch of fresh anonymous
// memory costs this process, as a record kept per request makes it pay: it
// maps 16 MiB, touches one byte of every 4 KiB page, unmaps; with 4 KiB
// pages (transparent huge pages refused) and with huge pages advised. It
// reports the process's CPU time and page faults per 4 KiB touched. Not
// part of scripts/bench: docs/benchmarks.md quotes one-off runs of it.
func BenchmarkPageFault(b *testing.B) {
	const size = 16 << 20
	page := os.Getpagesize()
	for _, c := range []struct {
		name   string
		advice int
	}{{"4KiB", syscall.MADV_NOHUGEPAGE}, {"hugepage-advised", syscall.MADV_HUGEPAGE}} {
		b.Run(c.name, func(b *testing.B) {
			var touched int64
			u0 := now()
			for b.Loop() {
				m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				if err != nil {
					b.Fatal(err)
				}
				_ = syscall.Madvise(m, c.advice) // advice only: a kernel without THP ignores it
				for i := 0; i < size; i += page {
					m[i] = 1
				}
				touched += size / 4096
				if err := syscall.Munmap(m); err != nil {
					b.Fatal(err)
				}
			}
			u1 := now()
			if touched > 0 {
				b.ReportMetric(float64((u1.cpu-u0.cpu).Nanoseconds())/float64(touched), "cpu-ns/4KiB")
				b.ReportMetric(float64(u1.faults-u0.faults)/float64(touched), "faults/4KiB")
			}
		})
	}
}
