package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// The commands themselves stop soon after their context is cancelled mid-run, without main's
// last-resort exit: in-process, the deadline falls while plan plans and simulate simulates.
func TestCancelMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("plans a large pool")
	}
	pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 5000, GPUs: 5000}, rand.New(rand.NewPCG(1, 2)))
	data, err := v1.EncodeYAML(pool)
	if err != nil {
		t.Fatal(err)
	}
	big := writeTemp(t, "pool.yaml", string(data))
	example := filepath.Join("..", "..", "examples", "h100-7b-sharing.yaml")
	for _, tc := range []struct {
		args []string
		wait time.Duration
	}{
		{[]string{"plan", big, "--out", filepath.Join(t.TempDir(), "out")}, 1500 * time.Millisecond},
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
		// 1 s; the race detector slows the planner's longest step without a check (the LP
		// bound's simplex, 0.35 s for this pool) several times over.
		bar := time.Second
		if raceEnabled {
			bar = 5 * time.Second
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
