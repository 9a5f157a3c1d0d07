package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemgen/idemgen/runtime/idem"
)

type txKey struct{}

// Tx returns the transaction BeginTx put into ctx, for a handler to make its
// own writes in it, so that they commit together with the COMPLETED record or
// not at all. The handler must not commit or roll it back itself.
func Tx(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// rollbackTimeout bounds a rollback, which runs even when the request's
// context has ended.
const rollbackTimeout = 5 * time.Second

// BeginTx implements idem.Transactor. It opens a transaction (with
// Options.TxOptions) for the holder of key/token and returns a context
// carrying it (see Tx). It does not touch the record: the lease alone guards
// it while the handler runs, so duplicates are answered at once instead of
// queueing behind the transaction.
//
// commit runs Finish's fenced UPDATE inside the transaction and commits. The
// UPDATE locks the record's row until the commit, and a takeover (Begin's
// UPDATE of a row whose lease has run out) locks the same row; PostgreSQL
// serializes the two, and whichever comes second re-checks its condition on
// the row the first left (a Begin that loses reads the row again). So a takeover that won
// makes commit's UPDATE match no row (commit rolls back and returns
// idem.ErrFenced), and a commit that won leaves a COMPLETED or FAILED row the
// takeover cannot claim: the holder's writes and a takeover never both commit.
// Any other commit error means the transaction was rolled back, except a
// failure of the COMMIT itself (a lost connection), whose outcome is unknown.
//
// commit and the handler's statements use ctx: when it ends first, nothing
// commits. rollback abandons the transaction; after commit it does nothing.
// Call rollback in every case (defer it), or the connection stays taken.
func (s *Store) BeginTx(ctx context.Context, key string, token idem.Token) (context.Context, func(idem.State, []byte) error, func(), error) {
	if err := checkKey(ctx, "begin tx", key); err != nil {
		return nil, nil, nil, err
	}
	tx, err := s.pool.BeginTx(ctx, s.opts.TxOptions)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pgstore: begin tx: %w", err)
	}
	var (
		mu   sync.Mutex
		done bool
	)
	rollback := func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		done = true
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}
	commit := func(state idem.State, response []byte) error {
		if err := checkFinish(ctx, key, state); err != nil {
			rollback()
			return err
		}
		mu.Lock()
		if done {
			mu.Unlock()
			return errors.New("pgstore: commit: the transaction has already ended")
		}
		done = true
		mu.Unlock()
		if err := s.finishTx(ctx, tx, key, token, state, response); err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_ = tx.Rollback(rctx)
			return err
		}
		return nil
	}
	return context.WithValue(ctx, txKey{}, tx), commit, rollback, nil
}

func (s *Store) finishTx(ctx context.Context, tx pgx.Tx, key string, token idem.Token, state idem.State, response []byte) error {
	tag, err := tx.Exec(ctx, s.q.finish, newFinishArgs(key, token, state, response, s.typed && defaultEncodes(tx.Conn().TypeMap())).args[:]...)
	if err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return idem.ErrFenced
	}
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	return nil
}
