package stores

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/bench/internal/workload"
)

// The raw implementations are the limit of each server for the same
// protocol (claim with a fencing token, run, finish fenced; replay the stored
// body): the fewest round trips, no fingerprint, no key validation, no
// record format beyond token, state and body. They are not middlewares one
// should use; they say how fast one could be.

var tokens atomic.Uint64

func token() []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], tokens.Add(1))
	return b[:]
}

// capture tees a response to the client and keeps its body.
type capture struct {
	http.ResponseWriter
	body []byte
}

func (c *capture) Write(p []byte) (int, error) {
	c.body = append(c.body, p...)
	return c.ResponseWriter.Write(p)
}

func writeStored(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", workload.Location)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// Redis: a record is token (8 bytes), state ('P' or 'C'), body. The claim
// is one SET NX with GET (Redis 7.0 or later): it writes the pending record
// when the key is free and returns the record it finds otherwise, the
// least a claim can be (the raw protocol has no leases to take over). The
// finish is fenced, a compare-and-set on the token, which Redis 7 has no
// command for (SET IFEQ came with 8.4): a script.
var (
	rawFinish = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 9) == ARGV[1] .. 'P' then
  redis.call('SET', KEYS[1], ARGV[1] .. 'C' .. ARGV[2], 'KEEPTTL')
  return 1
end
return 0`)
)

const rawTTL = 24 * time.Hour

// rawRedisFirst claims with one SET NX GET, runs next, finishes with one
// EVALSHA (falling back to EVAL, as redisstore does, when a test flushed the
// shared server's script cache).
func rawRedisFirst(c *redis.Client, prefix string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := prefix + r.Header.Get("Idempotency-Key")
		tok := token()
		err := c.SetArgs(ctx, key, append(tok, 'P'), redis.SetArgs{Mode: "NX", TTL: rawTTL, Get: true}).Err()
		if !errors.Is(err, redis.Nil) { // a record was there (or an error)
			http.Error(w, "not claimed", http.StatusConflict)
			return
		}
		cw := &capture{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if err := rawFinish.Run(context.WithoutCancel(ctx), c, []string{key}, tok, cw.body).Err(); err != nil {
			panic(err)
		}
	})
}

// rawRedisReplay answers with one GET.
func rawRedisReplay(c *redis.Client, prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := c.Get(r.Context(), prefix+r.Header.Get("Idempotency-Key")).Bytes()
		if err != nil || len(v) < 9 || v[8] != 'C' {
			http.Error(w, "no record", http.StatusNotFound)
			return
		}
		writeStored(w, v[9:])
	})
}

// PostgreSQL: one table, the same upsert / update / select as pgstore's
// protocol without its lease, takeover and reclaim conditions.
func rawPGSchema(schema string) string {
	return `CREATE TABLE ` + pgx.Identifier{schema, "raw"}.Sanitize() + ` (
    key text PRIMARY KEY,
    state smallint NOT NULL,
    token bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    response bytea)`
}

type rawPG struct {
	pool                  *pgxpool.Pool
	claim, finish, replay string
}

func newRawPG(pool *pgxpool.Pool, schema string) *rawPG {
	t := pgx.Identifier{schema, "raw"}.Sanitize()
	return &rawPG{pool: pool,
		claim: `INSERT INTO ` + t + ` AS r (key, state, token, expires_at) VALUES ($1, 1, $2, now() + interval '1 day')
ON CONFLICT (key) DO UPDATE SET state = 1, token = excluded.token, expires_at = excluded.expires_at, response = NULL
WHERE r.expires_at <= now() RETURNING 1`,
		finish: `UPDATE ` + t + ` SET state = 2, response = $3 WHERE key = $1 AND token = $2 AND state = 1`,
		replay: `SELECT response FROM ` + t + ` WHERE key = $1 AND state = 2 AND expires_at > now()`,
	}
}

func (p *rawPG) first(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := r.Header.Get("Idempotency-Key")
		tok := int64(tokens.Add(1))
		var one int
		if err := p.pool.QueryRow(ctx, p.claim, key, tok).Scan(&one); err != nil {
			http.Error(w, "not claimed", http.StatusConflict)
			return
		}
		cw := &capture{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if _, err := p.pool.Exec(context.WithoutCancel(ctx), p.finish, key, tok, cw.body); err != nil {
			panic(err)
		}
	})
}

func (p *rawPG) replayHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if err := p.pool.QueryRow(r.Context(), p.replay, r.Header.Get("Idempotency-Key")).Scan(&body); err != nil {
			http.Error(w, "no record", http.StatusNotFound)
			return
		}
		writeStored(w, body)
	})
}
