package idem_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/idemgen/idemgen/runtime/idem"
	"github.com/idemgen/idemgen/runtime/memstore"
)

// A key the router refused is logged (at Debug, with the router's error
// that quotes it) clipped: a 100 KB key makes a short log line that says
// how long the text was, not a 100 KB one.
func TestRefusedKeyLogIsBounded(t *testing.T) {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	var logs bytes.Buffer
	eng := idem.New(store, idem.Options{Principal: idem.Anonymous,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	p := idem.MustCompile(idem.Spec{Operation: "createOrder", Method: "POST", Path: "/orders",
		Semantics: idem.Strict, Key: idem.KeySpec{Format: idem.FormatUUID}})
	key := strings.Repeat("k", 100_000) + "é"
	err := errors.New("error unmarshaling '" + key + "' text as *uuid.UUID: invalid UUID length: 100002")
	w := httptest.NewRecorder()
	eng.RefuseWithCause(w, httptest.NewRequest("POST", "/orders", nil), p,
		&idem.Problem{Status: http.StatusBadRequest, Code: idem.CodeKeyInvalid, Detail: p.KeyFormatDetail()}, err)
	line := logs.String()
	if !strings.Contains(line, "refused before the engine ran") || len(line) > 1024 ||
		!strings.Contains(line, "("+strconv.Itoa(len(err.Error()))+" bytes)") {
		t.Fatalf("log line of %d bytes:\n%.2000s", len(line), line)
	}
	// A short error is logged as it is.
	logs.Reset()
	eng.RefuseWithCause(w, httptest.NewRequest("POST", "/orders", nil), p,
		&idem.Problem{Status: http.StatusBadRequest, Code: idem.CodeKeyInvalid}, errors.New("invalid UUID length: 3"))
	if !strings.Contains(logs.String(), `error="invalid UUID length: 3"`) {
		t.Fatalf("%s", logs.String())
	}
}
