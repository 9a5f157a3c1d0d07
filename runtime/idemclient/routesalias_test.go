package idemclient_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idemclient"
)

// BenchmarkDoerRouteTable measures a request of no typed helper that the
// Doer manages under a RouteTable's policy (Match and Matcher).
func BenchmarkDoerRouteTable(b *testing.B) {
	t := idemclient.NewRouteTable(nil, []idemclient.Route{{Method: http.MethodPost, Path: "/claims", Policy: &idemclient.Policy{On: idemclient.RetryOn{Connection: true, Statuses: []int{502, 503}}}}})
	m, err := t.Matcher("http://h/")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    idemclient.Matcher
	}{{"Match", t.Match}, {"Matcher", m}} {
		b.Run(tc.name, func(b *testing.B) {
			d := idemclient.NewDoer(okDoer{}, idemclient.Policy{}, idemclient.WithMatcher(tc.m))
			b.ReportAllocs()
			for range b.N {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://h/claims", bytes.NewReader([]byte(`{}`)))
				resp, err := d.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

type okDoer struct{}

func (okDoer) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 201, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
}

// TestRouteTableStatusesShared pins what the policies a RouteTable returns
// promise about the On.Statuses they share with the table (a copy would
// cost an allocation per matched request, BenchmarkDoerRouteTable):
// appending to it does not reach the table, and the Doer, retrying under
// it, never writes it.
func TestRouteTableStatusesShared(t *testing.T) {
	tb := idemclient.NewRouteTable(nil, []idemclient.Route{{Method: http.MethodPost, Path: "/claims", Policy: &idemclient.Policy{MaxAttempts: 3, On: idemclient.RetryOn{Statuses: []int{502, 503}}}}})
	req, _ := http.NewRequest(http.MethodPost, "http://h/claims", nil)
	p, ok := tb.Match(req)
	if !ok {
		t.Fatal("not matched")
	}
	p.On.Statuses = append(p.On.Statuses, 500)
	q, _ := tb.Match(req)
	if !slices.Equal(q.On.Statuses, []int{502, 503}) {
		t.Fatalf("an append to a returned policy's statuses reached the table: %v", q.On.Statuses)
	}

	var attempts int
	d := idemclient.NewDoer(doerFunc(func(req *http.Request) (*http.Response, error) {
		attempts++
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
	}), idemclient.Policy{}, idemclient.WithMatcher(tb.Match), idemclient.WithClock(noWait{}))
	resp, err := d.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if attempts != 3 {
		t.Fatalf("attempts = %d, want 3", attempts)
	}
	q, _ = tb.Match(req)
	if !slices.Equal(q.On.Statuses, []int{502, 503}) {
		t.Fatalf("the Doer wrote the table's statuses: %v", q.On.Statuses)
	}
}

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

type noWait struct{}

func (noWait) Now() time.Time                                   { return time.Unix(0, 0) }
func (noWait) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
