package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/internal/mono"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// startedCtx is a call's context that made a clock reading at its start
// (mono.Started), as the engine's store call contexts do.
type startedCtx struct {
	context.Context
	at time.Duration
	ok bool
}

func (c startedCtx) MonoStarted() (time.Duration, bool) { return c.at, c.ok }

// TestCallStartReading: under the default clock, Begin and Finish take
// the reading their context made at the call's start (mono.Started) as
// their now, instead of reading the clock; without one (or under
// Options.Now) they read the clock.
func TestCallStartReading(t *testing.T) {
	const lease, ttl = 30 * time.Second, time.Hour
	past := startedCtx{Context: context.Background(), at: time.Since(mono.Epoch) - 10*time.Second, ok: true}
	none := startedCtx{Context: context.Background()}
	near := func(t *testing.T, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -time.Second || d > time.Second {
			t.Fatalf("got %v, want %v (off by %v)", got, want, d)
		}
	}
	t.Run("reading", func(t *testing.T) {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		defer s.Close()
		res, err := s.Begin(past, &idem.BeginRequest{Key: "k", Token: 1, Lease: lease, TTL: ttl})
		if err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		rec, _, _ := s.Get(context.Background(), "k")
		now := time.Now()
		near(t, rec.LeaseExpiresAt, now.Add(lease-10*time.Second))
		near(t, rec.ExpiresAt, now.Add(ttl-10*time.Second))
		if err := s.Finish(past, "k", 1, idem.StateCompleted, []byte("r")); err != nil {
			t.Fatal(err)
		}
		rec, _, _ = s.Get(context.Background(), "k")
		near(t, rec.LeaseExpiresAt, now.Add(-10*time.Second)) // when it finished
	})
	t.Run("no reading", func(t *testing.T) {
		s := memstore.New(memstore.Options{SweepInterval: -1})
		defer s.Close()
		if _, err := s.Begin(none, &idem.BeginRequest{Key: "k", Token: 1, Lease: lease, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		rec, _, _ := s.Get(context.Background(), "k")
		near(t, rec.LeaseExpiresAt, time.Now().Add(lease))
	})
	t.Run("Options.Now", func(t *testing.T) {
		at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		s := memstore.New(memstore.Options{SweepInterval: -1, Now: func() time.Time { return at }})
		defer s.Close()
		if _, err := s.Begin(past, &idem.BeginRequest{Key: "k", Token: 1, Lease: lease, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
		rec, _, _ := s.Get(context.Background(), "k")
		if !rec.LeaseExpiresAt.Equal(at.Add(lease)) {
			t.Fatalf("lease ends %v, want %v", rec.LeaseExpiresAt, at.Add(lease))
		}
	})
}

// TestPrefetchKey: a hint that changes nothing, on an empty store (no
// index yet) as on one with records, for keys it holds or not.
func TestPrefetchKey(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1, Shards: 1})
	defer s.Close()
	ctx := context.Background()
	s.PrefetchKey("k0")
	s.PrefetchKey("")
	for i := range 3000 {
		k := "k" + string(rune('a'+i%26)) + time.Duration(i).String()
		s.PrefetchKey(k)
		if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		s.PrefetchKey(k)
		if rec, ok, _ := s.Get(ctx, k); !ok || rec.State != idem.StatePending {
			t.Fatalf("%s: %+v %v", k, rec, ok)
		}
	}
	if st := s.Stats(); st.Entries != 3000 {
		t.Fatalf("%d entries, want 3000", st.Entries)
	}
}

// TestPrefetchKeyWhileGrowing: PrefetchKey takes no lock, so it runs while
// other goroutines grow the index it reads (a data race here fails under
// -race).
func TestPrefetchKeyWhileGrowing(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1, Shards: 1})
	defer s.Close()
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5000 {
			k := "g" + time.Duration(i).String()
			if _, err := s.Begin(ctx, &idem.BeginRequest{Key: k, Token: 1, Lease: time.Minute, TTL: time.Hour}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			if st := s.Stats(); st.Entries != 5000 {
				t.Fatalf("%d entries, want 5000", st.Entries)
			}
			return
		default:
			s.PrefetchKey("p" + time.Duration(i%9000).String())
		}
	}
}
