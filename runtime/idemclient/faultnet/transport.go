package faultnet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
)

// Transport is an http.RoundTripper that applies a [Plan]'s faults to the
// requests it carries to Base.
type Transport struct {
	base  http.RoundTripper
	plan  Plan
	sleep func(context.Context, time.Duration) error
	count counter
}

// NewTransport returns a Transport over base (http.DefaultTransport if nil).
func NewTransport(base http.RoundTripper, plan Plan) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{base: base, plan: plan, sleep: sleep}
}

// WithSleep replaces the wait of Delay faults (default: a timer that
// stops when the request's context ends) and returns t.
func (t *Transport) WithSleep(fn func(context.Context, time.Duration) error) *Transport {
	t.sleep = fn
	return t
}

// Stats returns what t did so far.
func (t *Transport) Stats() Stats { return t.count.get() }

// RoundTrip applies the next fault of the plan to req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.plan.Next(req)
	switch f.Kind {
	case Reset:
		t.count.add(Reset, false)
		closeReq(req)
		return nil, injected(Reset, "write", syscall.ECONNRESET)
	case Unavailable, InFlight:
		t.count.add(f.Kind, false)
		closeReq(req)
		status, h, body := answer(f)
		return &http.Response{
			Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
			Request: req,
		}, nil
	case Delay:
		if err := t.sleep(req.Context(), f.Delay); err != nil {
			t.count.add(Delay, false)
			closeReq(req)
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	t.count.add(f.Kind, true)
	if err != nil {
		return nil, err
	}
	switch f.Kind {
	case Drop:
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, injected(Drop, "read", syscall.ECONNRESET)
	case Truncate:
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), errReader{injected(Truncate, "read", io.ErrUnexpectedEOF)}))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return resp, nil
	}
	return resp, nil
}

// InjectedError is the error of a fault a [Transport] made up. It unwraps to
// the *net.OpError a real connection would give (so errors.Is finds
// syscall.ECONNRESET or io.ErrUnexpectedEOF) and matches [ErrInjected].
type InjectedError struct {
	Kind Kind
	Err  error
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faultnet %v: %v", e.Kind, e.Err)
}

// Unwrap returns the realistic cause.
func (e *InjectedError) Unwrap() error { return e.Err }

// Is matches ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

func injected(k Kind, op string, cause error) error {
	if errno, ok := cause.(syscall.Errno); ok {
		cause = os.NewSyscallError(op, errno)
	}
	return &InjectedError{Kind: k, Err: &net.OpError{Op: op, Net: "tcp", Err: cause}}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func closeReq(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
