package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgen/idemgen/examples/redemptions/api"
	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/pgstore"
)

// redemptionService implements oapi-codegen's strict server interface. It
// writes through pgstore.Tx(ctx) when it runs inside the idempotency
// engine's transaction (idem.Options.Transactional with the PostgreSQL
// store), so the redemption row and the COMPLETED record of its key commit
// together or not at all; outside one it writes through the pool.
type redemptionService struct {
	pool      *pgxpool.Pool
	table     string // the redemptions table, quoted and schema-qualified
	rewards   map[string]bool
	warehouse *warehouse
}

var _ api.StrictServerInterface = (*redemptionService)(nil)

// querier is what the service needs of a pgx.Tx or a *pgxpool.Pool.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *redemptionService) db(ctx context.Context) querier {
	if tx, ok := pgstore.Tx(ctx); ok {
		return tx
	}
	return s.pool
}

func (s *redemptionService) CreateRedemption(ctx context.Context, req api.CreateRedemptionRequestObject) (api.CreateRedemptionResponseObject, error) {
	member := memberOf(ctx)
	if req.Body == nil || !s.rewards[req.Body.RewardId] {
		return api.CreateRedemption404JSONResponse{Body: api.Error{Code: api.REWARDNOTFOUND, Message: "no such reward"}}, nil
	}
	var (
		id      int64
		created time.Time
	)
	err := s.db(ctx).QueryRow(ctx,
		`INSERT INTO `+s.table+` (member_id, reward_id, idempotency_key) VALUES ($1, $2, $3) RETURNING id, created_at`,
		member, req.Body.RewardId, req.Params.IdempotencyKey.String()).Scan(&id, &created)
	if err != nil {
		return nil, fmt.Errorf("recording the redemption: %w", err)
	}
	// Reserve the reward: a failure here rolls the row back with the
	// transaction and frees the key, so the member can simply retry.
	if err := s.warehouse.reserve(ctx, req.Body.RewardId); err != nil {
		return nil, fmt.Errorf("reserving reward %s: %w", req.Body.RewardId, err)
	}
	rid := fmt.Sprintf("rdm_%d", id)
	location := "/api/v1/redemptions/" + rid
	return api.CreateRedemption201JSONResponse{
		Body:    api.Redemption{RedemptionId: rid, RewardId: req.Body.RewardId, MemberId: member, CreatedAt: created.UTC()},
		Headers: api.CreateRedemption201ResponseHeaders{Location: &location},
	}, nil
}

func (s *redemptionService) ListRedemptions(ctx context.Context, _ api.ListRedemptionsRequestObject) (api.ListRedemptionsResponseObject, error) {
	rows, err := s.db(ctx).Query(ctx, `SELECT id, reward_id, created_at FROM `+s.table+` WHERE member_id = $1 ORDER BY id`, memberOf(ctx))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := api.ListRedemptions200JSONResponse{}
	for rows.Next() {
		var (
			id      int64
			r       api.Redemption
			created time.Time
		)
		if err := rows.Scan(&id, &r.RewardId, &created); err != nil {
			return nil, err
		}
		r.RedemptionId, r.MemberId, r.CreatedAt = fmt.Sprintf("rdm_%d", id), memberOf(ctx), created.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// rowsWithKey counts the redemptions made by requests with this key.
func (s *redemptionService) rowsWithKey(ctx context.Context, key string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+s.table+` WHERE idempotency_key = $1`, key).Scan(&n)
	return n, err
}

// warehouse is the downstream system a redemption reserves its reward in.
// The walkthrough makes it hold a request (to show a duplicate arriving
// while the first is in flight) or fail once (to show the rollback).
type warehouse struct {
	mu      sync.Mutex
	hold    chan struct{} // non-nil: reserve waits until it is closed
	entered chan struct{} // reserve signals here before holding
	fail    int           // the next fail reservations fail
}

var errWarehouseDown = errors.New("the warehouse is unavailable")

func (w *warehouse) reserve(ctx context.Context, _ string) error {
	w.mu.Lock()
	hold, entered := w.hold, w.entered
	if w.fail > 0 {
		w.fail--
		w.mu.Unlock()
		return errWarehouseDown
	}
	w.mu.Unlock()
	if hold != nil {
		entered <- struct{}{}
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type memberKey struct{}

// memberOf returns the member authenticate put into ctx.
func memberOf(ctx context.Context) string {
	m, _ := ctx.Value(memberKey{}).(string)
	return m
}

// authenticate is the service's authentication middleware: the bearer token
// is the member's session, here simply the member id. A request without one
// is refused with 401 before anything else runs. The engine's
// idem.Options.Principal reads the member it puts into the context, so
// idempotency keys are scoped per member: idemp:{member}:createRedemption:{key}.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintln(w, `{"code":"UNAUTHORIZED","message":"a member session (Authorization: Bearer ...) is required"}`)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), memberKey{}, token)))
	})
}

// principal is idem.Options.Principal: the member authenticate found. A
// request without one (a route left outside authenticate) is refused with
// 401: "" would be the key space that anonymous callers share (the engine
// refuses it too, with a 500).
func principal(r *http.Request) (string, error) {
	if m := memberOf(r.Context()); m != "" {
		return m, nil
	}
	return "", &idem.Problem{Status: http.StatusUnauthorized, Code: "UNAUTHORIZED", Detail: "a member session (Authorization: Bearer ...) is required"}
}
