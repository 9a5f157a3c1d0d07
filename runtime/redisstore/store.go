package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Options configure a Store.
type Options struct {
	// Prefix starts every Redis key and channel name the store uses; it lets
	// several applications or environments share one Redis. Empty means
	// DefaultPrefix. It must not contain '{' or '}' (the scope key is the
	// Cluster hash tag, see the package documentation). A prefix with a
	// glob character (*, ?, [, ], \) needs it escaped in ACL patterns (see
	// ACL in the package documentation).
	Prefix string

	// DisableNotify turns off the PUBLISH a record change makes on the
	// record's channel. Publishing costs nothing measurable on a standalone
	// server or under Sentinel, but Redis Cluster broadcasts every PUBLISH to
	// all nodes; a cluster whose services never wait for duplicates (the
	// contract's in-flight wait: 0s) may switch it off. With notifications off,
	// Watch never reports a change, and waiters find changes by polling.
	DisableNotify bool
}

// Store is an idem.Store on Redis. It is safe for concurrent use. It
// implements idem.LeaseExtender, idem.Watcher and idem.ReadFirst.
type Store struct {
	client redis.UniversalClient
	prefix string
	notify byte // 1 or 0, passed to the scripts
	get    any  // Get's command, boxed once (a string boxed per call allocates): "get", or "getex" for a client that reads from replicas (see New)

	hub    *hub
	closed bool
	mu     sync.Mutex
}

var (
	_ idem.Store         = (*Store)(nil)
	_ idem.LeaseExtender = (*Store)(nil)
	_ idem.Watcher       = (*Store)(nil)
	_ idem.ReadFirst     = (*Store)(nil)
)

// New returns a Store that keeps its records in client, which may be a
// standalone, Sentinel (failover) or Cluster client. New makes no request;
// the scripts are loaded on first use (or by LoadScripts).
//
// The client must be built with ContextTimeoutEnabled: true, and New rejects
// one that is not: without it go-redis bounds a network read by its
// ReadTimeout (5 s by default, then retries) instead of the caller's context,
// so a request facing a hung Redis would wait far past its deadline.
//
// A *redis.Ring works for Begin, Finish and Get (every record is one key),
// but not for Watch (a Ring's pub/sub is per shard): with a Ring the store
// does not publish, and Watch never reports a change.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	ctxTimeout, ring, replicas := true, false, false
	switch c := client.(type) {
	case *redis.Client:
		ctxTimeout = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		o := c.Options()
		ctxTimeout = o.ContextTimeoutEnabled
		replicas = o.ReadOnly || o.RouteByLatency || o.RouteRandomly
	case *redis.Ring:
		ctxTimeout, ring = c.Options().ContextTimeoutEnabled, true
	}
	if !ctxTimeout {
		return nil, errors.New("redisstore: the client must be built with ContextTimeoutEnabled: true, " +
			"or go-redis ignores the deadline of a request's context while it waits for Redis")
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q contains '{' or '}', which would change the Cluster hash tag", prefix)
	}
	s := &Store{client: client, prefix: prefix, notify: 1, get: "get"}
	if replicas {
		// GETEX without options is GET, but a write command to go-redis:
		// a Cluster client built to read from replicas still sends it to
		// the primary, whose answer (and clock for the key's expiry) is
		// the one the scripts see. Elsewhere GET, which a server refusing
		// writes (NOREPLICAS, MISCONF, READONLY) still answers.
		s.get = "getex"
	}
	if opts.DisableNotify || ring {
		s.notify = 0
	}
	return s, nil
}

// LoadScripts loads the store's Lua scripts into the script cache of every
// server the client talks to (SCRIPT LOAD; a Cluster client sends it to every
// primary). Calling it is optional: a script missing from the cache (a new or
// restarted server, SCRIPT FLUSH) is sent once with EVAL, which caches it, and
// EVALSHA is used from then on.
func (s *Store) LoadScripts(ctx context.Context) error {
	for _, sc := range []*script{beginScript, finishScript, extendScript} {
		if err := s.client.ScriptLoad(ctx, sc.src).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}

// Close releases the connection Watch uses. It does not close the client.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	h := s.hub
	s.mu.Unlock()
	if h != nil {
		return h.close()
	}
	return nil
}

