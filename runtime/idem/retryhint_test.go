package idem_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// hintErr is a store error that says when to retry (idem.RetryHint).
type hintErr struct{ d time.Duration }

func (e hintErr) Error() string             { return "store full" }
func (e hintErr) RetryAfter() time.Duration { return e.d }

// TestStoreRetryHint: a claim refused with a store error that offers a
// RetryHint (also wrapped) is answered 503 with that Retry-After, in whole
// seconds rounded up, at most the engine's cap (memstore's hour, a third-party
// store's day, are sent capped: what a client waits for), instead of UnavailableRetryAfter; an error without
// one, or with a hint that is not positive, gets UnavailableRetryAfter.
func TestStoreRetryHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"hint", hintErr{20 * time.Second}, "20"},
		{"rounded up", hintErr{1500 * time.Millisecond}, "2"},
		{"wrapped", fmt.Errorf("begin: %w", hintErr{25 * time.Second}), "25"},
		{"clamped", hintErr{time.Hour}, "30"},
		{"a day", hintErr{24 * time.Hour}, "30"},
		{"zero hint", hintErr{0}, "3"},
		{"no hint", errors.New("down"), "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			defer ms.Close()
			f := newFixtureStore(t, ms, &failingStore{Store: ms, beginErr: tc.err}, idem.Options{UnavailableRetryAfter: 3 * time.Second})
			h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
			w := send(h, req{key: "k", body: `{}`})
			requireProblem(t, w, 503, idem.CodeStoreUnavailable)
			assert.Equal(t, tc.want, w.Header().Get("Retry-After"))
			assert.Equal(t, int32(0), f.calls.Load())
		})
	}
}
