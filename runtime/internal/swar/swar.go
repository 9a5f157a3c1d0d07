// Package swar holds the byte-parallel (SIMD within a register) tests the
// runtime's hot scanners share: runtime/idem's scope and record header
// checks and runtime/internal/keysyntax's key check.
package swar

// Load64 reads the first 8 bytes of s, little-endian (one load).
func Load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// ControlOrHigh and HasZero test the 8 bytes of x: nonzero when some byte
// is a control byte (below 0x20) or 0x7F and above (ControlOrHigh), when
// some byte is zero (HasZero). Only whether the result is zero means
// anything: borrows and carries start at a byte that already makes it
// nonzero.
func ControlOrHigh(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return ((x-0x20*ones) & ^x | (x + ones) | x) & highs
}

// HasZero: see ControlOrHigh.
func HasZero(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (x - ones) & ^x & highs
}