// check refuses a call before any request: an ended context (so the call
// changes nothing) or an empty key; its error is marked idem.ErrNothingDone.
func check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return idem.NothingDone(fmt.Errorf("redisstore: %s: %w", op, err))
	}
	if key == "" {
		return idem.NothingDone(fmt.Errorf("redisstore: %s: empty key", op))
	}
	return nil
}

// ms converts a duration to whole milliseconds, rounding up, so that a lease
// or TTL is never shorter than asked. It cannot overflow: math.MaxInt64 ns
// is 9223372036855 ms (292 years), which the scripts add to the server's
// clock exactly (Lua numbers are doubles, exact to 2^53) and pass to PXAT.
// (Rounding up by adding 999999 ns first overflowed for durations within a
// millisecond of math.MaxInt64: a TTL of math.MaxInt64 was refused, ERR
// invalid expire time, and ExtendLease(math.MaxInt64) moved the lease into
// the past.)
func ms(d time.Duration) int64 {
	n := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		n++
	}
	return n
}

// op is the memory of one store call, reused through opPool: the Redis key,
// the packed script argument, and the command's arguments, which point into
// it (a pointer in an interface costs no allocation; a string or a slice
// would). go-redis is done with a command's arguments when Process returns;
// a hook that kept a command past its call would see them reused, so hooks
// must format what they keep during the call (see the package doc).
type op struct {
	buf  []byte // the key, then the packed argument
	key  keyArg // the Redis key, aliasing buf
	arg  bytesArg
	resp bytesArg // Finish's response (the caller's memory: cleared after the call)
	args [6]any
}

// keyArg and bytesArg are arguments behind a pointer, which go-redis writes
// through encoding.BinaryMarshaler and formats (for a hook's cmd.String(),
// and a Cluster client's or Ring's routing, which reads the key) through
// fmt.Stringer. (A *string would be written and routed as it is, but
// cmd.String() prints it as an address: TestCommandText.)
//
// keyArg counts the times go-redis asked for the key's bytes (writes): it
// does so only to write the command on a connection (once per attempt
// that got one: its retries and a Cluster redirection write it again), so
// a command whose key was never marshalled was never sent (see
// nothingDone).
type (
	keyArg struct {
		s      string
		writes int
	}
	bytesArg []byte
)

func (k *keyArg) MarshalBinary() ([]byte, error) {
	k.writes++
	return unsafe.Slice(unsafe.StringData(k.s), len(k.s)), nil
}

func (k *keyArg) String() string { return k.s }

func (b *bytesArg) MarshalBinary() ([]byte, error) { return *b, nil }

func (b *bytesArg) String() string { return strconv.Quote(string(*b)) }

var opPool = sync.Pool{New: func() any { return new(op) }}

// newOp returns an op holding the Redis key of scope, with room after it for
// the packed argument of n bytes, which the caller appends to o.arg.
func (s *Store) newOp(scope string, n int) *op {
	o := opPool.Get().(*op)
	b := s.appendKey(o.buf[:0], scope)
	k := len(b)
	if cap(b)-k < n {
		b = append(b, make([]byte, n)...)[:k]
	}
	o.buf = b
	o.key.s, o.key.writes = unsafe.String(unsafe.SliceData(b), k), 0
	o.arg = bytesArg(b[k:k:cap(b)])
	return o
}

func (o *op) free() {
	o.key.s, o.resp = "", nil
	o.args = [6]any{}
	if cap(o.buf) <= 1024 { // do not pool what an unusual key grew
		opPool.Put(o)
	}
}

// evalArgs sets o.args for a script run over o.key and o.arg (and, with
// resp, o.resp) and returns them.
func (o *op) evalArgs(sc *script, resp bool) []any {
	o.args[0], o.args[1], o.args[2], o.args[3], o.args[4] = "evalsha", sc.shaArg, 1, &o.key, &o.arg
	if resp {
		o.args[5] = &o.resp
		return o.args[:6]
	}
	return o.args[:5]
}

