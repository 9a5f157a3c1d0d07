package idemclient

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Under WithoutKey a request whose key carrier holds no key (the nil UUID
// oapi-codegen writes for a typed key parameter it always sends, such as an
// optional one without a pointer, or an empty value) goes without the
// header or query parameter: the server would refuse the nil UUID (400),
// while it accepts a request without a key under an optional key. A key
// the request does carry is still sent as is.
func TestWithoutKeyDropsEmptyCarrier(t *testing.T) {
	srv := newRecServer(t, nil)
	d := NewDoer(http.DefaultClient, Policy{}, WithClock(newFakeClock()))
	p := fastPolicy(2)
	p.KeyOptional, p.KeylessDedupe = true, true
	send := func(p Policy, url string, header ...string) seen {
		t.Helper()
		ctx, _ := p.Start(context.Background(), WithoutKey())
		req := post(t, ctx, url, payload)
		for _, h := range header {
			req.Header.Add(p.WithDefaults().KeyName, h)
		}
		resp, err := d.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		got := srv.Seen()
		return got[len(got)-1]
	}
	for _, v := range []string{nilUUID, ""} {
		s := send(p, srv.URL, v)
		_, ok := s.Header["Idempotency-Key"]
		assert.False(t, ok, "%q: no key header sent, got %q", v, s.Header.Get("Idempotency-Key"))
	}
	s := send(p, srv.URL, "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d")
	assert.Equal(t, "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", s.Key, "a key the request carries is sent")
	// A carrier with more than one value is dropped only when none of them
	// carries a key: a real key after an empty value or the nil UUID is
	// kept, not sent keyless.
	for _, first := range []string{"", nilUUID} {
		s = send(p, srv.URL, first, "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d")
		assert.Contains(t, s.Header.Values("Idempotency-Key"), "0190b4a2-7c1e-7d3f-9a4b-2c6e8f0a1b3d", "%q first: the real key is sent", first)
	}
	s = send(p, srv.URL, "", nilUUID)
	_, ok := s.Header["Idempotency-Key"]
	assert.False(t, ok, "no value carries a key: no header")

	q := p
	q.KeyCarrier, q.KeyName = CarrierQuery, "request_id"
	s = send(q, srv.URL+"?a=1&request_id="+nilUUID+"&b=2&request_id=")
	assert.Equal(t, "a=1&b=2", s.RawQuery)
	s = send(q, srv.URL+"?request_id=k1&a=1")
	assert.Equal(t, "request_id=k1&a=1", s.RawQuery, "a key the request carries is sent as is")
}
