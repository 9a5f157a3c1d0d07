package idem

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"
)

// A record's Finish that fails on the store (it did not answer within
// Options.StoreTimeout, or the connection broke), outside a transaction,
// leaves the record PENDING although the handler ran: its response is on
// its way to the client, but a retry finds the key in flight until the
// lease runs out, and then runs the handler again. So the engine goes on
// trying that Finish in the background, with backoff, for
// Options.FinishRetryFor (by default the operation's lease): once the
// store answers again, the record holds its response and a retry gets the
// replay, the handler having run once. A Finish that comes after another
// request took the key over (its lease had run out) is fenced and changes
// nothing; one that reached the store although its caller gave up on it
// is found there by the next (a re-run: Finish succeeds and changes
// nothing), so trying again is always safe.

// maxLateFinishes bounds the Finish calls an Engine retries at once, and
// maxLateBytes the responses they keep copies of; past either, a failed
// Finish is not retried.
const (
	maxLateFinishes = 1024
	maxLateBytes    = 64 << 20
)

// lateFinish backoff: the first retry after lateFinishFirst, doubling up
// to lateFinishMax, each with jitter (half to all of it).
const (
	lateFinishFirst = 100 * time.Millisecond
	lateFinishMax   = 2 * time.Second
)

// lateFinish is one Finish to retry, with copies of what the Call held.
type lateFinish struct {
	ctx       context.Context // the request's values, without its cancellation
	operation string
	principal string
	key       string // the client's key (logs, events)
	scope     string
	recent    uint64
	window    time.Duration
	token     Token
	state     State
	resp      []byte
	prior     State
	status    int
	start     time.Time
	failedAt  time.Time
	err       error // the first failure
}

// finishLater schedules the retry of the Finish that just failed with err,
// unless it cannot help (fenced) or may not (Options.FinishRetryFor
// negative, maxLateFinishes or maxLateBytes reached); it reports whether
// it did.
func (c *Call) finishLater(state State, resp []byte, status int, err error) bool {
	e := c.e
	if errors.Is(err, ErrFenced) || e.lateFor < 0 {
		return false
	}
	select {
	case e.late <- struct{}{}:
	default:
		return false
	}
	if e.lateBytes.Add(int64(len(resp))) > maxLateBytes {
		e.lateBytes.Add(-int64(len(resp)))
		<-e.late
		return false
	}
	f := &lateFinish{
		ctx:       context.WithoutCancel(c.ss.bg.parent), // the request's, not a transaction's
		operation: c.p.spec.Operation,
		principal: c.principal,
		key:       c.key,
		scope:     strings.Clone(c.scope),
		recent:    c.recent,
		window:    c.p.spec.Window,
		token:     c.token,
		state:     state,
		resp:      bytes.Clone(resp), // nil stays nil: a re-run compares them
		prior:     c.prior,
		status:    status,
		err:       err,
		start:     c.start,
		failedAt:  time.Now(),
	}
	d := e.lateFor
	if d == 0 {
		d = c.p.spec.InFlight.Lease
	}
	go e.retryFinish(f, d)
	return true
}

// retryFinish tries f's Finish until it succeeds, is fenced, or d has
// passed since the first failure.
func (e *Engine) retryFinish(f *lateFinish, d time.Duration) {
	defer func() {
		e.lateBytes.Add(-int64(len(f.resp)))
		<-e.late
	}()
	deadline := f.failedAt.Add(d)
	wait := lateFinishFirst
	err := f.err
	attempt := 1
	for {
		pause := wait/2 + rand.N(wait/2+1)
		if time.Until(deadline) < pause {
			break
		}
		time.Sleep(pause)
		wait = min(2*wait, lateFinishMax)
		attempt++
		ctx, cancel := context.WithTimeout(f.ctx, e.timeout)
		err = e.store.Finish(ctx, f.scope, f.token, f.state, f.resp)
		cancel()
		if err == nil || errors.Is(err, ErrFenced) {
			break
		}
	}
	attrs := []slog.Attr{slog.String("operation", f.operation), slog.String("key", f.key),
		slog.Int("attempts", attempt), slog.Duration("after", time.Since(f.failedAt).Round(time.Millisecond))}
	switch {
	case err == nil:
		e.log.LogAttrs(f.ctx, slog.LevelWarn, "idem: record finished by a later attempt, after the store failed at finish", attrs...)
		if f.resp != nil && e.recent != nil {
			e.recent.add(f.recent, f.start.Add(f.window))
		}
		e.observe(f.ctx, Event{Kind: EventExecuted, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Prior: f.prior, Status: f.status, Duration: f.failedAt.Sub(f.start)})
	case errors.Is(err, ErrFenced):
		e.log.LogAttrs(f.ctx, slog.LevelWarn, "idem: late completion rejected: the claim was taken over or expired while the store failed at finish", attrs...)
		e.observe(f.ctx, Event{Kind: EventFenced, Operation: f.operation, Principal: f.principal, Key: f.key,
			Protected: true, State: f.state, Status: f.status, Err: err})
	default:
		attrs = append(attrs, slog.Any("error", err))
		e.log.LogAttrs(f.ctx, slog.LevelError, "idem: gave up finishing the record: the key stays in flight until its lease runs out, and a retry then runs the handler again", attrs...)
	}
}
