package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/internal/testenv"
	"github.com/idemgen/idemgen/runtime/idem"
)

// lossyProxy forwards TCP connections to PostgreSQL. Armed (lose), it
// lets the next query that calls the claim function through, swallows
// the server's reply and closes the connection: the claim committed (in
// the simple protocol, PostgreSQL sends a statement's result after its
// commit), and the client sees its connection lost.
//
// Armed with replyErr (a SQLSTATE) instead, it lets the next such query
// through and replaces the server's reply, up to its ReadyForQuery, by an
// ErrorResponse of severity ERROR with that code (and a ReadyForQuery): a
// pooler's answer when its server connection failed after it forwarded
// the statement.
type lossyProxy struct {
	ln       net.Listener
	lose     atomic.Bool
	replyErr atomic.Pointer[string]
	dropped  atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func newLossyProxy(t *testing.T, upstream string) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lossyProxy{ln: ln}
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go p.serve(c, u)
		}
	}()
	return p
}

func (p *lossyProxy) serve(c, u net.Conn) {
	var lose atomic.Bool
	var replace atomic.Pointer[string]
	go func() {
		defer u.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if bytes.Contains(buf[:n], []byte(`_claim"(`)) {
					if p.lose.CompareAndSwap(true, false) {
						lose.Store(true)
					} else if code := p.replyErr.Swap(nil); code != nil {
						replace.Store(code)
					}
				}
				if _, err := u.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer c.Close()
	buf := make([]byte, 64<<10)
	var held []byte // the reply being replaced, so far
	for {
		n, err := u.Read(buf)
		if n > 0 {
			if lose.Load() {
				p.dropped.Add(1)
				_ = u.Close()
				return
			}
			out := buf[:n]
			if code := replace.Load(); code != nil {
				held = append(held, out...)
				rest, ok := afterReadyForQuery(held)
				if !ok {
					continue
				}
				replace.Store(nil)
				held = nil
				out = append(errorResponse(*code, "server conn crashed?"), rest...)
			}
			if _, err := c.Write(out); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// afterReadyForQuery returns what follows the first ReadyForQuery message
// in b, a stream of backend messages from its start, and whether b holds
// one whole.
func afterReadyForQuery(b []byte) ([]byte, bool) {
	for len(b) >= 5 {
		n := 1 + int(binary.BigEndian.Uint32(b[1:5]))
		if len(b) < n {
			return nil, false
		}
		if b[0] == 'Z' {
			return b[n:], true
		}
		b = b[n:]
	}
	return nil, false
}

// errorResponse is an ErrorResponse of severity ERROR with code and msg,
// then a ReadyForQuery (idle).
func errorResponse(code, msg string) []byte {
	var f []byte
	for _, kv := range [][2]string{{"S", "ERROR"}, {"V", "ERROR"}, {"C", code}, {"M", msg}} {
		f = append(append(append(f, kv[0]...), kv[1]...), 0)
	}
	f = append(f, 0)
	b := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(4+len(f)))
	b = append(b, f...)
	return append(b, 'Z', 0, 0, 0, 5, 'I')
}

// lossyStore returns a migrated Store whose pool (simple protocol: one
// message per query, which the proxy recognises) reaches the test server
// through a lossyProxy.
func lossyStore(t *testing.T) (*Store, *lossyProxy) {
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	require.NoError(t, err)
	p := newLossyProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, fmt.Sprint(cfg.ConnConfig.Port)))
	pool := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
		c.ConnConfig.Host, c.ConnConfig.Port = "127.0.0.1", uint16(p.ln.Addr().(*net.TCPAddr).Port)
		c.ConnConfig.Fallbacks = nil
		c.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
		c.MaxConns = 4
	})
	return newStoreOn(t, pool, Options{}), p
}

