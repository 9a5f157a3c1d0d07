package clientapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	api "github.com/idemgen/idemgen/internal/e2e/clientapi"
	"github.com/idemgen/idemgen/runtime/fingerprint"
	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// The same key with another body is the server's 422 IDEMPOTENCY_KEY_REUSED:
// a clear error, after one attempt. A body that differs only in volatile
// members (client_time, trace_id) or in the order of an unordered array is
// the same request: the first response is replayed.
func TestReusedKey(t *testing.T) {
	e := newEnv(t)
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()
	first, key, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, first.StatusCode())

	again, _, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithKey(key))
	require.NoError(t, err)
	assert.Equal(t, "true", again.HTTPResponse.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, string(first.Body), string(again.Body))

	if canonicalFingerprint() {
		same := claim("u1")
		same.ClientTime = ptr(time.Date(2025, 3, 1, 12, 0, 9, 0, time.UTC))
		same.TraceId = ptr("another trace")
		same.CouponIds = &[]string{"c1", "c2"}
		again, _, err := c.ClaimCoupon(ctx, "c1", nil, same, idemclient.WithKey(key))
		require.NoError(t, err)
		assert.Equal(t, "true", again.HTTPResponse.Header.Get("Idempotent-Replayed"))
		assert.Equal(t, string(first.Body), string(again.Body))
	} else {
		t.Log("runtime/fingerprint still hashes raw bytes: the volatile and unordered members are not checked here")
	}

	other, key2, err := c.ClaimCoupon(ctx, "c1", nil, claim("u2"), idemclient.WithKey(key))
	assert.Equal(t, key, key2)
	var pe *idemclient.ProblemError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusUnprocessableEntity, pe.Status)
	assert.Equal(t, idemclient.CodeKeyReused, pe.Code)
	assert.Equal(t, key, pe.Key)
	assert.Equal(t, 1, pe.Attempts, "never retried")
	require.NotNil(t, other, "the response comes with the error")
	assert.Equal(t, http.StatusUnprocessableEntity, other.StatusCode())
	assert.Contains(t, err.Error(), "IDEMPOTENCY_KEY_REUSED (422 Unprocessable Entity) key="+key+" attempts=1")
	assert.Equal(t, 1, e.shop.Executions("claimCoupon", key))
}

// 400s are never retried: a key the server refuses (IDEMPOTENCY_KEY_INVALID,
// a ProblemError), a body the strict server cannot decode (the API's own
// 400, returned as the response). A key that a typed uuid parameter cannot
// hold fails before anything is sent.
func TestBadRequestsNotRetried(t *testing.T) {
	e := newEnv(t)
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()

	// recordEvent's key is an undeclared header of format uuidv7: a
	// supplied key of another format is refused before sending, as the
	// server would refuse it (400 IDEMPOTENCY_KEY_INVALID).
	v4 := uuid.NewString()
	_, key, err := c.RecordEvent(ctx, api.Event{Name: "x"}, idemclient.WithKey(v4))
	assert.Equal(t, v4, key, "the key the call would have used, as the error's")
	require.ErrorIs(t, err, idemclient.ErrInvalidKey)
	var ie *idemclient.Error
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, v4, ie.Key)
	assert.Contains(t, err.Error(), "is a UUID of version 4, not 7, which the policy's key format uuidv7 requires")
	for _, bad := range []string{"order-42", "{" + v4 + "}", "urn:uuid:" + v4} {
		_, key, err := c.CreatePayment(ctx, nil, api.Payment{}, idemclient.WithKey(bad)) // uuidv4, typed query parameter
		assert.ErrorIs(t, err, idemclient.ErrInvalidKey, bad)
		assert.Equal(t, bad, key)
	}
	assert.Zero(t, c.AttemptCount(), "nothing sent")
	assert.Zero(t, e.shop.Total())
	// The server's own check stays: a key it refuses that the request
	// carries where no policy checks it.
	var pe *idemclient.ProblemError
	_, key, err = c.RecordEvent(ctx, api.Event{Name: "x"}, idemclient.WithPolicyOverride(func(p *idemclient.Policy) { p.EnforceKeyFormat = false }), idemclient.WithKey(v4))
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, idemclient.CodeKeyInvalid, pe.Code)
	assert.Equal(t, http.StatusBadRequest, pe.Status)
	assert.Len(t, c.Attempts(key), 1)

	resp, key, err := c.ClaimCouponWithBody(ctx, "c1", nil, "application/json", strings.NewReader(`{"user_id": `))
	require.NoError(t, err, "the API's own answer")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode())
	assert.Len(t, c.Attempts(key), 1)

	resp, key, err = c.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithKey("order-42"))
	assert.Nil(t, resp)
	assert.Equal(t, "order-42", key)
	assert.ErrorIs(t, err, idemclient.ErrInvalidKey, "the documented sentinel, not the carrier's")
	assert.Contains(t, err.Error(), `the key "order-42" is not a UUID in canonical form`)
	assert.Empty(t, e.rec.Arrivals("order-42"))
	assert.Equal(t, 0, e.shop.Total())

	// A resume whose saved key is empty fails, nothing sent: not a new key
	// that runs the operation again.
	resp, key, err = c.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithKey(""))
	assert.Nil(t, resp)
	assert.Empty(t, key)
	assert.ErrorIs(t, err, idemclient.ErrInvalidKey)
	assert.Equal(t, 0, e.shop.Total())
}

