package idem

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// errDetachEnded is the cause of a detached handler context's end (see
// Options.DetachHandler): the request's context was cancelled (its client
// went away) DetachHandler ago.
var errDetachEnded = errors.New("idem: the client went away and Options.DetachHandler has passed since")

// handlerDetach is what a protected run of an Engine with
// Options.DetachHandler keeps of its handler's context: the request's
// values and deadline without its cancellation, cancelled grace after the
// request's context was cancelled (otherwise than by its deadline), or
// when the Call ends.
type handlerDetach struct {
	ctx    context.Context // the handler's (before a transaction's)
	mu     sync.Mutex
	ended  bool
	timer  *time.Timer
	stop   func() bool // stops the context.AfterFunc on the request's context
	cancel context.CancelCauseFunc
	done   context.CancelFunc // the deadline's, when the request's context has one
}

// detachHandler returns the context the handler of a protected run gets
// under Options.DetachHandler, and keeps what ends it in c.detach.
func (c *Call) detachHandler(parent context.Context) context.Context {
	d := &handlerDetach{}
	ctx := context.WithoutCancel(parent)
	if dl, ok := parent.Deadline(); ok {
		// The request's deadline is the server's own bound (a timeout
		// middleware in front): it ends the handler's context as it
		// would have (DeadlineExceeded).
		ctx, d.done = context.WithDeadline(ctx, dl)
	}
	ctx, d.cancel = context.WithCancelCause(ctx)
	grace := c.e.detach
	log, op, key := c.e.log, c.p.spec.Operation, c.key
	d.stop = context.AfterFunc(parent, func() {
		if errors.Is(parent.Err(), context.DeadlineExceeded) {
			return // the handler's own deadline ends it
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.ended {
			d.timer = time.AfterFunc(grace, func() {
				d.mu.Lock()
				ended := d.ended
				d.mu.Unlock()
				if ended {
					return // the handler returned meanwhile
				}
				log.LogAttrs(ctx, slog.LevelInfo, "idem: the client went away Options.DetachHandler ago and the handler still runs: its context is cancelled",
					slog.String("operation", op), slog.String("key", key), slog.Duration("detach", grace))
				d.cancel(errDetachEnded)
			})
		}
	})
	d.ctx = ctx
	c.detach = d
	return ctx
}

// end releases the detached context once the handler returned (Call.End).
func (d *handlerDetach) end() {
	d.stop()
	d.mu.Lock()
	d.ended = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	d.cancel(context.Canceled)
	if d.done != nil {
		d.done()
	}
}

// endDetach releases the handler's detached context, if it has one
// (DetachHandler), once the run is over.
func (c *Call) endDetach() {
	if c.detach != nil {
		c.detach.end()
		c.detach = nil
	}
}
