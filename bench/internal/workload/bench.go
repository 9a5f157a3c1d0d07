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

// FirstBodies is how many distinct bodies Keyed cycles through: more than
// the engine's fingerprint cache has slots (cmd/report's tests check it),
// so that the cache (almost) never helps a first request.
const FirstBodies = 4096

// firstBodies are the bodies Keyed cycles through.
var firstBodies = sync.OnceValue(func() [][]byte { return Bodies(FirstBodies) })

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

// Rotation is how many distinct requests (keys and bodies) the rotating
// replay rows cycle through: more than any cache of the implementations
// measured holds, so that no replay finds its request cached from the
// previous lap (idemgen's fingerprint cache has 1024 slots per Engine, its
// table of recently finished keys 4096), as a retry that comes after
// thousands of other requests does not.
const Rotation = 8192

// rotation is the keys and bodies of the rotating replays, the same for
// every implementation.
var rotation = sync.OnceValues(func() ([]string, [][]byte) {
	return Keys(1<<29, Rotation), Bodies(Rotation)
})

// record makes the Rotation records of the rotating replays through set
// and do (before the benchmark's loop, which resets the timers).
func record(b *testing.B, set func(key string, body []byte), do func() int) {
	keys, bodies := rotation()
	for i := range keys {
		set(keys[i], bodies[i])
		if st := do(); st != http.StatusCreated {
			b.Fatalf("making record %d: status %d", i, st)
		}
	}
}

// rotate returns do, preceded by set of the next request of the rotation
// (from start on).
func rotate(start int, set func(key string, body []byte), do func() int) func() int {
	keys, bodies := rotation()
	i := start % Rotation
	return func() int {
		set(keys[i], bodies[i])
		if i++; i == Rotation {
			i = 0
		}
		return do()
	}
}

// Rotating is Serial over replays: it makes Rotation records through set
// and do, then replays them in rotation.
func Rotating(b *testing.B, set func(key string, body []byte), do func() int) {
	record(b, set, do)
	Serial(b, rotate(0, set, do))
}

// RotatingParallel is Parallel over replays: it makes Rotation records
// through a client of newClient, then each goroutine replays them in
// rotation with a client of its own, from a start of its own.
func RotatingParallel(b *testing.B, newClient func() (set func(key string, body []byte), do func() int)) {
	set, do := newClient()
	record(b, set, do)
	var g atomic.Uint32
	Parallel(b, func() func() int {
		set, do := newClient()
		return rotate(int(g.Add(1))*(Rotation/16), set, do)
	})
}
