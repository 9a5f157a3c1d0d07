//go:build !unix

package storebench

import "time"

// cpuTime is 0 where getrusage is missing: no cpu-ns/op metric.
func cpuTime() time.Duration { return 0 }