// run runs the script whose arguments evalArgs set in o.args through cmd,
// a command made over them: EVALSHA, and EVAL (which caches the script
// again) when the server answers NOSCRIPT (a new or restarted server, a
// failover, SCRIPT FLUSH).
func (s *Store) run(ctx context.Context, sc *script, o *op, cmd redis.Cmder) error {
	cmd.SetFirstKeyPos(3)
	_ = s.client.Process(ctx, cmd)
	err := cmd.Err()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if o.key.writes == 1 {
			// The only write of the EVALSHA was answered NOSCRIPT: it ran nothing.
			o.key.writes = 0
		}
		o.args[0], o.args[1] = "eval", sc.srcArg
		cmd.SetErr(nil)
		_ = s.client.Process(ctx, cmd)
		err = cmd.Err()
	}
	return err
}

// nothingDone reports whether err, the error of a script run over o (run),
// certainly changed nothing on the server: go-redis never wrote the
// command on a connection (the key was never marshalled: no connection
// could be had, the dial failed or timed out, the pool handed out none in
// time, the client was closed, a hook refused the call; an error of the
// last attempt alone would not tell, as go-redis sends the command again
// after a reply lost with its connection), or its only write was answered
// with an error reply that Redis gives before the begin script ran, or from
// inside it before its one write (refusal). The begin script writes once,
// as its last step but for a PUBLISH it runs with pcall, so a script that
// failed wrote nothing. go-redis sends a command again after a LOADING,
// READONLY, NOREPLICAS, MASTERDOWN, CLUSTERDOWN or TRYAGAIN reply (unless
// its MaxRetries is -1; a ClusterClient's MaxRedirects, through which it
// retries, its nodes' MaxRetries being -1 unless set), as after a lost
// one: that is a second write, and
// such an error is then not marked. Only Begin marks the errors of its
// script run (the engine looks at Begin's); check marks a call it refuses
// before any request, for every operation.
func nothingDone(o *op, err error) bool {
	if o.key.writes == 0 {
		return true
	}
	var re redis.Error
	return o.key.writes == 1 && errors.As(err, &re) && refusal(re.Error())
}

// refusals are the error codes of the replies that refuse a script before
// it ran, or that it raises before its one write (the begin script's own
// IDEMRECORD: a record it cannot read). NOSCRIPT is not one: run sends
// the script again after it (see run). Any other error reply is not taken
// for a refusal: a proxy in front of Redis (Envoy's "ERR upstream
// failure", twemproxy's) may answer one after it forwarded the command.
var refusals = []string{
	"READONLY", "NOREPLICAS", "MISCONF", "OOM", "LOADING", "BUSY", "NOPERM", "NOAUTH",
	"WRONGTYPE", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "IDEMRECORD",
}

// refusal reports whether msg, an error reply, is one of the refusals:
// its code (the first word) is.
func refusal(msg string) bool {
	code, _, _ := strings.Cut(msg, " ")
	return slices.Contains(refusals, code)
}

// putUint64 appends v big-endian.
func putUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// finishArg appends the finish script's packed argument (finishArgLen
// bytes) to b: the token, the state, whether there is a response, and the
// notify flag.
func finishArg(b []byte, token idem.Token, state idem.State, response []byte, notify byte) []byte {
	return append(putUint64(b, uint64(token)), byte(state), bit(response != nil), notify)
}

// extendArg appends the extend script's packed argument (extendArgLen
// bytes) to b: the token and the lease in milliseconds.
func extendArg(b []byte, token idem.Token, lease time.Duration) []byte {
	return putUint64(putUint64(b, uint64(token)), uint64(ms(lease)))
}

