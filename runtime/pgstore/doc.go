// Package pgstore is an idempotency record store (idem.Store) on PostgreSQL,
// through pgx's *pgxpool.Pool. It also implements idem.LeaseExtender and
// idem.Transactor, the latter so that a handler's own writes and the
// COMPLETED record commit in one transaction. It needs PostgreSQL 9.5 or newer
// (ON CONFLICT, SKIP LOCKED) and is tested on PostgreSQL 15.
//
// # Schema
//
// (*Store).Migrate creates and upgrades the schema objects, recording the
// applied versions in <table>_version; SchemaSQL returns the same DDL for
// teams that run their own migrations. With the default names (Schema
// "public", Table "idem_records"):
//
//	CREATE TABLE IF NOT EXISTS "public"."idem_records" (
//	    token            bigint      NOT NULL,  -- fencing token: the uint64 bit pattern as int64
//	    lease_expires_at timestamptz NOT NULL,  -- a PENDING holder's lease runs out (database clock)
//	    expires_at       timestamptz NOT NULL,  -- the record is forgotten: claim time + TTL
//	    state            smallint    NOT NULL CHECK (state IN (1, 2, 3)),  -- 1 PENDING, 2 COMPLETED, 3 FAILED
//	    prior_state      smallint    NOT NULL DEFAULT 0,  -- the state the last claim replaced (0: none)
//	    key              text        COLLATE "C" NOT NULL PRIMARY KEY,  -- the engine's encoded scope key
//	    fingerprint      bytea       NOT NULL,  -- versioned request digest (33 bytes)
//	    response         bytea                  -- engine-encoded response; NULL while PENDING and for a FAILED record that frees its key
//	) WITH (fillfactor = 90);
//	CREATE INDEX IF NOT EXISTS "idem_records_expires_at_idx" ON "public"."idem_records" (expires_at);
//
// The primary key is the unique constraint on the scope key; COLLATE "C"
// compares keys as bytes, which is all the store needs and the fastest. Keys
// must be valid UTF-8 without NUL bytes, at most MaxKeyLen bytes (the engine's
// encoded scope keys are). Tokens are uint64; they are stored as bigint by
// reinterpreting the bits (int64(token)), which is lossless both ways.
// prior_state exists because RETURNING shows only the new row: a takeover
// copies the state it replaces into it, so Begin reports BeginResult.Prior
// exactly.
// fillfactor 90 leaves room in each page for Finish's update to stay a HOT
// update (no index change). Expired rows are invisible to Get and claimable
// by Begin; Reap (or the background reaper, Options.ReapInterval) deletes
// them in bounded batches through the expires_at index.
//
// # Statements and round trips
//
// All times are the database's clock_timestamp(), never the application's.
//
// Begin is one statement (one round trip) that reads before it writes:
//
//	WITH cur AS (                                    -- the row, unlocked, and whether it is claimable
//	    SELECT …, (expires_at <= clock_timestamp()                      -- expired
//	              OR (state = 1 AND lease_expires_at <= clock_timestamp())  -- lease run out
//	              OR (state = 3 AND response IS NULL                    -- reclaimable
//	                  AND (NOT $6 OR fingerprint = $2))) AS claimable
//	    FROM t WHERE key = $1
//	), ins AS (                                      -- a new key
//	    INSERT INTO t (…) SELECT $1, 1, $2, $3, clock_timestamp() + $4, clock_timestamp() + $5, 0, NULL
//	    WHERE NOT EXISTS (SELECT FROM cur)
//	    ON CONFLICT (key) DO NOTHING RETURNING prior_state
//	), upd AS (                                      -- a takeover
//	    UPDATE t AS r SET state = 1, …, prior_state = CASE WHEN r.expires_at <= clock_timestamp() THEN 0 ELSE r.state END
//	    WHERE r.key = $1 AND EXISTS (SELECT FROM cur WHERE claimable) AND <claimable, on r>
//	    RETURNING r.prior_state
//	)
//	SELECT true, prior_state, NULL, … FROM ins UNION ALL SELECT true, prior_state, NULL, … FROM upd
//	UNION ALL SELECT false, 0, state, fingerprint, … FROM cur WHERE NOT claimable
//
// A replay (a COMPLETED record) or a duplicate of a request in flight (a live
// lease) is answered from cur: the guards skip the INSERT and the UPDATE, so
// it neither writes nor locks the row, and concurrent replays of one key never
// queue. A claim stays atomic: ON CONFLICT DO NOTHING waits for a concurrent
// inserter of the key and then inserts nothing, and the UPDATE locks the row
// and re-checks its WHERE on the row's latest version, so of racing claims
// exactly one wins. A claim that loses such a race returns no row, because
// its snapshot predates the winner's row; Begin then runs the statement again
// (a second round trip, in this race only), whose fresh snapshot shows the
// winner's committed row. Under REPEATABLE READ or SERIALIZABLE as the
// database's default isolation, the loser gets a serialization failure
// (SQLSTATE 40001) instead, which Begin retries the same way. RETURNING shows
// only the new row, so the UPDATE carries the state it replaces over in
// prior_state, and Begin reports BeginResult.Prior exactly.
//
// Finish is one fenced UPDATE … WHERE key = $1 AND token = $2 AND state = 1
// AND expires_at > clock_timestamp(); no row updated means idem.ErrFenced.
// Get is one SELECT that skips expired rows. A first request costs two round
// trips (Begin + Finish), a replay one (Get, or a Begin that returns the
// completed record) and no write.
//
// The statements run on an acquired connection through pgx's Conn.Query and
// Conn.Exec, so a pgx tracer sees each of them. Their arguments are encoded
// through pgtype's valuer interfaces (one allocation for all of them), and a
// row in pgx's binary formats is decoded from its raw values, the way pgx's
// Scan decodes it with the connection's type map (times in the ScanLocation
// of its TimestamptzCodec, if any); with a QueryExecMode that does not
// describe statements (simple protocol, exec), or on a connection whose type
// map has codecs of its own for the arguments' types, the store passes plain
// Go values, and a row in another format, or on a connection whose type map
// has codecs of its own for the columns' types, is read with Scan.
//
// # Transactions
//
// BeginTx opens a transaction for a holder and carries it in the context
// (Tx); commit runs Finish's fenced UPDATE in it and commits. Row locks make
// a holder's commit and a takeover of its (expired) lease mutually exclusive:
// see Store.BeginTx.
//
// # Notifications
//
// The store does not implement idem.Watcher. LISTEN/NOTIFY would need a
// dedicated connection per Store, and a transaction that has sent NOTIFY
// takes a database-wide lock at commit, which would serialize the commits of
// every Finish; waiting duplicates poll instead.
package pgstore
