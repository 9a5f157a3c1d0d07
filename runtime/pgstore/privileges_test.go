package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// A role without the run-time privileges on the records table fails
// Migrate and Check, which name the GRANT it lacks (before, Migrate
// succeeded and every request was then answered 503 "permission denied",
// SQLSTATE 42501); granted them, both succeed.
func TestMigrateChecksPrivileges(t *testing.T) {
	admin := testPool(t)
	owner := newStoreOn(t, admin, Options{})
	var role string
	s, _ := storeAsRole(t, admin, owner.n.schema, func(r string) []string {
		role = r
		return []string{`GRANT SELECT ON ` + owner.n.table + ` TO ` + r} // SELECT only
	})
	ctx := testCtx(t)
	err := s.Migrate(ctx)
	require.Error(t, err, "Migrate must not succeed for a role that cannot claim")
	want := "GRANT INSERT, UPDATE ON " + owner.n.table + " TO " + role
	assert.Contains(t, err.Error(), want)
	err = s.Check(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), want)
	assert.False(t, strings.Contains(err.Error(), "DELETE"), "the reaper is off (ReapInterval negative): DELETE is not needed: %v", err)

	_, err = admin.Exec(ctx, `GRANT INSERT, UPDATE ON `+owner.n.table+` TO `+role)
	require.NoError(t, err)
	require.NoError(t, s.Check(ctx))
	require.NoError(t, s.Migrate(ctx))

	// With the reaper on, DELETE is needed too.
	s.opts.ReapInterval = 0
	err = s.Check(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GRANT DELETE ON "+owner.n.table+" TO "+role)
}

// Check names a missing table (or schema), and the owner passes it.
func TestCheckMissingTable(t *testing.T) {
	s := openStore(t, testPool(t), Options{})
	err := s.Check(testCtx(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist: run Migrate")
	require.NoError(t, s.Migrate(testCtx(t)))
	require.NoError(t, s.Check(testCtx(t)))
}

// A store error that will not go away by itself (here 42501: the role may
// read the table but not write it) is marked idem.ErrMisconfigured, so
// that the engine's EventStoreError carries Misconfigured, and logged at
// ERROR with its SQLSTATE and the likely fix, once per interval (not once
// per request); an outage's error is not marked.
func TestMisconfiguredErrors(t *testing.T) {
	admin := testPool(t)
	owner := newStoreOn(t, admin, Options{})
	s, _ := storeAsRole(t, admin, owner.n.schema, func(r string) []string {
		return []string{`GRANT SELECT ON ` + owner.n.table + ` TO ` + r}
	})
	logs := &strings.Builder{}
	s.log = slog.New(slog.NewTextHandler(logs, nil))
	ctx := testCtx(t)
	for i := range 3 {
		_, err := s.Begin(ctx, beginReq(fmt.Sprintf("k%d", i), idem.Token(i+1)))
		require.Error(t, err)
		assert.ErrorIs(t, err, idem.ErrMisconfigured, "%v", err)
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), logs.String())
	assert.Contains(t, logs.String(), "sqlstate=42501")
	assert.Contains(t, logs.String(), "Store.Check names the GRANT")
	_, _, err := s.Get(ctx, "k0")
	require.NoError(t, err, "SELECT is granted")

	s.misEvery = 0 // log each
	err = s.Finish(ctx, "k0", 1, idem.StateCompleted, nil)
	require.ErrorIs(t, err, idem.ErrMisconfigured)
	assert.Equal(t, 2, strings.Count(logs.String(), "level=ERROR"))

	// An outage (a cancelled call) is not a misconfiguration.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = owner.Begin(cctx, beginReq("k", 1))
	require.Error(t, err)
	assert.NotErrorIs(t, err, idem.ErrMisconfigured)
}
