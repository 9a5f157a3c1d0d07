//go:build race

package augment_test

const raceEnabled = true
