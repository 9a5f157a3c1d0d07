package idem

import (
	"context"
	"errors"
)

// LeaseLost reports whether ctx, a handler's context, was ended because
// its claim was lost while it ran: context.Cause is ErrLeaseLost (the
// heartbeats failed until the lease ran out, so a retry may have taken the
// key over) or ErrFenced (the key was taken over, or the record expired).
// That happens to a transactional handler's context, and to any
// handler's under Options.CancelOnLeaseLost; without that option a handler
// that is not transactional is never told, and LeaseLost stays false.
//
// A handler about to make an external side effect that a second run of the
// same key would repeat (charging a card, sending a message) checks it
// right before, and gives up when it is true: another run may be making
// it. It narrows the window, it does not close it: the lease may be lost
// just after the check (the side effect's own idempotency key, passed
// through to the provider, closes it).
func LeaseLost(ctx context.Context) bool {
	cause := context.Cause(ctx)
	return errors.Is(cause, ErrLeaseLost) || errors.Is(cause, ErrFenced)
}
