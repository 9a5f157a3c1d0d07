// Command redemptions walks through the redemption API of idemgen's seed
// article 002 on PostgreSQL: POST /api/v1/redemptions with an
// Idempotency-Key header, records scoped per authenticated member, kept in
// PostgreSQL (runtime/pgstore) in transactional mode, so the redemption row
// the handler writes through pgstore.Tx(ctx) and the idempotency record of
// its key commit together.
//
// It shows, over real HTTP against the generated server wrapper: a first
// request (201) and its retry (the same response, Idempotent-Replayed: true,
// one row); the key reused with another body (422 IDEMPOTENCY_KEY_REUSED);
// a duplicate while the first is in flight (409 IDEMPOTENCY_KEY_IN_USE with
// Retry-After); another member sending the same key (an execution of its
// own, never the first member's replay); a failed attempt rolled back with
// its row; requests without a proper key (400); and the generated client
// helper over a network that loses a response.
//
// Usage:
//
//	go run ./examples/redemptions [-postgres URL] [-schema NAME]
//
// -postgres defaults to $IDEMGEN_POSTGRES_URL; from the repository root,
// eval "$(scripts/services start)" starts PostgreSQL on loopback and sets it.
// The walkthrough drops and recreates the schema -schema (default
// redemptions_example) and works only inside it. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: flags in, exit code out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("redemptions", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pgURL := fs.String("postgres", os.Getenv("IDEMGEN_POSTGRES_URL"), "PostgreSQL URL (default $IDEMGEN_POSTGRES_URL)")
	schema := fs.String("schema", "redemptions_example", "the schema the walkthrough (re)creates and works in")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || *schema == "" {
		fmt.Fprintln(stderr, "redemptions: want a -schema name and no arguments")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	pool, err := connect(ctx, *pgURL)
	if err != nil {
		fmt.Fprintf(stderr, "redemptions: %v\n", err)
		return 1
	}
	defer pool.Close()
	e, err := setup(ctx, pool, *schema, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "redemptions: %v\n", err)
		return 1
	}
	defer e.Close()
	fmt.Fprintf(stdout, "PostgreSQL at %s, schema %s (recreated): tables redemptions and idem_records.\n", redactURL(*pgURL), pgx.Identifier{*schema}.Sanitize())
	fmt.Fprintf(stdout, "The service: the generated strict server wrapper, idempotency records in PostgreSQL, handlers in the record's transaction.\n\n")
	n := 0
	err = walkthrough(ctx, e, func(s step) {
		n++
		printStep(stdout, n, s)
	})
	if err != nil {
		fmt.Fprintf(stderr, "redemptions: %v\n", err)
		return 1
	}
	return 0
}
