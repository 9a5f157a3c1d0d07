package client

// SampleKeys exposes the sample keys to the tests.
func SampleKeys() map[string][]string { return sampleKeys }
