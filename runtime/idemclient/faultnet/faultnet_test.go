package faultnet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// origin counts the requests it handled and echoes path, query and body.
type origin struct {
	*httptest.Server
	handled atomic.Int32
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.handled.Add(1)
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Key", r.Header.Get("Idempotency-Key"))
		fmt.Fprintf(w, "%s %s?%s %s", r.Method, r.URL.Path, r.URL.RawQuery, b)
	}))
	t.Cleanup(o.Close)
	return o
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string, error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("body"))
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func isConnErr(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE)
}

// Both injectors, each fault kind.
func TestFaults(t *testing.T) {
	type injector struct {
		name   string
		client func(t *testing.T, o *origin, f faultnet.Fault) (*http.Client, string, func() faultnet.Stats)
	}
	injectors := []injector{
		{"transport", func(t *testing.T, o *origin, f faultnet.Fault) (*http.Client, string, func() faultnet.Stats) {
			ft := faultnet.NewTransport(nil, faultnet.Script(f))
			return &http.Client{Transport: ft}, o.URL, ft.Stats
		}},
		{"proxy", func(t *testing.T, o *origin, f faultnet.Fault) (*http.Client, string, func() faultnet.Stats) {
			p, err := faultnet.NewProxy(o.URL, faultnet.Script(f))
			require.NoError(t, err)
			front := httptest.NewServer(p)
			t.Cleanup(front.Close)
			return &http.Client{Transport: &http.Transport{}}, front.URL, p.Stats
		}},
	}
	for _, inj := range injectors {
		t.Run(inj.name, func(t *testing.T) {
			for _, tc := range []struct {
				fault   faultnet.Fault
				handled int32
				check   func(t *testing.T, resp *http.Response, body string, err error)
			}{
				{faultnet.PassFault, 1, func(t *testing.T, resp *http.Response, body string, err error) {
					require.NoError(t, err)
					assert.Equal(t, "POST /a/b?x=1&y=%2F body", body)
				}},
				{faultnet.ResetFault, 0, func(t *testing.T, _ *http.Response, _ string, err error) {
					require.Error(t, err)
					assert.True(t, isConnErr(err), "%v", err)
				}},
				{faultnet.DropFault, 1, func(t *testing.T, _ *http.Response, _ string, err error) {
					require.Error(t, err)
					assert.True(t, isConnErr(err), "%v", err)
				}},
				{faultnet.TruncateFault, 1, func(t *testing.T, resp *http.Response, body string, err error) {
					require.Error(t, err)
					assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
					assert.Equal(t, 200, resp.StatusCode)
					assert.Equal(t, "POST /a/b?x=", body, "half of the body")
				}},
				{faultnet.UnavailableFault, 0, func(t *testing.T, resp *http.Response, body string, err error) {
					require.NoError(t, err)
					assert.Equal(t, 503, resp.StatusCode)
					assert.Equal(t, "1", resp.Header.Get("Retry-After"))
					assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
					assert.Contains(t, body, `"code":"IDEMPOTENCY_STORE_UNAVAILABLE"`)
				}},
				{faultnet.Fault{Kind: faultnet.InFlight, RetryAfter: "2"}, 0, func(t *testing.T, resp *http.Response, body string, err error) {
					require.NoError(t, err)
					assert.Equal(t, 409, resp.StatusCode)
					assert.Equal(t, "2", resp.Header.Get("Retry-After"))
					assert.Contains(t, body, `"code":"IDEMPOTENCY_KEY_IN_USE"`)
				}},
				{faultnet.DelayFault(time.Millisecond), 1, func(t *testing.T, _ *http.Response, body string, err error) {
					require.NoError(t, err)
					assert.Equal(t, "POST /a/b?x=1&y=%2F body", body)
				}},
			} {
				t.Run(tc.fault.Kind.String(), func(t *testing.T) {
					o := newOrigin(t)
					c, url, stats := inj.client(t, o, tc.fault)
					resp, body, err := get(t, c, url+"/a/b?x=1&y=%2F")
					tc.check(t, resp, body, err)
					assert.Equal(t, tc.handled, o.handled.Load(), "requests the server handled")
					st := stats()
					assert.Equal(t, 1, st.Requests)
					assert.Equal(t, 1, st.Count(tc.fault.Kind))
					assert.Equal(t, int(tc.handled), st.Forwarded)
					if inj.name == "transport" && err != nil && tc.fault.Kind != faultnet.Truncate {
						assert.ErrorIs(t, err, faultnet.ErrInjected)
					}
					// The script is used up: the next request passes.
					_, body, err = get(t, c, url+"/next")
					require.NoError(t, err)
					assert.Equal(t, "POST /next? body", body)
				})
			}
		})
	}
}

