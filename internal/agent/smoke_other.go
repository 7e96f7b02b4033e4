//go:build !unix

package agent

import (
	"os"
	"os/exec"
)

// killGroupOnCancel leaves the command's cancellation as it is (the process alone is killed);
// the smoke command's WaitDelay still bounds the wait for its output.
func killGroupOnCancel(*exec.Cmd) {}

// ReapSmokeLeftover removes the group file: without process groups nothing is killed.
func ReapSmokeLeftover(groupFile string) (int, error) {
	_ = os.Remove(groupFile)
	return 0, nil
}
