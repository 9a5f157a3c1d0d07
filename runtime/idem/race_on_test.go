//go:build race

package idem

const raceEnabled = true