func TestDelayRespectsContext(t *testing.T) {
	o := newOrigin(t)
	var slept []time.Duration
	var mu sync.Mutex
	ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.DelayFault(time.Hour), faultnet.DelayFault(5*time.Second))).
		WithSleep(func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			slept = append(slept, d)
			mu.Unlock()
			if d == time.Hour {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
	_, err := (&http.Client{Transport: ft}).Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Zero(t, o.handled.Load())
	_, _, err = get(t, &http.Client{Transport: ft}, o.URL)
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Hour, 5 * time.Second}, slept)
	assert.Equal(t, int32(1), o.handled.Load())
}

func TestRandomIsSeeded(t *testing.T) {
	rates := faultnet.Rates{Reset: 0.1, Drop: 0.1, Delay: 0.05, Unavailable: 0.05, InFlight: 0.05, Truncate: 0.05}
	draw := func(p faultnet.Plan, n int) []faultnet.Kind {
		out := make([]faultnet.Kind, n)
		for i := range out {
			out[i] = p.Next(&http.Request{Header: http.Header{}}).Kind
		}
		return out
	}
	a, b, c := draw(faultnet.Random(42, rates), 2000), draw(faultnet.Random(42, rates), 2000), draw(faultnet.Random(43, rates), 2000)
	assert.Equal(t, a, b, "same seed, same faults")
	assert.NotEqual(t, a, c)
	counts := map[faultnet.Kind]int{}
	for _, k := range a {
		counts[k]++
	}
	assert.InDelta(t, 0.6*2000, counts[faultnet.Pass], 90)
	assert.InDelta(t, 0.1*2000, counts[faultnet.Reset], 60)
	assert.InDelta(t, 0.05*2000, counts[faultnet.Truncate], 45)
}

func TestRandomPerKeyIgnoresOrder(t *testing.T) {
	rates := faultnet.Rates{Reset: 0.2, Drop: 0.2, Unavailable: 0.1}
	req := func(k string) *http.Request { return &http.Request{Header: http.Header{"Idempotency-Key": {k}}} }
	keys := []string{"a", "b", "c", "d"}
	seq := func(order []string) map[string][]faultnet.Kind {
		p := faultnet.RandomPerKey(5, rates, faultnet.HeaderKey("Idempotency-Key"))
		out := map[string][]faultnet.Kind{}
		for range 50 {
			for _, k := range order {
				out[k] = append(out[k], p.Next(req(k)).Kind)
			}
		}
		return out
	}
	assert.Equal(t, seq(keys), seq([]string{"d", "b", "a", "c"}))
}

func TestScriptConcurrent(t *testing.T) {
	s := faultnet.Script(faultnet.ResetFault, faultnet.DropFault, faultnet.InFlightFault)
	var wg sync.WaitGroup
	var faults atomic.Int32
	for range 50 {
		wg.Go(func() {
			if s.Next(nil).Kind != faultnet.Pass {
				faults.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(3), faults.Load(), "each scripted fault is handed out once")
}

func TestProxyConcurrent(t *testing.T) {
	o := newOrigin(t)
	p, err := faultnet.NewProxy(o.URL, faultnet.Random(3, faultnet.Rates{Reset: 0.2, Drop: 0.2, Truncate: 0.1, Unavailable: 0.1}))
	require.NoError(t, err)
	front := httptest.NewServer(p)
	defer front.Close()
	c := &http.Client{Transport: &http.Transport{}}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			resp, body, err := get(t, c, fmt.Sprintf("%s/p%d", front.URL, i))
			if err == nil && resp.StatusCode == 200 {
				assert.Equal(t, fmt.Sprintf("POST /p%d? body", i), body)
			}
		})
	}
	wg.Wait()
	st := p.Stats()
	assert.GreaterOrEqual(t, st.Requests, 64)
	assert.Equal(t, int32(st.Forwarded), o.handled.Load())
}

func TestNewProxyErrors(t *testing.T) {
	_, err := faultnet.NewProxy("://bad", faultnet.Script())
	assert.Error(t, err)
	_, err = faultnet.NewProxy("ftp://host", faultnet.Script())
	assert.Error(t, err)
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "drop", faultnet.Drop.String())
	assert.Equal(t, "in-flight", faultnet.InFlight.String())
	assert.Equal(t, "Kind(99)", faultnet.Kind(99).String())
}
