// Package storetest is the conformance suite every idem.Store passes (like
// gocloud's drivertest or testing/slogtest). A store's package runs it with
// one line:
//
//	func TestConformance(t *testing.T) {
//		storetest.RunConformanceTests(t, func(t *testing.T) idem.Store { return newStoreForTest(t) })
//	}
//
// newStore is called once per subtest; the stores it returns may share a
// backend (subtests use distinct keys) and it should register its own cleanup
// with t.Cleanup. Optional abilities (idem.Watcher, idem.LeaseExtender,
// idem.Transactor) are tested when the store has them.
//
// Stores keep time on their own clock (Redis TIME, PostgreSQL now()), so the
// suite uses short real durations with generous slack instead of a fake
// clock: it asserts "expired" only after sleeping well past a deadline and
// "not expired" only with deadlines seconds away, so a loaded machine makes
// it slower, never wrong. The whole suite takes about a second.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

const (
	short = 60 * time.Millisecond // a lease or TTL that must run out
	slack = 150 * time.Millisecond
	long  = 30 * time.Second // a lease or TTL that must not run out during a test
)

// RunConformanceTests runs the conformance suite against stores from newStore.
func RunConformanceTests(t *testing.T, newStore func(t *testing.T) idem.Store) {
	t.Helper()
	run := func(name string, f func(t *testing.T, s idem.Store, key func(string) string)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			prefix := uniquePrefix()
			f(t, s, func(k string) string { return "i1p0:13:storetest" + prefix + "k" + fmt.Sprint(len(k)) + ":" + k })
		})
	}
	run("BeginAcquiresNewKey", testBeginNew)
	run("BeginReportsExisting", testBeginExisting)
	run("AtomicBeginUnderConcurrency", testConcurrentBegin)
	run("LeaseExpiryTakeover", testLeaseTakeover)
	run("Fencing", testFencing)
	run("FinishCompleted", testFinishCompleted)
	run("FinishFailedReplayable", testFinishFailedReplayable)
	run("ReclaimFailed", testReclaimFailed)
	run("ReclaimFailedSameFingerprint", testReclaimSameFingerprint)
	run("LeaseExpiryTakeoverSameFingerprint", testTakeoverSameFingerprint)
	run("ExpiryAfterTTL", testExpiry)
	run("FinishAfterExpiryIsFenced", testFinishAfterExpiry)
	run("FinishAfterLeaseExpiry", testFinishAfterLeaseExpiry)
	run("BeginTwiceSameToken", testBeginRerun)
	run("FinishTwiceSameTokenAndState", testFinishRerun)
	run("ScopeIsolation", testScopeIsolation)
	run("LargeResponse", testLargeResponse)
	run("EmptyResponseIsNotNil", testEmptyResponse)
	run("TokensBeyond2to53", testBigTokens)
	run("HugeDurations", testHugeDurations)
	run("FingerprintRoundTrip", testFingerprintRoundTrip)
	run("GetMissing", testGetMissing)
	run("ContextCancellation", testContextCancel)
	run("BadRequests", testBadRequests)
	run("Watcher", testWatcher)
	run("LeaseExtender", testLeaseExtender)
	run("HeartbeatPastExpiry", testHeartbeatPastExpiry)
	run("LocalReader", testLocalReader)
	run("FinishRacingHeartbeat", testFinishRacingHeartbeat)
	run("Transactor", testTransactor)
	run("PrincipalChangesNoDecision", testPrincipal)
}

var prefixSeq atomic.Uint64

func uniquePrefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%d", b, prefixSeq.Add(1))
}

func fp(b byte) idem.Fingerprint {
	var f idem.Fingerprint
	f[0] = 1
	for i := 1; i < len(f); i++ {
		f[i] = b ^ byte(i*7)
	}
	return f
}

func tok() idem.Token {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return idem.Token(binary.LittleEndian.Uint64(b[:]) | 1)
}

// callTimeout bounds every call of the suite to a store (testCtx,
// callCtx): a hung server, or a call that waits on a lock a failed subtest
// left held, fails the subtest instead of hanging the package until go
// test's timeout. It is generous: a loaded machine (2 cores, packages at
// once, -race) makes calls slower, not a minute long.
const callTimeout = time.Minute

// testCtx returns the context of t's calls to the store: done callTimeout
// from now, or when t ends. It registers a cleanup: a goroutine of the
// test takes a context made before it starts.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// callCtx returns the context of one call to the store, done callTimeout
// from now or when t ends, and its cancel, for a helper's defer.
func callCtx(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), callTimeout)
}

func begin(t *testing.T, s idem.Store, key string, f idem.Fingerprint, token idem.Token, lease, ttl time.Duration, same bool) idem.BeginResult {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: f, Token: token, Lease: lease, TTL: ttl, SameFingerprintToReclaim: same})
	if err != nil {
		t.Fatalf("Begin(%q): %v", key, err)
	}
	return res
}

func finish(t *testing.T, s idem.Store, key string, token idem.Token, st idem.State, resp []byte) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	if err := s.Finish(ctx, key, token, st, resp); err != nil {
		t.Fatalf("Finish(%q, %v): %v", key, st, err)
	}
}

func get(t *testing.T, s idem.Store, key string) (idem.Record, bool) {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	rec, ok, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return rec, ok
}

// acquired fails the test unless res is a successful claim that replaced a
// record of state prior (0: none) and reports no record.
func acquired(t *testing.T, what string, res idem.BeginResult, prior idem.State) {
	t.Helper()
	if !reflect.DeepEqual(res, idem.BeginResult{Acquired: true, Prior: prior}) {
		t.Fatalf("%s: %+v, want Acquired with Prior %v and no record", what, res, prior)
	}
}

func testBeginNew(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("new"), tok()
	before := time.Now()
	acquired(t, "first Begin", begin(t, s, k, fp(1), tk, long, 2*long, false), 0)
	rec, ok := get(t, s, k)
	if !ok {
		t.Fatal("Get after Begin: not found")
	}
	if rec.State != idem.StatePending || rec.Token != tk || rec.Fingerprint != fp(1) || rec.Response != nil {
		t.Fatalf("record after Begin = %+v, want PENDING with the token and fingerprint, nil response", rec)
	}
	// Store clocks may differ from ours by a little; allow a generous margin.
	if d := rec.LeaseExpiresAt.Sub(before); d < long-5*time.Second || d > long+5*time.Second {
		t.Errorf("LeaseExpiresAt is %v after Begin, want about %v", d, long)
	}
	if d := rec.ExpiresAt.Sub(before); d < 2*long-5*time.Second || d > 2*long+5*time.Second {
		t.Errorf("ExpiresAt is %v after Begin, want about %v", d, 2*long)
	}
	// Both deadlines come from one reading of the store's clock.
	if d := rec.ExpiresAt.Sub(rec.LeaseExpiresAt).Round(10 * time.Millisecond); d != long {
		t.Errorf("ExpiresAt - LeaseExpiresAt = %v, want TTL - lease = %v", d, long)
	}
}

