// Package rollouttest runs, over one store, the retries of a rolling
// deploy that changes an operation's fingerprint settings: two Engines in
// one process share the store, one with the old settings, one with the new
// ones and the old listed in idem.Spec.CompatibleFingerprints (or, for a rollback, the
// reverse), and a retry with the same key reaches the other one. The
// stores' test packages run it (memstore, redisstore, pgstore).
package rollouttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Run runs the scenarios; newStore is called once per subtest, and its
// store is shared by the subtest's two Engines.
func Run(t *testing.T, newStore func(t *testing.T) idem.Store) {
	t.Helper()
	run := func(name string, f func(t *testing.T, s idem.Store)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, newStore(t))
		})
	}
	run("ReplayAcrossVolatileChange", testReplay)
	run("ReplayAcrossRollback", testRollback)
	run("NoMatchingSetting", testNoMatch)
	run("NewRecordRetriedOnOldRelease", testBothDirections)
	run("FingerprintHeadersChange", testHeaders)
	run("InFlight", testInFlight)
	run("ExpiredLeaseTakenOver", testTakeover)
	run("FailedReclaim", testReclaim)
	run("LooseReplayIsNoMismatch", testLoose)
}

// The bodies: "a" is volatile before and after, "b" after only.
const (
	body      = `{"a":"t-1","b":"nonce-1","amount":100}`
	otherBody = `{"a":"t-1","b":"nonce-1","amount":999}`
	otherB    = `{"a":"t-1","b":"nonce-2","amount":100}`
)

var (
	v1 = idem.FingerprintSpec{Volatile: []string{"/a"}}
	v2 = idem.FingerprintSpec{Volatile: []string{"/a", "/b"}}
)

// spec is the operation under fs, with the settings it had before.
func spec(sem idem.Semantics, fs idem.FingerprintSpec, compat ...idem.FingerprintSpec) idem.Spec {
	return idem.Spec{
		Operation: "createPayment", Method: "POST", Path: "/payments", Semantics: sem,
		Volatile: fs.Volatile, Unordered: fs.Unordered, FingerprintHeaders: fs.FingerprintHeaders,
		CompatibleFingerprints: compat,
	}
}

// instance is one deploy's Engine and handler.
type instance struct {
	t     *testing.T
	name  string
	h     http.Handler
	calls atomic.Int32
	obs   *observer
}

type observer struct{ mismatches atomic.Int32 }

func (o *observer) Observe(_ context.Context, e idem.Event) {
	if e.Kind == idem.EventLooseMismatch {
		o.mismatches.Add(1)
	}
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// newInstance serves sp over s with an Engine of its own; run, when not
// nil, is the handler (else one that answers 201 with the instance's name
// and its count of calls). A nil opts.Principal means idem.Anonymous: the
// rollouts' callers are one principal.
func newInstance(t *testing.T, s idem.Store, name string, sp idem.Spec, opts idem.Options, run http.HandlerFunc) *instance {
	t.Helper()
	if opts.Principal == nil {
		opts.Principal = idem.Anonymous
	}
	p, err := idem.Compile(sp)
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, name: name, obs: &observer{}}
	opts.Logger, opts.Observer = discard, in.obs
	eng := idem.New(s, opts)
	if run == nil {
		run = func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			n := in.calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprintf(w, `{"by":%q,"call":%d}`, name, n)
		}
	} else {
		inner := run
		run = func(w http.ResponseWriter, r *http.Request) { in.calls.Add(1); inner(w, r) }
	}
	in.h = eng.Handler(p, run)
	return in
}

// send sends a request with key, body and the headers given as name,
// value pairs.
func (in *instance) send(key, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	in.h.ServeHTTP(w, r)
	return w
}

