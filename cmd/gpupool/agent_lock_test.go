package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/agent"
)

// TestAgentStateDirLocked: while one agent process runs on a state directory, a second agent on
// it refuses to start, naming the first one's process id (before, both ran, each
// appending to the one gate journal and driving the same GPUs). Once the first is SIGKILLed, a
// new agent starts on the directory: the lock dies with its process.
func TestAgentStateDirLocked(t *testing.T) {
	cfg := agentConfig(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GPUPOOL_TEST_CHILD=1",
		"GPUPOOL_TEST_ARGS=agent --fake --config "+cfg+" --listen 127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ready := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "gpupool agent on node") {
				close(ready)
				break
			}
		}
		for lines.Scan() {
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the first agent did not start within 30s")
	}
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &stdout, &stderr)
	if !errors.Is(err, agent.ErrStateDirLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("agent --once beside a running agent: %v, want ErrStateDirLocked naming process %d\n%s", err, cmd.Process.Pid, stdout.String())
	}
	// --reset beside it appends nothing itself: the running agent answers through its reset
	// socket (TestAgentResetRunning).
	stdout.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--reset"}, &stdout, &stderr); err != nil ||
		!strings.Contains(stdout.String(), "the running agent answered") || !strings.Contains(stdout.String(), "nothing to reset") {
		t.Fatalf("agent --reset beside a running agent: %v\n%s", err, stdout.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	stdout.Reset()
	if err := run(context.Background(), []string{"agent", "--fake", "--config", cfg, "--once"}, &stdout, &stderr); err != nil {
		t.Fatalf("agent after the first was SIGKILLed: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "gate: phase") {
		t.Fatalf("agent --once after the kill printed:\n%s", stdout.String())
	}
}
