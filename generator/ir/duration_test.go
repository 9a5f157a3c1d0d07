package ir_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgen/idemgen/generator/contract"
	"github.com/idemgen/idemgen/generator/ir"
)

func ExampleFormatDuration() {
	for _, d := range []time.Duration{500 * time.Millisecond, 90 * time.Second, 10 * time.Minute, 90 * time.Minute, 24 * time.Hour, 7 * 24 * time.Hour} {
		fmt.Println(ir.FormatDuration(d))
	}
	// Output:
	// 500ms
	// 1m30s
	// 10m
	// 1h30m
	// 24h
	// 7d
}

// What FormatDuration writes, the contract's parser reads back.
func TestFormatDurationRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 1500 * time.Millisecond, time.Minute, time.Hour, 36 * time.Hour, 48 * time.Hour, 49 * time.Hour, 30 * 24 * time.Hour} {
		got, err := contract.ParseDuration(ir.FormatDuration(d))
		require.NoError(t, err, ir.FormatDuration(d))
		assert.Equal(t, d, got, ir.FormatDuration(d))
	}
}
