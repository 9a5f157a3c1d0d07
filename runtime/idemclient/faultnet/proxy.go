package faultnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Proxy is an http.Handler that forwards requests to a target server,
// applying a [Plan]'s faults on the client's real connection: Reset and
// Drop hijack it and close it with a TCP reset (SO_LINGER 0), Truncate
// writes half the body and closes it. Serve it over HTTP/1.1 (for example
// with httptest.NewServer); without hijacking (HTTP/2) connection faults
// abort the stream instead.
type Proxy struct {
	target    *url.URL
	transport http.RoundTripper
	plan      Plan
	sleep     func(context.Context, time.Duration) error
	count     counter
}

// NewProxy returns a Proxy forwarding to target (a base URL like
// "http://127.0.0.1:8080"; its path prefixes request paths).
func NewProxy(target string, plan Plan) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultnet: proxy target: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("faultnet: proxy target %q: want an http or https URL", target)
	}
	return &Proxy{target: u, transport: http.DefaultTransport, plan: plan, sleep: sleep}, nil
}

// WithTransport sets the RoundTripper to the target (default
// http.DefaultTransport) and returns p.
func (p *Proxy) WithTransport(rt http.RoundTripper) *Proxy {
	p.transport = rt
	return p
}

// WithSleep replaces the wait of Delay faults and returns p.
func (p *Proxy) WithSleep(fn func(context.Context, time.Duration) error) *Proxy {
	p.sleep = fn
	return p
}

// Stats returns what p did so far.
func (p *Proxy) Stats() Stats { return p.count.get() }

// ServeHTTP applies the next fault of the plan to r.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := p.plan.Next(r)
	switch f.Kind {
	case Reset:
		p.count.add(Reset, false)
		reset(w)
		return
	case Unavailable, InFlight:
		p.count.add(f.Kind, false)
		_, _ = io.Copy(io.Discard, r.Body)
		status, h, body := answer(f)
		for k, v := range h {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	case Delay:
		if err := p.sleep(r.Context(), f.Delay); err != nil {
			p.count.add(Delay, false)
			return
		}
	}
	resp, err := p.transport.RoundTrip(p.outgoing(r))
	p.count.add(f.Kind, true)
	if err != nil {
		http.Error(w, "faultnet: forwarding: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	switch f.Kind {
	case Drop:
		_, _ = io.Copy(io.Discard, resp.Body)
		reset(w)
		return
	case Truncate:
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			reset(w)
			return
		}
		truncate(w, resp, body)
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *Proxy) outgoing(r *http.Request) *http.Request {
	out := r.Clone(r.Context())
	u := *p.target
	u.Path = strings.TrimSuffix(p.target.Path, "/") + r.URL.Path
	if r.URL.RawPath != "" {
		u.RawPath = strings.TrimSuffix(p.target.EscapedPath(), "/") + r.URL.EscapedPath()
	}
	u.RawQuery = r.URL.RawQuery
	out.URL = &u
	out.Host = ""
	out.RequestURI = ""
	if r.ContentLength == 0 {
		out.Body = nil
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	return out
}

var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = append([]string(nil), v...)
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// reset closes the client's connection with a TCP RST.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream
	}
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = nc.NetConn()
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// truncate writes resp's head with the full Content-Length and half of body, then closes.
func truncate(w http.ResponseWriter, resp *http.Response, body []byte) {
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer conn.Close()
	h := http.Header{}
	copyHeader(h, resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Connection", "close")
	writeHead(bw.Writer, resp.StatusCode, h)
	_, _ = bw.Write(body[:len(body)/2])
	_ = bw.Flush()
}

func writeHead(bw *bufio.Writer, status int, h http.Header) {
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(bw)
	_, _ = bw.WriteString("\r\n")
}
