package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/examples/internal/regen"
	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

func defaultConfig(seed uint64) config {
	return config{Store: "memory", Seed: seed, Members: 400, Coupons: 500, FaultRate: 0.2, TimeScale: 0.05}
}

// story runs both guards on cfg and checks what must hold whatever the
// seed: the naive guard hands out duplicate coupons after false conflicts,
// the generated wrapper hands out exactly one coupon per member, refuses no
// retry, and answers every lost response's retry with a replay.
func story(t *testing.T, cfg config) (naive, gen result) {
	t.Helper()
	return storyWith(t, cfg, nil)
}

// storyWith is story with the idemgen run's store wrapped by wrap (nil:
// not wrapped).
func storyWith(t *testing.T, cfg config, wrap func(idem.Store) idem.Store) (naive, gen result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // generous: CI runs every package at once, with -race
	defer cancel()
	store, closeStore, err := openStore(ctx, cfg)
	require.NoError(t, err)
	defer closeStore()
	naive, err = runStory(ctx, cfg, guardNaive, store)
	require.NoError(t, err)
	if wrap != nil {
		if store == nil {
			m := memstore.New(memstore.Options{})
			defer m.Close()
			store = m
		}
		store = wrap(store)
	}
	gen, err = runStory(ctx, cfg, guardIdemgen, store)
	require.NoError(t, err)
	t.Logf("seed %d: naive %s", cfg.Seed, summary(naive))
	t.Logf("seed %d: idemgen %s", cfg.Seed, summary(gen))

	// The naive guard: every retry after a lost response is refused as a
	// different request, the member is told the claim failed, taps again and
	// gets a second coupon.
	assert.Positive(t, naive.Lost, "the network lost responses")
	assert.Positive(t, naive.Duplicates, "naive: duplicate claims")
	assert.Positive(t, naive.FalseConflicts, "naive: false conflicts")
	assert.Equal(t, naive.Conflicts, naive.FalseConflicts, "naive: every conflict is a retry that differed only in client_time")
	assert.Positive(t, naive.ToldFailed, "naive: members told the claim failed")
	if naive.Claims < cfg.Coupons {
		assert.Equal(t, naive.MembersWithTwo, naive.ToldFailed, "naive: a member told it failed taps again and gets a second coupon")
	}
	assert.Equal(t, min(cfg.Members+naive.Duplicates, cfg.Coupons), naive.Claims)

	// idemgen: one coupon per member, no conflict, a replay for every
	// response lost after the claim ran.
	assert.Positive(t, gen.Lost, "the network lost responses")
	assert.Zero(t, gen.Duplicates, "idemgen: duplicate claims")
	assert.Zero(t, gen.MembersWithTwo)
	assert.Zero(t, gen.Conflicts, "idemgen: conflicts")
	assert.Zero(t, gen.FalseConflicts, "idemgen: false conflicts")
	assert.Zero(t, gen.ToldFailed)
	assert.Equal(t, cfg.Members, gen.Claims)
	assert.Equal(t, cfg.Members, gen.WithCoupon)
	assert.Zero(t, gen.NoAnswer)
	assert.Equal(t, cfg.Members+gen.Replays+gen.Refused, gen.Requests-gen.Resets-gen.Busy,
		"idemgen: requests that reached the service = one execution per member + the replays + the requests refused unrun")
	if gen.Refused == 0 {
		assert.Equal(t, gen.Lost, gen.Replays, "idemgen: each lost response is answered by a replay on the retry")
	} else {
		// The store was slow (a loaded machine): some requests were refused
		// unrun, 503 when their Begin outlasted the store timeout, 409 while
		// a Begin that took effect anyway held the key until its lease
		// ended. A refusal whose response was lost too is retried, and that
		// retry is no replay: the claim had not run.
		t.Logf("idemgen: %d requests refused unrun (the store slow at Begin, or the key held by such a claim)", gen.Refused)
		assert.LessOrEqual(t, gen.Replays, gen.Lost, "idemgen: a replay answers a lost response")
		assert.LessOrEqual(t, gen.Lost-gen.Replays, gen.Refused, "idemgen: each lost response of a claim that ran is answered by a replay on the retry")
	}
	for _, o := range gen.outcomes {
		if !assert.True(t, o.Claimed, "%s: %+v", o.Member, o) {
			break
		}
	}
	return naive, gen
}

func summary(r result) string {
	return fmt.Sprintf("requests=%d lost=%d claims=%d duplicates=%d falseConflicts=%d/%d replays=%d toldFailed=%d elapsed=%v",
		r.Requests, r.Lost, r.Claims, r.Duplicates, r.FalseConflicts, r.Conflicts, r.Replays, r.ToldFailed, r.Elapsed.Round(time.Millisecond))
}

func TestStory(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { story(t, defaultConfig(seed)) })
	}
}

// TestStoryDeterministic: a seed gives each member the same faults, so the
// counts of a run are the same every time.
func TestStoryDeterministic(t *testing.T) {
	cfg := defaultConfig(42)
	cfg.Members = 100
	a1, b1 := story(t, cfg)
	a2, b2 := story(t, cfg)
	for _, p := range [][2]result{{a1, a2}, {b1, b2}} {
		p[0].Elapsed, p[1].Elapsed, p[0].outcomes, p[1].outcomes = 0, 0, nil, nil
		assert.Equal(t, p[0], p[1])
	}
}

