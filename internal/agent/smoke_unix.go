//go:build unix

package agent

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel starts the command in a process group of its own and makes its cancellation
// kill that group, the command's children included.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
