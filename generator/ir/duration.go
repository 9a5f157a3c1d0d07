package ir

import (
	"strconv"
	"strings"
	"time"
)

// FormatDuration writes a duration the way the contract does, so that it
// reads back with the contract's parser: 500ms, 90s, 10m, 1h30m, 24h, 7d,
// 1.5s (whole days from two days on: 24h rather than 1d). Every emitter and
// diagnostic that shows a duration uses it.
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