func testBeginExisting(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("existing"), tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	res := begin(t, s, k, fp(2), tok(), long, long, false)
	if res.Acquired || res.Prior != 0 {
		t.Fatalf("second Begin on a live PENDING record: Acquired=%v Prior=%v, want false, 0", res.Acquired, res.Prior)
	}
	if res.Record.State != idem.StatePending || res.Record.Token != tk || res.Record.Fingerprint != fp(1) {
		t.Fatalf("second Begin reported %+v, want the first claim's PENDING record", res.Record)
	}
}

func testConcurrentBegin(t *testing.T, s idem.Store, key func(string) string) {
	const n = 64
	k := key("race")
	var won atomic.Int32
	var winner atomic.Uint64
	var wg sync.WaitGroup
	ctx := testCtx(t)
	start := make(chan struct{})
	errs := make(chan error, n)
	seen := make(chan idem.Token, n) // the tokens the losers were shown
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := tok()
			<-start
			res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Fingerprint: fp(byte(i)), Token: tk, Lease: long, TTL: long})
			if err != nil {
				errs <- err
				return
			}
			if res.Acquired {
				won.Add(1)
				winner.Store(uint64(tk))
			} else if res.Record.State != idem.StatePending {
				errs <- fmt.Errorf("loser saw state %v, want PENDING", res.Record.State)
			} else {
				seen <- res.Record.Token
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	close(seen)
	for err := range errs {
		t.Error(err)
	}
	if got := won.Load(); got != 1 {
		t.Fatalf("%d of %d concurrent Begins acquired the key, want exactly 1", got, n)
	}
	if rec, _ := get(t, s, k); rec.Token != idem.Token(winner.Load()) {
		t.Fatalf("record token %d, want the winner's %d", rec.Token, winner.Load())
	}
	for tk := range seen {
		if tk != idem.Token(winner.Load()) {
			t.Fatalf("a loser was shown token %d, want the winner's %d", tk, winner.Load())
		}
	}
}

func testLeaseTakeover(t *testing.T, s idem.Store, key func(string) string) {
	k, old := key("takeover"), tok()
	begin(t, s, k, fp(1), old, short, long, false)
	time.Sleep(short + slack)
	nw := tok()
	acquired(t, "Begin after the lease expired", begin(t, s, k, fp(2), nw, long, long, false), idem.StatePending)
	rec, _ := get(t, s, k)
	if rec.Token != nw || rec.Fingerprint != fp(2) || rec.State != idem.StatePending {
		t.Fatalf("record after takeover = %+v, want PENDING with the new token and fingerprint", rec)
	}
	// The new holder's lease is fresh: a third claim does not take it over.
	if res := begin(t, s, k, fp(3), tok(), long, long, false); res.Acquired {
		t.Fatal("a third Begin took over a fresh lease")
	}
}

func testFencing(t *testing.T, s idem.Store, key func(string) string) {
	k, old := key("fence"), tok()
	begin(t, s, k, fp(1), old, short, long, false)
	time.Sleep(short + slack)
	nw := tok()
	begin(t, s, k, fp(1), nw, long, long, false)
	err := s.Finish(testCtx(t), k, old, idem.StateCompleted, []byte("late"))
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("old holder's Finish = %v, want ErrFenced", err)
	}
	rec, _ := get(t, s, k)
	if rec.State != idem.StatePending || rec.Token != nw || rec.Response != nil {
		t.Fatalf("record after a fenced Finish = %+v, want the new holder's untouched PENDING", rec)
	}
	// A token that never held the key is fenced too, and so is a second
	// Finish asking for another response (a re-run of the same Finish is
	// not fenced: testFinishRerun).
	if err := s.Finish(testCtx(t), k, tok(), idem.StateCompleted, nil); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("stranger's Finish = %v, want ErrFenced", err)
	}
	finish(t, s, k, nw, idem.StateCompleted, []byte("ok"))
	if err := s.Finish(testCtx(t), k, nw, idem.StateCompleted, []byte("again")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("second Finish = %v, want ErrFenced", err)
	}
	if rec, _ := get(t, s, k); string(rec.Response) != "ok" {
		t.Fatalf("response after a second Finish = %q, want %q", rec.Response, "ok")
	}
	// Finish of a key that was never claimed, which it does not create.
	if err := s.Finish(testCtx(t), key("never"), nw, idem.StateCompleted, nil); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish of an unknown key = %v, want ErrFenced", err)
	}
	if rec, ok := get(t, s, key("never")); ok {
		t.Fatalf("a fenced Finish of an unknown key created %+v", rec)
	}
}

func testFinishCompleted(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("done"), tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	before, _ := get(t, s, k)
	// Another token is fenced, and changes nothing.
	if err := s.Finish(testCtx(t), k, tk+2, idem.StateCompleted, []byte("x")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish with another token = %v, want ErrFenced", err)
	}
	resp := []byte{0, 1, 2, 0xff, 'x'}
	finish(t, s, k, tk, idem.StateCompleted, resp)
	resp[0] = 9 // the store must not keep the caller's buffer
	rec, ok := get(t, s, k)
	if !ok || rec.State != idem.StateCompleted || !bytes.Equal(rec.Response, []byte{0, 1, 2, 0xff, 'x'}) {
		t.Fatalf("record = %+v (found %v), want COMPLETED with the response", rec, ok)
	}
	if rec.Token != tk || rec.Fingerprint != fp(1) {
		t.Errorf("Finish changed the token or fingerprint: %+v", rec)
	}
	if !rec.ExpiresAt.Equal(before.ExpiresAt) {
		t.Errorf("Finish changed ExpiresAt from %v to %v", before.ExpiresAt, rec.ExpiresAt)
	}
	res := begin(t, s, k, fp(2), tok(), long, long, true)
	if res.Acquired || res.Prior != 0 || !reflect.DeepEqual(res.Record, rec) {
		t.Fatalf("Begin on a COMPLETED record: %+v, want not acquired, the record Get returns (%+v)", res, rec)
	}
}

func testFinishFailedReplayable(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("failed-replay"), tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	finish(t, s, k, tk, idem.StateFailed, []byte("boom"))
	res := begin(t, s, k, fp(1), tok(), long, long, false)
	if res.Acquired || res.Record.State != idem.StateFailed || string(res.Record.Response) != "boom" {
		t.Fatalf("Begin on a FAILED record with a response: %+v, want it reported, not acquired", res)
	}
}

func testReclaimFailed(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("reclaim"), tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	finish(t, s, k, tk, idem.StateFailed, nil)
	rec, _ := get(t, s, k)
	if rec.State != idem.StateFailed || !rec.Reclaimable() {
		t.Fatalf("record after Finish(FAILED, nil) = %+v, want reclaimable FAILED", rec)
	}
	nw := tok()
	acquired(t, "Begin on a reclaimable record", begin(t, s, k, fp(2), nw, long, long, false), idem.StateFailed)
	rec, _ = get(t, s, k)
	if rec.State != idem.StatePending || rec.Token != nw || rec.Fingerprint != fp(2) {
		t.Fatalf("record after reclaim = %+v", rec)
	}
	if err := s.Finish(testCtx(t), k, tk, idem.StateCompleted, nil); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("first holder's Finish after reclaim = %v, want ErrFenced", err)
	}
}

