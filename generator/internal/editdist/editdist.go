// Package editdist computes the Levenshtein distance of two strings, for
// the "did you mean" hints and near-miss checks of the generator.
package editdist

// MaxLen is the longest string, in bytes, whose distance Distance
// computes: past it, Distance returns Far rather than spend quadratic
// time on it.
const MaxLen = 256

// Far is the distance Distance returns when a or b is longer than MaxLen:
// further than any near miss.
const Far = 99

// Distance is the Levenshtein distance between a and b, counted in bytes
// (insertions, deletions and substitutions, each 1); Far when a or b is
// longer than MaxLen bytes.
func Distance(a, b string) int {
	if len(a) > MaxLen || len(b) > MaxLen {
		return Far
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
