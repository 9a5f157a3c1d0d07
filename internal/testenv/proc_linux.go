package testenv

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd (SIGKILL) when the test process
// dies, so a crashed or killed test leaves no server behind.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// DieWithParent asks the kernel to kill cmd when the test process dies
// (Linux only; elsewhere it does nothing).
func DieWithParent(cmd *exec.Cmd) { dieWithParent(cmd) }
