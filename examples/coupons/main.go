// Command coupons replays the coupon incident of idemgen's seed article 000,
// twice: 500 coupons, some 400 members claiming at the same moment from an
// app that retries on a flaky network and stamps a fresh client_time into
// every attempt. The first run guards the service with the hand-written
// guard of the article (key + SHA-256 of the whole body); the second with
// the server wrapper idemgen generated from the contract in openapi.yaml,
// where client_time is declared volatile. It prints what each run did.
//
// Both runs are in process, over real HTTP on loopback, with the same
// seeded faults (faultnet) between the members' phones and the service:
// responses lost after the server handled the claim, connections reset,
// 503s with Retry-After. The app is the same in both runs: the generated
// client helpers (api.IdempotentClient).
//
// Usage:
//
//	go run ./examples/coupons [-store memory|redis] [-redis-url URL] [-seed N]
//	                          [-users N] [-coupons N] [-fault-rate F] [-time-scale F]
//
// The idemgen run keeps its records in memory by default (nothing to start);
// -store redis uses a Redis server (-redis-url, default $IDEMGEN_REDIS_URL;
// scripts/services start runs one). See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: flags in, exit code out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("coupons", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{}
	fs.StringVar(&cfg.Store, "store", "memory", "the idemgen run's record store: memory or redis")
	fs.StringVar(&cfg.RedisURL, "redis-url", os.Getenv("IDEMGEN_REDIS_URL"), "Redis URL for -store redis (default $IDEMGEN_REDIS_URL)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the network's faults (the same seed gives each member the same faults in both runs)")
	fs.IntVar(&cfg.Members, "users", 400, "users (the coupon's members) claiming at the same moment")
	fs.IntVar(&cfg.Members, "members", 400, "same as -users")
	fs.IntVar(&cfg.Coupons, "coupons", 500, "coupons in stock")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0.2, "share of requests that meet a fault: half lose the response after the server handled the claim, a quarter are reset, a quarter get 503 with Retry-After")
	fs.Float64Var(&cfg.TimeScale, "time-scale", 0.05, "the app's waits between attempts (backoff, Retry-After) are multiplied by this, so the story runs in seconds")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || cfg.Members < 1 || cfg.Coupons < 0 || cfg.FaultRate < 0 || cfg.FaultRate > 1 || cfg.TimeScale < 0 {
		fmt.Fprintln(stderr, "coupons: want -users >= 1, -coupons >= 0, -fault-rate in [0, 1], -time-scale >= 0 and no arguments")
		return 2
	}

	store, closeStore, err := openStore(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "coupons: %v\n", err)
		return 1
	}
	defer closeStore()

	fmt.Fprintf(stdout, "The coupon incident: %d coupons, %d members claiming at once; %.0f%% of requests meet a fault (seed %d).\n",
		cfg.Coupons, cfg.Members, 100*cfg.FaultRate, cfg.Seed)
	fmt.Fprintf(stdout, "The app stamps a fresh client_time into every attempt. idemgen's records: %s store.\n\n", cfg.Store)
	var results []result
	for _, guard := range []string{guardNaive, guardIdemgen} {
		res, err := runStory(ctx, cfg, guard, store)
		if err != nil {
			fmt.Fprintf(stderr, "coupons: %s run: %v\n", guard, err)
			return 1
		}
		results = append(results, res)
	}
	printTable(stdout, results)
	fmt.Fprint(stdout, `
naive guard: the article's own guard (a record per key, PENDING -> SUCCESS, 409 when the body
  differs), hashing the whole body. A retry after a lost response carries a new client_time, so it
  is refused as a different request; the member, told the claim failed, taps again (a new key)
  and gets a second coupon.
idemgen: the generated wrapper; the contract declares client_time volatile, so the retry is the
  same request and gets the first response again. One coupon per member.
`)
	return 0
}

// printTable prints one column per run.
func printTable(w io.Writer, rs []result) {
	row := func(label string, f func(result) string) {
		fmt.Fprintf(w, "%-36s", label)
		for _, r := range rs {
			fmt.Fprintf(w, "%13s", f(r))
		}
		fmt.Fprintln(w)
	}
	num := func(f func(result) int) func(result) string {
		return func(r result) string { return fmt.Sprint(f(r)) }
	}
	names := map[string]string{guardNaive: "naive guard", guardIdemgen: "idemgen"}
	row("", func(r result) string { return names[r.Guard] })
	row("requests sent (retries included)", num(func(r result) int { return r.Requests }))
	row("  responses lost after the claim ran", num(func(r result) int { return r.Lost }))
	row("claims (coupons issued)", num(func(r result) int { return r.Claims }))
	row("duplicate claims", num(func(r result) int { return r.Duplicates }))
	row("  members holding 2+ coupons", num(func(r result) int { return r.MembersWithTwo }))
	row("false conflicts (retries refused)", num(func(r result) int { return r.FalseConflicts }))
	row("replays (first response again)", num(func(r result) int { return r.Replays }))
	row(`members told "claim failed"`, num(func(r result) int { return r.ToldFailed }))
	row("members with a coupon", num(func(r result) int { return r.WithCoupon }))
	row("time", func(r result) string { return r.Elapsed.Round(time.Millisecond).String() })
}
