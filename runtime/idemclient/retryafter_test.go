package idemclient

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		ra, raMs string
		want     time.Duration
		ok       bool
	}{
		{"none", "", "", 0, false},
		{"seconds", "3", "", 3 * time.Second, true},
		{"zero", "0", "", 0, true},
		{"spaces", "  7 ", "", 7 * time.Second, true},
		{"leading zeros", "007", "", 7 * time.Second, true},
		{"more than 64 leading zeros", strings.Repeat("0", 100) + "5", "", 5 * time.Second, true},
		{"only zeros", strings.Repeat("0", 100), "", 0, true},
		{"zero-padded ms", "", strings.Repeat("0", 70) + "1500", 1500 * time.Millisecond, true},
		{"zero-padded huge saturates", strings.Repeat("0", 70) + "99999999999999999999", "", maxDuration, true},
		{"IMF-fixdate", "Sat, 01 Mar 2025 12:00:30 GMT", "", 30 * time.Second, true},
		{"RFC 850", "Saturday, 01-Mar-25 12:01:00 GMT", "", time.Minute, true},
		{"asctime", "Sat Mar  1 12:00:05 2025", "", 5 * time.Second, true},
		{"date in the past", "Fri, 28 Feb 2025 12:00:00 GMT", "", 0, true},
		{"garbage", "soon", "", 0, false},
		{"negative", "-5", "", 0, false},
		{"fraction", "1.5", "", 0, false},
		{"plus sign", "+5", "", 0, false},
		{"hex", "0x10", "", 0, false},
		{"huge saturates", "99999999999999999999999", "", maxDuration, true},
		{"largest exact", strconv.FormatInt(int64(maxDuration/time.Second), 10), "", maxDuration / time.Second * time.Second, true},
		{"one past largest saturates", strconv.FormatInt(int64(maxDuration/time.Second)+1, 10), "", maxDuration, true},
		{"very long digits saturate", string(make100('9')), "", maxDuration, true},
		{"huge with garbage", "99999999999999999999999x", "", 0, false},
		{"ms wins", "3", "1500", 1500 * time.Millisecond, true},
		{"ms alone", "", "250", 250 * time.Millisecond, true},
		{"bad ms falls back", "2", "abc", 2 * time.Second, true},
		{"negative ms falls back", "", "-1", 0, false},
		{"huge ms saturates", "", "99999999999999999999", maxDuration, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.ra != "" {
				h.Set("Retry-After", tc.ra)
			}
			if tc.raMs != "" {
				h.Set("Retry-After-Ms", tc.raMs)
			}
			got, ok := ParseRetryAfter(h, now)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func make100(c byte) []byte {
	b := make([]byte, 100)
	for i := range b {
		b[i] = c
	}
	return b
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "0", "3", "120", "-1", "1.5", "soon", "Sat, 01 Mar 2025 12:00:30 GMT",
		"Saturday, 01-Mar-25 12:01:00 GMT", "Sat Mar  1 12:00:05 2025", "99999999999999999999999", " 5 "} {
		f.Add(s, "")
		f.Add("", s)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ra, raMs string) {
		h := http.Header{}
		h["Retry-After"] = []string{ra}
		h["Retry-After-Ms"] = []string{raMs}
		d, ok := ParseRetryAfter(h, now)
		if d < 0 {
			t.Fatalf("negative %v for %q/%q", d, ra, raMs)
		}
		if !ok && d != 0 {
			t.Fatalf("not ok but %v", d)
		}
		// A plain small number of seconds parses exactly.
		if raMs == "" {
			if n, err := strconv.ParseUint(ra, 10, 16); err == nil && ra != "" && ra[0] != '+' {
				if !ok || d != time.Duration(n)*time.Second {
					t.Fatalf("%q: got %v, %v", ra, d, ok)
				}
			}
		}
	})
}
