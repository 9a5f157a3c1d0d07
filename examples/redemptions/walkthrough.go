package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/redemptions/api"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// errNoPostgres is returned, wrapped, when PostgreSQL cannot be used.
var errNoPostgres = errors.New("cannot connect to PostgreSQL")

const startHint = `Start PostgreSQL on loopback from the repository root with
    eval "$(scripts/services start)"
which also exports IDEMGEN_POSTGRES_URL; or pass -postgres URL.`

// connect opens a pool on rawURL and checks that the server answers.
func connect(ctx context.Context, rawURL string) (*pgxpool.Pool, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("%w: no URL (-postgres is empty and IDEMGEN_POSTGRES_URL is not set).\n%s", errNoPostgres, startHint)
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("-postgres %s: %w", redactURL(rawURL), err)
	}
	cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	where := fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("-postgres %s: %w", redactURL(rawURL), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		cause := err
		if op, ok := errors.AsType[*net.OpError](err); ok {
			cause = op // the dial error, without pgx's per-address list
		}
		return nil, fmt.Errorf("%w at %s (%v).\n%s", errNoPostgres, where, cause, startHint)
	}
	return pool, nil
}

// env is the service of the walkthrough: the generated server wrapper in
// transactional mode on the PostgreSQL store, over real HTTP.
type env struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	svc   *redemptionService
	x     *api.Idempotency
	srv   *httptest.Server
}

