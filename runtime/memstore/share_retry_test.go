package memstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/memstore"
)

// TestShareRetryAfterNextRoom: a refused principal's Retry-After is when
// the shard may next drop a record: here, when its oldest finished records
// reach MinRetention (50 min on), not when the principal's records expire
// (24 h on: before the fix the hint was the cap, an hour, and a claim 50
// min on was refused still, since nothing was evicted below full).
func TestShareRetryAfterNextRoom(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000})
	for i := range 200 {
		if err := claimAs(t, s, "p", fmt.Sprint("p-", i), 24*time.Hour, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		if err := claimAs(t, s, "", fmt.Sprint("anon-", i), 24*time.Hour, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(10 * time.Minute)
	var pf *memstore.PrincipalFullError
	err := claimAs(t, s, "p", "p-new", time.Hour, nil)
	if !errors.As(err, &pf) {
		t.Fatalf("not refused: %v", err)
	}
	if pf.RetryAfter() != 50*time.Minute {
		t.Errorf("Retry-After %v, want 50m (the oldest records reach MinRetention)", pf.RetryAfter())
	}
	c.Add(50 * time.Minute)
	if err := claimAs(t, s, "p", "p-new", time.Hour, nil); err != nil {
		t.Errorf("refused once records older than MinRetention may go: %v", err)
	}
}

// TestShareRetryAfterLowerBound: the hint is a lower bound. The soonest
// thing that may change is another caller's record expiring in 5 s; one
// record gone is not enough, and the retry then is refused with a new
// hint (the records reaching MinRetention, ~58 min), after which it is
// admitted. (Before the fix the hint came from the principal's soonest
// expiry, only ever lowered, so it went stale once that record was gone.)
func TestShareRetryAfterLowerBound(t *testing.T) {
	s, c := newClockStore(t, memstore.Options{Shards: 1, MaxEntries: 1000})
	if err := claimAs(t, s, "p", "p-first", time.Minute, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := claimAs(t, s, "p", fmt.Sprint("p-", i), time.Hour, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 400 {
		if err := claimAs(t, s, "", fmt.Sprint("anon-", i), time.Hour, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	c.Add(2 * time.Minute)
	if err := claimAs(t, s, "", "anon-short", 5*time.Second, []byte("ok")); err != nil { // also drops p-first (expired)
		t.Fatal(err)
	}
	var waited time.Duration
	var hints []time.Duration
	for range 3 {
		err := claimAs(t, s, "p", "p-new", time.Hour, nil)
		var pf *memstore.PrincipalFullError
		if err == nil {
			break
		}
		if !errors.As(err, &pf) {
			t.Fatal(err)
		}
		hints = append(hints, pf.RetryAfter())
		c.Add(pf.RetryAfter())
		waited += pf.RetryAfter()
	}
	t.Logf("hints %v", hints)
	if len(hints) == 0 || hints[0] != 5*time.Second {
		t.Errorf("hints %v, want 5s first (the soonest expiry)", hints)
	}
	if len(hints) > 2 || waited > 58*time.Minute+5*time.Second {
		t.Errorf("hints %v: not admitted by the time p's records reach MinRetention (58 min)", hints)
	}
}
