package idemclient

import (
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	assert.Equal(t, 4, p.MaxAttempts)
	assert.Equal(t, Backoff{Initial: 500 * time.Millisecond, Max: 8 * time.Second, Multiplier: 2, Jitter: JitterFull}, p.Backoff)
	assert.Equal(t, RetryOn{Connection: true, Statuses: []int{408, 409, 425, 429, 500, 502, 503, 504}}, p.On)
	assert.Equal(t, FormatUUID, p.KeyFormat)
	assert.Equal(t, CarrierHeader, p.KeyCarrier)
	assert.Equal(t, "Idempotency-Key", p.KeyName)
	assert.Equal(t, 38*time.Second, p.InUseWait, "the default lease 30s + max(retry-after 2s, backoff max 8s)")
	require.NoError(t, p.Validate())
	require.NoError(t, Policy{}.Validate())
	assert.Equal(t, 90*time.Second, Policy{Backoff: Backoff{Max: time.Minute}}.WithDefaults().InUseWait,
		"a longer backoff max: a longer default in-use wait")
	assert.Equal(t, 32*time.Second, Policy{Backoff: Backoff{Initial: 100 * time.Millisecond, Max: time.Second}}.WithDefaults().InUseWait)
	assert.Equal(t, time.Second, Policy{InUseWait: time.Second}.WithDefaults().InUseWait)

	// Explicit values survive defaults; a query/body carrier gets no default name.
	q := Policy{MaxAttempts: 1, On: RetryOn{Statuses: []int{503}}, KeyCarrier: CarrierQuery}.WithDefaults()
	assert.Equal(t, 1, q.MaxAttempts)
	assert.Equal(t, RetryOn{Statuses: []int{503}}, q.On)
	assert.Empty(t, q.KeyName)
	assert.ErrorIs(t, q.Validate(), ErrInvalidPolicy)
}

func TestLongestSpan(t *testing.T) {
	s, ms := time.Second, time.Millisecond
	for _, tc := range []struct {
		name string
		p    Policy
		want time.Duration
	}{
		{"defaults: 0.5+1+2", Policy{}, 3500 * ms},
		{"one attempt waits nothing", Policy{MaxAttempts: 1}, 0},
		{"two attempts", Policy{MaxAttempts: 2}, 500 * ms},
		{"capped", Policy{MaxAttempts: 6, Backoff: Backoff{Initial: s, Max: 3 * s, Multiplier: 2}}, (1 + 2 + 3 + 3 + 3) * s},
		{"multiplier 3", Policy{MaxAttempts: 5, Backoff: Backoff{Initial: s, Max: time.Hour, Multiplier: 3}}, (1 + 3 + 9 + 27) * s},
		{"multiplier 1", Policy{MaxAttempts: 4, Backoff: Backoff{Initial: 200 * ms, Max: s, Multiplier: 1}}, 600 * ms},
		{"initial above max", Policy{MaxAttempts: 3, Backoff: Backoff{Initial: 5 * s, Max: 2 * s}}, 4 * s},
		{"jitter does not matter", Policy{Backoff: Backoff{Jitter: JitterNone}}, 3500 * ms},
		{"saturates", Policy{MaxAttempts: math.MaxInt, Backoff: Backoff{Max: time.Duration(math.MaxInt64 / 2)}}, time.Duration(math.MaxInt64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.p.LongestSpan())
			// The span is the sum of the ceilings, as documented.
			p := tc.p.WithDefaults()
			if p.MaxAttempts < 100 {
				var sum time.Duration
				for n := 1; n < p.MaxAttempts; n++ {
					sum += p.Backoff.Ceiling(n)
				}
				assert.Equal(t, tc.want, sum)
			}
		})
	}
}

func TestBackoffCeiling(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	want := []time.Duration{0, 100, 200, 400, 800, 1000, 1000}
	for n, w := range want {
		assert.Equal(t, w*time.Millisecond, b.Ceiling(n), "retry %d", n)
	}
	assert.Equal(t, time.Second, b.Ceiling(1_000_000), "no overflow on huge n")
}