// setup (re)creates schema with the redemptions table and pgstore's records
// table, and starts the service.
// The engine logs its warnings to logw.
func setup(ctx context.Context, pool *pgxpool.Pool, schema string, logw io.Writer) (*env, error) {
	s := pgx.Identifier{schema}.Sanitize()
	table := pgx.Identifier{schema, "redemptions"}.Sanitize()
	for _, q := range []string{
		`DROP SCHEMA IF EXISTS ` + s + ` CASCADE`,
		`CREATE SCHEMA ` + s,
		`CREATE TABLE ` + table + ` (
			id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			member_id       text        NOT NULL,
			reward_id       text        NOT NULL,
			idempotency_key uuid        NOT NULL,  -- the key of the request that made it, for audits
			created_at      timestamptz NOT NULL DEFAULT clock_timestamp()
		)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("preparing schema %s: %w", schema, err)
		}
	}
	store, err := pgstore.New(pool, pgstore.Options{Schema: schema}) // records in <schema>.idem_records, expired ones reaped every minute
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		store.Close()
		return nil, err
	}
	e := &env{pool: pool, store: store}
	e.svc = &redemptionService{pool: pool, table: table, rewards: map[string]bool{"id-123": true, "id-456": true}, warehouse: &warehouse{}}
	e.x = api.NewIdempotency(store, idem.Options{
		Principal:     principal, // records per member
		Logger:        slog.New(slog.NewTextHandler(logw, nil)),
		Transactional: true, // the handler runs in the store's transaction: pgstore.Tx(ctx)
	})
	e.srv = httptest.NewServer(authenticate(e.x.StrictHandler(e.svc, nil, api.StrictHTTPServerOptions{}, api.StdHTTPServerOptions{})))
	return e, nil
}

func (e *env) Close() {
	e.srv.Close()
	e.x.Close()
	e.store.Close()
}

// exchange is one request of the walkthrough and its answer.
type exchange struct {
	Label             string // how the walkthrough introduces it
	Member, Key, Body string // what was sent ("" key: none)
	Status            int
	Code              string // the problem's code, if any
	Replayed          bool   // Idempotent-Replayed: true
	RetryAfter        string
	Response          string
	Redemption        string // redemption_id of a 201
	RowsWithKey       int    // redemptions in the table made with this key, after the request
}

// step is one scene of the walkthrough.
type step struct {
	Title     string
	Exchanges []exchange
	Note      string
}

// redeem sends POST /api/v1/redemptions as member with key and body.
func (e *env) redeem(ctx context.Context, member, key, body string) (exchange, error) {
	x := exchange{Member: member, Key: key, Body: body}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/api/v1/redemptions", strings.NewReader(body))
	if err != nil {
		return x, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+member)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return x, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return x, err
	}
	x.Status, x.Response = resp.StatusCode, strings.TrimSpace(string(b))
	x.Replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	x.RetryAfter = resp.Header.Get("Retry-After")
	var v struct {
		Code         string `json:"code"`
		RedemptionID string `json:"redemption_id"`
	}
	_ = json.Unmarshal(b, &v)
	x.Code, x.Redemption = v.Code, v.RedemptionID
	if _, err := uuid.Parse(key); err == nil {
		if x.RowsWithKey, err = e.svc.rowsWithKey(ctx, key); err != nil {
			return x, err
		}
	}
	return x, nil
}

func newKey() string { return uuid.Must(uuid.NewV7()).String() }

// walkthrough runs the scenes of seed article 002 against e and reports
// each as it ends.
func walkthrough(ctx context.Context, e *env, report func(step)) error {
	const (
		reward123 = `{"reward_id":"id-123"}`
		reward456 = `{"reward_id":"id-456"}`
	)
	var err error
	do := func(member, key, body string) exchange {
		if err != nil {
			return exchange{}
		}
		var x exchange
		x, err = e.redeem(ctx, member, key, body)
		return x
	}

	k1 := newKey()
	first := do("alice", k1, reward123)
	retry := do("alice", k1, reward123)
	if err != nil {
		return err
	}
	report(step{Title: "alice redeems id-123; her app lost the response and retries with the same key and body",
		Exchanges: []exchange{first, retry},
		Note:      "the retry gets the first response again, marked Idempotent-Replayed: true; one row"})

	report(step{Title: "alice's app reuses that key for another reward (a client bug)",
		Exchanges: []exchange{do("alice", k1, reward456)},
		Note:      "refused: the key stands for the first request; nothing ran"})
	if err != nil {
		return err
	}

	// A duplicate while the first request is still running: the warehouse
	// holds the first inside its transaction (its record is PENDING).
	k2 := newKey()
	w := e.svc.warehouse
	w.mu.Lock()
	w.hold, w.entered = make(chan struct{}), make(chan struct{}, 1)
	hold, entered := w.hold, w.entered
	w.mu.Unlock()
	type result struct {
		x   exchange
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		x, err := e.redeem(ctx, "alice", k2, reward123)
		firstDone <- result{x, err}
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		return ctx.Err()
	}
	dup := do("alice", k2, reward123)
	close(hold)
	r := <-firstDone
	w.mu.Lock()
	w.hold, w.entered = nil, nil
	w.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if err != nil {
		return err
	}
	dup.Label, r.x.Label = "the duplicate, while the first is held:", "the first, once the warehouse answers:"
	report(step{Title: "alice redeems id-123 again (a new key); a duplicate arrives while the first is still running",
		Exchanges: []exchange{dup, r.x},
		Note:      "the duplicate is told to come back (409 with Retry-After); the first completes once"})

	// Another member with the same key: a record of its own.
	report(step{Title: "bob's app sends alice's first key (a key is only unique per member)",
		Exchanges: []exchange{do("bob", k1, reward123)},
		Note:      "bob's own redemption, never alice's replay: records are scoped by member; two rows with this key, one each"})
	if err != nil {
		return err
	}

	// The handler fails after writing its row: the transaction rolls back.
	k3 := newKey()
	w.mu.Lock()
	w.fail = 1
	w.mu.Unlock()
	failed := do("alice", k3, reward456)
	again := do("alice", k3, reward456)
	if err != nil {
		return err
	}
	report(step{Title: "alice redeems id-456; the warehouse fails after the row was written, and her app retries",
		Exchanges: []exchange{failed, again},
		Note:      "the row rolled back with the failed attempt and the key was freed: the retry runs once, one row"})

	report(step{Title: "requests without a proper key",
		Exchanges: []exchange{do("alice", "", reward123), do("alice", "the-idempotency-key-dhfa", reward123)},
		Note:      "400 problems, before anything runs"})
	if err != nil {
		return err
	}

	// The way an app calls the API: the generated client helper, one key
	// per logical call, here over a network that loses the first response.
	lossy := &http.Client{Transport: faultnet.NewTransport(nil, faultnet.Script(faultnet.DropFault))}
	var attempts int
	c, cerr := api.NewIdempotentClient(e.srv.URL,
		api.WithHTTPClient(api.NewIdempotentDoer(lossy, idemclient.WithAttemptHook(func(context.Context, idemclient.Attempt) { attempts++ }))),
		api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer carol")
			return nil
		}))
	if cerr != nil {
		return cerr
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, key, cerr := c.CreateRedemption(cctx, nil, api.RedemptionRequest{RewardId: "id-123"})
	if cerr != nil {
		return fmt.Errorf("the client helper: %w", cerr)
	}
	x := exchange{Member: "carol", Key: key, Body: reward123, Status: resp.StatusCode(),
		Replayed: resp.HTTPResponse.Header.Get("Idempotent-Replayed") == "true", Response: strings.TrimSpace(string(resp.Body))}
	if resp.JSON201 != nil {
		x.Redemption = resp.JSON201.RedemptionId
	}
	if x.RowsWithKey, err = e.svc.rowsWithKey(ctx, key); err != nil {
		return err
	}
	report(step{Title: "carol's app uses the generated client helper; the network loses the first response",
		Exchanges: []exchange{x},
		Note:      fmt.Sprintf("%d attempts with one key: the helper retried, the server replayed; one row", attempts)})

	// What alice holds: GET is not idempotent-protected and passes through.
	list, lerr := c.ListRedemptionsWithResponse(ctx, func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer alice")
		return nil
	})
	if lerr != nil {
		return lerr
	}
	if list.JSON200 == nil {
		return fmt.Errorf("listing alice's redemptions: %s", list.Status())
	}
	var held []string
	for _, r := range *list.JSON200 {
		held = append(held, r.RedemptionId+" "+r.RewardId)
	}
	report(step{Title: "alice lists her redemptions (GET /api/v1/redemptions, no key needed)",
		Note: fmt.Sprintf("%d redemptions, one per thing she meant to do: %s", len(held), strings.Join(held, ", "))})
	return nil
}

// printStep writes a step as the command shows it.
func printStep(w io.Writer, n int, s step) {
	fmt.Fprintf(w, "%d. %s\n", n, s.Title)
	for _, x := range s.Exchanges {
		if x.Label != "" {
			fmt.Fprintf(w, "   %s\n", x.Label)
		}
		key := x.Key
		if key == "" {
			key = "(none)"
		}
		fmt.Fprintf(w, "   POST /api/v1/redemptions  as %s  Idempotency-Key: %s  %s\n", x.Member, key, x.Body)
		var hdr bytes.Buffer
		if x.Replayed {
			hdr.WriteString("  Idempotent-Replayed: true")
		}
		if x.RetryAfter != "" {
			fmt.Fprintf(&hdr, "  Retry-After: %s", x.RetryAfter)
		}
		fmt.Fprintf(w, "   -> %d %s%s  %s\n", x.Status, http.StatusText(x.Status), hdr.String(), shorten(x.Response))
		if _, err := uuid.Parse(x.Key); err == nil && x.Status != http.StatusConflict {
			fmt.Fprintf(w, "      rows with this key: %d\n", x.RowsWithKey)
		}
	}
	fmt.Fprintf(w, "   => %s\n\n", s.Note)
}

// shorten keeps a problem document to its code and detail.
func shorten(body string) string {
	var p struct{ Code, Detail string }
	if json.Unmarshal([]byte(body), &p) == nil && strings.HasPrefix(p.Code, "IDEMPOTENCY_") {
		return p.Code + ": " + p.Detail
	}
	return body
}

// redactURL hides a password in a database URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
