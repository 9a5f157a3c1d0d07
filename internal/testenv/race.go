//go:build race

package testenv

// RaceEnabled reports whether the race detector is on. A few tests that
// exercise no concurrency but feed the largest real spec through oapi-codegen
// take minutes under -race: they skip there (with testenv.SkipUnderRace) and
// run in scripts/test's second, race-free pass.
const RaceEnabled = true
