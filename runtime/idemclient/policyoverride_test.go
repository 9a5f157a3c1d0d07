package idemclient

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// answerDoer answers every request 200 after reading its body.
type answerDoer struct{ n atomic.Int32 }

func (d *answerDoer) Do(r *http.Request) (*http.Response, error) {
	d.n.Add(1)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// An override that edits On.Statuses in place must not change the policy
// a generated helper passes with WithPolicy (its operation's, shared by
// every call), and runs once per call even when FixKey reads the policy
// before the Doer does.
func TestPolicyOverrideDoesNotEditSharedPolicy(t *testing.T) {
	shared := Policy{MaxAttempts: 1, On: RetryOn{Statuses: []int{408, 409, 503}}}
	before := slices.Clone(shared.On.Statuses)
	runs := 0
	ctx, call := shared.Start(context.Background(), WithPolicyOverride(func(p *Policy) {
		runs++
		p.On.Statuses = slices.DeleteFunc(p.On.Statuses, func(s int) bool { return s == 409 })
	}))
	if _, err := call.FixKey(""); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/y", nil)
	if _, err := NewDoer(&answerDoer{}, DefaultPolicy()).Do(req); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shared.On.Statuses, before) {
		t.Errorf("the shared policy's statuses became %v, want %v", shared.On.Statuses, before)
	}
	if runs != 1 {
		t.Errorf("the override ran %d times, want 1", runs)
	}
}
