package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/storetest"
)

// mixedStore sends each call to the current code or to the previous one
// (v1Store, over the v1 scripts), as old decides: the processes of a
// rolling deploy, some old and some new, sharing records.
//
// A repeat of a Begin or a Finish (the same key and token: the suite's
// re-run cases, BeginTwiceSameToken and FinishTwiceSameTokenAndState) goes
// to the current code. A re-run happens in the process that made the first
// call, whose code is one generation; the v1 scripts predate the re-run
// branches, and the current ones must recognise a record the v1 code wrote.
type mixedStore struct {
	cur *Store
	v1  *v1Store
	old func(op string) bool

	mu   sync.Mutex
	seen map[string]bool // op, key and token of the calls made
}

// repeat reports whether op was called before with key and token.
func (m *mixedStore) repeat(op, key string, token idem.Token) bool {
	id := fmt.Sprint(op, "\x00", key, "\x00", token)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = make(map[string]bool)
	}
	r := m.seen[id]
	m.seen[id] = true
	return r
}

var (
	_ idem.LeaseExtender = (*mixedStore)(nil)
	_ idem.Watcher       = (*mixedStore)(nil)
)

func (m *mixedStore) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	// The suite's LeaseExpiryTakeoverSameFingerprint case goes to the
	// current code: the v1 script (as the current one before it) lets any
	// fingerprint take an expired claim over. Its records are shared all
	// the same (its Finish and Get go either way).
	if strings.Contains(req.Key, "takeover-fp") {
		return m.cur.Begin(ctx, req)
	}
	if !m.repeat("begin", req.Key, req.Token) && m.old("begin") {
		return m.v1.Begin(ctx, req)
	}
	return m.cur.Begin(ctx, req)
}

func (m *mixedStore) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if !m.repeat("finish", key, token) && m.old("finish") {
		return m.v1.Finish(ctx, key, token, state, response)
	}
	return m.cur.Finish(ctx, key, token, state, response)
}

func (m *mixedStore) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if m.old("get") {
		return m.v1.Get(ctx, key)
	}
	return m.cur.Get(ctx, key)
}

// ExtendLease: a heartbeat of the v1 scripts moves the lease only, and
// leaves the record's expiry where it is (a handler of an old process that
// runs past the window can still lose its record, as before); the current
// script also moves the expiry to the lease's end when that is later, which
// the suite's HeartbeatPastExpiry checks. So a heartbeat whose lease ends
// after the record's expiry goes to the current code; others as old says.
func (m *mixedStore) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	rec, found, err := m.cur.Get(ctx, key)
	past := err == nil && found && time.Now().Add(lease).After(rec.ExpiresAt.Add(-time.Second))
	if !past && m.old("extend") {
		return m.v1.ExtendLease(ctx, key, token, lease)
	}
	return m.cur.ExtendLease(ctx, key, token, lease)
}

// Watch: both generations publish the same notifications.
func (m *mixedStore) Watch(ctx context.Context, key string) (<-chan struct{}, func()) {
	return m.cur.Watch(ctx, key)
}

// TestMixedProtocols runs the conformance suite over processes of both
// script protocols sharing one Redis: records and claims written by the
// previous code are replayed, finished, taken over, reclaimed and extended
// by the current code, and the other way round (the record layout did not
// change; the scripts of both generations live side by side in the script
// cache under their own SHA-1).
func TestMixedProtocols(t *testing.T) {
	runRollingDeploy(t, map[string]func() func(string) bool{
		// A claim (or a record) of an old process, finished, replayed and
		// taken over by new ones.
		"OldClaimsNewFinishes": func() func(string) bool { return func(op string) bool { return op == "begin" } },
		// A new process's claim finished by an old one (a rollback).
		"NewClaimsOldFinishes": func() func(string) bool { return func(op string) bool { return op != "begin" } },
		"Alternating":          alternating,
	}, func(s *Store, c redis.UniversalClient, old func(string) bool) idem.Store {
		return &mixedStore{cur: s, v1: &v1Store{client: c, s: s}, old: old}
	})
}

// alternating is a selector of runRollingDeploy: every other call by each
// generation.
func alternating() func(string) bool {
	var n atomic.Int64
	return func(string) bool { return n.Add(1)%2 == 0 }
}