// A claim whose reply was lost with its connection, after PostgreSQL
// committed it: Begin's error is not marked idem.ErrNothingDone, and the
// engine, which answered 503 (nothing ran), releases the claim in the
// background, so the client's retry runs (before: 409
// IDEMPOTENCY_KEY_IN_USE for the whole lease).
func TestLostBeginReplyReleased(t *testing.T) {
	t.Parallel()
	s, p := lossyStore(t)
	eng := idem.New(s, idem.Options{Principal: idem.Anonymous, DisableHeartbeat: true})
	pol := idem.MustCompile(idem.Spec{Operation: "op", Method: "POST", Path: "/x", Semantics: idem.Strict,
		InFlight: idem.InFlightSpec{Lease: time.Hour}})
	var runs atomic.Int32
	h := eng.Handler(pol, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	serve := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-lost-reply")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	p.lose.Store(true)
	first := serve()
	require.Equal(t, http.StatusServiceUnavailable, first.Code, first.Body.String())
	require.Equal(t, int32(1), p.dropped.Load(), "replies lost")
	require.NoError(t, eng.Drain(testCtx(t)))
	retry := serve()
	require.Equal(t, http.StatusCreated, retry.Code, "the claim was released: %s", retry.Body)
	assert.Equal(t, int32(1), runs.Load())
}

// Begin marks idem.ErrNothingDone the errors after which the claim
// certainly was not made, and no other.
func TestBeginNothingDone(t *testing.T) {
	t.Parallel()
	req := func(key string) *idem.BeginRequest { return beginReq(key, 0x1234) }
	t.Run("context done", func(t *testing.T) {
		s := newTestStore(t, Options{})
		ctx, cancel := context.WithCancel(testCtx(t))
		cancel()
		_, err := s.Begin(ctx, req("k"))
		assert.ErrorIs(t, err, context.Canceled)
		assert.ErrorIs(t, err, idem.ErrNothingDone)
	})
	t.Run("connect refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		require.NoError(t, ln.Close())
		down := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
			c.ConnConfig.Host, c.ConnConfig.Port, c.ConnConfig.Fallbacks = "127.0.0.1", uint16(port), nil
		})
		s := openStore(t, down, Options{})
		ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
		defer cancel()
		_, err = s.Begin(ctx, req("k"))
		require.Error(t, err)
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("pool exhausted", func(t *testing.T) {
		one := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) { c.MaxConns = 1 })
		s := newStoreOn(t, one, Options{})
		held, err := one.Acquire(testCtx(t))
		require.NoError(t, err)
		defer held.Release()
		ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
		defer cancel()
		_, err = s.Begin(ctx, req("k"))
		require.Error(t, err)
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("statement failed", func(t *testing.T) {
		// The claim meets the table locked by another transaction and
		// gives up at lock_timeout: an ERROR, its transaction rolled back.
		lockWait := poolWith(t, testenv.PostgresURL(t), func(c *pgxpool.Config) {
			c.ConnConfig.RuntimeParams["lock_timeout"] = "100"
		})
		s := newStoreOn(t, lockWait, Options{})
		tx, err := testPool(t).Begin(testCtx(t))
		require.NoError(t, err)
		defer rollback(tx)
		_, err = tx.Exec(testCtx(t), `LOCK TABLE `+s.n.table+` IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)
		_, err = s.Begin(testCtx(t), req("k"))
		require.Error(t, err)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "55P03", pe.Code)
		assert.ErrorIs(t, err, idem.ErrNothingDone, "%v", err)
	})
	t.Run("connection exception ERROR after the claim", func(t *testing.T) {
		// A pooler's ERROR of class 08 (PgBouncer's 08P01 "server conn
		// crashed?") after it forwarded the claim, which committed:
		// before, marked as any ERROR was.
		s, p := lossyStore(t)
		code := "08P01"
		p.replyErr.Store(&code)
		_, err := s.Begin(testCtx(t), req("k"))
		require.Error(t, err)
		var pe *pgconn.PgError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "08P01", pe.Code)
		assert.Equal(t, "ERROR", pe.Severity)
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		rec, found, err := s.Get(testCtx(t), "k")
		require.NoError(t, err)
		require.True(t, found, "the claim committed")
		assert.Equal(t, idem.Token(0x1234), rec.Token)
	})
	t.Run("reply lost", func(t *testing.T) {
		s, p := lossyStore(t)
		p.lose.Store(true)
		_, err := s.Begin(testCtx(t), req("k"))
		require.Error(t, err)
		require.Equal(t, int32(1), p.dropped.Load())
		assert.NotErrorIs(t, err, idem.ErrNothingDone, "%v", err)
		rec, found, err := s.Get(testCtx(t), "k")
		require.NoError(t, err)
		require.True(t, found, "the claim committed")
		assert.Equal(t, idem.Token(0x1234), rec.Token)
	})
}
