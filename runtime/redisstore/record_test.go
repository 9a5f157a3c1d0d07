package redisstore

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/runtime/idem"
)

func TestRecordRoundTrip(t *testing.T) {
	base := idem.Record{
		State:          idem.StateCompleted,
		Fingerprint:    fp(9),
		Token:          1<<64 - 1,
		LeaseExpiresAt: time.UnixMilli(1_700_000_000_123),
		ExpiresAt:      time.UnixMilli(1_700_086_400_123),
	}
	for name, resp := range map[string][]byte{"nil": nil, "empty": {}, "body": []byte(`{"id":1}`)} {
		t.Run(name, func(t *testing.T) {
			rec := base
			rec.Response = resp
			v := encodeRecord(&rec)
			got, err := decodeRecord(v)
			require.NoError(t, err)
			assert.Equal(t, rec, got)
			assert.Equal(t, resp == nil, got.Response == nil)
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	good := encodeRecord(&idem.Record{State: idem.StatePending, Fingerprint: fp(1)})
	for name, v := range map[string]string{
		"empty":          "",
		"short":          good[:headerLen-1],
		"version":        "\x02" + good[1:],
		"state 0":        good[:1] + "\x00" + good[2:],
		"state 4":        good[:1] + "\x04" + good[2:],
		"flags":          good[:2] + "\x02" + good[3:],
		"trailing":       good + "x",
		"someone else's": strings.Repeat("x", 100),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeRecord(v)
			assert.ErrorIs(t, err, errFormat)
		})
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(&idem.Record{State: idem.StatePending, Fingerprint: fp(1), Token: 5}))
	f.Add(encodeRecord(&idem.Record{State: idem.StateFailed, Response: []byte{}}))
	f.Add(encodeRecord(&idem.Record{State: idem.StateCompleted, Response: []byte("hello"), ExpiresAt: time.UnixMilli(-1)}))
	f.Add("")
	f.Add("\x01\x01")
	f.Fuzz(func(t *testing.T, v string) {
		rec, err := decodeRecord(v)
		if err != nil {
			return
		}
		require.Equal(t, v, encodeRecord(&rec), "decode is the inverse of encode")
	})
}

func TestMs(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		1:                                1,
		time.Millisecond:                 1,
		time.Millisecond + 1:             2,
		math.MaxInt64:                    9223372036855,
		math.MaxInt64 - time.Millisecond: 9223372036854,
		math.MaxInt64 / time.Millisecond * time.Millisecond: 9223372036854,
	} {
		if got := ms(d); got != want {
			t.Errorf("ms(%d) = %d, want %d", int64(d), got, want)
		}
	}
}
