//go:build !linux

package memstore

func sysHugePages([]byte) {}
