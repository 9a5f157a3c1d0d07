// Package mono is the monotonic clock that runtime/idem's store call
// contexts read, shared with runtime/memstore so that a store call reads
// the clock once: memstore takes the reading its context made (Started)
// instead of reading the clock again.
package mono

import "time"

// Epoch anchors the readings: time.Since(Epoch) reads only the monotonic
// clock, at half the cost of time.Now.
var Epoch = time.Now()

// Started is implemented by the context runtime/idem hands to a store call
// (its first Begin and Finish): MonoStarted returns the monotonic reading,
// since Epoch, at which the call started (the caller's reading made just
// before the call, or the one the store's first Err, Deadline or Done
// made), and false when none was made yet. A store whose clock is the
// monotonic clock may take it as the call's now: it was read at the call's
// start, before any lock the store takes.
type Started interface {
	MonoStarted() (time.Duration, bool)
}
