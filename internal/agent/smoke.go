package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// smokeWaitDelay is how long a smoke command's output may stay open after the command was ended.
const smokeWaitDelay = 2 * time.Second

// sleepCh is the drain poll period.
var sleepCh = func() <-chan time.Time { return time.After(500 * time.Millisecond) }

// CommandSmoker runs a command once per new instance, with GPUPOOL_GPU (the GPU UUID) and
// GPUPOOL_INSTANCE ("3g.40gb@4") in its environment; it fails on a non-zero exit or after
// Timeout. A short CUDA program or a vLLM health check fits here.
type CommandSmoker struct {
	Command []string
	Timeout time.Duration
	// GroupFile, when set, holds the running command's process group and GPU while it runs, so
	// that an agent restarted after being killed ends a command its predecessor left running
	// (ReapSmokeLeftover) before it runs the smoke step again.
	GroupFile string
}

// Smoke runs the command for each instance in turn.
func (s CommandSmoker) Smoke(ctx context.Context, gpuID string, instances gpu.Layout) error {
	if len(s.Command) == 0 {
		return nil
	}
	for _, in := range instances {
		cctx, cancel := context.WithTimeout(ctx, s.Timeout)
		cmd := exec.CommandContext(cctx, s.Command[0], s.Command[1:]...)
		cmd.Env = append(os.Environ(), "GPUPOOL_GPU="+gpuID, "GPUPOOL_INSTANCE="+in.String())
		// The timeout ends the command's whole process group, not only the process itself: a
		// shell script's children would otherwise keep its output open and the wait would last
		// as long as they do. WaitDelay bounds the wait for the output in any case.
		killGroupOnCancel(cmd)
		cmd.WaitDelay = smokeWaitDelay
		var buf strings.Builder
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err := cmd.Start()
		if err == nil {
			s.record(cmd, gpuID)
			err = cmd.Wait()
			s.record(nil, "")
		}
		out := buf.String()
		cancel()
		if err != nil {
			tail := strings.TrimSpace(out)
			if len(tail) > 200 {
				tail = tail[len(tail)-200:]
			}
			return fmt.Errorf("smoke %s on %s (%s, timeout %s): %w: %s", in, gpuID, strings.Join(s.Command, " "), s.Timeout, err, tail)
		}
	}
	return nil
}

// record writes the running command's process group and GPU to GroupFile, or removes the file
// (cmd nil). A failure to write only loses the clean-up after a crash.
func (s CommandSmoker) record(cmd *exec.Cmd, gpuID string) {
	if s.GroupFile == "" {
		return
	}
	if cmd == nil {
		_ = os.Remove(s.GroupFile)
		return
	}
	_ = os.WriteFile(s.GroupFile, fmt.Appendf(nil, "%d %s\n", cmd.Process.Pid, gpuID), 0o600)
}