// TestStorySoldOut: with fewer coupons than members, each duplicate of the
// naive guard is a coupon another member never gets. (Which members get
// the last coupons depends on the order their requests arrive in, so only
// these sums are fixed.)
func TestStorySoldOut(t *testing.T) {
	cfg := defaultConfig(3)
	cfg.Coupons = cfg.Members - 50
	ctx := context.Background()
	naive, err := runStory(ctx, cfg, guardNaive, nil)
	require.NoError(t, err)
	gen, err := runStory(ctx, cfg, guardIdemgen, nil)
	require.NoError(t, err)
	t.Logf("naive %s", summary(naive))
	t.Logf("idemgen %s", summary(gen))
	for _, r := range []result{naive, gen} {
		assert.Equal(t, cfg.Coupons, r.Claims, r.Guard)
		assert.Equal(t, cfg.Coupons-r.Duplicates, r.WithCoupon, "%s: as many members as duplicates are left without a coupon", r.Guard)
		assert.Zero(t, r.NoAnswer, r.Guard)
	}
	assert.Zero(t, gen.Duplicates)
	soldOut := 0
	for _, o := range gen.outcomes {
		if o.SoldOut {
			soldOut++
		}
	}
	assert.Equal(t, cfg.Members-cfg.Coupons, soldOut, "idemgen: the members told sold out are exactly those without a coupon")
}

func TestStoryRedis(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.Store, cfg.RedisURL = "redis", testenv.RedisURL(t)
	story(t, cfg)
}

// TestStoryLateBegin: a Begin that took effect in the store but answered
// after the store timeout (as under load, with Redis) is a 503, and its
// claim holds the key until its lease ends: the member's retries meet 409
// "in use" meanwhile. The app resumes the claim until the lease is over,
// and the member still gets exactly one coupon. (The lease of that one
// claim is 5s here, the contract's is 30s.)
func TestStoryLateBegin(t *testing.T) {
	cfg := defaultConfig(1)
	cfg.Members = 50
	var late *lateBegin
	_, gen := storyWith(t, cfg, func(s idem.Store) idem.Store {
		late = &lateBegin{Store: s, lease: 5 * time.Second}
		return late
	})
	assert.True(t, late.done.Load())
	assert.Positive(t, gen.Refused, "the late Begin's 503, and 409s until its lease ended")
}

// lateBegin is a store whose first Begin takes effect, with its lease set
// to lease, and then fails as a call that outlived the store timeout.
type lateBegin struct {
	idem.Store
	lease time.Duration
	done  atomic.Bool
}

func (s *lateBegin) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if !s.done.CompareAndSwap(false, true) {
		return s.Store.Begin(ctx, req)
	}
	r := *req
	r.Lease = s.lease
	if _, err := s.Store.Begin(ctx, &r); err != nil {
		return idem.BeginResult{}, err
	}
	return idem.BeginResult{}, fmt.Errorf("lateBegin: %w", context.DeadlineExceeded)
}

func TestCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-seed", "2"}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	out := stdout.String()
	t.Log("\n" + out)
	assert.Contains(t, out, "500 coupons, 400 members claiming at once; 20% of requests meet a fault (seed 2)")
	assert.Regexp(t, `(?m)^\s+naive guard\s+idemgen$`, out)
	assert.Regexp(t, `(?m)^duplicate claims\s+[1-9]\d*\s+0$`, out)
	assert.Regexp(t, `(?m)^false conflicts \(retries refused\)\s+[1-9]\d*\s+0$`, out)
	assert.Regexp(t, `(?m)^replays \(first response again\)\s+0\s+[1-9]\d*$`, out)
	assert.Regexp(t, `(?m)^claims \(coupons issued\)\s+4\d\d\s+400$`, out)
}

func TestCommandErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-fault-rate", "2"}, 2, "-fault-rate in [0, 1]"},
		{[]string{"-users", "0"}, 2, "-users >= 1"},
		{[]string{"-members", "0"}, 2, "-users >= 1"},
		{[]string{"extra"}, 2, "no arguments"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"-store", "disk"}, 1, "-store must be memory or redis"},
		{[]string{"-store", "redis", "-redis-url", ""}, 1, "-store redis needs a Redis server"},
		{[]string{"-store", "redis", "-redis-url", "redis://127.0.0.1:1/0"}, 1, "the Redis server at 127.0.0.1:1 is not reachable"},
		{[]string{"-store", "redis", "-redis-url", "http://x"}, 1, "-redis-url"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, tt.code, run(context.Background(), tt.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), tt.msg)
			assert.Empty(t, stdout.String())
		})
	}
}

// TestGenerated: go generate rewrites the committed api package byte for
// byte, and idemgen's own checks pass on the example, as they would in the
// CI of an API repository.
func TestGenerated(t *testing.T) {
	regen.Check(t, ".")
	code, out := regen.Idemgen(t, ".", "check", "-generated", "-config", "idemgen.yaml")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "generated files are up to date")
	code, out = regen.Idemgen(t, ".", "check", "-strict", "openapi.yaml")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "1 idempotent operation, 0 warnings")
}
