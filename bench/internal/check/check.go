// Package check is the correctness side of the comparisons: the same
// scenarios run against every implementation (idemgen over each store, the
// peers), each through a Target that serves one request at a time, and the
// outcome is a Result that tests assert on (for idemgen) and log as one
// "RESULT {json}" line that cmd/report renders.
package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/bench/internal/workload"
	"github.com/idemgen/idemgen/runtime/fingerprint"
)

// Ops is the handler's behaviour and its execution counter, shared by the
// handler an implementation wraps and the scenario that drives it.
type Ops struct {
	calls atomic.Int64
	delay atomic.Int64 // time.Duration
	fail  atomic.Int64 // the next fail calls answer 500
}

// Enter counts an execution, waits the scenario's delay and returns the
// status the handler answers (201, or 500 while failures are armed).
func (o *Ops) Enter() int {
	o.calls.Add(1)
	if d := time.Duration(o.delay.Load()); d > 0 {
		time.Sleep(d)
	}
	if o.fail.Add(-1) >= 0 {
		return http.StatusInternalServerError
	}
	o.fail.Store(0)
	return http.StatusCreated
}

// Calls returns how many times the handler ran.
func (o *Ops) Calls() int { return int(o.calls.Load()) }

// Response is what a client got.
type Response struct {
	Status   int
	Replayed bool   // Idempotent-Replayed: true
	Code     string // the "code" of a problem+json answer
	Body     []byte
}

// Target serves one request with an idempotency key and a body; it is safe
// for concurrent use.
type Target interface {
	Do(key string, body []byte) Response
}

// New builds a fresh implementation (its own store) around a handler driven by ops.
type New func(tb testing.TB, ops *Ops) Target

// Outcome is what one scenario's last request got.
type Outcome struct {
	Status   int    `json:"status"`
	Code     string `json:"code,omitempty"`
	Replayed bool   `json:"replayed"` // said so (Idempotent-Replayed) or answered the first body without running
	Executed bool   `json:"executed"` // the handler ran for this request
}

func (o Outcome) String() string {
	s := fmt.Sprint(o.Status)
	if o.Code != "" {
		s += " " + o.Code
	}
	switch {
	case o.Executed:
		s += ", executed again"
	case o.Replayed:
		s += ", replay of the first answer"
	}
	return s
}

// Concurrent is what N simultaneous duplicates got.
type Concurrent struct {
	Requests   int            `json:"requests"`
	Executions int            `json:"executions"`
	Statuses   map[string]int `json:"statuses"` // "201" or "409 IDEMPOTENCY_KEY_IN_USE" -> count
}

func (c Concurrent) String() string {
	keys := make([]string, 0, len(c.Statuses))
	for k := range c.Statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", c.Statuses[k], k))
	}
	return strings.Join(parts, ", ")
}

// Result is one implementation's outcomes.
type Result struct {
	Impl       string     `json:"impl"`
	Concurrent Concurrent `json:"concurrent"`
	// OtherBody: the key reused, after completion, with another body.
	OtherBody Outcome `json:"other_body"`
	// Resent: the same request resent with its members reordered and the volatile sent_at changed.
	Resent Outcome `json:"resent"`
	// After500: the first attempt answered 500; the retry with the same key and body.
	After500 Outcome `json:"after_500"`
}

// Duplicates is how many requests the concurrent scenario sends at once.
const Duplicates = 50

// Run runs every scenario against fresh instances of an implementation,
// logs the RESULT line and returns the result.
func Run(t *testing.T, impl string, newTarget New) Result {
	t.Helper()
	res := Result{Impl: impl}
	res.Concurrent = concurrent(t, newTarget)
	res.OtherBody = sequel(t, newTarget, 0, workload.PayloadOther)
	res.Resent = sequel(t, newTarget, 0, workload.PayloadResent)
	res.After500 = sequel(t, newTarget, 1, workload.Payload)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT %s", b)
	return res
}

func label(r Response) string {
	if r.Code != "" {
		return fmt.Sprintf("%d %s", r.Status, r.Code)
	}
	return fmt.Sprint(r.Status)
}

func concurrent(t *testing.T, newTarget New) Concurrent {
	ops := &Ops{}
	ops.delay.Store(int64(100 * time.Millisecond))
	tg := newTarget(t, ops)
	start := make(chan struct{})
	var wg sync.WaitGroup
	out := make([]Response, Duplicates)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = tg.Do(workload.Key, workload.Payload)
		}()
	}
	close(start)
	wg.Wait()
	c := Concurrent{Requests: Duplicates, Executions: ops.Calls(), Statuses: map[string]int{}}
	for _, r := range out {
		c.Statuses[label(r)]++
	}
	return c
}

