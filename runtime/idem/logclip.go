package idem

import (
	"log/slog"
	"strconv"
	"unicode/utf8"
)

// maxLogText bounds a text the client controls (a key as it was sent, a
// router's error that quotes it, a request path) in the engine's log
// attributes: a 100 KB key must not make a 100 KB log line.
const maxLogText = 256

// clip returns s when it is at most maxLogText bytes long, else its first
// maxLogText bytes (cut at a character boundary) followed by how long s
// was. A short s costs nothing.
func clip(s string) string {
	if len(s) <= maxLogText {
		return s
	}
	n := maxLogText
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "...(" + strconv.Itoa(len(s)) + " bytes)"
}

// clipErr is slog.Any(key, err) with the error's text clipped (see clip),
// computed only when the record is logged.
func clipErr(key string, err error) slog.Attr {
	if err == nil {
		return slog.Any(key, nil)
	}
	return slog.Any(key, clippedErr{err})
}

// clippedErr logs an error's text clipped.
type clippedErr struct{ err error }

func (c clippedErr) LogValue() slog.Value { return slog.StringValue(clip(c.err.Error())) }
