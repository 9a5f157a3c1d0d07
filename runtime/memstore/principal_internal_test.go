package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// checkAccounts recomputes, from the records a shard holds, what each
// principal holds, and compares it with the shard's accounts: every record
// carries the tag of its claimant's account (owner, by key: the principal
// of the claim that holds it), each account holds exactly its records'
// keys, responses and overheads, and only accounts with records exist.
func checkAccounts(t *testing.T, s *Store, owner map[string]string, step int) {
	t.Helper()
	for si := range s.shards {
		sh := &s.shards[si]
		sh.mu.Lock()
		type sum struct {
			records int
			bytes   int64
		}
		got := map[uint32]sum{}
		for i := range sh.nslots {
			e := sh.at(i)
			if e.state == 0 {
				continue
			}
			tag := sh.tagOf(i)
			key := string(sh.key(i))
			if p := owner[key]; (p == "") != (tag == 0) || tag != 0 && sh.pr.accts[tag].hash != maphash.String(s.seed, p) {
				t.Fatalf("step %d: record %q of %q carries tag %d", step, key, p, tag)
			}
			if tag == 0 {
				continue
			}
			x := got[tag]
			x.records++
			x.bytes += int64(e.keyLen) + EntryOverhead + int64(e.respLen)
			got[tag] = x
		}
		indexed := 0
		for _, w := range sh.pr.idx {
			if w == 0 {
				continue
			}
			indexed++
			tag := uint32(w)
			a := sh.pr.accts[tag]
			if a.hash>>32 != w>>32 || sh.pr.find(a.hash) != tag || a.records != got[tag].records || a.bytes != got[tag].bytes {
				t.Fatalf("step %d: account %d: %+v, its records hold %+v", step, tag, a, got[tag])
			}
		}
		if sh.pr.live != len(got) || indexed != len(got) {
			t.Fatalf("step %d: shard %d has %d accounts (%d indexed), records of %d", step, si, sh.pr.live, indexed, len(got))
		}
		sh.mu.Unlock()
	}
}

// TestPrincipalAccountsAgainstSlots runs random claims (by a few
// principals and by none, of keys some principals share), finishes with
// and without responses, lease extensions, clock steps and compactions on a
// small store that expires, evicts and takes over, and checks the accounts
// against the records after each step.
func TestPrincipalAccountsAgainstSlots(t *testing.T) {
	for _, many := range []bool{false, true} {
		t.Run(fmt.Sprint("many=", many), func(t *testing.T) { testPrincipalAccounts(t, many) })
	}
}

func testPrincipalAccounts(t *testing.T, many bool) {
	now := time.Unix(1_700_000_000, 0)
	s := New(Options{Shards: 1, MaxEntries: 300, MaxBytes: 64 << 10, MinRetention: time.Second, SweepInterval: -1,
		Now: func() time.Time { return now }})
	defer s.Close()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	principals := []string{"", "", "alice", "bob", "carol", "dave"}
	if many {
		// Enough to probe and shift in the accounts' index as they come
		// and go.
		for i := range 200 {
			principals = append(principals, fmt.Sprint("p", i))
		}
	}
	owner := map[string]string{}
	tokens := map[string]idem.Token{}
	var tok idem.Token
	mostAccounts := 0
	for step := range 12000 {
		k := fmt.Sprint("k", rng.IntN(400))
		switch op := rng.IntN(20); {
		case op < 9:
			tok++
			p := principals[rng.IntN(len(principals))]
			res, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: tok, Lease: time.Duration(1+rng.IntN(5)) * time.Second,
				TTL: time.Duration(10+rng.IntN(300)) * time.Second, Principal: p})
			if err == nil && res.Acquired {
				owner[k], tokens[k] = p, tok
			}
		case op < 16:
			var resp []byte
			st := idem.StateCompleted
			switch rng.IntN(4) {
			case 0:
				st = idem.StateFailed
			case 1:
				resp = make([]byte, rng.IntN(2000))
			default:
				resp = make([]byte, rng.IntN(100))
			}
			_ = s.Finish(ctx, k, tokens[k], st, resp)
		case op < 17:
			_ = s.ExtendLease(ctx, k, tokens[k], time.Duration(1+rng.IntN(30))*time.Second)
		case op < 18:
			s.ReadLocal(k, nil)
		default:
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
		if step%1000 == 999 {
			// Compaction moves the keys, their tags with them.
			sh := &s.shards[0]
			sh.mu.Lock()
			sh.compact()
			sh.mu.Unlock()
		}
		checkAccounts(t, s, owner, step)
		mostAccounts = max(mostAccounts, s.Stats().Principals)
	}
	now = now.Add(time.Hour)
	s.Sweep()
	checkAccounts(t, s, owner, -1)
	if st := s.Stats(); st.Entries != 0 || st.Principals != 0 || !many && st.PrincipalFull == 0 || st.Evicted == 0 || mostAccounts < 4 || many && mostAccounts < 50 {
		t.Fatalf("at the end: %+v, at most %d accounts", st, mostAccounts)
	}
}