func TestBackoffDelayBounds(t *testing.T) {
	draws := []float64{0, 1e-9, 0.25, 0.5, 0.75, 0.999999, 1, -3, 7, math.NaN(), math.Inf(1)}
	for _, j := range []Jitter{JitterFull, JitterEqual, JitterNone} {
		b := Backoff{Initial: 300 * time.Millisecond, Max: 5 * time.Second, Multiplier: 2.5, Jitter: j}
		huge := Backoff{Initial: time.Second, Max: math.MaxInt64, Multiplier: 2, Jitter: j}
		for _, n := range []int{62, 63, 64, 80} { // ceilings near and at the largest Duration
			c := huge.Ceiling(n)
			lo := map[Jitter]time.Duration{JitterFull: 0, JitterEqual: c - c/2, JitterNone: c}[j]
			for _, u := range append(draws, 0.9999999999999999) {
				d := huge.Delay(n, u)
				assert.GreaterOrEqual(t, d, lo, "%v n=%d u=%v: no overflow", j, n, u)
				assert.LessOrEqual(t, d, c, "%v n=%d u=%v", j, n, u)
			}
		}
		for n := 1; n <= 8; n++ {
			c := b.Ceiling(n)
			require.LessOrEqual(t, c, b.Max)
			lo := map[Jitter]time.Duration{JitterFull: 0, JitterEqual: c - c/2, JitterNone: c}[j]
			for _, u := range draws {
				d := b.Delay(n, u)
				assert.GreaterOrEqual(t, d, lo, "%v n=%d u=%v", j, n, u)
				assert.LessOrEqual(t, d, c, "%v n=%d u=%v", j, n, u)
			}
		}
	}
	full := Backoff{Initial: time.Second, Max: 8 * time.Second}
	assert.Equal(t, time.Duration(0), full.Delay(1, 0))
	assert.Equal(t, 500*time.Millisecond, full.Delay(1, 0.5))
	assert.Equal(t, time.Second, full.Delay(2, 0.5))
	eq := Backoff{Initial: time.Second, Max: 8 * time.Second, Jitter: JitterEqual}
	assert.Equal(t, 500*time.Millisecond, eq.Delay(1, 0))
	assert.Equal(t, 750*time.Millisecond, eq.Delay(1, 0.5))
	assert.Equal(t, 4*time.Second, Backoff{Initial: time.Second, Jitter: JitterNone}.Delay(3, 0.1))
}

// The ceilings are the library's sequence with no randomization.
func TestCeilingMatchesLibrary(t *testing.T) {
	eb := &backoff.ExponentialBackOff{InitialInterval: 70 * time.Millisecond, Multiplier: 1.7, MaxInterval: 3 * time.Second}
	eb.Reset()
	b := Backoff{Initial: 70 * time.Millisecond, Max: 3 * time.Second, Multiplier: 1.7}
	for n := 1; n < 15; n++ {
		assert.Equal(t, eb.NextBackOff(), b.Ceiling(n), "retry %d", n)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"zero", Policy{}, true},
		{"negative attempts", Policy{MaxAttempts: -1}, false},
		{"negative initial", Policy{Backoff: Backoff{Initial: -time.Second}}, false},
		{"max below initial", Policy{Backoff: Backoff{Initial: 2 * time.Second, Max: time.Second}}, false},
		{"multiplier below 1", Policy{Backoff: Backoff{Multiplier: 0.5}}, false},
		{"multiplier NaN", Policy{Backoff: Backoff{Multiplier: math.NaN()}}, false},
		{"multiplier Inf", Policy{Backoff: Backoff{Multiplier: math.Inf(1)}}, false},
		{"bad jitter", Policy{Backoff: Backoff{Jitter: 9}}, false},
		{"bad format", Policy{KeyFormat: "ulid"}, false},
		{"v4", Policy{KeyFormat: FormatUUIDv4}, true},
		{"bad carrier", Policy{KeyCarrier: 7}, false},
		{"query needs name", Policy{KeyCarrier: CarrierQuery}, false},
		{"query", Policy{KeyCarrier: CarrierQuery, KeyName: "request_id"}, true},
		{"body pointer", Policy{KeyCarrier: CarrierBody, KeyName: "/meta/idempotency_key"}, true},
		{"body not a pointer", Policy{KeyCarrier: CarrierBody, KeyName: "idempotency_key"}, false},
		{"body bad escape", Policy{KeyCarrier: CarrierBody, KeyName: "/a~2"}, false},
		{"negative in-use wait", Policy{InUseWait: -time.Second}, false},
		{"short in-use wait", Policy{InUseWait: time.Nanosecond}, true},
		{"status out of range", Policy{On: RetryOn{Statuses: []int{503, 99}}}, false},
		{"422 listed is tolerated", Policy{On: RetryOn{Statuses: []int{422, 400}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidPolicy)
			}
		})
	}
}

func TestParseJitter(t *testing.T) {
	for s, want := range map[string]Jitter{"full": JitterFull, "": JitterFull, "equal": JitterEqual, "none": JitterNone} {
		got, err := ParseJitter(s)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		if s != "" {
			assert.Equal(t, s, got.String())
		}
	}
	_, err := ParseJitter("decorrelated")
	assert.Error(t, err)
}

func TestRetryOnNeverRetries(t *testing.T) {
	on := RetryOn{Statuses: []int{400, 422, 503}}
	assert.False(t, on.Status(400))
	assert.False(t, on.Status(422))
	assert.True(t, on.Status(503))
	assert.False(t, on.Status(500))
}

// A zero InUseWait is derived from Backoff.Max and saturates: a Backoff.Max
// near the largest Duration must not overflow into a negative InUseWait,
// which Validate would refuse although the caller never set it.
func TestInUseWaitDefaultSaturates(t *testing.T) {
	p := Policy{Backoff: Backoff{Max: time.Duration(math.MaxInt64)}}.WithDefaults()
	if p.InUseWait != time.Duration(math.MaxInt64) {
		t.Fatalf("InUseWait = %v, want the largest Duration", p.InUseWait)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}
