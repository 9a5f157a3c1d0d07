//go:build unix

package storebench

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time so far, user + system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
