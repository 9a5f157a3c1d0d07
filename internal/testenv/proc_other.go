//go:build !linux

package testenv

import "os/exec"

func dieWithParent(*exec.Cmd) {}

// DieWithParent asks the kernel to kill cmd when the test process dies
// (Linux only; elsewhere it does nothing).
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }
