package idem_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/runtime/idem"
)

// State 0 is named: a claim of a new key logs prior=NONE, not UNKNOWN.
func TestStateNoneString(t *testing.T) {
	for s, want := range map[idem.State]string{idem.StateNone: "NONE", idem.StatePending: "PENDING",
		idem.StateCompleted: "COMPLETED", idem.StateFailed: "FAILED", 9: "UNKNOWN"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// An Event logged with log/slog is a group of its non-zero fields, named.
func TestEventLogValue(t *testing.T) {
	var _ slog.LogValuer = idem.Event{}
	for _, tc := range []struct {
		ev   idem.Event
		want string
	}{
		{idem.Event{Kind: idem.EventExecuted, Operation: "createOrder", Principal: "alice", Key: "k1", Protected: true,
			State: idem.StateCompleted, Status: 201, Duration: 3 * time.Millisecond},
			"ev.kind=executed ev.operation=createOrder ev.principal=alice ev.key=k1 ev.protected=true ev.state=COMPLETED ev.prior=NONE ev.status=201 ev.duration=3ms"},
		{idem.Event{Kind: idem.EventLeaseTakeover, Operation: "op", Key: "k", Protected: true, Prior: idem.StatePending},
			"ev.kind=lease-takeover ev.operation=op ev.key=k ev.protected=true ev.prior=PENDING"},
		{idem.Event{Kind: idem.EventStoreError, Operation: "op", Key: "k", Protected: true, Status: 503,
			Code: "IDEMPOTENCY_STORE_UNAVAILABLE", Err: errors.New("dial: refused")},
			`ev.kind=store-error ev.operation=op ev.key=k ev.protected=true ev.status=503 ev.code=IDEMPOTENCY_STORE_UNAVAILABLE ev.err="dial: refused"`},
		{idem.Event{Kind: idem.EventExecuted, Operation: "op", Status: 200},
			"ev.kind=executed ev.operation=op ev.protected=false ev.status=200"},
	} {
		var b bytes.Buffer
		slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
				return slog.Attr{}
			}
			return a
		}})).Info("", slog.Any("ev", tc.ev))
		if got := strings.TrimSpace(b.String()); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}

// An event's Err can quote what the client sent (RefuseWithCause hands the
// router's error, which quotes the key as sent): its text is clipped in
// LogValue as in the engine's own log lines (found by the review of the
// security merges: a 100 KB key made a 100,271-byte line).
func TestEventLogValueClipsErr(t *testing.T) {
	long := strings.Repeat("k", 100<<10)
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Info("", slog.Any("ev", idem.Event{Kind: idem.EventRejected, Operation: "op",
		Err: errors.New("invalid format for parameter Idempotency-Key: " + long)}))
	if b.Len() > 1024 {
		t.Fatalf("log line of %d bytes", b.Len())
	}
	if !strings.Contains(b.String(), "bytes)") {
		t.Errorf("the clipped text does not say how long it was: %s", b.String())
	}
}