// A key the caller put into the typed parameters is the call's key; a
// different one given with WithKey is a conflict, refused before sending.
func TestKeyInParams(t *testing.T) {
	e := newEnv(t)
	c := newClient(t, e.srv.URL, e.srv.Client())
	ctx := context.Background()
	mine := uuid.New()
	params := &api.ClaimCouponParams{IdempotencyKey: mine}
	_, key, err := c.ClaimCoupon(ctx, "c1", params, claim("u1"))
	require.NoError(t, err)
	assert.Equal(t, mine.String(), key)
	assert.Equal(t, mine, params.IdempotencyKey, "the caller's params are not modified")
	assert.Equal(t, 1, e.shop.Executions("claimCoupon", key))

	empty := &api.CreateOrderParams{}
	_, key, err = c.CreateOrder(ctx, empty, api.Order{Item: "a"})
	require.NoError(t, err)
	assert.Empty(t, empty.IdempotencyKey, "the caller's params are not modified")
	assert.Equal(t, 1, e.shop.Executions("createOrder", key))

	_, _, err = c.ClaimCoupon(ctx, "c1", params, claim("u1"), idemclient.WithKey(uuid.NewString()))
	assert.ErrorIs(t, err, idemclient.ErrKeyConflict)
	assert.Equal(t, 2, e.shop.Total(), "nothing sent")

	// An optional key parameter (a pointer) is filled too.
	resp, key, err := c.UploadReceiptFileWithBody(ctx, receiptID, nil, "application/octet-stream", strings.NewReader("x"))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode())
	assert.Equal(t, 1, e.shop.Executions("uploadReceiptFile", key))
	// The query carrier makes a v4, as the contract says.
	_, key, err = c.CreatePayment(ctx, nil, api.Payment{Amount: 1})
	require.NoError(t, err)
	assert.Equal(t, 4, int(uuid.MustParse(key).Version()))
	assert.Equal(t, "request_id="+key, e.rec.Arrivals(key)[0].RawQuery)
}

// A duplicate that arrives while the first request of its key still runs
// gets 409 IDEMPOTENCY_KEY_IN_USE with Retry-After; the helper waits it out
// and gets the first request's response.
func TestInFlightWaitedOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := uuid.NewString()
	h := e.shop.Hold("claimCoupon")

	first := newClient(t, e.srv.URL, e.srv.Client())
	type out struct {
		resp *api.ClaimCouponResponse
		err  error
	}
	done := make(chan out, 1)
	go func() {
		resp, _, err := first.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithKey(key))
		done <- out{resp, err}
	}()
	<-h.entered

	// The duplicate's wait lets the first finish.
	clock := newVClock()
	var firstOut out
	clock.onSleep = func(time.Duration) {
		if firstOut.resp == nil {
			close(h.release)
			firstOut = <-done
		}
	}
	dup := newClientOn(t, clock, e.srv.URL, e.srv.Client())
	resp, _, err := dup.ClaimCoupon(ctx, "c1", nil, claim("u1"), idemclient.WithKey(key))
	require.NoError(t, err)
	require.NoError(t, firstOut.err)
	at := dup.Attempts(key)
	require.Len(t, at, 2)
	assert.Equal(t, http.StatusConflict, at[0].Status)
	assert.Equal(t, idemclient.CodeKeyInUse, at[0].Code)
	assert.Equal(t, []time.Duration{time.Second}, clock.Slept(), "the contract's in-flight retry-after: 1s")
	assert.Equal(t, "true", resp.HTTPResponse.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, string(firstOut.resp.Body), string(resp.Body))
	assert.Equal(t, 1, e.shop.Executions("claimCoupon", key))
}

