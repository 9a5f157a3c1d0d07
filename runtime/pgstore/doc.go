// Package pgstore is an idempotency record store (idem.Store) on PostgreSQL,
// through pgx's *pgxpool.Pool. It also implements idem.LeaseExtender,
// idem.ReadFirst and idem.Transactor, the latter so that a handler's own
// writes and the COMPLETED record commit in one transaction. It needs
// PostgreSQL 9.5 or newer (ON CONFLICT, SKIP LOCKED) and is tested on
// PostgreSQL 15.
//
// # Schema
//
// (*Store).Migrate creates and upgrades the schema objects, recording the
// applied versions in <table>_version, and creates (or replaces) the
// function <table>_claim that Begin calls when it is missing or not this
// package's; where the role may not (creating needs CREATE on the schema,
// replacing also the function's ownership), Migrate logs a warning and
// Begin runs the claim statement below. SchemaSQL returns the same DDL,
// version records included, for teams that run their own migrations; the
// function's body is dollar-quoted, so a migration tool must not split it
// at semicolons.
//
// Privileges: at run time the store's role needs USAGE on the schema, SELECT,
// INSERT, UPDATE and DELETE on the table (DELETE for the reaper), and EXECUTE
// on the claim function (without it Begin runs the claim statement). What
// Migrate needs besides, how it works over a schema a DBA made, and why a
// rollback to an older pgstore after a newer one migrated the schema makes
// the older one's Migrate fail: see Store.Migrate. Version
// 1 is the records table and its index. The function is no schema version: it
// changes no layout, and an older pgstore, which refuses to migrate a version
// it does not know, keeps starting beside newer ones. With the default names
// (Schema "public", Table "idem_records"):
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
//	CREATE TABLE IF NOT EXISTS "public"."idem_records_version" (
//	    version    integer     PRIMARY KEY,
//	    applied_at timestamptz NOT NULL DEFAULT now()
//	);
//	INSERT INTO "public"."idem_records_version" (version) VALUES (1) ON CONFLICT (version) DO NOTHING;
//	CREATE OR REPLACE FUNCTION "public"."idem_records_claim"(
//	    claim_key text, claim_fp bytea, claim_token bigint, claim_lease interval, claim_ttl interval, same_fp boolean,
//	    OUT acquired boolean, OUT prior integer, OUT rec_state smallint, OUT rec_fingerprint bytea, OUT rec_token bigint,
//	    OUT rec_lease_expires_at timestamptz, OUT rec_expires_at timestamptz, OUT rec_response bytea)
//	LANGUAGE plpgsql AS $claim$
//	BEGIN
//	    -- The row, unlocked, into the record's result columns.
//	    SELECT c.state, c.fingerprint, c.token, c.lease_expires_at, c.expires_at, c.response
//	    INTO rec_state, rec_fingerprint, rec_token, rec_lease_expires_at, rec_expires_at, rec_response
//	    FROM "public"."idem_records" AS c WHERE c.key = claim_key;
//	    IF NOT FOUND THEN  -- a new key
//	        INSERT INTO "public"."idem_records" (key, state, fingerprint, token, lease_expires_at, expires_at, prior_state, response)
//	        VALUES (claim_key, 1, claim_fp, claim_token, clock_timestamp() + claim_lease, clock_timestamp() + claim_ttl, 0, NULL)
//	        ON CONFLICT (key) DO NOTHING;
//	        IF FOUND THEN
//	            acquired := true;
//	            prior := 0;
//	        END IF;  -- else a concurrent claim inserted the key: acquired is NULL
//	        RETURN;
//	    END IF;
//	    IF rec_state = 1 AND rec_token = claim_token AND rec_expires_at > clock_timestamp() THEN
//	        -- This very claim, made by an earlier run of the same call: its
//	        -- lease renewed from now, whether or not it ran out (no takeover:
//	        -- no other claim came in between), and the state the first run
//	        -- replaced. Before Begin has answered, only short statements lock
//	        -- the row (another claim's takeover, after which this one is lost).
//	        UPDATE "public"."idem_records" AS o SET lease_expires_at = clock_timestamp() + claim_lease
//	        WHERE o.key = claim_key AND o.token = claim_token AND o.state = 1 AND o.expires_at > clock_timestamp()
//	        RETURNING o.prior_state INTO prior;
//	        IF FOUND THEN
//	            acquired := true;
//	        END IF;  -- else the row changed meanwhile (expired, taken over): acquired is NULL
//	        rec_state := NULL; rec_fingerprint := NULL; rec_token := NULL;
//	        rec_lease_expires_at := NULL; rec_expires_at := NULL; rec_response := NULL;
//	        RETURN;
//	    END IF;
//	    IF NOT (rec_expires_at <= clock_timestamp()
//	        OR (rec_state = 1 AND rec_lease_expires_at <= clock_timestamp() AND (NOT same_fp OR rec_fingerprint = claim_fp))
//	        OR (rec_state = 3 AND rec_response IS NULL AND (NOT same_fp OR rec_fingerprint = claim_fp))) THEN  -- a replay, a live lease: the record
//	        acquired := false;
//	        prior := 0;
//	        RETURN;
//	    END IF;
//	    -- A takeover locks the row first, without waiting: a transaction that
//	    -- holds it (a BeginTx holder, alive; a Finish, the reaper, another
//	    -- claim) makes the request in flight.
//	    PERFORM FROM "public"."idem_records" AS l WHERE l.key = claim_key FOR NO KEY UPDATE SKIP LOCKED;
//	    IF NOT FOUND THEN  -- in flight, as this request: what the row held is no answer while its lock is held
//	        acquired := false;
//	        prior := 0;
//	        rec_state := 1;
//	        rec_fingerprint := claim_fp;
//	        rec_response := NULL;
//	        RETURN;
//	    END IF;
//	    UPDATE "public"."idem_records" AS r SET  -- a takeover
//	        state = 1,
//	        fingerprint = claim_fp,
//	        token = claim_token,
//	        lease_expires_at = clock_timestamp() + claim_lease,
//	        expires_at = clock_timestamp() + claim_ttl,
//	        prior_state = CASE WHEN r.expires_at <= clock_timestamp() THEN 0 ELSE r.state END,
//	        response = NULL
//	    WHERE r.key = claim_key AND (r.expires_at <= clock_timestamp()
//	        OR (r.state = 1 AND r.lease_expires_at <= clock_timestamp() AND (NOT same_fp OR r.fingerprint = claim_fp))
//	        OR (r.state = 3 AND r.response IS NULL AND (NOT same_fp OR r.fingerprint = claim_fp)))
//	    RETURNING r.prior_state INTO prior;
//	    IF FOUND THEN
//	        acquired := true;
//	    END IF;  -- else a concurrent claim changed the row first: acquired is NULL
//	    rec_state := NULL; rec_fingerprint := NULL; rec_token := NULL;
//	    rec_lease_expires_at := NULL; rec_expires_at := NULL; rec_response := NULL;
//	END
//	$claim$;
//
// The primary key is the unique constraint on the scope key; COLLATE "C"
// compares keys as bytes, which is all the store needs and the fastest. Keys
// must be valid UTF-8 without NUL bytes, at most MaxKeyLen bytes (the engine's
// encoded scope keys are). Tokens are uint64; they are stored as bigint by
// reinterpreting the bits (int64(token)), which is lossless both ways.
// prior_state exists because RETURNING shows only the new row: a takeover
// copies the state it replaces into it, so Begin reports BeginResult.Prior
// exactly, also to a re-run of the same claim (below), which finds the first
// run's row.
// fillfactor 90 leaves room in each page for Finish's update to stay a HOT
// update (no index change).
//
// # Reaping
//
// Expired rows are invisible to Get and claimable by Begin; the background
// reaper, which New starts and Close stops, deletes them in batches of
// Options.ReapBatch through the expires_at index, every DefaultReapInterval
// unless Options.ReapInterval says otherwise (negative: off; then call Reap
// on a schedule of your own, or the table grows with every new key). Each
// statement of the reaper runs at most Options.ReapTimeout. Reapers of
// several processes on one table are safe together: a reaping statement
// locks the rows it deletes and skips those another one holds (FOR UPDATE
// SKIP LOCKED). A reaper that cannot work in its setup (a role without
// DELETE, no table, a read-only standby) logs one warning to
// Options.Logger and backs off, doubling its interval up to an hour (or
// ReapInterval, if longer); other errors are logged at every tick. A zero
// ReapInterval used to mean no reaper: set it negative for that.
//
// # Statements and round trips
//
// All times are the database's clock_timestamp(), never the application's
// (the reaper's bound is statement_timestamp(), the start of its statement:
// an index bound must be stable within a statement).
//
// Begin is one statement (one round trip) that calls the claim function,
// which reads the row before it writes: the call itself,
//
//	SELECT * FROM "public"."idem_records_claim"($1::text, $2::bytea, $3::bigint, $4::interval, $5::interval, $6::boolean)
//
// or, while replays are frequent, a statement that reads the row first and
// calls the function only when the row is not an answer by itself (the
// query claimRead in store.go: the row's SELECT, UNION ALL the function's
// call in an OFFSET 0 sub-select, LIMIT 1).
//
// Both answer alike. A replay (a COMPLETED record, or a FAILED one with its
// response) or a duplicate of a request in flight (a live lease of another
// claim) is answered from the row read, by the function's SELECT or by the
// second statement's first (as the function would answer it; the function
// then does not run: LIMIT 1 stops the statement at that row). Neither
// writes nor locks that row, so concurrent replays of one key never queue.
// Reading first costs the server about a third less CPU for a replay than
// the call, but a claim the function decides (a new key, a takeover) pays
// for the read that found nothing to answer. So the Store counts, over
// epochs of Begins, those answered from a record (one atomic add a Begin),
// and reads first while enough of them were (claimChooser in store.go has
// the thresholds and the measurements behind them). A
// new Store calls the function alone: most Begins of a typical service are
// first requests. A
// claim stays atomic: for a new key, INSERT … ON CONFLICT DO NOTHING waits
// for a concurrent inserter of the key and then inserts nothing; a takeover
// (an expired record, a run-out lease, a reclaimable FAILED record) locks
// the row without waiting (SELECT … FOR NO KEY UPDATE SKIP LOCKED), then
// UPDATEs it, re-checking the claimable condition on the row's latest
// version. So of racing claims exactly one wins. A claimable row that
// another transaction holds locked (a holder's transaction above READ
// COMMITTED, a Finish, the reaper, another claim) is answered at once as in
// flight: not acquired, a PENDING record with the request's own fingerprint
// (what the row held is no answer while another transaction holds it: a
// takeover in progress may be this request's own duplicate, an expired
// response must not be replayed, nor a FAILED record claimed again at once; a
// duplicate with another body gets its 422 on a later retry); the engine
// answers 409 with Retry-After, or waits per its policy, and a retry finds the
// outcome. A claim that loses such a race answers acquired = NULL, because the
// row it read predates the winner's; Begin then calls the function again (a
// second round trip, in this race only), whose fresh snapshot shows the
// winner's committed row.
// Under REPEATABLE READ or SERIALIZABLE as the database's default isolation,
// the loser gets a serialization failure (SQLSTATE 40001) instead, which Begin
// retries the same way. RETURNING shows only the new row, so the UPDATE
// carries the state it replaces over in prior_state, and Begin reports
// BeginResult.Prior exactly. A PENDING row that carries the request's own
// token (unexpired) is this very claim, made by an earlier run of the same
// Begin (the idem.Store contract's re-run): the function renews its lease
// from now, whether or not it ran out, with an UPDATE of that column alone
// (which does not skip a locked row: before Begin has answered, only short
// statements lock it, such as another claim's taking over a lease that ran
// out), and answers acquired with the row's prior_state, the state the
// first run replaced; a row that changed meanwhile (taken over, expired) is
// a lost race, as above. The function is plpgsql, VOLATILE (each of its
// statements takes a fresh snapshot under READ COMMITTED) and SECURITY
// INVOKER; it names the table schema-qualified instead of setting a
// search_path, which would cost every call.
//
// Get is a plain SELECT by key (of an unexpired row), and the store
// implements idem.ReadFirst: the engine replays a retry of a key whose
// record it completed or replayed before with that SELECT, which costs the
// server less than the function.
//
// Where the function is missing (a schema an older pgstore migrated, or an
// older SchemaSQL applied by hand, or a role without the CREATE privilege on
// the schema ran Migrate), Begin cannot call it. Begin's first call then
// fails (SQLSTATE 42883, or 42501 for a role that may not execute the
// function; the server logs that error for each Begin that ran into it before
// the switch), and the Store falls back to the claim statement of older
// pgstores, one statement with the same semantics that costs the server more
// per claim (a replay more than twice the CPU on PostgreSQL 15):
//
//	WITH cur AS (                                    -- the row, unlocked, and whether it is claimable
//	    SELECT …, (expires_at <= clock_timestamp()                      -- expired
//	              OR (state = 1 AND lease_expires_at <= clock_timestamp()   -- lease run out
//	                  AND (NOT $6 OR fingerprint = $2))
//	              OR (state = 3 AND response IS NULL                    -- reclaimable
//	                  AND (NOT $6 OR fingerprint = $2))) AS claimable,
//	        (state = 1 AND token = $3 AND expires_at > clock_timestamp()) AS own  -- this claim, run again
//	    FROM t WHERE key = $1
//	), own AS (                                      -- a re-run renews its lease
//	    UPDATE t AS o SET lease_expires_at = clock_timestamp() + $4
//	    WHERE o.key = $1 AND o.token = $3 AND o.state = 1 AND o.expires_at > clock_timestamp()
//	        AND EXISTS (SELECT FROM cur WHERE own)
//	    RETURNING o.prior_state
//	), locked AS (                                   -- a takeover locks the row, never waiting
//	    SELECT FROM t WHERE key = $1 AND EXISTS (SELECT FROM cur WHERE claimable AND NOT own) FOR NO KEY UPDATE SKIP LOCKED
//	), ins AS (                                      -- a new key
//	    INSERT INTO t (…) SELECT $1, 1, $2, $3, clock_timestamp() + $4, clock_timestamp() + $5, 0, NULL
//	    WHERE NOT EXISTS (SELECT FROM cur)
//	    ON CONFLICT (key) DO NOTHING RETURNING prior_state
//	), upd AS (                                      -- a takeover
//	    UPDATE t AS r SET state = 1, …, prior_state = CASE WHEN r.expires_at <= clock_timestamp() THEN 0 ELSE r.state END
//	    WHERE r.key = $1 AND EXISTS (SELECT FROM locked) AND <claimable, on r>
//	    RETURNING r.prior_state
//	)
//	SELECT true, prior_state, NULL, … FROM ins UNION ALL SELECT true, prior_state, NULL, … FROM upd
//	UNION ALL SELECT true, prior_state, NULL, … FROM own
//	UNION ALL SELECT false, 0, state, fingerprint, … FROM cur WHERE NOT claimable AND NOT own
//	UNION ALL SELECT false, 0, 1, …, NULL FROM cur WHERE claimable AND NOT own AND NOT EXISTS (SELECT FROM locked)  -- locked: in flight
//
// A lost race is no row at all here. The Store uses the function again after
// its own Migrate succeeds, or once it finds the function there (another
// process's Migrate, a DBA's migration): while it claims with the statement,
// one Begin a minute first looks for the function, with one catalog query.
// The function and the statement take the same locks and re-check the same conditions on the same rows, so
// processes claiming either way (during a rolling deploy) are correct
// together, and older processes keep migrating (their Migrate sees version 1).
// A function an older pgstore installed (whose takeover waited for a locked
// row) is replaced by the next Migrate, which finds its body is not this
// package's; until then Begin calls it, correctly, only waiting where this
// package's would answer in flight. An older pgstore's Migrate puts its own
// body back in turn (it compares the body too), so during a rolling deploy
// the last process to migrate decides; a Store that fell back to the
// statement takes up the function only when its body is this package's.
// So it is for the strict rule on expired leases: this package's function
// and statement take over a PENDING row whose lease ran out only with the
// request's fingerprint when same_fp ($6) is set (strict semantics: another
// body gets the row back, and a 422), where older ones let any fingerprint
// take it over. The arguments, result and rows written are the same; until
// the deploy is over (and this package's Migrate the last), an older body
// may still let another request take an expired claim over, as it always
// did.
//
// Finish is one fenced UPDATE … WHERE key = $1 AND token = $2 AND state = 1
// AND expires_at > clock_timestamp() (or a row that already holds the token,
// state and response: a re-run of the same Finish, which the idem.Store
// contract has succeed); no row updated means idem.ErrFenced. ExtendLease is
// one fenced UPDATE of lease_expires_at (and of expires_at, when the lease
// ends later; in BeginTx's transaction above READ COMMITTED a read, whose
// lease commit, or a statement after a rollback, writes: see BeginTx). Under
// REPEATABLE READ or SERIALIZABLE as the database's default isolation, either
// may fail with a serialization failure when the row changed after the
// statement's snapshot (a Finish meeting the holder's own heartbeat, which
// the engine does not wait for; a takeover); it then runs again, with a fresh
// snapshot, which decides as under READ COMMITTED: done, or idem.ErrFenced.
// Reap's DELETE, which fails so when a row it read expired is taken over
// before it locks it, and ExtendLease's read while a transaction of BeginTx
// locks the row, run again likewise. pgx never sends a statement twice, and
// the store tries one again only after an attempt that wrote nothing (a lost
// race, a serialization failure, a missing claim function), so none takes
// effect twice for one call here. Get is one SELECT that skips expired rows.
// A first request costs two round trips (Begin + Finish), a replay one (Get,
// or a Begin that returns the completed record) and no write.
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
// A Begin that fails marks its error idem.ErrNothingDone when the claim
// certainly was not made: the pool's Acquire failed, pgx reports the
// error as occurring before anything was sent (pgconn.SafeToRetry), or
// PostgreSQL answered with an ERROR (the claim is one statement in a
// transaction of its own, rolled back), but for one of SQLSTATE class 08
// (connection exception: a pooler such as PgBouncer answers one when its
// server connection failed, possibly after it forwarded the statement). A
// connection lost, or a read that timed out or was cancelled, after the
// statement was sent may have committed the claim, and the engine
// releases it (TestBeginNothingDone).
//
// # Transactions
//
// BeginTx opens a transaction for a holder and carries it in the context
// (Tx); commit runs Finish's fenced UPDATE in it and commits. Row locks make
// a holder's commit and a takeover of its (expired) lease mutually
// exclusive, at every isolation level: see Store.BeginTx.
//
// Size the pool for it: a transaction of BeginTx holds one of the pool's
// connections from before the handler runs until its commit or rollback,
// while every other call (Begin, Get, ExtendLease: the heartbeats, which
// above READ COMMITTED also read the row's lock, a Finish outside a
// transaction, the reaper) acquires a connection for one statement.
// pgxpool's default MaxConns is the greater of 4 and runtime.NumCPU(): with
// that many transactional handlers in flight nothing else gets a
// connection. Set MaxConns (pool_max_conns in the URL) to at least the
// number of transactional handlers that may run at once plus headroom for
// the other calls (a few connections, more for heavy traffic), bound the
// concurrency in front of the handlers to match, and keep the total within
// the server's max_connections. A starved pool shows as new requests
// answered 503 IDEMPOTENCY_STORE_UNAVAILABLE (a Begin waited the engine's
// StoreTimeout for a connection) and heartbeats that fail ("idem: lease
// extension failed" warnings). A transactional holder whose heartbeats keep
// failing (one that cannot get a connection within the engine's
// StoreTimeout fails) has its transaction cancelled as its lease ends
// (context.Cause: idem.ErrLeaseLost) under READ COMMITTED, where nothing
// keeps a takeover out once the lease ran out: nothing is committed, its
// request ends with 503 and the key is released for a retry. A starved
// pool thus turns slow handlers into cancelled ones there. Above READ
// COMMITTED the transaction holds the record's row lock, which every
// takeover must take first (Store.TxHoldsLock, idem.TxLockHolder): while
// its heartbeats fail only because the pool has no free connection (every
// one of MaxConns established and in use), the engine does not cancel it,
// and the handler commits. A heartbeat that fails otherwise (a dial
// refused or unanswered, a statement that timed out on a connection it
// got: the server unreachable) gets it cancelled as its lease ends, as
// under READ COMMITTED, and one that reaches the server and finds the lock
// gone (its backend terminated) at once (idem.ErrFenced).
//
// # Durability
//
// A record is as durable as the commit that wrote it. Streaming replication
// is asynchronous by default: a standby promoted after the primary failed
// may lack the last commits the primary acknowledged, records (and, with
// BeginTx, the handler's writes) included, and a retry of such a key runs
// again. Where a failover must not lose records, have commits wait for the
// standby a failover may promote (synchronous_standby_names naming it, with
// synchronous_commit on, its default, or remote_apply), or use a managed
// service whose failover keeps every acknowledged commit.
//
// # Notifications
//
// The store does not implement idem.Watcher. LISTEN/NOTIFY would need a
// dedicated connection per Store, and a transaction that has sent NOTIFY
// takes a database-wide lock at commit, which would serialize the commits of
// every Finish; waiting duplicates poll instead.
package pgstore
