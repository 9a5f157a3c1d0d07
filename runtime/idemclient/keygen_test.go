package idemclient

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
)

// A key generator that returns "" fails the call: nothing is sent, and
// the generator is not asked twice; its errors are *Error with
// ErrKeyGenerator, not ErrBadKeyCarrier.
func TestKeyGeneratorEmptyOrFailing(t *testing.T) {
	for _, tc := range []struct {
		name string
		gen  KeyGenerator
	}{
		{"empty", func(KeyFormat) (string, error) { return "", nil }},
		{"error", func(KeyFormat) (string, error) { return "", errors.New("boom") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, fix := range []bool{false, true} {
				var calls atomic.Int32
				gen := func(f KeyFormat) (string, error) { calls.Add(1); return tc.gen(f) }
				inner := &answerDoer{}
				ctx, call := DefaultPolicy().Start(context.Background(), WithKeyGenerator(gen))
				var err error
				if fix { // a typed helper: it returns FixKey's error
					_, err = call.FixKey("")
				} else {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/y", nil)
					_, err = NewDoer(inner, DefaultPolicy()).Do(req)
				}
				var e *Error
				if !errors.As(err, &e) || !errors.Is(err, ErrKeyGenerator) || errors.Is(err, ErrBadKeyCarrier) {
					t.Errorf("fix=%v: %v (%T), want an *Error matching ErrKeyGenerator", fix, err, err)
				}
				if n := inner.n.Load(); n != 0 {
					t.Errorf("fix=%v: %d requests sent", fix, n)
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("fix=%v: the generator was called %d times", fix, n)
				}
			}
		})
	}
}

// Client-wide options (a generated client's WithCallOptions) must not
// supply a key: every call would share it.
func TestCheckClientOptions(t *testing.T) {
	gen := WithKeyGenerator(func(KeyFormat) (string, error) { return "k", nil })
	if err := CheckClientOptions(gen, WithPolicyOverride(func(*Policy) {})); err != nil {
		t.Errorf("a generator and an override: %v", err)
	}
	if err := CheckClientOptions(gen, WithKey("shared")); err == nil {
		t.Error("WithKey accepted client-wide")
	}
}
