package idemclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// dedupe is a test-only exactly-once server: a map and a mutex keyed by
// Idempotency-Key (the real engine lives in runtime/idem).
type dedupe struct {
	mu    sync.Mutex
	recs  map[string]*dedupeRec
	execs map[string]int
	n     int
}

type dedupeRec struct {
	done   bool
	fp     string
	status int
	body   string
}

func newDedupe() *dedupe {
	return &dedupe{recs: map[string]*dedupeRec{}, execs: map[string]int{}}
}

func (d *dedupe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	problem := func(status int, code string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"status":%d,"code":%q}`, status, code)
	}
	if key == "" {
		problem(400, "IDEMPOTENCY_KEY_MISSING")
		return
	}
	fp := r.Method + " " + r.URL.Path + " " + string(body)
	d.mu.Lock()
	if rec, ok := d.recs[key]; ok {
		d.mu.Unlock()
		switch {
		case rec.fp != fp:
			problem(422, CodeKeyReused)
		case !rec.done:
			problem(409, CodeKeyInUse)
		default:
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(rec.status)
			_, _ = io.WriteString(w, rec.body)
		}
		return
	}
	rec := &dedupeRec{fp: fp}
	d.recs[key] = rec
	d.n++
	n := d.n
	d.execs[key]++
	d.mu.Unlock()

	runtime.Gosched() // the side effect
	out := fmt.Sprintf(`{"effect":%d,"key":%q}`, n, key)

	d.mu.Lock()
	rec.done, rec.status, rec.body = true, http.StatusCreated, out
	d.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, out)
}

func (d *dedupe) effects() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

func (d *dedupe) first(key string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r := d.recs[key]; r != nil {
		return r.body
	}
	return ""
}

func (d *dedupe) executions() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := make(map[string]int, len(d.execs))
	for k, v := range d.execs {
		m[k] = v
	}
	return m
}

type outcome struct {
	key    string
	status int
	body   string
	err    error
	took   time.Duration
}

// hammer runs calls calls on workers goroutines, each under its own deadline.
func hammer(t *testing.T, d *Doer, url string, calls, workers int, deadline time.Duration, keys []string) []outcome {
	t.Helper()
	out := make([]outcome, calls)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				var opts []CallOption
				if keys != nil {
					opts = append(opts, WithKey(keys[i]))
				}
				ctx, call := Start(ctx, opts...)
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/claims",
					stringsReader(fmt.Sprintf(`{"call":%d,"client_time":"t"}`, i)))
				resp, err := d.Do(req)
				o := outcome{key: call.Key(), err: err}
				if err == nil {
					o.status = resp.StatusCode
					b, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					o.body, o.err = string(b), rerr
				}
				o.took = time.Since(start)
				cancel()
				out[i] = o
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func stringsReader(s string) io.Reader { return &stringReader{s: s} }

// stringReader is a reader http.NewRequest does not know, so requests
// built on it have no GetBody: the Doer buffers them once.
type stringReader struct{ s string }

func (r *stringReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

var e2ePolicy = Policy{
	Backoff: Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Multiplier: 2, Jitter: JitterFull},
}

const (
	e2eCalls    = 200
	e2eWorkers  = 16
	e2eDeadline = 20 * time.Second
)

var e2eRates = faultnet.Rates{Reset: 0.075, Drop: 0.075, Unavailable: 0.05, InFlight: 0.05, Truncate: 0.05, RetryAfter: "0"}

// Deterministic: fixed keys and per-key fault draws, so the faults every
// call meets do not depend on scheduling. With 10 attempts every call
// succeeds; side effects == calls; each caller gets the first response.
func TestEndToEndExactlyOnce(t *testing.T) {
	dd := newDedupe()
	srv := httptest.NewServer(dd)
	defer srv.Close()
	ft := faultnet.NewTransport(nil, faultnet.RandomPerKey(7, e2eRates, faultnet.HeaderKey("Idempotency-Key")))
	p := e2ePolicy
	p.MaxAttempts = 10
	d := NewDoer(&http.Client{Transport: ft}, p)

	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, e2eCalls)
	for i := range keys {
		keys[i] = uuid.Must(uuid.NewRandomFromReader(rngReader{rng})).String()
	}
	out := hammer(t, d, srv.URL, e2eCalls, e2eWorkers, e2eDeadline, keys)

	for i, o := range out {
		require.NoError(t, o.err, "call %d", i)
		assert.Equal(t, http.StatusCreated, o.status, "call %d", i)
		assert.Equal(t, keys[i], o.key)
		assert.Equal(t, dd.first(o.key), o.body, "call %d gets the first response", i)
		assert.Less(t, o.took, e2eDeadline)
	}
	assert.Equal(t, e2eCalls, dd.effects(), "side effects == calls")
	for k, n := range dd.executions() {
		assert.Equal(t, 1, n, "key %s", k)
	}
	st := ft.Stats()
	for _, k := range []faultnet.Kind{faultnet.Reset, faultnet.Drop, faultnet.Unavailable, faultnet.InFlight, faultnet.Truncate} {
		assert.Positive(t, st.Count(k), "%v injected", k)
	}
	faults := st.Requests - st.Count(faultnet.Pass)
	t.Logf("%d requests for %d calls, %d faults (%.0f%%)", st.Requests, e2eCalls, faults, 100*float64(faults)/float64(st.Requests))
	assert.InDelta(t, 0.3, float64(faults)/float64(st.Requests), 0.06)
}

// Real sockets through the proxy, generated keys, few attempts: some calls
// give up, and still nothing runs twice and nobody gets another's answer.
func TestEndToEndProxy(t *testing.T) {
	dd := newDedupe()
	origin := httptest.NewServer(dd)
	defer origin.Close()
	proxy, err := faultnet.NewProxy(origin.URL, faultnet.Random(11, e2eRates))
	require.NoError(t, err)
	front := httptest.NewServer(proxy)
	defer front.Close()

	for _, attempts := range []int{1, 16} {
		t.Run(fmt.Sprintf("attempts=%d", attempts), func(t *testing.T) {
			before := dd.effects()
			p := e2ePolicy
			p.MaxAttempts = attempts
			d := NewDoer(&http.Client{Transport: &http.Transport{}}, p)
			out := hammer(t, d, front.URL, e2eCalls, e2eWorkers, e2eDeadline, nil)
			ok, gaveUp := 0, 0
			executed := dd.executions()
			for i, o := range out {
				require.NotEmpty(t, o.key)
				assert.Less(t, o.took, e2eDeadline)
				if o.err == nil && o.status == http.StatusCreated {
					ok++
					assert.Equal(t, dd.first(o.key), o.body, "call %d gets the first response", i)
					assert.Equal(t, 1, executed[o.key])
					continue
				}
				gaveUp++
				if o.err != nil {
					var e *Error
					require.True(t, errors.As(o.err, &e), "call %d: a clear error: %v", i, o.err)
					assert.Equal(t, o.key, e.Key)
					assert.ErrorIs(t, o.err, ErrAttemptsExhausted)
				} else {
					assert.Contains(t, []int{409, 503}, o.status, "call %d: %s", i, o.body)
				}
				assert.LessOrEqual(t, executed[o.key], 1)
			}
			for k, n := range executed {
				assert.Equal(t, 1, n, "key %s", k)
			}
			t.Logf("attempts=%d: %d succeeded, %d gave up, %d side effects, proxy %+v", attempts, ok, gaveUp, dd.effects()-before, proxy.Stats())
			assert.GreaterOrEqual(t, dd.effects()-before, ok)
			if attempts == 16 {
				assert.Equal(t, e2eCalls, ok, "0.3^16 per call: all succeed")
			} else {
				assert.Positive(t, gaveUp, "no retries: about 30% give up")
			}
		})
	}
}

type rngReader struct{ r *rand.Rand }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}
