// Package redisstore is an idempotency record store (idem.Store) on Redis,
// through go-redis's redis.UniversalClient: a standalone server, Sentinel
// (a failover client) or Cluster. It also implements idem.LeaseExtender,
// idem.Watcher and idem.ReadFirst. It needs Redis 6.2 or newer (SET … PXAT,
// GETEX).
//
// # Round trips
//
// Each operation is one round trip: Begin, Finish and ExtendLease run a Lua
// script (EVALSHA; the store falls back to EVAL, which caches the script
// again, when a server answers NOSCRIPT after a restart, failover or SCRIPT
// FLUSH), and Get is a plain read: GET, or, for a Cluster client built to
// read from replicas (ReadOnly, RouteByLatency, RouteRandomly), GETEX
// without options, which go-redis sends to the primary as a write command.
// A first request costs two round trips (Begin + Finish); a replay costs
// one: a GET when the engine reads first (idem.ReadFirst: a retry of a key
// whose record this engine completed or replayed before), else a Begin that
// finds the completed record and returns it before it reads the clock.
//
// A call allocates little: the key and the script's arguments (packed into
// one string, see scripts.go) are built in pooled memory, the reply is read
// by a typed go-redis command (a string or an integer, never an interface),
// and a record's response aliases the reply.
//
// # Keys and Cluster
//
// A record is one Redis key, <prefix>{<scope key>}, so no operation ever
// spans slots. The braces make the scope key the Cluster hash tag: the slot
// depends on the scope key alone, never on the prefix. A scope key holding
// '{', '}' or '%' is escaped (%7B, %7D, %25) so that its tag is the whole
// scope key and distinct scope keys stay distinct keys. The notification
// channel of a record has the same name as its key. The tests run the
// conformance suite on a standalone server, a Redis Cluster of three primaries
// and a Sentinel setup (a failover client), and check on the cluster where
// records land (the server's CLUSTER KEYSLOT, the owning primary), the EVAL
// fallback after SCRIPT FLUSH on one primary, and Watch across primaries.
//
// # Record layout
//
// A record is one string: a 60-byte header and the response.
//
//	offset  size  field
//	0       1     format version (1)
//	1       1     state: 1 PENDING, 2 COMPLETED, 3 FAILED
//	2       1     flags: 1 = a response follows (tells an empty response from none)
//	3       8     fencing token, big-endian
//	11      8     lease expiry, Unix milliseconds, big-endian
//	19      8     record expiry (ExpiresAt), Unix milliseconds, big-endian
//	27      33    fingerprint
//	60      …     response
//
// A string was chosen over a HASH of fields after measuring (BenchmarkLayout):
// per record, Redis's MEMORY USAGE is 296 bytes for the string against 675
// for the hash with a 100-byte response, 616 against 1078 with 400 bytes and
// 4200 against 5456 with 4000 bytes (the hash's values outgrow the compact
// listpack encoding); reading it back costs 7 allocations instead of 21; and
// Finish rewrites it with one SET … KEEPTTL, which keeps the key's expiry
// and allocates the string at its size (an APPEND of the response would
// grow it greedily, up to twice that).
//
// # Server-side decisions
//
// All decisions happen inside the scripts, on the server's clock (TIME):
// whether a lease has run out, ExpiresAt (the key expires at it, by SET …
// PXAT, so Redis forgets the record on its own), and fencing. Tokens are
// compared as 8-byte strings, never as Lua numbers (doubles cannot hold
// every uint64). Durations are passed in milliseconds, rounded up.
//
// # Retries
//
// go-redis sends a command again (up to Options.MaxRetries, 3 by default; a
// ClusterClient up to ClusterOptions.MaxRedirects, 3 by default, its nodes'
// MaxRetries being -1 unless set) when the connection drops after the
// command was sent, so a script may run twice for one call, the second run
// finding what the first wrote. The scripts answer such a re-run as the
// first run did: Begin finding a
// PENDING record with the request's own token reports the claim acquired
// and renews its lease from the re-run's now, as the claim did (also when
// it ran out meanwhile: that is no takeover), with Prior 0 (the record does
// not keep the state the claim replaced, so a takeover whose reply was lost
// is reported as a claim of a new key: see idem.EventLeaseTakeover), Finish
// finding its own token, state and response succeeds, and ExtendLease sets
// the lease again (TestLostReply loses the replies through a TCP proxy).
// Tokens are fresh per claim, so no other call matches.
//
// A Begin that fails marks its error idem.ErrNothingDone when go-redis
// certainly did not run the script: it never wrote the command on a
// connection (no connection could be had; the store sees whether go-redis
// marshalled the key argument, which it does only to write it), or the
// only write was answered with an error reply by which Redis refuses a
// script before it ran or that the begin script meets before its one
// write, its last step (READONLY, NOREPLICAS, MISCONF, OOM, LOADING, BUSY,
// NOPERM, NOAUTH, WRONGTYPE, CLUSTERDOWN, TRYAGAIN, MASTERDOWN, IDEMRECORD).
// go-redis sends a command again after LOADING, READONLY, NOREPLICAS,
// MASTERDOWN, CLUSTERDOWN and TRYAGAIN, unless its retries are off
// (MaxRetries -1; for a ClusterClient, which retries through MaxRedirects,
// MaxRedirects -1, with ClusterOptions.MaxRetries left unset): with
// retries, those come after another write and are not marked. Any other
// failed Begin (a written command whose reply was lost, even when the
// retries' dials then failed or a retry got an error reply; an error reply
// not in that list, such as a proxy's ERR after it forwarded the command)
// may have claimed the key, and the engine releases that claim
// (TestBeginNothingDone).
//
// # Watch
//
// Finish, and a Begin that replaces an existing record, publish on the
// record's channel from inside their script. Watch multiplexes all watches of
// a Store over one pub/sub connection; see Store.Watch for what its channel
// promises. Redis Cluster broadcasts every PUBLISH to all nodes; a cluster
// that never waits for duplicates can turn publishing off with
// Options.DisableNotify.
//
// # ACL
//
// The user the client logs in as needs, on the keys <prefix>{*: EVALSHA and
// EVAL (and SCRIPT LOAD for LoadScripts); GET (GETEX for a Cluster client
// that reads from replicas); inside the scripts GET, SET, SETRANGE,
// GETRANGE, TIME and PUBLISH; and for Watch's pub/sub connection SUBSCRIBE,
// UNSUBSCRIBE and PING. Every key is <prefix>{<scope key>} and a prefix
// never contains '{', so ~<prefix>{*, unlike ~<prefix>*, does not also
// grant the keys of another tenant whose prefix extends this one, say
// <prefix>b:. The user also needs the record channels, named like the keys:
// &<prefix>{* (Redis 7 gives a new user no channel by default,
// acl-pubsub-default resetchannels), or Options.DisableNotify; see below
// for what is lost without them. Key and channel patterns are globs: in a
// prefix that contains *, ?, [, ] or \ put a backslash before each such
// character in the pattern, or it matches other keys, not the prefix's (for
// the prefix svc[a]: the rules are ~svc\[a\]:{* and &svc\[a\]:{*, while
// ~svc[a]:{* grants svca:{...} and not svc[a]:{...}; TestACLGlobPrefix).
// For the default prefix on a standalone server (TestLeastPrivilegeACL runs
// the conformance suite as such a user):
//
//	ACL SETUSER app on >secret ~idem:{* &idem:{* +evalsha +eval +script|load +get
//	    +set +setrange +getrange +time +publish +subscribe +unsubscribe +ping
//
// A Cluster client needs more, on every node (ACL rules are per node):
// +cluster|slots, which go-redis discovers the slots with; +command, the
// command table go-redis's cluster client loads to route commands (without
// it every call sends a COMMAND, refused, to the nodes, and go-redis logs
// NOPERM); and +asking, which go-redis sends before retrying a command that
// a slot's migration redirected (ASK): without it a Begin or Get of a key
// in a migrating slot fails NOPERM, a 503. A Cluster client that reads from
// replicas (ReadOnly, RouteByLatency, RouteRandomly) also needs +readonly
// and +getex. For the default prefix (TestClusterLeastPrivilegeACL runs
// the conformance suite on a Cluster as such a user):
//
//	ACL SETUSER app on >secret ~idem:{* &idem:{* +evalsha +eval +script|load +get
//	    +set +setrange +getrange +time +publish +subscribe +unsubscribe +ping
//	    +cluster|slots +command +asking
//
// A Sentinel client asks the sentinels for the primary (SENTINEL …, as the
// sentinels' own user).
//
// Without the channels, records are still written and answered correctly (a
// script's PUBLISH is a redis.pcall, whose failure loses only the
// notification), but Watch's SUBSCRIBE is refused: each Watch says "look
// again" after about a second (it waits that long for the server's
// confirmation), and a waiting duplicate finds the change by polling. The
// Store forgets such a subscription about a second after its last Watch has
// stopped, so refused watches of ever new keys do not accumulate.
//
// # Durability
//
// Redis replicates asynchronously: a failover (Sentinel or Cluster) can lose
// the last writes acknowledged by the old primary, so a claim or a completion
// may vanish and a retry of that key execute again. Where that is not
// acceptable (payments), use the PostgreSQL store (runtime/pgstore) with
// synchronous replication: its streaming replication is asynchronous too by
// default (see that package's Durability section).
//
// Eviction loses records the same way: every record has an expiry, so a
// server that reaches its maxmemory under a volatile-* or allkeys-*
// maxmemory-policy silently evicts records, PENDING and COMPLETED alike, and
// a duplicate of an evicted key executes again (a takeover of a running
// request's key, or a second run of a finished one). Keep the records on a
// server (or a dedicated instance) with maxmemory-policy noeviction, and
// enough memory for the records of a window. noeviction is the default of
// a self-hosted Redis only: managed services set their own (Google Cloud
// Memorystore and Amazon ElastiCache default to volatile-lru), under which
// every record, PENDING ones included, can be evicted silently; set the
// policy in the service's configuration (parameter group) and check it
// (CONFIG GET maxmemory-policy, where allowed).
//
// At its maxmemory a noeviction server refuses writes (OOM) and loses
// nothing (TestOutOfMemory): completed records are still replayed; a new
// key is answered 503 IDEMPOTENCY_STORE_UNAVAILABLE and its handler does
// not run; a Finish is refused as when Redis fails as the request finishes:
// the response is sent, the record stays PENDING, and the engine tries the
// Finish again in the background for idem.Options.FinishRetryFor (a retry
// after that runs again once the lease has run out).
//
// # Timeouts
//
// New requires a client built with ContextTimeoutEnabled: true, so that the
// deadline of a request's context bounds every wait for Redis: an unreachable
// or hung server yields an error by the deadline, which the engine turns into
// 503 IDEMPOTENCY_STORE_UNAVAILABLE.
//
// # Hooks
//
// The key and the script's argument of a command live in memory the store
// reuses for its next call once the command returns. A go-redis hook sees
// them whole during the call (cmd.String(), cmd.Args() formatted then); one
// that keeps a command to read after the call returns (a queued, lazily
// formatted log or span) must copy what it needs first.
package redisstore
