package pgstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
