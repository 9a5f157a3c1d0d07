package pgstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// TestRawReadsMatchScan: readRecord and readClaim, which decode pgx's binary
// row values themselves, read every kind of row exactly as Scan does (the
// reading of main's code and the fallback for text formats).
func TestRawReadsMatchScan(t *testing.T) {
	ctx := testCtx(t)
	p := testPool(t)
	s := newStoreOn(t, p, Options{})
	f := fp(7)
	claim := func(key string) {
		res, err := s.Begin(ctx, &idem.BeginRequest{Key: key, Fingerprint: f, Token: idem.Token(1 << 63), Lease: time.Minute, TTL: time.Hour})
		require.NoError(t, err)
		require.True(t, res.Acquired)
	}
	claim("pending")
	var claimOneWay func(t *testing.T, key string, token int64, way claimWay) idem.BeginResult
	// claimBothWays runs the claim function's call, the read that calls it
	// (claimRead) and the claim statement for key with the fencing token,
	// each in a transaction it rolls back, reads their rows with readClaim
	// and with Scan, requires the six to agree and returns the result.
	claimBothWays := func(t *testing.T, key string, token int64) idem.BeginResult {
		t.Helper()
		res := claimOneWay(t, key, token, wayCTE)
		require.Equal(t, res, claimOneWay(t, key, token, wayFunc), key)
		require.Equal(t, res, claimOneWay(t, key, token, wayRead), key)
		return res
	}
	claimOneWay = func(t *testing.T, key string, token int64, way claimWay) idem.BeginResult {
		t.Helper()
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		rows, err := tx.Query(ctx, claimSQL(s, way), key, f[:], token, time.Minute, time.Hour, false)
		require.NoError(t, err)
		require.True(t, rows.Next())
		_, fast := fastRow(rows, claimOIDs)
		require.True(t, fast)
		raw, err := readClaim(rows)
		require.NoError(t, err)
		scanned, err := scanClaim(rows)
		require.NoError(t, err)
		rows.Close()
		require.NoError(t, rows.Err())
		require.Equal(t, scanned, raw, key)
		return raw
	}
	for key, fin := range map[string]struct {
		st   idem.State
		resp []byte
	}{
		"completed": {idem.StateCompleted, []byte("HTTP/1.1 200\r\n\r\nbody")},
		"empty":     {idem.StateCompleted, []byte{}},
		"failed":    {idem.StateFailed, nil},
		"failedr":   {idem.StateFailed, []byte("x")},
	} {
		claim(key)
		require.NoError(t, s.Finish(ctx, key, idem.Token(1<<63), fin.st, fin.resp))
	}
	for _, key := range []string{"pending", "completed", "empty", "failed", "failedr"} {
		var raw idem.Record
		rows, err := p.Query(ctx, s.q.get, key)
		require.NoError(t, err)
		require.True(t, rows.Next())
		loc, fast := fastRow(rows, recordOIDs)
		require.True(t, fast)
		require.Nil(t, loc)
		require.NoError(t, readRecord(&raw, rows.RawValues(), loc))
		scanned, err := scanRecordRow(rows)
		require.NoError(t, err)
		rows.Close()
		require.NoError(t, rows.Err())
		require.Equal(t, scanned, raw, key)
		require.Equal(t, scanned.Response == nil, raw.Response == nil, key)

		got, found, err := s.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, scanned, got, key)

		// The claim's row for a record nobody may claim (a FAILED one
		// without a response is claimable: it is taken over, in a
		// transaction rolled back below).
		rawRes := claimBothWays(t, key, 2)
		require.Equal(t, key == "failed", rawRes.Acquired, key)
		if key == "failed" {
			require.Equal(t, idem.StateFailed, rawRes.Prior)
		}
	}
	// Acquired on a new key.
	require.Equal(t, idem.BeginResult{Acquired: true}, claimBothWays(t, "new", 3))
}
