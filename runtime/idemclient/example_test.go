package idemclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/idemgen/idemgen/runtime/idemclient"
	"github.com/idemgen/idemgen/runtime/idemclient/faultnet"
)

// A flaky server answers 503 once; the Doer waits and retries with the same key.
func Example() {
	var mu sync.Mutex
	keys := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		k := r.Header.Get("Idempotency-Key")
		if keys[k]++; keys[k] == 1 {
			w.Header().Set("Retry-After-Ms", "10")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	doer := idemclient.NewDoer(http.DefaultClient, idemclient.Policy{
		Backoff: idemclient.Backoff{Initial: 5 * time.Millisecond}, // defaults otherwise: 4 attempts, ...
	})
	ctx, call := idemclient.Start(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/coupons/c1/claims",
		bytes.NewReader([]byte(`{"user":"u1"}`)))
	resp, err := doer.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", call.Attempts(), "attempts, one key:", len(keys) == 1 && keys[call.Key()] == 2)
	// Output: 201 after 2 attempts, one key: true
}

// A caller persists the key before the first attempt and, after its own
// crash, resumes the same logical call with it.
func ExampleWithKey() {
	var mu sync.Mutex
	done := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		k := r.Header.Get("Idempotency-Key")
		if done[k] {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		done[k] = true
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	doer := idemclient.NewDoer(http.DefaultClient, idemclient.Policy{})

	var saved string // a database row in real life
	ctx, _ := idemclient.Start(context.Background(), idemclient.WithKeyObserver(func(k string) { saved = k }))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
	resp, _ := doer.Do(req)
	resp.Body.Close()
	// ... the process crashes before recording the outcome; on restart:
	ctx, _ = idemclient.Start(context.Background(), idemclient.WithKey(saved))
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
	resp, _ = doer.Do(req)
	resp.Body.Close()
	fmt.Println("replayed:", resp.Header.Get("Idempotent-Replayed"))
	// Output: replayed: true
}

// The key can travel in the JSON body: it is spliced in once, before the
// first attempt, and every attempt sends the same bytes.
func ExamplePolicy_bodyCarrier() {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if bodies = append(bodies, b.String()); len(bodies) == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()

	p := idemclient.Policy{
		KeyCarrier: idemclient.CarrierBody, KeyName: "/idempotency_key",
		Backoff: idemclient.Backoff{Initial: time.Millisecond},
	}
	doer := idemclient.NewDoer(http.DefaultClient, p)
	ctx, call := idemclient.Start(context.Background(), idemclient.WithKey("7f1c-demo"))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{"amount": 1.50}`)))
	resp, err := doer.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(call.Attempts(), "attempts")
	for _, b := range bodies {
		fmt.Println(b)
	}
	// Output:
	// 2 attempts
	// {"idempotency_key":"7f1c-demo","amount": 1.50}
	// {"idempotency_key":"7f1c-demo","amount": 1.50}
}

func ExamplePolicy_LongestSpan() {
	fmt.Println(idemclient.DefaultPolicy().LongestSpan()) // 500ms + 1s + 2s
	p := idemclient.Policy{MaxAttempts: 6, Backoff: idemclient.Backoff{Initial: time.Second, Max: 4 * time.Second}}
	fmt.Println(p.LongestSpan()) // 1 + 2 + 4 + 4 + 4
	// Output:
	// 3.5s
	// 15s
}

func ExampleParseRetryAfter() {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"3", "Sat, 01 Mar 2025 12:00:30 GMT", "soon"} {
		d, ok := idemclient.ParseRetryAfter(http.Header{"Retry-After": {v}}, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 3s true
	// 30s true
	// 0s false
}

// A Doer behind a fault-injecting transport: the first response is lost
// after the server handled the request; the retry carries the same key.
func ExampleNewDoer_faults() {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	ft := faultnet.NewTransport(nil, faultnet.Script(faultnet.DropFault))
	doer := idemclient.NewDoer(&http.Client{Transport: ft}, idemclient.Policy{
		Backoff: idemclient.Backoff{Initial: time.Millisecond},
	}, idemclient.WithAttemptHook(func(_ context.Context, a idemclient.Attempt) {
		fmt.Printf("attempt %d: status=%d class=%v retry=%v\n", a.N, a.Status, a.Class, a.Retry)
	}))
	ctx, call := idemclient.Start(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
	resp, err := doer.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(len(seen), seen[0] == call.Key() && seen[1] == call.Key())
	// Output:
	// attempt 1: status=0 class=connection retry=true
	// attempt 2: status=201 class=none retry=false
	// 2 true
}

// Under WithErrorOnExhausted a call whose attempts all got a status the
// policy retries ends with an error that errors.Is matches
// ErrAttemptsExhausted and that keeps the last answer.
func ExampleWithErrorOnExhausted() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, "down for maintenance")
	}))
	defer srv.Close()
	doer := idemclient.NewDoer(http.DefaultClient, idemclient.Policy{
		MaxAttempts: 2, Backoff: idemclient.Backoff{Initial: time.Millisecond},
	}, idemclient.WithErrorOnExhausted())
	ctx, _ := idemclient.Start(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader([]byte(`{}`)))
	_, err := doer.Do(req)
	var e *idemclient.Error
	if errors.Is(err, idemclient.ErrAttemptsExhausted) && errors.As(err, &e) {
		body, _ := io.ReadAll(e.Response.Body)
		fmt.Println(e.Attempts, e.Status, string(body))
	}
	// Output: 2 503 down for maintenance
}
