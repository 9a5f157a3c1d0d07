package idemclient

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reused Call's second request is refused, nothing sent: its CallEnd
// and its Error report 0 attempts, not the first request's (which metrics
// would count twice).
func TestCallEndReused(t *testing.T) {
	srv := newRecServer(t, unavailableOnce(201))
	var ends []CallEnd
	d := NewDoer(http.DefaultClient, fastPolicy(3), WithClock(newFakeClock()),
		WithCallHook(func(_ context.Context, e CallEnd) { ends = append(ends, e) }))
	ctx, call := Start(context.Background())
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	_, err = d.Do(post(t, ctx, srv.URL, payload))
	require.ErrorIs(t, err, ErrCallReused)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Zero(t, e.Attempts, "the refused request sent nothing")
	require.Len(t, ends, 2)
	assert.Len(t, srv.Seen(), 2)
	assert.Equal(t, 2, ends[0].Attempts)
	assert.Zero(t, ends[1].Attempts, "the refused request sent nothing")
	assert.Equal(t, 2, call.Attempts(), "the call's own count is the first request's")
}
