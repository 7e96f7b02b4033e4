//go:build unix

package agent

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// killGroupOnCancel starts the command in a process group of its own and makes its cancellation
// kill that group, the command's children included.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// ReapSmokeLeftover ends a smoke command that a killed agent left running: the process group
// recorded in groupFile (CommandSmoker.GroupFile) is killed when one of its processes still
// carries the recorded GPU in its environment (so that a process group id reused since is left
// alone), and the file is removed. It reports how many processes of the group it found.
func ReapSmokeLeftover(groupFile string) (int, error) {
	raw, err := os.ReadFile(groupFile)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read smoke group file: %w", err)
	}
	defer os.Remove(groupFile)
	var pgid int
	var gpuID string
	if _, err := fmt.Sscanf(string(raw), "%d %s", &pgid, &gpuID); err != nil || pgid <= 1 {
		return 0, fmt.Errorf("smoke group file %s: %q does not parse", groupFile, raw)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil // no /proc: nothing can be checked, so nothing is killed
	}
	found, ours := 0, false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[2] != strconv.Itoa(pgid) {
			continue
		}
		found++
		env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if bytes.Contains(env, []byte("\x00GPUPOOL_GPU="+gpuID+"\x00")) || bytes.HasPrefix(env, []byte("GPUPOOL_GPU="+gpuID+"\x00")) {
			ours = true
		}
	}
	if !ours {
		return 0, nil
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return found, fmt.Errorf("kill smoke process group %d: %w", pgid, err)
	}
	return found, nil
}
