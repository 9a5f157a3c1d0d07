package workload

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// The benchmark loops shared by the comparisons: each iteration serves one
// request and fails the benchmark unless it answers 201; each reports
// allocations, the 1 KB payload as bytes/op and cpu-ns/op (Meter).

// Serial runs do in a b.Loop.
func Serial(b *testing.B, do func() int) {
	b.ReportAllocs()
	b.SetBytes(PayloadSize)
	m := StartMeter(b)
	for b.Loop() {
		if st := do(); st != http.StatusCreated {
			b.Fatalf("status %d", st)
		}
	}
	m.Stop()
}

// rounds numbers the sets of keys Keyed makes, so that a key is never used
// twice in a process: with -count, a benchmark function runs again over the
// state its parent made (a store, say), and must not replay the first run.
var rounds atomic.Uint32

// firstBodies are the bodies Keyed cycles through: 4 times as many as the
// engine's fingerprint cache has slots, so that it (almost) never helps.
var firstBodies = sync.OnceValue(func() [][]byte { return Bodies(4096) })

// Keyed is Serial with a new key and another body every iteration, given
// to set before do; fresh sets of keys are made with the timers stopped.
func Keyed(b *testing.B, set func(key string, body []byte), do func() int) {
	const perRound = 1 << 14
	bodies := firstBodies()
	b.ReportAllocs()
	b.SetBytes(PayloadSize)
	var keys []string
	i := 0
	m := StartMeter(b)
	for b.Loop() {
		if i == len(keys) {
			b.StopTimer()
			m.Pause()
			keys, i = Keys(int(rounds.Add(1)), perRound), 0
			m.Resume()
			b.StartTimer()
		}
		set(keys[i], bodies[i%len(bodies)])
		i++
		if st := do(); st != http.StatusCreated {
			b.Fatalf("status %d", st)
		}
	}
	m.Stop()
}

// Parallel runs newDo()'s function from GOMAXPROCS goroutines.
func Parallel(b *testing.B, newDo func() func() int) {
	b.ReportAllocs()
	b.SetBytes(PayloadSize)
	b.ResetTimer()
	m := StartMeter(b)
	b.RunParallel(func(pb *testing.PB) {
		do := newDo()
		for pb.Next() {
			if st := do(); st != http.StatusCreated {
				b.Errorf("status %d", st)
				return
			}
		}
	})
	m.Stop()
}
