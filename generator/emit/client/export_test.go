package client

// SampleKeys exposes the sample keys to the tests.
func SampleKeys() map[string][]string { return sampleKeys }

// RetryDoc exposes a helper's retry sentence to the tests.
var RetryDoc = retryDoc