// runRollingDeploy runs the conformance suite once for each of modes, over
// the Store wrap returns for a fresh Store, its client and a fresh selector
// of the mode: old(op) tells whether the call op goes to the previous
// generation of the code (the processes of a rolling deploy sharing one
// Redis).
func runRollingDeploy(t *testing.T, modes map[string]func() func(string) bool,
	wrap func(s *Store, c redis.UniversalClient, old func(op string) bool) idem.Store) {
	for name, old := range modes {
		t.Run(name, func(t *testing.T) {
			storetest.RunConformanceTests(t, func(t *testing.T) idem.Store {
				s, c := newTestStore(t, Options{})
				return wrap(s, c, old())
			})
		})
	}
}

// TestProtocolsWriteSameRecords: given the same calls, the current scripts
// and the v1 scripts leave the same bytes in Redis (the lease and the record
// expiry, read from the server's clock at different moments, within a
// second) and the same key expiry.
func TestProtocolsWriteSameRecords(t *testing.T) {
	s, c := newTestStore(t, Options{})
	v1 := &v1Store{client: c, s: s}
	ctx := ctxTimeout(t, 30*time.Second)
	stores := []idem.Store{s, v1}
	const tok = idem.Token(1<<64 - 3)
	steps := map[string]func(st idem.Store, key string) error{
		"pending": func(idem.Store, string) error { return nil },
		"completed": func(st idem.Store, key string) error {
			return st.Finish(ctx, key, tok, idem.StateCompleted, []byte(`{"id":1}`))
		},
		"completed empty": func(st idem.Store, key string) error {
			return st.Finish(ctx, key, tok, idem.StateCompleted, []byte{})
		},
		"failed": func(st idem.Store, key string) error {
			return st.Finish(ctx, key, tok, idem.StateFailed, nil)
		},
		"failed replayable": func(st idem.Store, key string) error {
			return st.Finish(ctx, key, tok, idem.StateFailed, []byte("boom"))
		},
		// Within the record's expiry (an hour): an extension past it moves
		// the expiry with the current script only (the suite's HeartbeatPastExpiry).
		"extended": func(st idem.Store, key string) error {
			return st.(idem.LeaseExtender).ExtendLease(ctx, key, tok, 30*time.Minute)
		},
		"reclaimed": func(st idem.Store, key string) error {
			if err := st.Finish(ctx, key, tok, idem.StateFailed, nil); err != nil {
				return err
			}
			r, err := st.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(4), Token: tok - 1,
				Lease: 3 * time.Second, TTL: 2 * time.Hour})
			if err == nil && (!r.Acquired || r.Prior != idem.StateFailed) {
				t.Errorf("reclaim: %+v", r)
			}
			return err
		},
	}
	for name, step := range steps {
		t.Run(name, func(t *testing.T) {
			var vals [2]string
			var ttls [2]time.Duration
			for i, st := range stores {
				key := name + "/" + string(rune('a'+i))
				r, err := st.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: fp(3), Token: tok,
					Lease: 90 * time.Second, TTL: time.Hour})
				require.NoError(t, err)
				require.True(t, r.Acquired)
				require.NoError(t, step(st, key))
				vals[i], ttls[i] = rawRecord(t, c, s.key(key))
			}
			cur := vals[0]
			if cur[offState] == byte(idem.StatePending) {
				// The extend script reads the header only (GETRANGE):
				// a PENDING record must be nothing else.
				assert.Len(t, cur, headerLen, "a PENDING record is its header")
			}
			assertSameRecord(t, vals[1], cur, ttls[1], ttls[0])
		})
	}
}

// assertSameRecord asserts that the values old and cur, which two
// generations of the scripts left given the same calls, are the same but
// for the times the scripts write (read from the server's clock at
// different moments) which may differ by less than a second, and that so
// are their keys' expiries oldTTL and curTTL. Values too short to hold the
// times (no record, or none) must be equal.
func assertSameRecord(t *testing.T, old, cur string, oldTTL, curTTL time.Duration) {
	t.Helper()
	// assert.True rather than assert.Equal: a 64 KiB difference is no
	// message.
	require.Len(t, cur, len(old), "value")
	if len(old) >= offFP { // the times are there
		assert.True(t, old[:offLease] == cur[:offLease], "value before the lease (version, state, flags, token)")
		assert.True(t, old[offFP:] == cur[offFP:], "value after the record's expiry (fingerprint, response)")
		for _, off := range []int{offLease, offExpires} {
			d := int64(be64(cur[off:])) - int64(be64(old[off:]))
			assert.Less(t, max(d, -d), int64(1000), "time at offset %d", off)
		}
	} else {
		assert.True(t, old == cur, "value")
	}
	assert.InDelta(t, oldTTL.Milliseconds(), curTTL.Milliseconds(), 1000, "key expiry")
}
