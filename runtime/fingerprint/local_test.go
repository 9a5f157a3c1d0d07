package fingerprint_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// TestLocalVersions checks the version bytes of the process-local
// variants: Local(v) for each format, which SumVersion computes and
// IsLocal recognizes, and the versions around them refused.
func TestLocalVersions(t *testing.T) {
	h := mustNew(t, fingerprint.Options{})
	in := jsonInput([]byte(`{"b":1,"a":2}`))
	for v := 1; v <= fingerprint.Version; v++ {
		lv := fingerprint.Local(v)
		if !fingerprint.IsLocal(lv) || fingerprint.IsLocal(v) {
			t.Fatalf("IsLocal(%#x) or IsLocal(%d)", lv, v)
		}
		f, ok := h.SumVersion(in, lv)
		if !ok || int(f[0]) != lv {
			t.Fatalf("SumVersion %#x: %v %v", lv, f, ok)
		}
		if [8]byte(f[25:]) != [8]byte{} || [8]byte(f[17:25]) == [8]byte{} || [16]byte(f[1:17]) == [16]byte{} {
			t.Fatalf("SumVersion %#x: want 16 digest bytes, 8 of the process tag, then zeros, got %x", lv, f[1:])
		}
		// The process tag: this process's, the same in every local
		// fingerprint; another tag is another process's.
		if f.OtherProcess() {
			t.Fatalf("SumVersion %#x: OtherProcess for this process's fingerprint %x", lv, f[1:])
		}
		other := f
		other[17] ^= 1
		if !other.OtherProcess() {
			t.Fatalf("SumVersion %#x: a local fingerprint with another tag is not OtherProcess", lv)
		}
		if f2, _ := h.SumVersion(jsonInput([]byte(`[1]`)), lv); [8]byte(f2[17:25]) != [8]byte(f[17:25]) {
			t.Fatalf("SumVersion %#x: two process tags, %x and %x", lv, f[17:25], f2[17:25])
		}
		if s := f.String(); s != fmt.Sprintf("v%d-local:%x", v, f[1:17]) {
			t.Fatalf("String %q", s)
		}
		sha, _ := h.SumVersion(in, v)
		if sha == f || sha[0] != byte(v) {
			t.Fatalf("SumVersion %d %v, local %v", v, sha, f)
		}
		if sha.OtherProcess() {
			t.Fatalf("SumVersion %d: a SHA-256 fingerprint is OtherProcess", v)
		}
	}
	for _, v := range []int{0x80, fingerprint.Local(fingerprint.Version + 1), 0xFF, 0x100 | fingerprint.Version, 0x7F} {
		if _, ok := h.SumVersion(in, v); ok {
			t.Fatalf("SumVersion %#x: a version this package does not compute", v)
		}
	}
}

// localPair pairs an input's SHA-256 fingerprint with its local one, in
// one format.
type localPair struct{ sha, local fingerprint.Fingerprint }

// checkLocalAgrees records in's fingerprints in every format, SHA-256 and
// local, and fails if the local ones are not equal exactly when the
// SHA-256 ones are: each SHA-256 fingerprint seen maps to one local
// fingerprint and back.
type localAgreement struct {
	t       *testing.T
	bySHA   map[fingerprint.Fingerprint]fingerprint.Fingerprint
	byLocal map[fingerprint.Fingerprint]fingerprint.Fingerprint
	sums    int
}

func newLocalAgreement(t *testing.T) *localAgreement {
	return &localAgreement{t: t, bySHA: map[fingerprint.Fingerprint]fingerprint.Fingerprint{}, byLocal: map[fingerprint.Fingerprint]fingerprint.Fingerprint{}}
}

func (a *localAgreement) add(h *fingerprint.Hasher, in *fingerprint.Input, what string) []localPair {
	a.t.Helper()
	var out []localPair
	for v := 1; v <= fingerprint.Version; v++ {
		sha, _ := h.SumVersion(in, v)
		local, ok := h.SumVersion(in, fingerprint.Local(v))
		if !ok || local[0] != byte(fingerprint.Local(v)) {
			a.t.Fatalf("%s: local version %d not computed: %v", what, v, local)
		}
		if l, seen := a.bySHA[sha]; seen && l != local {
			a.t.Fatalf("%s, version %d: equal SHA-256 fingerprints %v, local ones %v and %v", what, v, sha, l, local)
		}
		if s, seen := a.byLocal[local]; seen && s != sha {
			a.t.Fatalf("%s, version %d: equal local fingerprints %v, SHA-256 ones %v and %v", what, v, local, s, sha)
		}
		a.bySHA[sha], a.byLocal[local] = local, sha
		a.sums++
		out = append(out, localPair{sha, local})
	}
	return out
}