// beginAs is begin for a claim by principal (idem.BeginRequest.Principal).
func beginAs(t *testing.T, s idem.Store, principal, key string, f idem.Fingerprint, token idem.Token) idem.BeginResult {
	t.Helper()
	ctx, cancel := callCtx(t)
	defer cancel()
	res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: f, Token: token, Lease: long, TTL: long, Principal: principal})
	if err != nil {
		t.Fatalf("Begin(%q) by %q: %v", key, principal, err)
	}
	return res
}

// testPrincipal: BeginRequest.Principal decides nothing about a key in a
// store with room (a store may only refuse a principal over its share of
// a store under pressure): a claim by one principal is reported to
// another's Begin, a re-run of the claim with another Principal is still
// acquired, and a reclaimable record is reclaimed by another principal (a
// shared key changes hands) and by no principal.
func testPrincipal(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("principal"), tok()
	acquired(t, "Begin by alice", beginAs(t, s, "alice", k, fp(1), tk), 0)
	acquired(t, "the same claim again, by no principal", beginAs(t, s, "", k, fp(1), tk), 0)
	if res := beginAs(t, s, "bob", k, fp(1), tok()); res.Acquired || res.Record.Token != tk {
		t.Fatalf("bob's Begin of alice's PENDING key: %+v, want alice's record", res)
	}
	finish(t, s, k, tk, idem.StateFailed, nil)
	nw := tok()
	acquired(t, "bob reclaims a FAILED key", beginAs(t, s, "bob", k, fp(2), nw), idem.StateFailed)
	finish(t, s, k, nw, idem.StateFailed, nil)
	nw2 := tok()
	acquired(t, "no principal reclaims it", beginAs(t, s, "", k, fp(3), nw2), idem.StateFailed)
	finish(t, s, k, nw2, idem.StateCompleted, []byte("done"))
	if rec, ok := get(t, s, k); !ok || rec.State != idem.StateCompleted || string(rec.Response) != "done" {
		t.Fatalf("record = %+v (found %v)", rec, ok)
	}
}

func testReclaimSameFingerprint(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("reclaim-same"), tok()
	begin(t, s, k, fp(1), tk, long, long, true)
	finish(t, s, k, tk, idem.StateFailed, nil)
	res := begin(t, s, k, fp(2), tok(), long, long, true)
	if res.Acquired || res.Record.State != idem.StateFailed || res.Record.Fingerprint != fp(1) || res.Record.Response != nil {
		t.Fatalf("Begin with another fingerprint and SameFingerprintToReclaim: %+v, want not acquired, the FAILED record without a response", res)
	}
	acquired(t, "Begin with the same fingerprint", begin(t, s, k, fp(1), tok(), long, long, true), idem.StateFailed)
}

// testTakeoverSameFingerprint: with SameFingerprintToReclaim, a PENDING
// record whose lease expired is taken over only by an equal fingerprint, as
// a reclaimable FAILED record is reclaimed; another fingerprint gets the
// record back, unclaimed and unchanged. Without the flag any fingerprint
// takes it over (testLeaseTakeover).
func testTakeoverSameFingerprint(t *testing.T, s idem.Store, key func(string) string) {
	k, old := key("takeover-fp"), tok()
	begin(t, s, k, fp(1), old, short, long, true)
	time.Sleep(short + slack)
	res := begin(t, s, k, fp(2), tok(), long, long, true)
	if res.Acquired || res.Record.State != idem.StatePending || res.Record.Token != old ||
		res.Record.Fingerprint != fp(1) || res.Record.Response != nil {
		t.Fatalf("Begin with another fingerprint and SameFingerprintToReclaim after the lease expired: %+v, want not acquired, the PENDING record of the first claim", res)
	}
	if rec, _ := get(t, s, k); rec.State != idem.StatePending || rec.Token != old || rec.Fingerprint != fp(1) {
		t.Fatalf("record after a refused takeover = %+v, want the first claim unchanged", rec)
	}
	nw := tok()
	acquired(t, "Begin with the same fingerprint after the lease expired", begin(t, s, k, fp(1), nw, long, long, true), idem.StatePending)
	if rec, _ := get(t, s, k); rec.State != idem.StatePending || rec.Token != nw || rec.Fingerprint != fp(1) {
		t.Fatalf("record after takeover = %+v, want PENDING with the new token", rec)
	}
	if err := s.Finish(testCtx(t), k, old, idem.StateCompleted, nil); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("first holder's Finish after the takeover = %v, want ErrFenced", err)
	}

	// Without the flag, another fingerprint takes it over.
	k2, old2 := key("takeover-fp-any"), tok()
	begin(t, s, k2, fp(1), old2, short, long, true)
	time.Sleep(short + slack)
	acquired(t, "Begin with another fingerprint, without SameFingerprintToReclaim", begin(t, s, k2, fp(2), tok(), long, long, false), idem.StatePending)

	// A live lease is reported to either, whatever the flag.
	k3, tk := key("takeover-fp-live"), tok()
	begin(t, s, k3, fp(1), tk, long, long, true)
	for _, f := range []idem.Fingerprint{fp(1), fp(2)} {
		if res := begin(t, s, k3, f, tok(), long, long, true); res.Acquired || res.Record.Token != tk {
			t.Fatalf("Begin on a live lease: %+v, want not acquired, the holder's record", res)
		}
	}
}

// finishWithinTTL claims a key named name with a TTL of expiryTTL and
// finishes it COMPLETED, and returns the key and the TTL it was claimed
// with. On a loaded machine the Finish may come after the TTL: the store
// fences it, rightly. Only then is it tried again, with another key and
// twice the TTL (a few times: with the same TTL at each try, a machine slow
// once stays slow); a Finish fenced before the TTL has passed since its
// Begin was sent fails the test, as does any other error.
func finishWithinTTL(t *testing.T, s idem.Store, key func(string) string, name string) (string, time.Duration) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		k, tk, ttl := key(name), tok(), expiryTTL<<attempt
		if attempt > 0 {
			k = key(fmt.Sprintf("%s-%d", name, attempt))
		}
		sent := time.Now()
		begin(t, s, k, fp(1), tk, short, ttl, false)
		ctx, cancel := callCtx(t)
		err := s.Finish(ctx, k, tk, idem.StateCompleted, []byte("x"))
		cancel()
		took := time.Since(sent)
		if err == nil {
			return k, ttl
		}
		if !errors.Is(err, idem.ErrFenced) || took < ttl || attempt >= slowRetries {
			t.Fatalf("Finish(%q) %v after its Begin was sent (TTL %v): %v", k, took, ttl, err)
		}
		t.Logf("Finish(%q) fenced %v after its Begin was sent, past the TTL %v (a loaded machine): again with twice the TTL", k, took, ttl)
	}
}

// slowRetries is how many times finishWithinTTL and claimToOutlive try
// again, each with twice the TTL, when a loaded machine let the TTL pass
// before their calls were done (16 times the first TTL at the last try).
const slowRetries = 4

// expiryTTL is the first TTL of a record that must expire during the test
// (finishWithinTTL).
const expiryTTL = 200 * time.Millisecond

