//go:build unix

package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// TestSmokeTimeoutEndsChildren: a smoke command that is a shell script whose child outlives the
// timeout fails at the timeout, not when the child ends, and the child is killed with it. Before,
// the child kept the command's output open and the smoke check (and the poll it runs in) waited
// for it: 30 s here, however short smoke.timeout was.
func TestSmokeTimeoutEndsChildren(t *testing.T) {
	l, err := gpu.ParseLayout("3g.40gb@0")
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	s := CommandSmoker{Command: []string{"sh", "-c", `sleep 30 & echo $! > "$0"; wait`, pidFile}, Timeout: 300 * time.Millisecond}
	start := time.Now()
	err = s.Smoke(context.Background(), "G0", l)
	took := time.Since(start)
	if err == nil {
		t.Fatal("a smoke command past its timeout passed")
	}
	if took > 10*time.Second {
		t.Fatalf("the smoke check took %s with a timeout of %s", took, s.Timeout)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break // gone, or a zombie waiting for its new parent to reap it
		}
		if syscall.Kill(pid, 0) != nil || time.Now().After(deadline) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the smoke command's child %d still runs after the timeout", pid)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReapSmokeLeftover: a smoke command still running when its agent died (here: still running
// while a second agent starts) is ended by the restarted agent from the group file, the shell's
// child included; a group file whose GPU no process of the group carries kills nothing.
func TestReapSmokeLeftover(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	l, err := gpu.ParseLayout("3g.40gb@0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pidFile, groupFile := filepath.Join(dir, "child.pid"), filepath.Join(dir, "smoke.group")
	s := CommandSmoker{Command: []string{"sh", "-c", `sleep 30 & echo $! > "$0"; wait`, pidFile}, Timeout: time.Minute, GroupFile: groupFile}
	done := make(chan error, 1)
	go func() { done <- s.Smoke(context.Background(), "GPU-7", l) }()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); ; {
		raw, err := os.ReadFile(pidFile)
		if _, gerr := os.Stat(groupFile); err == nil && gerr == nil && strings.HasSuffix(string(raw), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the smoke command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	recorded, err := os.ReadFile(groupFile)
	if err != nil {
		t.Fatal(err)
	}
	// Another GPU's record: the group is not this one's to kill.
	other := strings.Replace(string(recorded), "GPU-7", "GPU-8", 1)
	if err := os.WriteFile(groupFile, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := ReapSmokeLeftover(groupFile); err != nil || k != 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("a record of another GPU: %d %v, child alive %t", k, err, syscall.Kill(pid, 0) == nil)
	}
	if err := os.WriteFile(groupFile, recorded, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := ReapSmokeLeftover(groupFile)
	if err != nil || k < 2 {
		t.Fatalf("reap: %d processes, %v; want the shell and its child", k, err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the reaped smoke command passed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the smoke command still runs after the reap")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the smoke command's child %d still runs after the reap", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(groupFile); !os.IsNotExist(err) {
		t.Errorf("the group file is left: %v", err)
	}
}
