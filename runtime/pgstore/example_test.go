package pgstore_test

import (
	"context"
	"errors"
	"log"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// A store in its own schema, migrated at start-up, with a background reaper.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := pgstore.New(pool, pgstore.Options{
		Schema:       "idempotency",
		ReapInterval: 5 * time.Minute, // delete expired records, 1000 at a time (default: every minute)
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // stops the reaper

	// Or apply pgstore.SchemaSQL(...) with your own migration tool.
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	// Hand the store to the engine; what it does for a first request:
	var fp idem.Fingerprint
	res, err := store.Begin(ctx, &idem.BeginRequest{
		Key: "user-42:claimCoupon:4b1d…", Fingerprint: fp, Token: 0x9e3779b97f4a7c15,
		Lease: 30 * time.Second, TTL: 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	if res.Acquired {
		if err := store.Finish(ctx, "user-42:claimCoupon:4b1d…", 0x9e3779b97f4a7c15, idem.StateCompleted, []byte("…")); err != nil {
			log.Fatal(err)
		}
	}
}

// Migrate in a fleet: the schema's owner migrates (a job before the
// rollout), and the service, connecting as a restricted role (the run-time
// privileges and SELECT on the version table), calls Migrate only to check
// the schema: a newer version (a rollback's binary) is a warning, anything
// else (a missing or older schema: the job did not run) is fatal.
func ExampleStore_Migrate_fleet() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Options{Schema: "idempotency"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	switch err := store.Migrate(ctx); {
	case errors.Is(err, pgstore.ErrNewerSchema):
		// A later release migrated the schema: Migrate changed nothing,
		// and the store serves as it would without it.
		slog.WarnContext(ctx, "idem schema is newer than this binary", "error", err)
	case err != nil:
		log.Fatal(err)
	}
}

// A handler whose writes commit in the same transaction as the COMPLETED
// record: both or neither, even when a takeover races the commit.
func ExampleStore_BeginTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.New(pool, pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close() // stops the reaper

	const key, token = "user-42:claimCoupon:4b1d…", idem.Token(0x9e3779b97f4a7c15)
	// ... after Begin acquired key with token (the engine does both):
	txctx, commit, rollback, err := store.BeginTx(ctx, key, token)
	if err != nil {
		log.Fatal(err)
	}
	defer rollback() // a no-op after commit

	// The handler, given txctx:
	tx, _ := pgstore.Tx(txctx)
	if _, err := tx.Exec(txctx, `UPDATE coupons SET claimed_by = $1 WHERE id = $2 AND claimed_by IS NULL`, 42, 7); err != nil {
		return // rollback: the record stays PENDING and the key is retried after the lease
	}

	switch err := commit(idem.StateCompleted, []byte(`{"status":201}`)); {
	case err == nil:
		// the claim and the COMPLETED record are committed together
	case errors.Is(err, idem.ErrFenced):
		// the lease was taken over: nothing of this attempt was committed
	default:
		log.Print(err)
	}
}