// TestLocalEqualIffSHA is the differential test of the process-local
// fingerprints: over thousands of random bodies (the differential bodies:
// objects hashed as they close, in the stage or flushed past it, large
// ones, invalid ones hashed as raw bytes), their re-spellings (members
// reordered, escapes, white space), bodies with a volatile member changed
// and with another member changed, under several options, paths, queries
// and content types, in every format, two inputs have equal local
// fingerprints exactly when they have equal SHA-256 ones.
func TestLocalEqualIffSHA(t *testing.T) {
	rounds := 1500
	if testing.Short() || raceEnabled {
		rounds = 300
	}
	a := newLocalAgreement(t)
	r := rand.New(rand.NewPCG(21, 22))
	hashers := []*fingerprint.Hasher{
		mustNew(t, fingerprint.Options{}),
		mustNew(t, fingerprint.Options{Volatile: []string{"/a", "/*/b", "/id", "/sent_at"}, Unordered: []string{"/tags", "/*/*"}}),
	}
	paths := []string{"/orders", "/orders/o1", ""}
	types := []string{"application/json", "text/plain", "application/x-www-form-urlencoded"}
	for i, body := range differentialBodies(rounds) {
		for k, h := range hashers {
			in := &fingerprint.Input{Method: "POST", Operation: "op", Path: paths[r.IntN(len(paths))], ContentType: "application/json", Body: body}
			a.add(h, in, fmt.Sprintf("body %d, hasher %d", i, k))
			if i%7 == 0 {
				in.ContentType = types[r.IntN(len(types))]
				in.RawQuery = []string{"", "b=2&a=1", "%zz"}[r.IntN(3)]
				a.add(h, in, fmt.Sprintf("body %d, hasher %d, %s", i, k, in.ContentType))
			}
		}
	}
	// Pairs: a random value, a re-spelling (same fingerprints), a volatile
	// member changed (same) and another member changed (different).
	vol := mustNew(t, fingerprint.Options{Volatile: []string{"/volatile_at", "/*/volatile_at"}})
	for round := range rounds {
		v := randObject(r, 1+r.IntN(8), 2)
		base := append(jobj{}, v...)
		base = append(base, jmember{"volatile_at", randValue(r, 1)})
		plain, respelled := spell(r, base, false), spell(r, base, true)
		changedVol := append(jobj{}, v...)
		changedVol = append(changedVol, jmember{"volatile_at", jstr(fmt.Sprint("changed", round))})
		other := append(jobj{}, base...)
		other[0].val = jstr(strings.Repeat("x", 1+r.IntN(3000)) + fmt.Sprint(round))
		what := fmt.Sprintf("round %d", round)
		p := a.add(vol, jsonInput(plain), what)
		q := a.add(vol, jsonInput(respelled), what+", re-spelled")
		c := a.add(vol, jsonInput(spell(r, changedVol, true)), what+", volatile member changed")
		d := a.add(vol, jsonInput(spell(r, other, r.IntN(2) == 0)), what+", another member changed")
		for j := range p {
			if p[j] != q[j] || p[j] != c[j] {
				t.Fatalf("%s, version %d: a re-spelling or a volatile change has other fingerprints: %v %v %v", what, j+1, p[j], q[j], c[j])
			}
			if p[j].local == d[j].local {
				t.Fatalf("%s, version %d: a changed member keeps the local fingerprint %v: %s vs %.200s", what, j+1, p[j].local, plain, spell(r, other, false))
			}
		}
		// A version's local fingerprint is not another's.
		if p[0].local == p[1].local || p[1].local == p[2].local {
			t.Fatalf("%s: versions share a local fingerprint", what)
		}
	}
	if a.sums < 15*rounds {
		t.Fatalf("only %d fingerprints compared", a.sums)
	}
}
