package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/idemgen/idemgen/examples/coupons/api"
	"github.com/idemgen/idemgen/runtime/idemclient"
)

// The members' app. Each member taps "claim" (again only when told it
// failed); the app makes the claim with the generated client helper
// (api.IdempotentClient.ClaimCoupon: one key per claim, retries under the
// contract's policy). Like the app of the seed article, its HTTP layer
// stamps the device clock into the body of every request it sends
// (stampClientTime), so the attempts of one claim differ in client_time.
//
// What the member does with the outcome is the same whatever guards the
// server:
//   - 201: the member has the coupon; 410: sold out. Done.
//   - a conflict (the server says this key was used for a different
//     request): the app shows "claim failed, try again" and the member taps
//     again, which is a new claim with a new key (at most maxTaps taps);
//   - no final answer (connection errors, 503s or 409s "in use" until the
//     attempts ran out): the app resumes the same claim with the same key
//     (idemclient.WithKey), as docs/client.md recommends: at once up to
//     maxResumes times, then every resumePause until resumeFor has passed
//     since the tap.
const (
	maxTaps    = 3
	maxResumes = 5
	// resumeFor outlasts a claim whose Begin took effect in the store but
	// answered after the store timeout (5s; a loaded machine): the server
	// said 503 and the claim holds the key, in flight, until its lease
	// (30s, the contract's in-flight lease) ends. Real time: the server's
	// lease is not scaled.
	resumeFor   = time.Minute
	resumePause = 500 * time.Millisecond
	// callTimeout bounds each helper call (real time; the waits between
	// attempts are scaled by the run's TimeScale).
	callTimeout = 30 * time.Second
)

// memberOutcome is what happened to one member, as the app saw it.
type memberOutcome struct {
	Member     string
	Claimed    bool // the app got a 201
	SoldOut    bool // the app got a 410
	ToldFailed int  // times the app showed "claim failed" (a conflict)
	Taps       int
	Err        error // the last error, when the member ended with neither
}

type member struct {
	id       string
	client   *api.IdempotentClient
	couponID string
}

func newMember(id, server, couponID string, doer *idemclient.Doer) (*member, error) {
	c, err := api.NewIdempotentClient(server,
		api.WithHTTPClient(doer),
		api.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+id)
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &member{id: id, client: c, couponID: couponID}, nil
}

// claim is the member tapping "claim" until the app has an answer.
func (m *member) claim(ctx context.Context) memberOutcome {
	out := memberOutcome{Member: m.id}
	for out.Taps < maxTaps {
		out.Taps++
		if !m.tap(ctx, &out) {
			return out
		}
	}
	return out
}

// tap is one claim the member means to make: one key, resumed until the
// app gets an answer. It reports whether the member taps again.
func (m *member) tap(ctx context.Context, out *memberOutcome) (again bool) {
	key := "" // a new claim: the helper makes a new key
	start := time.Now()
	for resume := 0; ; resume++ {
		if resume > maxResumes {
			select {
			case <-ctx.Done():
			case <-time.After(resumePause):
			}
		}
		var opts []idemclient.CallOption
		if key != "" {
			opts = append(opts, idemclient.WithKey(key))
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, k, err := m.client.ClaimCoupon(cctx, m.couponID, nil, api.ClaimRequest{Channel: api.App}, opts...)
		cancel()
		key, out.Err = k, err
		status := 0
		if resp != nil {
			status = resp.StatusCode()
		}
		switch {
		case status == http.StatusCreated:
			out.Claimed, out.Err = true, nil
			return false
		case status == http.StatusGone:
			out.SoldOut, out.Err = true, nil
			return false
		case resp != nil && isConflictBody(status, resp.Body):
			out.ToldFailed++ // "claim failed, try again"
			return true
		case ctx.Err() != nil || resume >= maxResumes && time.Since(start) >= resumeFor:
			return false
		case err == nil && status != http.StatusConflict && status != http.StatusTooManyRequests && status < 500:
			out.Err = fmt.Errorf("unexpected answer %s", resp.Status())
			return false
		}
		// No final answer yet (errors, 409 in flight, 503): resume the same
		// claim with the same key.
	}
}

// stampClientTime is the app's HTTP interceptor: it writes the device clock
// into client_time of every JSON body it sends, every retry included, as the
// app of the seed article did. It sits below the retrying Doer, so each
// attempt is stamped anew.
type stampClientTime struct {
	next http.RoundTripper
	now  func() time.Time
}

func (s stampClientTime) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Method != http.MethodPost {
		return s.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var claim api.ClaimRequest
	if err := json.Unmarshal(body, &claim); err == nil {
		t := s.now()
		claim.ClientTime = &t
		if b, err := json.Marshal(claim); err == nil {
			body = b
		}
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return s.next.RoundTrip(r)
}

// scaledClock is the Doer's clock: the real time, with every wait between
// attempts (backoff, Retry-After) scaled down so the story runs in seconds.
type scaledClock struct{ scale float64 }

func (c scaledClock) Now() time.Time { return time.Now() }

func (c scaledClock) Sleep(ctx context.Context, d time.Duration) error {
	return idemclient.SystemClock.Sleep(ctx, time.Duration(float64(d)*c.scale))
}
