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
