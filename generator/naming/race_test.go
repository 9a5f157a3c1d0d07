//go:build race

package naming_test

// raceEnabled: the race detector makes oapi-codegen's generation of the
// largest spec take minutes; that test exercises no concurrency.
const raceEnabled = true