func testExpiry(t *testing.T, s idem.Store, key func(string) string) {
	k, ttl := finishWithinTTL(t, s, key, "expire")
	time.Sleep(ttl + slack)
	if rec, ok := get(t, s, k); ok {
		t.Fatalf("Get after the TTL found %+v", rec)
	}
	acquired(t, "Begin after the TTL", begin(t, s, k, fp(2), tok(), long, long, true), 0)
}

func testFinishAfterExpiry(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("late"), tok()
	begin(t, s, k, fp(1), tk, short, short, false)
	time.Sleep(short + slack)
	if err := s.Finish(testCtx(t), k, tk, idem.StateCompleted, []byte("x")); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish after the record expired = %v, want ErrFenced", err)
	}
	if rec, ok := get(t, s, k); ok {
		t.Fatalf("an expired record came back after a fenced Finish: %+v", rec)
	}
	// An expired PENDING record counts as none: no takeover (Prior 0).
	acquired(t, "Begin on an expired PENDING record", begin(t, s, k, fp(2), tok(), long, long, false), 0)
}

// testFinishAfterLeaseExpiry: a holder whose lease ran out but whom nobody
// took over still finishes.
func testFinishAfterLeaseExpiry(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("slow"), tok()
	begin(t, s, k, fp(1), tk, short, long, false)
	time.Sleep(short + slack)
	finish(t, s, k, tk, idem.StateCompleted, []byte("ok"))
	if rec, _ := get(t, s, k); rec.State != idem.StateCompleted || string(rec.Response) != "ok" {
		t.Fatalf("record after a late Finish = %+v, want COMPLETED", rec)
	}
}

// testBeginRerun: a Begin run twice (a store client that sent it again
// after the connection dropped: go-redis does) finds its own claim. The
// second run reports it acquired, with Prior either the first run's or 0
// (a store that does not keep it), renews its lease to now + Lease, as a
// first claim would, and changes nothing else; the claim still holds. The
// "late" cases run it again after the lease the first run set ran out
// (the caller, answered only now, counts its lease from now on): still
// its own claim, not a takeover, and not one another token may take over
// at once.
func testBeginRerun(t *testing.T, s idem.Store, key func(string) string) {
	for _, c := range []struct {
		name  string
		prior idem.State
		late  bool
	}{
		{"new", 0, false}, {"reclaim", idem.StateFailed, false}, {"takeover", idem.StatePending, false},
		{"new late", 0, true}, {"reclaim late", idem.StateFailed, true}, {"takeover late", idem.StatePending, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := key("rerun-begin-" + c.name)
			switch c.prior {
			case idem.StateFailed:
				old := tok()
				begin(t, s, k, fp(9), old, long, long, false)
				finish(t, s, k, old, idem.StateFailed, nil)
			case idem.StatePending:
				begin(t, s, k, fp(9), tok(), short, long, false)
				time.Sleep(short + slack)
			}
			tk, lease := tok(), long
			if c.late {
				lease = short
			}
			acquired(t, "first run", begin(t, s, k, fp(1), tk, lease, long, false), c.prior)
			before, _ := get(t, s, k)
			if c.late {
				time.Sleep(short + slack)
			}
			res := begin(t, s, k, fp(1), tk, long, long, false)
			if !reflect.DeepEqual(res, idem.BeginResult{Acquired: true, Prior: c.prior}) && !reflect.DeepEqual(res, idem.BeginResult{Acquired: true}) {
				t.Fatalf("second run of the same Begin: %+v, want Acquired with Prior %v or 0 and no record", res, c.prior)
			}
			after, _ := get(t, s, k)
			if !after.LeaseExpiresAt.After(before.LeaseExpiresAt) && !after.LeaseExpiresAt.Equal(before.LeaseExpiresAt) {
				t.Fatalf("the second run moved the lease back: %v, was %v", after.LeaseExpiresAt, before.LeaseExpiresAt)
			}
			if c.late && time.Until(after.LeaseExpiresAt) < long/2 {
				// The store's clock may differ from the test's a little; half a long lease is far more than that.
				t.Fatalf("the second run, after the lease ran out, left it at %v (%v from now): not renewed to now + %v",
					after.LeaseExpiresAt, time.Until(after.LeaseExpiresAt), long)
			}
			after.LeaseExpiresAt = before.LeaseExpiresAt
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("the second run changed more than the lease: %+v, was %+v", after, before)
			}
			if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
				t.Fatal("another token took over the claim after its Begin ran twice")
			}
			finish(t, s, k, tk, idem.StateCompleted, []byte("ok"))
		})
	}
}

// testFinishRerun: a Finish run twice (its reply lost, the call sent again)
// finds the record it wrote: the second run succeeds and changes nothing. A
// Finish of the same token asking for another state or response is fenced.
func testFinishRerun(t *testing.T, s idem.Store, key func(string) string) {
	ctx := testCtx(t)
	for _, c := range []struct {
		name  string
		state idem.State
		resp  []byte
	}{
		{"completed", idem.StateCompleted, []byte{0, 'o', 'k', 0xff}},
		{"completed empty", idem.StateCompleted, []byte{}},
		{"completed nil", idem.StateCompleted, nil},
		{"failed", idem.StateFailed, nil},
		{"failed replayable", idem.StateFailed, []byte("boom")},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, tk := key("rerun-finish-"+c.name), tok()
			begin(t, s, k, fp(1), tk, long, long, false)
			finish(t, s, k, tk, c.state, c.resp)
			before, _ := get(t, s, k)
			if err := s.Finish(ctx, k, tk, c.state, bytes.Clone(c.resp)); err != nil {
				t.Fatalf("second run of the same Finish = %v, want nil", err)
			}
			other := idem.StateFailed
			if c.state == idem.StateFailed {
				other = idem.StateCompleted
			}
			empty := []byte{}
			if c.resp != nil {
				empty = nil
			}
			for _, o := range []struct {
				what  string
				tk    idem.Token
				state idem.State
				resp  []byte
			}{
				{"another state", tk, other, c.resp},
				{"another response", tk, c.state, append(bytes.Clone(c.resp), 'x')},
				{"nil for empty or empty for nil", tk, c.state, empty},
				{"another token", tk + 2, c.state, c.resp},
			} {
				if err := s.Finish(ctx, k, o.tk, o.state, o.resp); !errors.Is(err, idem.ErrFenced) {
					t.Errorf("Finish of the final record with %s = %v, want ErrFenced", o.what, err)
				}
			}
			if after, _ := get(t, s, k); !reflect.DeepEqual(after, before) {
				t.Fatalf("the record changed: %+v, was %+v", after, before)
			}
			if before.Reclaimable() {
				// Once another claim took the key, the first holder's
				// Finish is fenced, the same request included.
				acquired(t, "reclaim", begin(t, s, k, fp(1), tok(), long, long, false), idem.StateFailed)
				if err := s.Finish(ctx, k, tk, c.state, c.resp); !errors.Is(err, idem.ErrFenced) {
					t.Fatalf("the first holder's Finish after a reclaim = %v, want ErrFenced", err)
				}
			}
		})
	}
}