// The context's deadline bounds the whole call: the helper stops, with a
// clear error, instead of sleeping past it, whether the server asks for a
// wait longer than what is left or the backoff alone would overrun it.
func TestDeadline(t *testing.T) {
	t.Run("Retry-After beyond the deadline", func(t *testing.T) {
		e := newEnv(t)
		hc, ft := transportClient(e.srv, faultnet.PlanFunc(func(*http.Request) faultnet.Fault {
			return faultnet.Fault{Kind: faultnet.Unavailable, RetryAfter: "1"}
		}))
		c := newClient(t, e.srv.URL, hc)
		start := c.clock.Now()
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(2500*time.Millisecond))
		defer cancel()
		resp, key, err := c.ClaimCoupon(ctx, "c1", nil, claim("u1"))
		assert.Nil(t, resp)
		var ie *idemclient.Error
		require.ErrorAs(t, err, &ie)
		assert.ErrorIs(t, err, idemclient.ErrRetryAfterTooLong)
		assert.Equal(t, key, ie.Key)
		assert.Equal(t, 3, ie.Attempts)
		assert.Equal(t, http.StatusServiceUnavailable, ie.Status)
		assert.Equal(t, time.Second, ie.RetryAfter)
		assert.Equal(t, []time.Duration{time.Second, time.Second}, c.clock.Slept())
		assert.LessOrEqual(t, c.clock.Now().Sub(start), 2500*time.Millisecond, "within the deadline")
		assert.Equal(t, 3, ft.Stats().Requests)
		assert.Equal(t, 0, e.shop.Total())
	})
	t.Run("backoff beyond the deadline", func(t *testing.T) {
		e := newEnv(t)
		hc, _ := transportClient(e.srv, faultnet.PlanFunc(func(*http.Request) faultnet.Fault { return faultnet.ResetFault }))
		// recordEvent: 6 attempts, backoff 100ms..2s ×1.5, equal jitter
		// (drawn at 0: half the ceiling): waits 50ms, 75ms, 112.5ms, ...
		c := newClient(t, e.srv.URL, hc)
		start := c.clock.Now()
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(200*time.Millisecond))
		defer cancel()
		_, key, err := c.RecordEvent(ctx, api.Event{Name: "x"})
		var ie *idemclient.Error
		require.ErrorAs(t, err, &ie)
		assert.ErrorIs(t, err, idemclient.ErrNoTimeLeft)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotEmpty(t, key)
		assert.Equal(t, []time.Duration{50 * time.Millisecond, 75 * time.Millisecond}, c.clock.Slept())
		assert.Equal(t, 3, ie.Attempts)
		assert.LessOrEqual(t, c.clock.Now().Sub(start), 200*time.Millisecond)
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		e := newEnv(t)
		hc, _ := transportClient(e.srv, faultnet.Script(faultnet.UnavailableFault))
		clock := newVClock()
		ctx, cancel := context.WithCancel(context.Background())
		clock.onSleep = func(time.Duration) { cancel() }
		c := newClientOn(t, clock, e.srv.URL, hc)
		_, _, err := c.CreateOrder(ctx, nil, api.Order{Item: "a"})
		assert.ErrorIs(t, err, context.Canceled)
		var ie *idemclient.Error
		assert.True(t, errors.As(err, &ie))
		assert.Equal(t, 0, e.shop.Total())
	})
}

// canonicalFingerprint reports whether runtime/fingerprint computes the
// canonical form (volatile members left out) rather than hashing raw bytes.
func canonicalFingerprint() bool {
	h, err := fingerprint.New(fingerprint.Options{Volatile: []string{"/v"}})
	if err != nil {
		return false
	}
	a := h.Sum(&fingerprint.Input{Method: "POST", ContentType: "application/json", Body: []byte(`{"a":1,"v":1}`)})
	b := h.Sum(&fingerprint.Input{Method: "POST", ContentType: "application/json", Body: []byte(`{"v":2, "a":1}`)})
	return a == b
}
