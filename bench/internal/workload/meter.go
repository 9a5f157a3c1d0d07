package workload

import (
	"syscall"
	"testing"
	"time"
)

// Meter adds two metrics to a benchmark, both of the whole process (every
// thread, the garbage collector's included) per operation: "cpu-ns/op", the
// CPU time, and "faults/op", the page faults (first touches of fresh
// memory, which the kernel must map; each costs microseconds). On a shared
// machine CPU time is steadier than ns/op, which also counts the time other
// processes held the cores. Pause and Resume go with b.StopTimer and
// b.StartTimer.
type Meter struct {
	b      *testing.B
	cpu    time.Duration
	faults int64
	since  usage
	paused bool
}

type usage struct {
	cpu    time.Duration
	faults int64
}

// StartMeter starts measuring (call it right before the loop).
func StartMeter(b *testing.B) *Meter {
	return &Meter{b: b, since: now()}
}

// Pause stops counting (with b.StopTimer).
func (m *Meter) Pause() {
	if !m.paused {
		u := now()
		m.cpu += u.cpu - m.since.cpu
		m.faults += u.faults - m.since.faults
		m.paused = true
	}
}

// Resume counts again (with b.StartTimer).
func (m *Meter) Resume() {
	if m.paused {
		m.since = now()
		m.paused = false
	}
}

// Stop reports the metrics (call it right after the loop).
func (m *Meter) Stop() {
	m.Pause()
	if m.b.N > 0 {
		m.b.ReportMetric(float64(m.cpu.Nanoseconds())/float64(m.b.N), "cpu-ns/op")
		m.b.ReportMetric(float64(m.faults)/float64(m.b.N), "faults/op")
	}
}

func now() usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return usage{}
	}
	return usage{time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt + ru.Majflt}
}