func testScopeIsolation(t *testing.T, s idem.Store, key func(string) string) {
	// The keys share one prefix and differ only in their ends (no length
	// prefix), so a store that escapes or normalizes keys lossily (Unicode
	// normalization, %-escaping of braces but not of '%') is caught.
	base := key("scope") + ":"
	keys := []string{"a", "A", "a ", " a", "ab", "a:b", "a:b:c", "a%3Ab", "é", "e\u0301", "😀", "ü/ключ/键", "a\tb", "a/b", "a\\b", `a"b`,
		"{a}", "%7Ba%7D", "{", "}", "%", "%25", "a*", "a?", "[a]", "a\u2028b", "ï¿½"}
	toks := make(map[string]idem.Token)
	for i, k := range keys {
		tk := tok()
		toks[k] = tk
		if res := begin(t, s, base+k, fp(byte(i)), tk, long, long, false); !res.Acquired {
			t.Fatalf("key %q: not acquired: it collides with another key (record %+v)", k, res.Record)
		}
	}
	for i, k := range keys {
		finish(t, s, base+k, toks[k], idem.StateCompleted, []byte(k))
		rec, ok := get(t, s, base+k)
		if !ok || string(rec.Response) != k || rec.Fingerprint != fp(byte(i)) {
			t.Fatalf("key %q: record %+v (found %v), want its own response", k, rec, ok)
		}
	}
}

func testLargeResponse(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("large"), tok()
	big := make([]byte, 1<<20+17)
	_, _ = rand.Read(big)
	begin(t, s, k, fp(1), tk, long, long, false)
	finish(t, s, k, tk, idem.StateCompleted, big)
	rec, _ := get(t, s, k)
	if !bytes.Equal(rec.Response, big) {
		t.Fatalf("1 MiB response came back with %d bytes, not equal", len(rec.Response))
	}
}

func testEmptyResponse(t *testing.T, s idem.Store, key func(string) string) {
	k, tk := key("empty"), tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	finish(t, s, k, tk, idem.StateFailed, []byte{})
	rec, _ := get(t, s, k)
	if rec.Response == nil || rec.Reclaimable() {
		t.Fatalf("FAILED with an empty, non-nil response came back as %+v: it must stay non-nil (replayable)", rec)
	}
	if len(rec.Response) != 0 {
		t.Fatalf("an empty response came back as %q", rec.Response)
	}
}

func testBigTokens(t *testing.T, s idem.Store, key func(string) string) {
	// 2^60+1 and 2^60 are the same float64: a store that keeps tokens as
	// doubles would confuse them.
	big := idem.Token(1<<60 + 1)
	near := idem.Token(1 << 60)
	k := key("bigtoken")
	begin(t, s, k, fp(1), big, long, long, false)
	if rec, _ := get(t, s, k); rec.Token != big {
		t.Fatalf("token %d came back as %d", big, rec.Token)
	}
	if err := s.Finish(testCtx(t), k, near, idem.StateCompleted, nil); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish with token %d on a claim of %d = %v, want ErrFenced", near, big, err)
	}
	max := idem.Token(1<<64 - 1)
	k2 := key("maxtoken")
	begin(t, s, k2, fp(1), max, long, long, false)
	if err := s.Finish(testCtx(t), k2, max-1, idem.StateCompleted, nil); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("Finish with token %d on a claim of %d = %v, want ErrFenced", max-1, max, err)
	}
	finish(t, s, k2, max, idem.StateCompleted, []byte("ok"))
	if rec, _ := get(t, s, k2); rec.Token != max {
		t.Fatalf("token %d came back as %d", max, rec.Token)
	}
	// The sign bit of a 64-bit integer column.
	sign := idem.Token(1 << 63)
	k3 := key("signtoken")
	begin(t, s, k3, fp(1), sign, long, long, false)
	if rec, _ := get(t, s, k3); rec.Token != sign {
		t.Fatalf("token %d came back as %d", sign, rec.Token)
	}
}

// testHugeDurations: a lease or TTL too long to add to a clock, up to
// math.MaxInt64 ("forever"), saturates: the claim is made, and its lease and
// the record last at least a century (memstore's clock ends in 2262), as
// does a lease extended by such a duration. (redisstore's millisecond
// conversion overflowed: a TTL of math.MaxInt64 was refused, and
// ExtendLease(math.MaxInt64) moved the lease into the past, so the key was
// taken over at once.)
func testHugeDurations(t *testing.T, s idem.Store, key func(string) string) {
	const (
		forever = time.Duration(math.MaxInt64)
		century = 100 * 365 * 24 * time.Hour
	)
	far := func(what string, at time.Time) {
		t.Helper()
		if d := time.Until(at); d < century {
			t.Errorf("%s is %v from now, want at least a century", what, d)
		}
	}
	for i, d := range []time.Duration{forever, forever - time.Millisecond/2, 2 * century} {
		k, tk := key(fmt.Sprint("huge", i)), tok()
		acquired(t, fmt.Sprintf("Begin with lease and TTL %v", d), begin(t, s, k, fp(1), tk, d, d, false), 0)
		rec, ok := get(t, s, k)
		if !ok || rec.State != idem.StatePending || rec.Token != tk {
			t.Fatalf("record after Begin with lease and TTL %v = %+v (found %v), want the PENDING claim", d, rec, ok)
		}
		far("LeaseExpiresAt", rec.LeaseExpiresAt)
		far("ExpiresAt", rec.ExpiresAt)
		if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
			t.Fatalf("a claim with lease %v was taken over", d)
		}
		if x, ok := s.(idem.LeaseExtender); ok {
			if err := x.ExtendLease(testCtx(t), k, tk, d); err != nil {
				t.Fatalf("ExtendLease(%v): %v", d, err)
			}
			rec, _ := get(t, s, k)
			far("LeaseExpiresAt after ExtendLease", rec.LeaseExpiresAt)
			if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
				t.Fatalf("a lease extended by %v was taken over", d)
			}
		}
		finish(t, s, k, tk, idem.StateCompleted, []byte("r"))
		rec, ok = get(t, s, k)
		if !ok || rec.State != idem.StateCompleted || string(rec.Response) != "r" {
			t.Fatalf("record after Finish = %+v (found %v), want COMPLETED", rec, ok)
		}
		far("ExpiresAt after Finish", rec.ExpiresAt)
	}
}

func testFingerprintRoundTrip(t *testing.T, s idem.Store, key func(string) string) {
	var f idem.Fingerprint
	for i := range f {
		f[i] = byte(255 - i*8)
	}
	f[5], f[6] = 0, 0
	k, tk := key("fp"), tok()
	begin(t, s, k, f, tk, long, long, false)
	if rec, _ := get(t, s, k); rec.Fingerprint != f {
		t.Fatalf("fingerprint %x came back as %x", f, rec.Fingerprint)
	}
}

func testGetMissing(t *testing.T, s idem.Store, key func(string) string) {
	rec, ok, err := s.Get(testCtx(t), key("missing"))
	if err != nil || ok {
		t.Fatalf("Get of a missing key = %+v, %v, %v; want not found, no error", rec, ok, err)
	}
}

