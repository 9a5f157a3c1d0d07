package idemclient

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// BenchmarkDelay: our jittered delay (library sequence + jitter) against
// the library's own randomized NextBackOff, per retry.
func BenchmarkDelay(b *testing.B) {
	p := DefaultPolicy()
	b.Run("idemclient", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			seq := p.Backoff.sequence()
			for range p.MaxAttempts - 1 {
				_ = p.Backoff.jitter(min(seq.NextBackOff(), p.Backoff.Max), float64(i%1000)/1000)
			}
		}
	})
	b.Run("cenkalti", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			eb := &backoff.ExponentialBackOff{InitialInterval: 500 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 8 * time.Second}
			eb.Reset()
			for range p.MaxAttempts - 1 {
				_ = eb.NextBackOff()
			}
		}
	})
}

// canned is an in-memory HTTPDoer: it reads the request and returns 201.
type canned struct{}

func (canned) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 201, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader([]byte(`{"ok":true}`))), Request: req}, nil
}

// BenchmarkDoer measures the per-call overhead of a managed call that
// succeeds at once, for each carrier, against the bare inner Doer.
func BenchmarkDoer(b *testing.B) {
	body := []byte(payload)
	run := func(b *testing.B, d HTTPDoer, mark bool) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for range b.N {
			ctx := context.Background()
			if mark {
				ctx, _ = Start(ctx)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://h/claims?x=1", bytes.NewReader(body))
			resp, err := d.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, canned{}, false) })
	b.Run("passthrough", func(b *testing.B) { run(b, NewDoer(canned{}, Policy{}), false) })
	b.Run("header", func(b *testing.B) { run(b, NewDoer(canned{}, Policy{}), true) })
	b.Run("query", func(b *testing.B) {
		run(b, NewDoer(canned{}, Policy{KeyCarrier: CarrierQuery, KeyName: "request_id"}), true)
	})
	b.Run("body", func(b *testing.B) {
		run(b, NewDoer(canned{}, Policy{KeyCarrier: CarrierBody, KeyName: "/idempotency_key"}), true)
	})
}

func BenchmarkSetBodyKey(b *testing.B) {
	body := []byte(`{"coupon_ids":[3,1,2],"user":{"id":"u1","name":"Ada"},"amount":1.50,"note":"` +
		string(bytes.Repeat([]byte("x"), 512)) + `"}`)
	toks := []string{"idempotency_key"}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for range b.N {
		if _, _, err := setBodyKey(body, toks, "0190b7b0-0000-7000-8000-000000000001"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseRetryAfter(b *testing.B) {
	now := time.Now()
	for name, h := range map[string]http.Header{
		"seconds": {"Retry-After": {"120"}},
		"date":    {"Retry-After": {"Sat, 01 Mar 2025 12:00:30 GMT"}},
		"ms":      {"Retry-After-Ms": {"1500"}},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				ParseRetryAfter(h, now)
			}
		})
	}
}
