package idemclient

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithKeyRecorder's error ends the call before anything is sent; its
// success lets the call go on with the key it recorded.
func TestKeyRecorder(t *testing.T) {
	srv := newRecServer(t, nil)
	d := NewDoer(http.DefaultClient, fastPolicy(2), WithClock(newFakeClock()))
	dbDown := errors.New("db down")
	var got string
	ctx, call := Start(context.Background(), WithKeyRecorder(func(_ context.Context, k string) error { got = k; return dbDown }))
	resp, err := d.Do(post(t, ctx, srv.URL, payload))
	assert.Nil(t, resp)
	require.ErrorIs(t, err, ErrKeyNotRecorded)
	require.ErrorIs(t, err, dbDown)
	assert.Equal(t, call.Key(), got)
	assert.Zero(t, call.Attempts())
	assert.Empty(t, srv.Seen(), "nothing sent")

	ctx, call = Start(context.Background(), WithKeyRecorder(func(_ context.Context, k string) error { got = k; return nil }))
	resp, err = d.Do(post(t, ctx, srv.URL, payload))
	require.NoError(t, err)
	resp.Body.Close()
	require.Len(t, srv.Seen(), 1)
	assert.Equal(t, got, srv.Seen()[0].Key)
	assert.Equal(t, call.Key(), got)
}
