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

func TestAbsentPeer(t *testing.T) {
	rs := results{"Postgres/gopotency-gorm/first": {"ns/op": {1}}}
	assert.False(t, absentPeer(rs, "Postgres", "gopotency-gorm"))
	assert.True(t, absentPeer(rs, "Redis", "gopotency-gorm"))
	assert.False(t, absentPeer(rs, "Redis", "raw"), "only gopotency rows are left out")
}
