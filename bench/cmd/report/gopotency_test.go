package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGopotencyNeedsAWorkspace(t *testing.T) {
	t.Setenv("GOWORK", "off")
	r := &runner{}
	err := r.enableGopotency()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GOWORK")
	assert.Empty(t, r.buildFlags)
	assert.Contains(t, r.gopotencyNote(), "without `-gopotency`")
}