func bit(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Begin implements idem.Store: one EVALSHA of the begin script.
func (s *Store) Begin(ctx context.Context, req *idem.BeginRequest) (idem.BeginResult, error) {
	if err := check(ctx, "begin", req.Key); err != nil {
		return idem.BeginResult{}, err
	}
	if req.Lease <= 0 || req.TTL <= 0 {
		return idem.BeginResult{}, idem.NothingDone(fmt.Errorf("redisstore: begin: lease (%v) and TTL (%v) must be positive", req.Lease, req.TTL))
	}
	o := s.newOp(req.Key, beginArgLen)
	a := putUint64(o.arg, uint64(req.Token))
	a = append(a, req.Fingerprint[:]...)
	a = putUint64(a, uint64(ms(req.Lease)))
	a = putUint64(a, uint64(ms(req.TTL)))
	o.arg = append(a, bit(req.SameFingerprintToReclaim), s.notify)
	cmd := redis.NewStringCmd(ctx, o.evalArgs(beginScript, false)...)
	err := s.run(ctx, beginScript, o, cmd)
	if err != nil {
		err = fmt.Errorf("redisstore: begin: %w", err)
		if nothingDone(o, err) {
			err = idem.NothingDone(err)
		}
		o.free()
		return idem.BeginResult{}, err
	}
	o.free()
	// The script answers an integer (the prior state, one digit, which the
	// reader hands over as a string) or a record (60 bytes or more).
	switch v := cmd.Val(); {
	case len(v) == 1 && (v[0] == '0' || v[0] == '1' || v[0] == '3'):
		return idem.BeginResult{Acquired: true, Prior: idem.State(v[0] - '0')}, nil
	case len(v) >= headerLen:
		rec, err := decodeRecord(v)
		if err != nil {
			return idem.BeginResult{}, fmt.Errorf("redisstore: begin: %w", err)
		}
		return idem.BeginResult{Record: rec}, nil
	default:
		return idem.BeginResult{}, fmt.Errorf("redisstore: begin: unexpected script reply %q", v)
	}
}

// Finish implements idem.Store: one EVALSHA of the finish script.
func (s *Store) Finish(ctx context.Context, key string, token idem.Token, state idem.State, response []byte) error {
	if err := check(ctx, "finish", key); err != nil {
		return err
	}
	if state != idem.StateCompleted && state != idem.StateFailed {
		return fmt.Errorf("redisstore: finish: state %v is not COMPLETED or FAILED", state)
	}
	o := s.newOp(key, finishArgLen)
	o.arg = finishArg(o.arg, token, state, response, s.notify)
	o.resp = response
	cmd := redis.NewIntCmd(ctx, o.evalArgs(finishScript, true)...)
	err := s.run(ctx, finishScript, o, cmd)
	o.free()
	if err != nil {
		return fmt.Errorf("redisstore: finish: %w", err)
	}
	if cmd.Val() == 0 {
		return idem.ErrFenced
	}
	return nil
}

// Get implements idem.Store: one GET. Redis itself forgets a record at its
// ExpiresAt, so whatever GET finds is current.
func (s *Store) Get(ctx context.Context, key string) (idem.Record, bool, error) {
	if err := check(ctx, "get", key); err != nil {
		return idem.Record{}, false, err
	}
	o := s.newOp(key, 0)
	o.args[0], o.args[1] = s.get, &o.key
	cmd := redis.NewStringCmd(ctx, o.args[:2]...)
	cmd.SetFirstKeyPos(1)
	_ = s.client.Process(ctx, cmd)
	err := cmd.Err()
	o.free()
	if errors.Is(err, redis.Nil) {
		return idem.Record{}, false, nil
	}
	if err != nil {
		return idem.Record{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	rec, err := decodeRecord(cmd.Val())
	if err != nil {
		return idem.Record{}, false, fmt.Errorf("redisstore: get: %w", err)
	}
	return rec, true, nil
}

// ReadFirst implements idem.ReadFirst: Get is a plain read of the key (GET,
// or GETEX without options on the primary for a Cluster client that reads
// from replicas), which costs the server a tenth of the claim script that
// Begin runs for a replay.
func (*Store) ReadFirst() {}

// ExtendLease implements idem.LeaseExtender: the lease of the PENDING record
// held by token now runs out lease from now on the server's clock (it may
// shrink as well as grow), and the record's ExpiresAt (with the key's expiry)
// moves to the lease's end when that is later; it never moves earlier. It
// returns idem.ErrFenced when token no longer holds the record.
func (s *Store) ExtendLease(ctx context.Context, key string, token idem.Token, lease time.Duration) error {
	if err := check(ctx, "extend lease", key); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("redisstore: extend lease: lease (%v) must be positive", lease)
	}
	o := s.newOp(key, extendArgLen)
	o.arg = extendArg(o.arg, token, lease)
	cmd := redis.NewIntCmd(ctx, o.evalArgs(extendScript, false)...)
	err := s.run(ctx, extendScript, o, cmd)
	o.free()
	if err != nil {
		return fmt.Errorf("redisstore: extend lease: %w", err)
	}
	if cmd.Val() == 0 {
		return idem.ErrFenced
	}
	return nil
}
