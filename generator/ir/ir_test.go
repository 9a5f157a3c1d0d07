package ir_test

import (
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/ir"
)

// TestDependencies keeps the IR free of kin-openapi, jennifer and
// oapi-codegen: emitters and tools depend on the contract, not on a parser.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/idemgen/idemgen/generator/ir").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/getkin/", "github.com/dave/jennifer", "github.com/oapi-codegen/", "gopkg.in/yaml", "go.yaml.in/"} {
			assert.False(t, strings.HasPrefix(dep, banned), "generator/ir imports %s", dep)
		}
		assert.False(t, strings.Contains(dep, ".") && !strings.HasPrefix(dep, "github.com/idemgen/idemgen/"), "generator/ir imports a non-standard package %s", dep)
	}
}

func TestLongestSpan(t *testing.T) {
	b := ir.Backoff{Initial: 500 * time.Millisecond, Max: 8 * time.Second, Multiplier: 2, Jitter: ir.JitterFull}
	tests := []struct {
		attempts int
		want     time.Duration
	}{
		{1, 0},
		{2, 500 * time.Millisecond},
		{4, 3500 * time.Millisecond},                    // 0.5 + 1 + 2
		{7, 23500 * time.Millisecond},                   // 0.5 + 1 + 2 + 4 + 8 + 8
		{100, 7500*time.Millisecond + 95*8*time.Second}, // 0.5+1+2+4, then 95 delays capped at 8s
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ir.Retry{MaxAttempts: tt.attempts, Backoff: b}.LongestSpan(), "max-attempts %d", tt.attempts)
	}
	flat := ir.Backoff{Initial: time.Second, Max: time.Second, Multiplier: 1}
	assert.Equal(t, 3*time.Second, ir.Retry{MaxAttempts: 4, Backoff: flat}.LongestSpan())

	// Whole nanoseconds, each step truncated, as the client's backoff
	// library computes them: 3, 4 (not 4.5), 6, 9, 13 (not 13.5).
	odd := ir.Backoff{Initial: 3, Max: time.Second, Multiplier: 1.5}
	for n, want := range []time.Duration{0, 3, 4, 6, 9, 13} {
		assert.Equal(t, want, odd.Delay(n), "delay %d", n)
	}
	assert.Equal(t, time.Duration(3+4+6+9+13), ir.Retry{MaxAttempts: 6, Backoff: odd}.LongestSpan())

	// A span beyond any Duration saturates instead of wrapping around.
	huge := ir.Backoff{Initial: time.Second, Max: 100000 * 24 * time.Hour, Multiplier: 10}
	assert.Equal(t, time.Duration(math.MaxInt64), ir.Retry{MaxAttempts: 100, Backoff: huge}.LongestSpan())
}

func TestValidate(t *testing.T) {
	op := func(path, name string, line int) *ir.Operation {
		return &ir.Operation{Method: "POST", Path: path, GoName: name, Pos: ir.Pos{File: "a.yaml", Line: line},
			Names: ir.Names{Handler: name, RequestObject: name + "RequestObject", WithResponse: name + "WithResponse"}}
	}
	s := &ir.Spec{Operations: []*ir.Operation{op("/a", "Claim", 1), op("/b", "Claim", 9), op("/c", "Other", 12), op("/d", "claim", 20)}}
	errs := s.Validate()
	require.Len(t, errs, 2)
	var col *ir.CollisionError
	require.ErrorAs(t, errs[0], &col)
	assert.Equal(t, "Claim", col.Name)
	assert.Equal(t, 9, col.Pos.Line)
	assert.Equal(t, 1, col.Other.Line)
	var inv *ir.InvalidNameError
	require.ErrorAs(t, errs[1], &inv)
	assert.Equal(t, "claim", inv.Name)

	assert.Empty(t, (&ir.Spec{Operations: []*ir.Operation{op("/a", "A", 1), op("/b", "B", 2)}}).Validate())
}

func ExampleRetry_LongestSpan() {
	r := ir.Retry{MaxAttempts: 4, Backoff: ir.Backoff{Initial: 500 * time.Millisecond, Max: 8 * time.Second, Multiplier: 2, Jitter: ir.JitterFull}}
	fmt.Println(r.LongestSpan(), "so the window must be at least", time.Duration(1.5*float64(r.LongestSpan())))
	// Output: 3.5s so the window must be at least 5.25s
}

// TestHTTPMethod: the path item keys that name an operation, in lower case
// (load and contract both ask it).
func TestHTTPMethod(t *testing.T) {
	for _, k := range []string{"get", "put", "post", "delete", "options", "head", "patch", "trace", "query"} {
		if !ir.HTTPMethod(k) {
			t.Errorf("HTTPMethod(%q) = false", k)
		}
	}
	for _, k := range []string{"POST", "parameters", "summary", "connect", ""} {
		if ir.HTTPMethod(k) {
			t.Errorf("HTTPMethod(%q) = true", k)
		}
	}
}

// TestWhere: an operation and a route are named "METHOD /path", the method
// in upper case whatever case it is given in.
func TestWhere(t *testing.T) {
	assert.Equal(t, "POST /orders/{id}", ir.Where("post", "/orders/{id}"))
	assert.Equal(t, "POST /orders/{id}", ir.Where("POST", "/orders/{id}"))
	assert.Equal(t, "PATCH /a", (&ir.Operation{Method: "PATCH", Path: "/a"}).Where())
	assert.Equal(t, "GET /b", ir.Route{Method: "GET", Path: "/b"}.Where())
}

// TestFirstPos: the first position that locates something; a pointer
// alone locates nothing.
func TestFirstPos(t *testing.T) {
	at := ir.Pos{File: "a.yaml", Line: 3, Col: 5}
	assert.Equal(t, at, ir.FirstPos(ir.Pos{}, ir.Pos{Pointer: "/x"}, at, ir.Pos{File: "b.yaml", Line: 1, Col: 1}))
	assert.Equal(t, ir.Pos{}, ir.FirstPos(ir.Pos{}))
	assert.Equal(t, ir.Pos{}, ir.FirstPos())
}

// The client's wait on in-use answers outlasts a crashed holder's lease:
// lease + max(the Retry-After sent, in whole seconds, backoff max).
func TestInUseWait(t *testing.T) {
	s := time.Second
	pol := func(lease, ra, bmax time.Duration) ir.Policy {
		return ir.Policy{InFlight: ir.InFlight{Lease: lease, RetryAfter: ra}, Retry: ir.Retry{Backoff: ir.Backoff{Max: bmax}}}
	}
	assert.Equal(t, 38*s, pol(30*s, 2*s, 8*s).InUseWait(), "defaults: 30s + max(2s, 8s)")
	assert.Equal(t, 40*s, pol(30*s, 10*s, 8*s).InUseWait(), "a Retry-After longer than the backoff")
	assert.Equal(t, 32*s, pol(30*s, 1500*time.Millisecond, time.Second).InUseWait(), "1.5s is sent as Retry-After: 2")
	assert.Equal(t, 11*s, pol(10*s, 100*time.Millisecond, 500*time.Millisecond).InUseWait(), "at least Retry-After: 1")
	assert.Equal(t, time.Duration(math.MaxInt64), pol(time.Duration(math.MaxInt64-1), 2*s, 8*s).InUseWait())
}
