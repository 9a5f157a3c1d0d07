// Package stores compares idemgen over its Redis and PostgreSQL stores
// (runtime/redisstore, runtime/pgstore) with the limit of each server: the
// raw client doing the minimum commands of the same protocol around the
// bare handler (Redis: one EVALSHA to claim and one to finish a first
// request, one GET for a replay; PostgreSQL through pgxpool: an upsert to
// claim, an update to finish, a select for a replay), and, on Redis, with a
// peer: fiber v2's idempotency middleware over gofiber/storage's Redis
// storage (redis/v3), measured on fiber's own stack (see fiber_test.go).
// Round trips are counted by a go-redis hook and a pgx tracer and reported
// as the roundtrips/op metric.
//
// The servers are those scripts/services starts (IDEMGEN_REDIS_URL,
// IDEMGEN_POSTGRES_URL, found through internal/testenv); without them the
// benchmarks and tests skip, or fail under IDEMGEN_REQUIRE_SERVICES=1.
package stores
