package idemclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// countingReader is a plain io.Reader (no Close: http.NewRequest wraps it
// in a NopCloser) that yields a byte every few milliseconds.
type countingReader struct{ reads, left atomic.Int32 }

func (s *countingReader) Read(p []byte) (int, error) {
	if s.left.Add(-1) < 0 {
		return 0, io.EOF
	}
	time.Sleep(5 * time.Millisecond)
	s.reads.Add(1)
	p[0] = 'x'
	return 1, nil
}

// Once a call ended by its context returned, its Doer reads the caller's
// reader no more (at most the Read under way finishes).
func TestBodyReadStopsWhenCallGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	ctx, _ = Start(ctx)
	s := &countingReader{}
	s.left.Store(60)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x/y", s)
	req.GetBody = nil
	_, err := NewDoer(&answerDoer{}, Policy{MaxAttempts: 1}).Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	at := s.reads.Load()
	time.Sleep(100 * time.Millisecond)
	if n := s.reads.Load() - at; n > 1 {
		t.Errorf("the reader was read %d times after Do returned", n)
	}
}