func testContextCancel(t *testing.T, s idem.Store, key func(string) string) {
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	k := key("ctx")
	if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Fingerprint: fp(1), Token: tok(), Lease: long, TTL: long}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin with a cancelled context = %v, want context.Canceled", err)
	}
	if _, _, err := s.Get(ctx, k); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context = %v, want context.Canceled", err)
	}
	tk := tok()
	if res := begin(t, s, k, fp(1), tk, long, long, false); !res.Acquired || res.Prior != 0 {
		t.Fatalf("Begin after a cancelled Begin: %+v, want a fresh claim (the cancelled call changed nothing)", res)
	}
	if err := s.Finish(ctx, k, tk, idem.StateCompleted, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Finish with a cancelled context = %v, want context.Canceled", err)
	}
	if rec, _ := get(t, s, k); rec.State != idem.StatePending {
		t.Fatalf("a cancelled Finish changed the record: %+v", rec)
	}
}

// testBadRequests: requests the contract rules out are errors (not panics,
// not fences) and change nothing.
func testBadRequests(t *testing.T, s idem.Store, key func(string) string) {
	ctx := testCtx(t)
	k := key("bad")
	for _, c := range []struct {
		what string
		req  idem.BeginRequest
	}{
		{"a zero lease", idem.BeginRequest{Key: k, Fingerprint: fp(1), Token: tok(), Lease: 0, TTL: long}},
		{"a negative lease", idem.BeginRequest{Key: k, Fingerprint: fp(1), Token: tok(), Lease: -time.Second, TTL: long}},
		{"a zero TTL", idem.BeginRequest{Key: k, Fingerprint: fp(1), Token: tok(), Lease: long, TTL: 0}},
		{"a negative TTL", idem.BeginRequest{Key: k, Fingerprint: fp(1), Token: tok(), Lease: long, TTL: -time.Second}},
		{"an empty key", idem.BeginRequest{Key: "", Fingerprint: fp(1), Token: tok(), Lease: long, TTL: long}},
	} {
		if res, err := s.Begin(ctx, &c.req); err == nil || errors.Is(err, idem.ErrFenced) {
			t.Errorf("Begin with %s = %+v, %v; want an error other than ErrFenced", c.what, res, err)
		}
	}
	if rec, ok := get(t, s, k); ok {
		t.Fatalf("a refused Begin wrote %+v", rec)
	}
	tk := tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	for _, st := range []idem.State{idem.StatePending, 0, 9} {
		if err := s.Finish(ctx, k, tk, st, []byte("x")); err == nil || errors.Is(err, idem.ErrFenced) {
			t.Errorf("Finish with state %v = %v, want an error other than ErrFenced", st, err)
		}
	}
	if rec, _ := get(t, s, k); rec.State != idem.StatePending || rec.Token != tk || rec.Response != nil {
		t.Fatalf("a refused Finish changed the record: %+v", rec)
	}
}

func testWatcher(t *testing.T, s idem.Store, key func(string) string) {
	w, ok := s.(idem.Watcher)
	if !ok {
		t.Skip("the store does not implement idem.Watcher")
	}
	k, tk := key("watch"), tok()
	begin(t, s, k, fp(1), tk, long, long, false)
	ctx := testCtx(t)
	changed, stop := w.Watch(ctx, k)
	defer stop()
	select {
	case <-changed:
		t.Fatal("changed fired before any change")
	case <-time.After(20 * time.Millisecond):
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		_ = s.Finish(ctx, k, tk, idem.StateCompleted, []byte("x"))
	}()
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("changed did not fire after Finish")
	}
	// A second watcher of an idle key, stopped without a change, releases cleanly.
	_, stop2 := w.Watch(ctx, key("idle"))
	stop2()
	stop2()
}

func testLeaseExtender(t *testing.T, s idem.Store, key func(string) string) {
	x, ok := s.(idem.LeaseExtender)
	if !ok {
		t.Skip("the store does not implement idem.LeaseExtender")
	}
	k, tk := key("extend"), tok()
	begin(t, s, k, fp(1), tk, short, long, false)
	if err := x.ExtendLease(testCtx(t), k, tk, long); err != nil {
		t.Fatalf("ExtendLease by the holder: %v", err)
	}
	if rec, _ := get(t, s, k); time.Until(rec.LeaseExpiresAt) < long-5*time.Second || time.Until(rec.LeaseExpiresAt) > long+5*time.Second {
		t.Errorf("LeaseExpiresAt after ExtendLease(%v) is %v from now, want about %v", long, time.Until(rec.LeaseExpiresAt), long)
	}
	time.Sleep(short + slack)
	if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
		t.Fatal("an extended lease was taken over at its original expiry")
	}
	if err := x.ExtendLease(testCtx(t), k, tok(), long); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("ExtendLease by a stranger = %v, want ErrFenced", err)
	}
	before, _ := get(t, s, k)
	for _, d := range []time.Duration{0, -time.Second} {
		if err := x.ExtendLease(testCtx(t), k, tk, d); err == nil || errors.Is(err, idem.ErrFenced) {
			t.Errorf("ExtendLease(%v) = %v, want an error other than ErrFenced", d, err)
		}
	}
	if rec, _ := get(t, s, k); !rec.LeaseExpiresAt.Equal(before.LeaseExpiresAt) || rec.State != idem.StatePending {
		t.Fatalf("a refused ExtendLease changed the record: %+v, was %+v", rec, before)
	}
	finish(t, s, k, tk, idem.StateCompleted, nil)
	if err := x.ExtendLease(testCtx(t), k, tk, long); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("ExtendLease of a COMPLETED record = %v, want ErrFenced", err)
	}
	if err := x.ExtendLease(testCtx(t), key("nothing"), tk, long); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("ExtendLease of a missing record = %v, want ErrFenced", err)
	}
}

// The first TTL a record that outlives it is claimed with
// (HeartbeatPastExpiry, and Transactor's), and how much longer than that TTL
// each heartbeat's lease is: long enough that the record outlives any stall
// of the test between a heartbeat and the checks after the sleep past the
// TTL that follows it.
const (
	outliveTTL  = 300 * time.Millisecond
	outliveBeat = 10 * time.Second
)

// outliving is a claim made to outlive its TTL: the store as an
// idem.LeaseExtender, the key, its holder's token, the record as claimed,
// the TTL it was claimed with, and the lease of its heartbeats (beat,
// outliveBeat more than ttl).
type outliving struct {
	x         idem.LeaseExtender
	k         string
	tk        idem.Token
	claimed   idem.Record
	ttl, beat time.Duration
}

