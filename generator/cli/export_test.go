package cli

import "testing"

// SetVersion makes idemgen report version v (as a released or VCS-stamped
// build does) until the end of the test.
func SetVersion(t testing.TB, v string) {
	old := buildVersion
	buildVersion = func() string { return v }
	t.Cleanup(func() { buildVersion = old })
}

// Synopses of the commands, for tests.
const (
	InitSynopsis           = initSynopsis
	CheckSynopsis          = checkSynopsis
	CheckGeneratedSynopsis = checkGeneratedSynopsis
	SpecSynopsis           = specSynopsis
	GenerateSynopsis       = generateSynopsis
	VersionSynopsis        = versionSynopsis
)

// CommandNames are idemgen's commands, in the order of the help.
func CommandNames() []string {
	var names []string
	for _, c := range commandList {
		names = append(names, c.name)
	}
	return names
}

// LineTexts is lineTexts, for tests.
var LineTexts = lineTexts