// executed: in ran the request (201, not a replay) as its call n.
func (in *instance) executed(w *httptest.ResponseRecorder, n int32) {
	in.t.Helper()
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
		in.t.Fatalf("%s: want the request executed, got %d (replayed %q): %s", in.name, w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	if got := in.calls.Load(); got != n {
		in.t.Fatalf("%s: handler ran %d times, want %d", in.name, got, n)
	}
}

// replayed: in replayed the response of by's call n, without running.
func (in *instance) replayed(w *httptest.ResponseRecorder, by *instance, n int32) {
	in.t.Helper()
	if w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		in.t.Fatalf("%s: want a replay, got %d (replayed %q): %s", in.name, w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	if want := fmt.Sprintf(`{"by":%q,"call":%d}`, by.name, n); w.Body.String() != want {
		in.t.Fatalf("%s: replayed %s, want %s", in.name, w.Body, want)
	}
}

// refused: in answered the problem status and code.
func (in *instance) refused(w *httptest.ResponseRecorder, status int, code string) {
	in.t.Helper()
	var p struct{ Code string }
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	if w.Code != status || p.Code != code {
		in.t.Fatalf("%s: want %d %s, got %d: %s", in.name, status, code, w.Code, w.Body)
	}
}

// A v1 record (Volatile /a) is replayed by a v2 instance (Volatile /a,/b,
// CompatibleFingerprints v1) to the identical retry, twice (the second may read first);
// another amount is another request, and so is another "b": the record
// was made under v1, where "b" counts.
func testReplay(t *testing.T, s idem.Store) {
	old := newInstance(t, s, "v1", spec(idem.Strict, v1), idem.Options{}, nil)
	cur := newInstance(t, s, "v2", spec(idem.Strict, v2, v1), idem.Options{}, nil)
	old.executed(old.send("k1", body), 1)
	cur.replayed(cur.send("k1", body), old, 1)
	cur.replayed(cur.send("k1", body), old, 1)
	cur.refused(cur.send("k1", otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	cur.refused(cur.send("k1", otherB), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	// v2's own records are compared as before.
	cur.executed(cur.send("k2", body), 1)
	cur.replayed(cur.send("k2", otherB), cur, 1)
	cur.refused(cur.send("k2", otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	if n := cur.calls.Load(); n != 1 {
		t.Fatalf("v2 ran %d times", n)
	}
}

// A rollback: a v2 record is replayed by an instance back at v1 that lists
// v2 as its compatible setting.
func testRollback(t *testing.T, s idem.Store) {
	cur := newInstance(t, s, "v2", spec(idem.Strict, v2, v1), idem.Options{}, nil)
	back := newInstance(t, s, "v1-again", spec(idem.Strict, v1, v2), idem.Options{}, nil)
	cur.executed(cur.send("k1", body), 1)
	back.replayed(back.send("k1", body), cur, 1)
	back.refused(back.send("k1", otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	// Under v2 "b" is volatile: a v2 record replays to another "b", at
	// v1 too (its v2 fingerprint is the record's).
	back.replayed(back.send("k1", otherB), cur, 1)
	if n := back.calls.Load(); n != 0 {
		t.Fatalf("v1-again ran %d times", n)
	}
}

// A rolling deploy runs both releases at once, in both directions: a
// record a v2 instance made (v1 listed) is retried on a v1 instance. A v1
// that lists nothing refuses the identical retry (why the two-release
// procedure: release N keeps v1 and lists v2, release N+1 switches to v2
// and lists v1); a v1 that lists v2 replays it. The same holds when v2 is
// loose: its records carry v2's fingerprint, which a strict v1 compares.
func testBothDirections(t *testing.T, s idem.Store) {
	for name, sem := range map[string]idem.Semantics{"strict": idem.Strict, "loose": idem.Loose} {
		cur := newInstance(t, s, "v2-"+name, spec(sem, v2, v1), idem.Options{}, nil)
		plain := newInstance(t, s, "v1-plain", spec(idem.Strict, v1), idem.Options{}, nil)
		ready := newInstance(t, s, "v1-listing-v2", spec(idem.Strict, v1, v2), idem.Options{}, nil)
		k := "k-" + name
		cur.executed(cur.send(k, body), 1)
		plain.refused(plain.send(k, body), http.StatusUnprocessableEntity, idem.CodeKeyReused)
		ready.replayed(ready.send(k, body), cur, 1)
		ready.refused(ready.send(k, otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
		if n := plain.calls.Load() + ready.calls.Load(); n != 0 {
			t.Fatalf("%s: v1 ran %d times", name, n)
		}
	}
}

// A request that matches none of the settings is another request: an
// instance that lists a setting other than the record's refuses the
// identical retry, as one that lists none does.
func testNoMatch(t *testing.T, s idem.Store) {
	old := newInstance(t, s, "v1", spec(idem.Strict, v1), idem.Options{}, nil)
	none := newInstance(t, s, "v2-without-compatible", spec(idem.Strict, v2), idem.Options{}, nil)
	other := newInstance(t, s, "v2-other-compatible", spec(idem.Strict, v2, idem.FingerprintSpec{}, idem.FingerprintSpec{Volatile: []string{"/b"}}), idem.Options{}, nil)
	old.executed(old.send("k1", body), 1)
	none.refused(none.send("k1", body), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	other.refused(other.send("k1", body), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	if n := none.calls.Load() + other.calls.Load(); n != 0 {
		t.Fatalf("ran %d times", n)
	}
}

// FingerprintHeaders changed (X-Tenant to X-Region): the request's
// fingerprint under the compatible setting reads a header the current one
// does not list.
func testHeaders(t *testing.T, s idem.Store) {
	h1 := idem.FingerprintSpec{Volatile: []string{"/a"}, FingerprintHeaders: []string{"X-Tenant"}}
	h2 := idem.FingerprintSpec{Volatile: []string{"/a"}, FingerprintHeaders: []string{"x-region"}}
	old := newInstance(t, s, "h1", spec(idem.Strict, h1), idem.Options{}, nil)
	cur := newInstance(t, s, "h2", spec(idem.Strict, h2, h1), idem.Options{}, nil)
	old.executed(old.send("k1", body, "X-Tenant", "t1", "X-Region", "eu"), 1)
	cur.replayed(cur.send("k1", body, "X-Tenant", "t1", "X-Region", "eu"), old, 1)
	cur.replayed(cur.send("k1", body, "X-Tenant", "t1", "X-Region", "us"), old, 1) // h1 does not read X-Region
	cur.refused(cur.send("k1", body, "X-Tenant", "t2", "X-Region", "eu"), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	cur.refused(cur.send("k1", otherBody, "X-Tenant", "t1", "X-Region", "eu"), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	// And back: an h1 instance listing h2 replays an h2 record.
	back := newInstance(t, s, "h1-again", spec(idem.Strict, h1, h2), idem.Options{}, nil)
	cur.executed(cur.send("k2", body, "X-Tenant", "t1", "X-Region", "eu"), 1)
	back.replayed(back.send("k2", body, "X-Tenant", "t1", "X-Region", "eu"), cur, 1)
	back.refused(back.send("k2", body, "X-Tenant", "t1", "X-Region", "us"), http.StatusUnprocessableEntity, idem.CodeKeyReused)
}

// lease is the lease of the takeover scenario: a v1 attempt's (without a
// heartbeat) runs out while its handler blocks. longLease is the in-flight
// scenario's, which must not run out however slow a loaded machine is.
const (
	lease     = 300 * time.Millisecond
	longLease = time.Minute
)

func withLease(sp idem.Spec) idem.Spec { return withLeaseOf(sp, lease) }

func withLeaseOf(sp idem.Spec, l time.Duration) idem.Spec {
	sp.Window, sp.InFlight.Lease = 2*time.Minute, l
	return sp
}

// blocking is a v1 instance (of lease l, without a heartbeat) whose
// handler signals started and answers once released.
func blocking(t *testing.T, s idem.Store, l time.Duration) (in *instance, started, release chan struct{}) {
	started, release = make(chan struct{}, 1), make(chan struct{})
	in = newInstance(t, s, "v1", withLeaseOf(spec(idem.Strict, v1), l), idem.Options{DisableHeartbeat: true}, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"by":"v1","call":1}`))
	})
	return in, started, release
}

// A v1 attempt in flight: the identical retry on v2 is told it is in
// flight (another body is refused), and waits for its response when the
// policy waits.
func testInFlight(t *testing.T, s idem.Store) {
	old, started, release := blocking(t, s, longLease)
	cur := newInstance(t, s, "v2", withLeaseOf(spec(idem.Strict, v2, v1), longLease), idem.Options{}, nil)
	waitSpec := withLeaseOf(spec(idem.Strict, v2, v1), longLease)
	waitSpec.InFlight.Wait = 10 * time.Second
	waiter := newInstance(t, s, "v2-waiting", waitSpec, idem.Options{}, nil)
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- old.send("k1", body) }()
	<-started
	cur.refused(cur.send("k1", body), http.StatusConflict, idem.CodeKeyInUse)
	cur.refused(cur.send("k1", otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	go func() { time.Sleep(50 * time.Millisecond); close(release) }()
	waiter.replayed(waiter.send("k1", body), old, 1)
	if w := <-done; w.Code != http.StatusCreated {
		t.Fatalf("v1: %d", w.Code)
	}
	if n := cur.calls.Load() + waiter.calls.Load(); n != 0 {
		t.Fatalf("v2 ran %d times", n)
	}
}

// A v1 attempt in flight past its lease: the identical retry on v2 takes
// the claim over (another body may not); the v1 attempt's late completion
// is fenced, and v1 then replays v2's response (the record kept v1's
// fingerprint).
func testTakeover(t *testing.T, s idem.Store) {
	old, started, release := blocking(t, s, lease)
	cur := newInstance(t, s, "v2", withLease(spec(idem.Strict, v2, v1)), idem.Options{}, nil)
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- old.send("k1", body) }()
	<-started
	time.Sleep(3 * lease)
	cur.refused(cur.send("k1", otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	cur.executed(cur.send("k1", body), 1)
	close(release)
	<-done
	cur.replayed(cur.send("k1", body), cur, 1)
	plain := newInstance(t, s, "v1-plain", spec(idem.Strict, v1), idem.Options{}, nil)
	plain.replayed(plain.send("k1", body), cur, 1)
}

// A failed v1 attempt (FailuresRetry frees the key) is re-claimed by the
// identical retry on v2, not by another body; v1 then replays v2's
// response.
func testReclaim(t *testing.T, s idem.Store) {
	failing := newInstance(t, s, "v1-failing", spec(idem.Strict, v1), idem.Options{}, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	cur := newInstance(t, s, "v2", spec(idem.Strict, v2, v1), idem.Options{}, nil)
	if w := failing.send("k1", body); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("v1: %d", w.Code)
	}
	cur.refused(cur.send("k1", otherBody), http.StatusUnprocessableEntity, idem.CodeKeyReused)
	cur.executed(cur.send("k1", body), 1)
	cur.replayed(cur.send("k1", body), cur, 1)
	old := newInstance(t, s, "v1", spec(idem.Strict, v1), idem.Options{}, nil)
	old.replayed(old.send("k1", body), cur, 1)
	if n := old.calls.Load(); n != 0 {
		t.Fatalf("v1 ran %d times", n)
	}
}

// Under loose semantics any duplicate is replayed; one that matches a
// compatible setting is no mismatch (EventLooseMismatch), one that matches
// none is.
func testLoose(t *testing.T, s idem.Store) {
	old := newInstance(t, s, "v1", spec(idem.Loose, v1), idem.Options{}, nil)
	cur := newInstance(t, s, "v2", spec(idem.Loose, v2, v1), idem.Options{}, nil)
	old.executed(old.send("k1", body), 1)
	cur.replayed(cur.send("k1", body), old, 1)
	if n := cur.obs.mismatches.Load(); n != 0 {
		t.Fatalf("%d mismatches reported for the same request", n)
	}
	cur.replayed(cur.send("k1", otherBody), old, 1)
	if n := cur.obs.mismatches.Load(); n != 1 {
		t.Fatalf("%d mismatches reported, want 1", n)
	}
}
