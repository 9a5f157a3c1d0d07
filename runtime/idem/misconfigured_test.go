package idem_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A store error marked ErrMisconfigured (a privilege, a missing table) is
// answered as any store error (503 with Retry-After: a fix deployed
// meanwhile makes the retries work), but its EventStoreError carries
// Misconfigured, so that an alert can tell it from an outage; an
// unmarked error does not.
func TestStoreErrorMisconfigured(t *testing.T) {
	denied := errors.New("permission denied for table idem_records (SQLSTATE 42501)")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{{"misconfigured", idem.Misconfigured(denied), true}, {"outage", errStoreDown, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ms := memstore.New(memstore.Options{SweepInterval: -1})
			t.Cleanup(func() { _ = ms.Close() })
			f := newFixtureStore(t, ms, &failingStore{Store: ms, beginErr: tc.err}, idem.Options{})
			h := f.eng.Handler(mustCompile(t, strictSpec()), f.createOrder())
			w := send(h, req{key: "k", body: `{"item":1}`})
			requireProblem(t, w, http.StatusServiceUnavailable, idem.CodeStoreUnavailable)
			assert.NotEmpty(t, w.Header().Get("Retry-After"))
			ev, ok := f.obs.find(idem.EventStoreError)
			require.True(t, ok)
			assert.Equal(t, tc.want, ev.Misconfigured)
			assert.Equal(t, tc.want, errors.Is(ev.Err, idem.ErrMisconfigured))
			if tc.want {
				assert.ErrorIs(t, ev.Err, denied, "the store's error is kept")
				assert.Contains(t, ev.LogValue().Resolve().String(), "misconfigured")
			}
		})
	}
	assert.Nil(t, idem.Misconfigured(nil))
}
