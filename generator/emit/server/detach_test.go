package server_test

import (
	"testing"

	"github.com/idemgen/idemgen/internal/gentest"
)

// TestStrictHandlerDetach runs the generated std-http strict server (the
// trial's chi strict server has the same wrapper) under failures: replay:
// with idem.Options.DetachHandler, a handler that honours its context
// finishes although the client's attempt timed out, so the resume with
// the key gets its 201 replayed and the operation ran once (HIGH-1); and
// an operation error marked idem.HandlerNothingDone frees the key, so a retry
// runs the operation again (M-2).
func TestStrictHandlerDetach(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	runHandlerErrorModule(t, gentest.StrictStdHTTP, "", "example.com/handlerdetach", handlerDetachTest)
}

const handlerDetachTest = `package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

type service struct {
	pays, voids atomic.Int32
	done        chan error
}

func (s *service) Pay(ctx context.Context, _ PayRequestObject) (PayResponseObject, error) {
	select {
	case <-time.After(400 * time.Millisecond):
	case <-ctx.Done():
		s.done <- ctx.Err()
		return nil, ctx.Err() // gave up before charging
	}
	n := int(s.pays.Add(1))
	s.done <- nil
	return Pay201JSONResponse{Run: &n}, nil
}

func (s *service) Charge(context.Context, ChargeRequestObject) (ChargeResponseObject, error) {
	return nil, errors.New("unused")
}

func (s *service) Void(context.Context, VoidRequestObject) (VoidResponseObject, error) {
	s.voids.Add(1)
	return nil, idem.HandlerNothingDone(errors.New("provider refused the connection: nothing voided"))
}

func post(t *testing.T, c *http.Client, url, key string) (*http.Response, string, error) {
	t.Helper()
	r, _ := http.NewRequest("POST", url, strings.NewReader("{\"amount\":1}"))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(r)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

func serve(t *testing.T, s *service, detach time.Duration) *httptest.Server {
	x := NewIdempotency(nil, idem.Options{Principal: idem.Anonymous, DetachHandler: detach})
	t.Cleanup(func() { _ = x.Close() })
	srv := httptest.NewServer(x.StrictHandler(s, nil, StrictHTTPServerOptions{}, StdHTTPServerOptions{}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDetachedPayFinishes(t *testing.T) {
	for _, detach := range []time.Duration{0, 10 * time.Second} {
		s := &service{done: make(chan error, 4)}
		srv := serve(t, s, detach)
		if _, _, err := post(t, &http.Client{Timeout: 50 * time.Millisecond}, srv.URL+"/pay", "k1"); err == nil {
			t.Fatal("the attempt did not time out")
		}
		<-s.done
		// The run's record lands just after it returns: a resume before
		// that is answered in flight.
		var resp *http.Response
		var body string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var err error
			resp, body, err = post(t, srv.Client(), srv.URL+"/pay", "k1")
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 409 || time.Now().After(deadline) {
				break
			}
		}
		if resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("detach %v: %d %s: want a replay", detach, resp.StatusCode, body)
		}
		if detach == 0 {
			if resp.StatusCode != 500 || s.pays.Load() != 0 {
				t.Fatalf("without DetachHandler: %d %s, %d payments: want the stored 500 and none", resp.StatusCode, body, s.pays.Load())
			}
			continue
		}
		if resp.StatusCode != 201 || body != "{\"run\":1}\n" || s.pays.Load() != 1 {
			t.Fatalf("with DetachHandler: %d %q, %d payments: want the first run's 201, once", resp.StatusCode, body, s.pays.Load())
		}
	}
}

func TestNothingDoneFreesKey(t *testing.T) {
	s := &service{done: make(chan error, 4)}
	srv := serve(t, s, 0)
	for i := range 2 {
		r, _ := http.NewRequest("POST", srv.URL+"/void", nil)
		r.Header.Set("Idempotency-Key", "v1")
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 500 || resp.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("attempt %d: %d %q: want the generic 500, not stored", i, resp.StatusCode, resp.Header)
		}
	}
	if n := s.voids.Load(); n != 2 {
		t.Fatalf("void ran %d times, want 2 (the key freed)", n)
	}
}
`
