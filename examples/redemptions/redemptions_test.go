package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/examples/internal/regen"
	"github.com/idemgen/idemgen/internal/testenv"
)

// testSchema returns a schema of its own for a test, dropped at its end.
func testSchema(t *testing.T, url string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "redemptions_test_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("dropping %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Logf("dropping %s: %v", schema, err)
		}
	})
	return schema
}

func TestWalkthrough(t *testing.T) {
	url := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := connect(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	var logs bytes.Buffer
	e, err := setup(ctx, pool, testSchema(t, url), &logs)
	require.NoError(t, err)
	defer e.Close()

	var steps []step
	require.NoError(t, walkthrough(ctx, e, func(s step) { steps = append(steps, s) }))
	require.Len(t, steps, 8)

	// 1. The first request runs; its retry is a replay of the same bytes; one row.
	first, retry := steps[0].Exchanges[0], steps[0].Exchanges[1]
	assert.Equal(t, http.StatusCreated, first.Status)
	assert.False(t, first.Replayed)
	assert.Equal(t, 1, first.RowsWithKey)
	assert.Equal(t, http.StatusCreated, retry.Status)
	assert.True(t, retry.Replayed)
	assert.Equal(t, first.Response, retry.Response, "the replay is the first response")
	assert.Equal(t, 1, retry.RowsWithKey)
	k1 := first.Key

	// 2. The same key with another body: 422, nothing ran.
	reused := steps[1].Exchanges[0]
	assert.Equal(t, k1, reused.Key)
	assert.Equal(t, http.StatusUnprocessableEntity, reused.Status)
	assert.Equal(t, "IDEMPOTENCY_KEY_REUSED", reused.Code)
	assert.Equal(t, 1, reused.RowsWithKey)

	// 3. A duplicate in flight: 409 with Retry-After; the first completes once.
	dup, held := steps[2].Exchanges[0], steps[2].Exchanges[1]
	assert.Equal(t, dup.Key, held.Key)
	assert.Equal(t, http.StatusConflict, dup.Status)
	assert.Equal(t, "IDEMPOTENCY_KEY_IN_USE", dup.Code)
	assert.Equal(t, "2", dup.RetryAfter)
	assert.Equal(t, http.StatusCreated, held.Status)
	assert.False(t, held.Replayed)
	assert.Equal(t, 1, held.RowsWithKey)

	// 4. Another member with alice's key: its own execution, never her replay.
	bob := steps[3].Exchanges[0]
	assert.Equal(t, k1, bob.Key)
	assert.Equal(t, "bob", bob.Member)
	assert.Equal(t, http.StatusCreated, bob.Status)
	assert.False(t, bob.Replayed, "bob must never get alice's replay")
	assert.Contains(t, bob.Response, `"member_id":"bob"`)
	assert.NotEqual(t, first.Redemption, bob.Redemption)
	assert.Equal(t, 2, bob.RowsWithKey, "one row for alice, one for bob")

	// 5. A failure after the row was written rolls it back and frees the key.
	failed, again := steps[4].Exchanges[0], steps[4].Exchanges[1]
	assert.Equal(t, http.StatusInternalServerError, failed.Status)
	assert.Equal(t, 0, failed.RowsWithKey, "the row rolled back with the transaction")
	assert.Equal(t, http.StatusCreated, again.Status)
	assert.False(t, again.Replayed, "the failed attempt left nothing to replay")
	assert.Equal(t, 1, again.RowsWithKey)
	assert.Contains(t, logs.String(), "key released for a retry")

	// 6. No key, a key that is not a UUID: 400 problems.
	missing, invalid := steps[5].Exchanges[0], steps[5].Exchanges[1]
	assert.Equal(t, http.StatusBadRequest, missing.Status)
	assert.Equal(t, "IDEMPOTENCY_KEY_MISSING", missing.Code)
	assert.Equal(t, http.StatusBadRequest, invalid.Status)
	assert.Equal(t, "IDEMPOTENCY_KEY_INVALID", invalid.Code)
	assert.Contains(t, invalid.Response, `"detail":"the Idempotency-Key header must be a UUID (RFC 9562) in canonical 8-4-4-4-12 form"`,
		"what the key must be, not oapi-codegen's message about Go types")

	// 7. The generated client helper over a lossy network: replayed, one row.
	carol := steps[6].Exchanges[0]
	assert.Equal(t, http.StatusCreated, carol.Status)
	assert.True(t, carol.Replayed)
	assert.Equal(t, 1, carol.RowsWithKey)
	_, err = uuid.Parse(carol.Key)
	assert.NoError(t, err)
	assert.Contains(t, steps[6].Note, "2 attempts with one key")

	// 8. Alice holds one redemption per thing she meant to do.
	assert.Contains(t, steps[7].Note, "3 redemptions")

	// The table: every row accounted for.
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+e.svc.table).Scan(&rows))
	assert.Equal(t, 5, rows, "alice 3, bob 1, carol 1")
}

func TestCommand(t *testing.T) {
	url := testenv.PostgresURL(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-postgres", url, "-schema", testSchema(t, url)}, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	out := stdout.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"-> 201 Created  Idempotent-Replayed: true",
		"-> 422 Unprocessable Entity  IDEMPOTENCY_KEY_REUSED",
		"-> 409 Conflict  Retry-After: 2  IDEMPOTENCY_KEY_IN_USE",
		"rows with this key: 2",
		"-> 400 Bad Request  IDEMPOTENCY_KEY_MISSING",
		"8. alice lists her redemptions",
	} {
		assert.Contains(t, out, want)
	}
}

// TestNoPostgres runs without a server: the command names PostgreSQL and how
// to start it, and exits 1.
func TestNoPostgres(t *testing.T) {
	t.Setenv("IDEMGEN_POSTGRES_URL", "")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no URL", nil, "cannot connect to PostgreSQL: no URL"},
		{"unreachable", []string{"-postgres", "postgres://postgres@127.0.0.1:1/postgres"}, "cannot connect to PostgreSQL at 127.0.0.1:1 (dial tcp 127.0.0.1:1: connect: connection refused)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 1, run(context.Background(), tt.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), tt.want)
			assert.Contains(t, stderr.String(), `eval "$(scripts/services start)"`)
			assert.Empty(t, stdout.String())
		})
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-schema", ""}, &stdout, &stderr))
	assert.Equal(t, 2, run(context.Background(), []string{"extra"}, &stdout, &stderr))
	assert.True(t, strings.Contains(stderr.String(), "want a -schema name"))
}

// TestGenerated: go generate rewrites the committed api package byte for
// byte, and idemgen's own checks pass on the example.
func TestGenerated(t *testing.T) {
	regen.Check(t, ".")
	code, out := regen.Idemgen(t, ".", "check", "-generated", "-config", "idemgen.yaml")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "generated files are up to date")
	code, out = regen.Idemgen(t, ".", "check", "-strict", "openapi.yaml")
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "1 idempotent operation, 0 warnings")
}
