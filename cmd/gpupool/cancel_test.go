package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"
)

// The simulator stops on its own soon after its context is cancelled mid-run, without main's
// last-resort exit: in-process, the deadline falls while it simulates. (The planner's own checks
// are tested in internal/plan, against the length of an uncancelled run: a fixed deadline here
// could fall while a loaded machine still reads the pool, which is not interruptible.)
func TestCancelMidRun(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "h100-7b-sharing.yaml")
	for _, tc := range []struct {
		args []string
		wait time.Duration
	}{
		{[]string{"simulate", example, "--strategy", "mps", "--duration", "24h"}, 300 * time.Millisecond},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), tc.wait)
		var stdout bytes.Buffer
		err := run(ctx, tc.args, &stdout, &bytes.Buffer{})
		late := time.Since(deadlineOf(ctx))
		cancel()
		if exitCode(err) != exitInterrupted || stdout.Len() > 0 {
			t.Errorf("%s: exit %d (%v), %d bytes on stdout; want 130 and nothing (the run may have ended before the deadline)",
				tc.args[0], exitCode(err), err, stdout.Len())
		}
		t.Logf("%s returned %v after the deadline", tc.args[0], late)
		bar := time.Second
		if raceEnabled {
			bar = 3 * time.Second
		}
		if late > bar {
			t.Errorf("%s returned %v after the deadline, want within %v", tc.args[0], late, bar)
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
