package workload

import (
	"syscall"
	"testing"
	"time"
)

// Meter adds a "cpu-ns/op" metric to a benchmark: the CPU time of the whole
// process (every thread, the garbage collector's included) per operation.
// On a shared machine it is steadier than ns/op, which also counts the time
// other processes held the cores. Pause and Resume go with b.StopTimer and
// b.StartTimer.
type Meter struct {
	b      *testing.B
	cpu    time.Duration
	since  time.Duration
	paused bool
}

// StartMeter starts measuring (call it right before the loop).
func StartMeter(b *testing.B) *Meter {
	return &Meter{b: b, since: cpuTime()}
}

// Pause stops counting (with b.StopTimer).
func (m *Meter) Pause() {
	if !m.paused {
		m.cpu += cpuTime() - m.since
		m.paused = true
	}
}

// Resume counts again (with b.StartTimer).
func (m *Meter) Resume() {
	if m.paused {
		m.since = cpuTime()
		m.paused = false
	}
}

// Stop reports the metric (call it right after the loop).
func (m *Meter) Stop() {
	m.Pause()
	if m.b.N > 0 {
		m.b.ReportMetric(float64(m.cpu.Nanoseconds())/float64(m.b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
