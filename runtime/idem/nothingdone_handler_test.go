package idem_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
)

// Under failures: replay, an operation error marked idem.HandlerNothingDone (the
// handler knows nothing of the operation ran: the payment provider refused
// the connection) frees the key, as under failures: retry: the error
// handler's answer reaches the client but is not stored, and a retry with
// the key runs the operation again. An unmarked error is stored and
// replayed (TestHandlerErrorAnswerIsReplayed). (The trial's
// TestHandlerNothingDone.)
func TestHandlerErrorNothingDoneFreesKey(t *testing.T) {
	for _, wrap := range []func(error) error{
		idem.HandlerNothingDone,
		func(err error) error { return fmt.Errorf("charge: %w", idem.HandlerNothingDone(err)) },
	} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		p := mustCompile(t, replaySpec())
		opErr := wrap(errors.New("psp unreachable"))
		var got error
		h := strictServer(f, p, opErr, func(w http.ResponseWriter, err error) {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		}, false, &got)
		first := post(h, "k1", true)
		assert.Equal(t, http.StatusServiceUnavailable, first.Code)
		assert.True(t, got == opErr, "HandlerFailed returns err itself")
		again := post(h, "k1", true)
		assert.Equal(t, http.StatusServiceUnavailable, again.Code)
		assert.Empty(t, again.Header().Get("Idempotent-Replayed"), "a NothingDone error is not stored")
		assert.Equal(t, int32(2), f.calls.Load(), "the retry runs the operation again")
	}
}

// The stores' mark, ErrNothingDone, is not the handler's: a handler that
// did something and then returned (wrapped or not) the error of a store
// call of its own that its store marked NothingDone keeps its answer
// stored and replayed under failures: replay, and a retry does not run it
// again. (Before, the same sentinel freed the key.)
func TestHandlerErrorStoreMarkNotHandlers(t *testing.T) {
	for _, opErr := range []error{
		idem.NothingDone(errors.New("redisstore: begin: connection refused")),
		fmt.Errorf("audit: %w", idem.NothingDone(errors.New("pgstore: begin: dial tcp: connection refused"))),
	} {
		f := newFixture(t, idem.Options{Principal: idem.Anonymous})
		p := mustCompile(t, replaySpec())
		h := strictServer(f, p, opErr, func(w http.ResponseWriter, err error) {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
		}, false, nil)
		assert.Equal(t, http.StatusServiceUnavailable, post(h, "k1", true).Code)
		again := post(h, "k1", true)
		assert.Equal(t, http.StatusServiceUnavailable, again.Code)
		assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"), "stored and replayed")
		assert.Equal(t, int32(1), f.calls.Load(), "the retry does not run the operation again")
	}
}
