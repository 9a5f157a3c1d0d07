package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

// bigResponse is a response of n bytes, none of them zero.
func bigResponse(n int) []byte {
	r := make([]byte, n)
	for i := range r {
		r[i] = 'a' + byte(i%26)
	}
	return r
}

// TestFencedByLargeRecord pins the answers of a heartbeat and of a Finish
// that find a final record with a large (64 KiB) response: a heartbeat is
// fenced, whoever's record it is (its own request's completion, which a
// heartbeat already on its way when Finish stopped it meets, or another
// token's); a Finish by the record's token, state and response is a re-run
// and succeeds, anything else is fenced, down to the response's last byte;
// and none of them changes the record or its expiry.
func TestFencedByLargeRecord(t *testing.T) {
	t.Parallel()
	s, c := newTestStore(t, Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	const tok, other = idem.Token(1<<64 - 5), idem.Token(7)
	resp := bigResponse(64 << 10)
	changed := append([]byte(nil), resp...)
	changed[len(changed)-1] = '0'
	for _, states := range [][2]idem.State{
		{idem.StateCompleted, idem.StateFailed},
		{idem.StateFailed, idem.StateCompleted},
	} {
		state, otherState := states[0], states[1]
		t.Run(state.String(), func(t *testing.T) {
			key := "big-" + state.String()
			r, err := s.Begin(ctx, beginReq(key, tok))
			require.NoError(t, err)
			require.True(t, r.Acquired)
			require.NoError(t, s.Finish(ctx, key, tok, state, resp))
			want, wantTTL := rawRecord(t, c, s.key(key))
			require.Len(t, want, headerLen+len(resp))

			// A lease past the record's expiry: a heartbeat that took
			// effect would move it.
			assert.ErrorIs(t, s.ExtendLease(ctx, key, tok, 3*time.Hour), idem.ErrFenced, "own token")
			assert.ErrorIs(t, s.ExtendLease(ctx, key, other, 3*time.Hour), idem.ErrFenced, "other token")
			assert.NoError(t, s.Finish(ctx, key, tok, state, resp), "a re-run")
			for name, f := range map[string]func() error{
				"other token":      func() error { return s.Finish(ctx, key, other, state, resp) },
				"other state":      func() error { return s.Finish(ctx, key, tok, otherState, resp) },
				"last byte":        func() error { return s.Finish(ctx, key, tok, state, changed) },
				"shorter response": func() error { return s.Finish(ctx, key, tok, state, resp[:len(resp)-1]) },
				"no response":      func() error { return s.Finish(ctx, key, tok, state, nil) },
				"empty response":   func() error { return s.Finish(ctx, key, tok, state, []byte{}) },
			} {
				assert.ErrorIs(t, f(), idem.ErrFenced, name)
			}
			got, gotTTL := rawRecord(t, c, s.key(key))
			assert.True(t, got == want, "the record changed")
			assert.LessOrEqual(t, gotTTL, wantTTL, "the record's expiry moved")
			assert.Greater(t, gotTTL, wantTTL-10*time.Second, "the record's expiry moved")
		})
	}
}

// rawRecord returns the bytes stored at key and the key's time to live.
func rawRecord(tb testing.TB, c redis.Cmdable, key string) (string, time.Duration) {
	tb.Helper()
	ctx := context.Background()
	v, err := c.Get(ctx, key).Result()
	require.NoError(tb, err)
	ttl, err := c.PTTL(ctx, key).Result()
	require.NoError(tb, err)
	return v, ttl
}
