package idemclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Class is what [Classify] makes of a transport error.
type Class uint8

const (
	// ClassNone: no error (the zero value, as in an [Attempt] that got a response).
	ClassNone Class = iota
	// ClassPermanent: retrying cannot help (a bad URL, a TLS or certificate
	// failure, a malformed request, an unknown error) or the caller stopped
	// (context canceled or its deadline passed). Never retried.
	ClassPermanent
	// ClassConnection: the connection failed or timed out (refused, reset,
	// aborted, broken pipe, unreachable, EOF or unexpected EOF mid-response,
	// a timeout of one attempt). Retried when the policy's On.Connection is set.
	// The server may or may not have handled the request: the key makes the
	// retry safe.
	ClassConnection
	// ClassCanceled: the caller's context was canceled or its deadline passed.
	ClassCanceled
)

func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassPermanent:
		return "permanent"
	case ClassConnection:
		return "connection"
	case ClassCanceled:
		return "canceled"
	}
	return "unknown"
}

// Classify sorts an error returned by an HTTP client's Do (or met while
// reading a response body) into a [Class]. It unwraps *url.Error and
// *net.OpError and decides by the cause:
//
//   - context.Canceled / context.DeadlineExceeded → ClassCanceled, except
//     http.Client's own Timeout (awaiting the headers or reading the body)
//     → ClassConnection (a [Doer] also counts as ClassConnection any
//     timeout met while the caller's context is still live: its
//     per-attempt timeout, or an inner client's);
//   - TLS and certificate errors (x509, tls.RecordHeaderError, tls.AlertError,
//     tls.CertificateVerificationError) → ClassPermanent;
//   - ECONNREFUSED, ECONNRESET, ECONNABORTED, EPIPE, ETIMEDOUT, EHOSTUNREACH,
//     ENETUNREACH, ENETDOWN, io.EOF, io.ErrUnexpectedEOF, any timeout
//     (net.Error.Timeout), a DNS error other than "not found", any other
//     *net.OpError, and the connection-loss errors of net/http's HTTP/1 and
//     HTTP/2 transports → ClassConnection;
//   - everything else (unsupported scheme, invalid URL or header, a failing
//     request body, unknown errors) → ClassPermanent.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// http.Client.Timeout, a per-attempt timeout: "Client.Timeout
		// exceeded while awaiting headers", or "(Client.Timeout or context
		// cancellation while reading body)", which net/http says only once
		// the Client's own deadline has passed (a caller's cancellation
		// before it reads as a plain context error).
		if strings.Contains(err.Error(), "Client.Timeout") {
			return ClassConnection
		}
		return ClassCanceled
	}
	if isTLS(err) {
		return ClassPermanent
	}
	for _, errno := range connErrnos {
		if errors.Is(err, errno) {
			return ClassConnection
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ClassConnection
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		if dns.IsNotFound {
			return ClassPermanent
		}
		return ClassConnection
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return ClassConnection
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return ClassConnection
	}
	msg := err.Error()
	for _, s := range connMessages {
		if strings.Contains(msg, s) {
			return ClassConnection
		}
	}
	return ClassPermanent
}

var connErrnos = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ENETDOWN,
}

// connMessages are net/http's unexported connection-loss errors (HTTP/1
// and the bundled HTTP/2), which no exported type or value identifies.
var connMessages = []string{
	"http: server closed idle connection",
	"transport connection broken",
	"http2: client connection lost",
	"http2: server sent GOAWAY",
	"http2: client connection force closed",
	"stream error:", // http2 RST_STREAM from the server
	"connection reset by peer",
	"broken pipe",
}

func isTLS(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*tls.ECHRejectionError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.SystemRootsError](err); ok {
		return true
	}
	return strings.Contains(err.Error(), "tls: ")
}
