package idem

import (
	"testing"
	"time"
)

// Hooks for the tests of package idem_test.

// OnFingerprint has f called for every fingerprint e computes (not for
// one its cache answers), until t ends. It replaces the f of an earlier
// call that t's test has not ended.
func OnFingerprint(t testing.TB, e *Engine, f func()) {
	h := func(c *fpCache) {
		if c == e.fpc {
			f()
		}
	}
	sumHook.Store(&h)
	t.Cleanup(func() { sumHook.CompareAndSwap(&h, nil) })
}

// FlushFingerprints empties e's fingerprint cache, as 1024 other requests
// would. Call it while e serves no request.
func FlushFingerprints(e *Engine) {
	for i := range e.fpc.slots {
		s := &e.fpc.slots[i]
		s.seq.Store(0)
		for j := range s.w {
			s.w[j].Store(0)
		}
	}
}

// RecordTag returns the domain of the tag of an encoded response (false:
// untagged), and e's domain.
func RecordTag(e *Engine, resp []byte) (domain, own uint64, tagged bool) {
	t, _, ok := cutRecordTag(resp)
	return t.domain, e.fpc.domain, ok
}

// UseLateBytes counts n bytes of responses as kept by Finish calls retried
// in the background (as if other retries held them).
func UseLateBytes(e *Engine, n int64) {
	e.lateMu.Lock()
	e.lateBytes += n
	e.lateMu.Unlock()
}

// SetLateBackoff sets the first backoff of the Finish calls e retries in
// the background, and its cap (before e serves a request).
func SetLateBackoff(e *Engine, first, max time.Duration) { e.lateFirst, e.lateMax = first, max }

// SetReleaseDropLogEvery sets how often at most e logs the claim releases
// it did not try (their budget full).
func SetReleaseDropLogEvery(e *Engine, d time.Duration) {
	e.lateMu.Lock()
	e.relDrop.every = d
	e.lateMu.Unlock()
}
