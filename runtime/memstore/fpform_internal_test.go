package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idem"
)

// TestFingerprintForms: a record gives back the fingerprint it was given,
// whichever form the shard keeps it in (this process's local fingerprints
// in the slot, a zero one as nothing, any other whole in the key's chunk:
// SHA-256 ones, another process's local ones, another local version),
// through takeovers that change the form (a reclaimable FAILED record
// claimed again with another fingerprint), compactions of the shard's
// chunks and removals; and the bytes a shard accounts to its chunks stay
// exact.
func TestFingerprintForms(t *testing.T) {
	h, err := fingerprint.New(fingerprint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	local := func(i int, v int) idem.Fingerprint {
		fp, _ := h.SumVersion(&fingerprint.Input{Method: "POST", Operation: "op", ContentType: "application/json",
			Body: fmt.Appendf(nil, `{"n":%d}`, i)}, v)
		return fp
	}
	rng := rand.New(rand.NewPCG(3, 4))
	forms := []func(i int) idem.Fingerprint{
		func(i int) idem.Fingerprint { return local(i, fingerprint.Local(fingerprint.Version)) },
		func(i int) idem.Fingerprint { return idem.Fingerprint{} },
		func(i int) idem.Fingerprint { return local(i, fingerprint.Version) }, // SHA-256
		func(i int) idem.Fingerprint { // another process's
			fp := local(i, fingerprint.Local(fingerprint.Version))
			fp[20] ^= 0xff
			return fp
		},
		func(i int) idem.Fingerprint { return local(i, fingerprint.Local(2)) }, // another local version
	}
	s := New(Options{Shards: 1, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	const n = 300
	want := make([]idem.Fingerprint, n)
	tok := idem.Token(0)
	begin := func(k int, fp idem.Fingerprint) {
		t.Helper()
		tok++
		res, err := s.Begin(ctx, &idem.BeginRequest{Key: fmt.Sprint("key-", k), Token: tok, Fingerprint: fp, Lease: time.Minute, TTL: time.Hour})
		if err != nil || !res.Acquired {
			t.Fatalf("Begin %d: %v %+v", k, err, res)
		}
		want[k] = fp
		// FAILED without a response: reclaimable, for the next takeover.
		if err := s.Finish(ctx, fmt.Sprint("key-", k), tok, idem.StateFailed, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for k := range n {
			rec, ok, err := s.Get(ctx, fmt.Sprint("key-", k))
			if err != nil || !ok {
				t.Fatalf("%s: key %d: %v %v", when, k, ok, err)
			}
			if rec.Fingerprint != want[k] {
				t.Fatalf("%s: key %d: fingerprint %x, want %x", when, k, rec.Fingerprint, want[k])
			}
		}
		sh := &s.shards[0]
		var live int64
		for i := range sh.nslots {
			if e := sh.at(i); e.state != 0 {
				live += int64(e.keySpan() + e.respLen)
			}
		}
		if live != sh.dataBytes {
			t.Fatalf("%s: the records hold %d bytes of the chunks, the shard accounts %d", when, live, sh.dataBytes)
		}
	}
	for k := range n {
		begin(k, forms[k%len(forms)](k))
	}
	check("claimed")
	for round := range 6 {
		for k := range n {
			begin(k, forms[rng.IntN(len(forms))](k+round*n))
		}
		check(fmt.Sprint("round ", round))
		sh := &s.shards[0]
		sh.mu.Lock()
		sh.compact()
		sh.mu.Unlock()
		check(fmt.Sprint("compacted, round ", round))
	}
	sh := &s.shards[0]
	sh.mu.Lock()
	if !sh.fpSet || sh.fpHead != byte(fingerprint.Local(fingerprint.Version)) {
		t.Errorf("the shard's local form: set %v, version %#x", sh.fpSet, sh.fpHead)
	}
	for sh.count > 0 {
		sh.remove(sh.ftail)
	}
	if sh.dataBytes != 0 {
		t.Errorf("%d live bytes left in the chunks of an empty shard", sh.dataBytes)
	}
	sh.mu.Unlock()
}
