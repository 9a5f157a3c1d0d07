//go:build !race

package idem

const raceEnabled = false
