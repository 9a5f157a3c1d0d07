//go:build !race

package naming_test

const raceEnabled = false