// sequel: a first request (answering 500 when fail), then body under the same key.
func sequel(t *testing.T, newTarget New, fail int64, body []byte) Outcome {
	ops := &Ops{}
	ops.fail.Store(fail)
	tg := newTarget(t, ops)
	first := tg.Do(workload.Key, workload.Payload)
	want := http.StatusCreated
	if fail > 0 {
		want = http.StatusInternalServerError
	}
	if first.Status != want {
		t.Fatalf("first request: status %d, want %d (%s)", first.Status, want, first.Body)
	}
	before := ops.Calls()
	r := tg.Do(workload.Key, body)
	o := Outcome{Status: r.Status, Code: r.Code, Executed: ops.Calls() > before}
	o.Replayed = r.Replayed || (!o.Executed && r.Status == first.Status && bytes.Equal(r.Body, first.Body))
	return o
}

// AssertExactlyOnce checks the concurrent scenario's promise: the handler
// ran once, one request got its 201, and the others either 409
// IDEMPOTENCY_KEY_IN_USE (still in flight) or the replay (201, arrived after
// it finished; how many do depends on timing).
func (c Concurrent) AssertExactlyOnce(t testing.TB) {
	t.Helper()
	if c.Executions != 1 {
		t.Errorf("the handler ran %d times, want 1", c.Executions)
	}
	n := 0
	for k, v := range c.Statuses {
		if k != "201" && k != "409 IDEMPOTENCY_KEY_IN_USE" {
			t.Errorf("%d× %s", v, k)
		}
		n += v
	}
	if c.Statuses["201"] < 1 || n != c.Requests {
		t.Errorf("statuses %v", c.Statuses)
	}
}

// AssertAnswered checks what the harness relies on from any peer, whatever
// its promise: every duplicate got an answer and the handler ran at least
// once.
func (c Concurrent) AssertAnswered(t testing.TB) {
	t.Helper()
	n := 0
	for _, v := range c.Statuses {
		n += v
	}
	if n != c.Requests || n != Duplicates {
		t.Errorf("%d answers for %d duplicates: %v", n, Duplicates, c.Statuses)
	}
	if c.Executions < 1 {
		t.Errorf("the handler never ran")
	}
}

// ResentIsSame reports whether this build's fingerprint takes
// workload.PayloadResent for the same request as workload.Payload (the
// canonical fingerprint does: same members in another order, only the
// volatile sent_at changed). Tests expect a replay of the resend exactly
// when it does, a conflict otherwise.
func ResentIsSame() bool {
	spec := workload.Spec()
	h, err := fingerprint.New(fingerprint.Options{Volatile: spec.Volatile})
	if err != nil {
		panic(err)
	}
	sum := func(body []byte) fingerprint.Fingerprint {
		return h.Sum(&fingerprint.Input{Method: http.MethodPost, Operation: spec.Operation,
			ContentType: "application/json", Header: http.Header{}, Body: body})
	}
	return sum(workload.Payload) == sum(workload.PayloadResent)
}

// ResentOutcome is what idemgen must answer the resend under strict semantics.
func ResentOutcome() Outcome {
	if ResentIsSame() {
		return Outcome{Status: http.StatusCreated, Replayed: true}
	}
	return Outcome{Status: http.StatusUnprocessableEntity, Code: "IDEMPOTENCY_KEY_REUSED"}
}

// ParseProblem fills r.Code from a problem+json body.
func ParseProblem(r *Response, contentType string) {
	if !strings.HasPrefix(contentType, "application/problem+json") {
		return
	}
	var p struct{ Code string }
	if json.Unmarshal(r.Body, &p) == nil {
		r.Code = p.Code
	}
}

// NetHTTP is a Target over a net/http handler, through httptest.
type NetHTTP struct{ H http.Handler }

// Do implements Target.
func (n NetHTTP) Do(key string, body []byte) Response {
	r := httptest.NewRequest(http.MethodPost, workload.Path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	n.H.ServeHTTP(w, r)
	res := Response{Status: w.Code, Replayed: w.Header().Get("Idempotent-Replayed") == "true", Body: w.Body.Bytes()}
	ParseProblem(&res, w.Header().Get("Content-Type"))
	return res
}

// Handler is workload.Handler driven by ops: decode, Enter, answer.
func Handler(ops *Ops) http.Handler {
	created := workload.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if st := ops.Enter(); st != http.StatusCreated {
			http.Error(w, "failed", st)
			return
		}
		created.ServeHTTP(w, r)
	})
}