// claimToOutlive claims a key named name with a new token, a short lease and
// a TTL of outliveTTL, then runs first(o): the calls that must reach the
// store within the TTL (the first heartbeat among them), and the checks that
// hold only then. On a loaded machine (2 cores, packages at once, -race)
// they may answer only after it: the store fences the heartbeat, rightly.
// Only then, when first failed ttl-short or more after the claim was sent
// (a lease of short from then may end past the claim's expiry), is it tried
// again, with another key and twice the TTL, a few times; a failure sooner
// fails the test, as does the last try's. The test skips when s is not an
// idem.LeaseExtender. (With a fixed TTL of 300ms, BeginTx and the first
// heartbeat came after it under -race on a loaded machine.)
func claimToOutlive(t *testing.T, s idem.Store, key func(string) string, name string, first func(o *outliving) error) *outliving {
	t.Helper()
	x, ok := s.(idem.LeaseExtender)
	if !ok {
		t.Skip("the store does not implement idem.LeaseExtender")
	}
	for attempt := 0; ; attempt++ {
		o := &outliving{x: x, k: key(fmt.Sprint(name, "-", attempt)), tk: tok(), ttl: outliveTTL << attempt}
		o.beat = o.ttl + outliveBeat
		sent := time.Now()
		begin(t, s, o.k, fp(1), o.tk, short, o.ttl, false)
		o.claimed, _ = get(t, s, o.k)
		err := first(o)
		took := time.Since(sent)
		if err == nil {
			return o
		}
		if took < o.ttl-short || attempt >= slowRetries {
			t.Fatalf("%v after the claim of %q was sent (TTL %v): %v", took, o.k, o.ttl, err)
		}
		t.Logf("%v after the claim of %q was sent, past its TTL %v less a short lease (a loaded machine): %v; again with twice the TTL", took, o.k, o.ttl, err)
	}
}

// testHeartbeatPastExpiry: heartbeats keep a PENDING record alive past the
// TTL it was claimed with (a handler that runs past the window): ExtendLease
// moves ExpiresAt to the lease's end when that is later (ExpiresAt equals
// the new LeaseExpiresAt, past the claim's expiry), never earlier, so the
// record is still there, with the expiry the last heartbeat gave it, not
// claimable by another token, and its holder's Finish succeeds; Finish
// keeps the expiry the record has. The checks compare the store's own
// times, not this host's clock (the store's server may run on another).
func testHeartbeatPastExpiry(t *testing.T, s idem.Store, key func(string) string) {
	ctx := testCtx(t)
	heartbeat := func(o *outliving, i int) error {
		if err := o.x.ExtendLease(ctx, o.k, o.tk, o.beat); err != nil {
			return fmt.Errorf("heartbeat %d: %w", i, err)
		}
		return nil
	}
	o := claimToOutlive(t, s, key, "outlive", func(o *outliving) error {
		// A lease that ends before the record's expiry leaves the expiry alone.
		if err := o.x.ExtendLease(ctx, o.k, o.tk, short); err != nil {
			return fmt.Errorf("ExtendLease(%v): %w", short, err)
		}
		if rec, ok := get(t, s, o.k); !ok || !rec.ExpiresAt.Equal(o.claimed.ExpiresAt) {
			return fmt.Errorf("after ExtendLease(%v), record = %+v (found %v), want ExpiresAt unchanged, %v", short, rec, ok, o.claimed.ExpiresAt)
		}
		return heartbeat(o, 0)
	})
	k, tk, claimed := o.k, o.tk, o.claimed
	prev := claimed
	for i := range 2 {
		if i > 0 {
			if err := heartbeat(o, i); err != nil {
				t.Fatal(err)
			}
		}
		// The heartbeat's lease ends at least beat-ttl after the claim's
		// expiry (it started after the claim), so ExpiresAt moves there.
		beaten, ok := get(t, s, k)
		if !ok || !beaten.ExpiresAt.Equal(beaten.LeaseExpiresAt) || beaten.ExpiresAt.Sub(claimed.ExpiresAt) < o.beat-o.ttl {
			t.Fatalf("after heartbeat %d, record = %+v (found %v), want ExpiresAt = LeaseExpiresAt, at least %v past the claim's expiry %v",
				i, beaten, ok, o.beat-o.ttl, claimed.ExpiresAt)
		}
		if !beaten.ExpiresAt.After(prev.ExpiresAt) {
			t.Fatalf("heartbeat %d moved ExpiresAt from %v to %v, want later", i, prev.ExpiresAt, beaten.ExpiresAt)
		}
		prev = beaten
		time.Sleep(o.ttl + slack) // past the TTL of the claim, then past the first heartbeat's start
		rec, ok := get(t, s, k)
		if !ok || rec.State != idem.StatePending || rec.Token != tk {
			t.Fatalf("after heartbeat %d and %v, record = %+v (found %v), want the PENDING claim", i, o.ttl+slack, rec, ok)
		}
		if !rec.ExpiresAt.Equal(beaten.LeaseExpiresAt) {
			t.Fatalf("%v after heartbeat %d, ExpiresAt is %v, want the end of its lease, %v", o.ttl+slack, i, rec.ExpiresAt, beaten.LeaseExpiresAt)
		}
		if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
			t.Fatalf("after heartbeat %d, another token claimed the record past its TTL", i)
		}
	}
	pending, _ := get(t, s, k)
	finish(t, s, k, tk, idem.StateCompleted, []byte("late"))
	rec, ok := get(t, s, k)
	if !ok || rec.State != idem.StateCompleted || string(rec.Response) != "late" {
		t.Fatalf("record after Finish past the TTL = %+v (found %v), want COMPLETED", rec, ok)
	}
	if !rec.ExpiresAt.Equal(pending.ExpiresAt) {
		t.Errorf("Finish moved ExpiresAt from %v to %v", pending.ExpiresAt, rec.ExpiresAt)
	}
}

func testLocalReader(t *testing.T, s idem.Store, key func(string) string) {
	l, ok := s.(idem.LocalReader)
	if !ok {
		t.Skip("the store does not implement idem.LocalReader")
	}
	// What ReadLocal returns is what Get returns, at every step.
	same := func(what, k string, buf []byte) {
		t.Helper()
		want, wantOK := get(t, s, k)
		got, gotOK := l.ReadLocal(k, buf)
		if gotOK != wantOK || got.State != want.State || got.Fingerprint != want.Fingerprint || got.Token != want.Token ||
			!got.ExpiresAt.Equal(want.ExpiresAt) || !got.LeaseExpiresAt.Equal(want.LeaseExpiresAt) ||
			!bytes.Equal(got.Response, want.Response) || (got.Response == nil) != (want.Response == nil) {
			t.Fatalf("%s: ReadLocal = %+v, %v; Get = %+v, %v", what, got, gotOK, want, wantOK)
		}
	}
	k, tk := key("local"), tok()
	same("missing", k, nil)
	begin(t, s, k, fp(1), tk, long, long, false)
	same("pending", k, nil)
	finish(t, s, k, tk, idem.StateCompleted, []byte("the response"))
	same("completed", k, nil)
	same("completed, into a buffer", k, make([]byte, 3, 64))
	k2, tk2 := key("local-empty"), tok()
	begin(t, s, k2, fp(2), tk2, long, long, false)
	finish(t, s, k2, tk2, idem.StateCompleted, []byte{})
	same("an empty response", k2, make([]byte, 0, 8))
	if rec, _ := l.ReadLocal(k2, nil); rec.Response == nil {
		t.Fatal("ReadLocal returned a nil Response for an empty one")
	}
	k3, ttl := finishWithinTTL(t, s, key, "local-expire")
	time.Sleep(ttl + slack)
	if rec, ok := l.ReadLocal(k3, nil); ok {
		t.Fatalf("ReadLocal after the TTL found %+v", rec)
	}
}

