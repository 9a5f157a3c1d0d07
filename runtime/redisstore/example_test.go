package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/redisstore"
)

// A store on a standalone server. The same code takes a Sentinel or Cluster
// client (redis.NewFailoverClient, redis.NewClusterClient,
// redis.NewUniversalClient); only ContextTimeoutEnabled is required.
func Example() {
	client := redis.NewClient(&redis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // the request's deadline bounds every wait
	})
	defer client.Close()

	store, err := redisstore.New(client, redisstore.Options{Prefix: "billing:idem:"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// Optional: load the scripts now rather than on first use.
	if err := store.LoadScripts(ctx); err != nil {
		log.Fatal(err)
	}

	// What the engine does for a first request: claim, run, finish.
	var fp idem.Fingerprint
	res, err := store.Begin(ctx, &idem.BeginRequest{
		Key: "user-42:claimCoupon:4b1d…", Fingerprint: fp, Token: 0x9e3779b97f4a7c15,
		Lease: 30 * time.Second, TTL: 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err) // the engine answers 503 IDEMPOTENCY_STORE_UNAVAILABLE
	}
	if res.Acquired {
		err = store.Finish(ctx, "user-42:claimCoupon:4b1d…", 0x9e3779b97f4a7c15, idem.StateCompleted, []byte("…"))
		fmt.Println("finished:", err)
	}
}
