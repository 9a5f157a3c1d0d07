// Package english spells counts in idemgen's messages: "1 operation",
// "2 operations", so that no message says "1 warnings".
package english

import "strconv"

// Count returns n and noun, in the plural unless n is 1: Count(1,
// "warning") is "1 warning", Count(0, "warning") "0 warnings". The plural
// is noun+"s"; give it as plural[0] when it is another word.
func Count(n int, noun string, plural ...string) string {
	return strconv.Itoa(n) + " " + Noun(n, noun, plural...)
}

// Noun returns noun, in the plural (noun+"s", or plural[0]) unless n is 1.
func Noun(n int, noun string, plural ...string) string {
	if n == 1 {
		return noun
	}
	if len(plural) > 0 {
		return plural[0]
	}
	return noun + "s"
}

// Plural returns "s" unless n is 1, for nouns spelled in a format string.
func Plural(n int) string { return Noun(n, "", "s") }