// testFinishRacingHeartbeat: the engine stops the holder's heartbeat when
// the handler returns but does not wait for an ExtendLease under way, so
// the holder's Finish may meet its own heartbeat on the record. Finish must
// finish the record all the same (the client has its answer), whichever
// comes first; the heartbeat succeeds or, after Finish, is fenced. Each
// round runs the two calls in goroutines of their own, released together
// once both are running (start), so that either may reach the store first
// and they overlap there.
func testFinishRacingHeartbeat(t *testing.T, s idem.Store, key func(string) string) {
	x, ok := s.(idem.LeaseExtender)
	if !ok {
		t.Skip("the store does not implement idem.LeaseExtender")
	}
	ctx := testCtx(t)
	const rounds = 40
	for i := range rounds {
		k, tk := key(fmt.Sprint("race-", i)), tok()
		begin(t, s, k, fp(1), tk, long, long, false)
		resp := []byte(fmt.Sprint("resp-", i))
		var ready sync.WaitGroup
		ready.Add(2)
		start := make(chan struct{})
		finished, extended := make(chan error, 1), make(chan error, 1)
		go func() {
			ready.Done()
			<-start
			finished <- s.Finish(ctx, k, tk, idem.StateCompleted, resp)
		}()
		go func() {
			ready.Done()
			<-start
			extended <- x.ExtendLease(ctx, k, tk, long)
		}()
		ready.Wait()
		close(start)
		if err := <-finished; err != nil {
			t.Fatalf("round %d: Finish racing the holder's heartbeat = %v, want nil", i, err)
		}
		if err := <-extended; err != nil && !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("round %d: the heartbeat racing Finish = %v, want nil or ErrFenced", i, err)
		}
		if rec, _ := get(t, s, k); rec.State != idem.StateCompleted || !bytes.Equal(rec.Response, resp) || rec.Token != tk {
			t.Fatalf("round %d: record %+v, want COMPLETED with the response, token %d", i, rec, tk)
		}
	}
}

func testTransactor(t *testing.T, s idem.Store, key func(string) string) {
	x, ok := s.(idem.Transactor)
	if !ok {
		t.Skip("the store does not implement idem.Transactor")
	}
	ctx := testCtx(t)

	t.Run("Commit", func(t *testing.T) {
		k, tk := key("tx-commit"), tok()
		begin(t, s, k, fp(1), tk, long, long, false)
		txctx, commit, rollback, err := x.BeginTx(ctx, k, tk)
		if err != nil {
			t.Fatalf("BeginTx: %v", err)
		}
		if txctx == nil {
			t.Fatal("BeginTx returned a nil context")
		}
		if err := commit(idem.StateCompleted, []byte("tx")); err != nil {
			t.Fatalf("commit: %v", err)
		}
		rollback() // a no-op after commit
		if rec, _ := get(t, s, k); rec.State != idem.StateCompleted || string(rec.Response) != "tx" {
			t.Fatalf("record after commit = %+v", rec)
		}
	})
	t.Run("Rollback", func(t *testing.T) {
		k, tk := key("tx-rollback"), tok()
		begin(t, s, k, fp(1), tk, long, long, false)
		_, _, rollback, err := x.BeginTx(ctx, k, tk)
		if err != nil {
			t.Fatalf("BeginTx: %v", err)
		}
		rollback()
		if rec, _ := get(t, s, k); rec.State != idem.StatePending || rec.Token != tk {
			t.Fatalf("record after rollback = %+v, want the untouched PENDING", rec)
		}
		finish(t, s, k, tk, idem.StateFailed, nil)
	})
	t.Run("Fenced", func(t *testing.T) {
		k, old := key("tx-fenced"), tok()
		begin(t, s, k, fp(1), old, short, long, false)
		time.Sleep(short + slack)
		nw := tok()
		begin(t, s, k, fp(1), nw, long, long, false)
		_, commit, rollback, err := x.BeginTx(ctx, k, old)
		if err == nil {
			err = commit(idem.StateCompleted, []byte("late"))
			rollback()
		}
		if !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("BeginTx/commit by a fenced holder = %v, want ErrFenced", err)
		}
		if rec, _ := get(t, s, k); rec.State != idem.StatePending || rec.Token != nw {
			t.Fatalf("record after a fenced commit = %+v, want the new holder's PENDING", rec)
		}
	})
	// A holder that heartbeats in its transaction past the TTL it claimed
	// with keeps its record, as outside a transaction (HeartbeatPastExpiry):
	// its heartbeats succeed, another token cannot claim the key, and its
	// commit stores the record, which lives on at least to the end of the
	// last heartbeat's lease.
	t.Run("HeartbeatPastExpiry", func(t *testing.T) {
		var (
			commit   func(idem.State, []byte) error
			rollback func()
		)
		o := claimToOutlive(t, s, key, "tx-outlive", func(o *outliving) error {
			_, c, r, err := x.BeginTx(ctx, o.k, o.tk)
			if err != nil {
				return fmt.Errorf("BeginTx: %w", err)
			}
			if err := o.x.ExtendLease(ctx, o.k, o.tk, o.beat); err != nil {
				r()
				return fmt.Errorf("heartbeat 0 in the transaction: %w", err)
			}
			commit, rollback = c, r
			return nil
		})
		defer rollback()
		e, k, tk, claimed := o.x, o.k, o.tk, o.claimed
		for i := range 2 {
			if i > 0 {
				if err := e.ExtendLease(ctx, k, tk, o.beat); err != nil {
					t.Fatalf("heartbeat %d in the transaction: %v", i, err)
				}
			}
			time.Sleep(o.ttl + slack) // past the TTL of the claim, then past the first heartbeat's start
			if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
				t.Fatalf("after heartbeat %d, another token claimed the record past its TTL", i)
			}
		}
		if err := e.ExtendLease(ctx, k, tk, o.beat); err != nil {
			t.Fatalf("last heartbeat in the transaction: %v", err)
		}
		if err := commit(idem.StateCompleted, []byte("late")); err != nil {
			t.Fatalf("commit past the TTL after heartbeats: %v", err)
		}
		rec, ok := get(t, s, k)
		if !ok || rec.State != idem.StateCompleted || string(rec.Response) != "late" || rec.Token != tk {
			t.Fatalf("record after the commit past the TTL = %+v (found %v), want COMPLETED", rec, ok)
		}
		// The last heartbeat came at least two sleeps after the claim, so
		// its lease ends at least this long after the claim's expiry (the
		// store's times, not this host's clock).
		if want := 2*(o.ttl+slack) + o.beat - o.ttl; rec.ExpiresAt.Sub(claimed.ExpiresAt) < want {
			t.Fatalf("record after the commit expires at %v, %v after the claim's expiry %v, want at least %v (the end of the last heartbeat's lease)",
				rec.ExpiresAt, rec.ExpiresAt.Sub(claimed.ExpiresAt), claimed.ExpiresAt, want)
		}
		if res := begin(t, s, k, fp(1), tok(), long, long, false); res.Acquired {
			t.Fatal("after the commit, another token claimed the record")
		}
	})
}
