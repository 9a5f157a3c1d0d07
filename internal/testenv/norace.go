//go:build !race

package testenv

// RaceEnabled reports whether the race detector is on (see race.go).
const RaceEnabled = false
