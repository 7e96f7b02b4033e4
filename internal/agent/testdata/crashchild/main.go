// Command crashchild is the crash test's child process (internal/agent crash_test.go): it runs
// one gate change on a 2-GPU fake H100 node whose MIG state is kept in DIR, and SIGKILLs itself at
// the KILL_AT-th crash point (every journal write and fsync, cordon-file write and NVML MIG call,
// before and after). The test builds it once, without the race detector, so that hundreds of
// runs stay fast.
package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"gpupool.dev/gpupool/internal/agent"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

// otherLayout is GPU 1's layout; the change on GPU 0 must leave it alone.
const otherLayout = "2g.20gb@0 2g.20gb@2 3g.40gb@4"

func main() { os.Exit(crashChild()) }

func crashChild() int {
	dir := os.Getenv("DIR")
	killAt, _ := strconv.Atoi(os.Getenv("KILL_AT"))
	failNth, _ := strconv.Atoi(os.Getenv("FAIL_NTH"))
	failCall := os.Getenv("FAIL_CALL")
	if os.Getenv("INIT") != "" {
		failCall = ""
	}
	var points, calls atomic.Int64
	hook := func(string) {
		if n := points.Add(1); killAt > 0 && n == int64(killAt) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 2, StatePath: filepath.Join(dir, "mig.json"), Hook: hook})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lib := nvml.New(fake.Interface(), nvml.Options{Faults: func(c string) nvml.Fault {
		if c == failCall && calls.Add(1) == int64(failNth) {
			return nvml.Fault{Err: true}
		}
		return nvml.Fault{}
	}})
	u := fake.UUIDs()
	board := fake.Board().Name
	if os.Getenv("INIT") != "" { // lay out the starting state, once, without kills
		for i, s := range []string{os.Getenv("FROM"), otherLayout} {
			l, _ := gpu.ParseLayout(s)
			for _, in := range fake.Board().CreationOrder(l) {
				if err := lib.Create(u[i], board, in); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 2
				}
			}
		}
		if os.Getenv("MIG_ON") != "" { // GPU 0 starts out of MIG mode
			if err := lib.SetMIGMode(u[0], false); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
		}
		return 0
	}
	j, rep, err := agent.OpenJournal(filepath.Join(dir, "gate.journal"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	j.Hook = hook
	var node agent.Node = &agent.LocalNode{Path: filepath.Join(dir, "cordon.json"), Hook: hook}
	uncordons := 0
	if os.Getenv("UNCORDON_FAIL") != "" { // every uncordon fails (the node cannot be written)
		node = failingUncordon{node, &uncordons}
	}
	var smoke agent.Smoker = okSmoker{}
	if os.Getenv("FAIL_SMOKE") != "" {
		smoke = failSmoker{}
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	ctx := context.Background()
	// A retry's backoff passes on the fake clock at once; KILL_IN_BACKOFF=m SIGKILLs the process
	// during the m-th wait.
	killInBackoff, _ := strconv.Atoi(os.Getenv("KILL_IN_BACKOFF"))
	backoffs := 0
	sleep := func(ctx context.Context, d time.Duration) error {
		if backoffs++; backoffs == killInBackoff {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		clock = clock.Add(d)
		return ctx.Err()
	}
	// JITTER=seed spreads the uncordon retries (half of each wait random) with a source of that seed.
	var policy gate.Policy
	var draw func() float64
	if seed, err := strconv.ParseUint(os.Getenv("JITTER"), 10, 64); err == nil {
		policy.Uncordon.Jitter = 0.5
		draw = rand.New(rand.NewPCG(seed, 1)).Float64
	}
	x, err := agent.NewExecutor(ctx, j, rep, gate.State{Policy: policy}, agent.Deps{MIG: lib, Node: node, Smoke: smoke, Now: now, Sleep: sleep, Rand: draw})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	if os.Getenv("MIG_ON") != "" { // MIG mode on first, as the agent does for a layout
		devs, err := lib.Inventory()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 7
		}
		if _, err := x.SetMIGMode(agent.GPUInfo{UUID: u[0], Board: board, MIG: devs[0].MIG}, true); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 7
		}
	}
	cur, _, err := lib.Observe(u[0], board)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	to, _ := gpu.ParseLayout(os.Getenv("TO"))
	if err := x.Submit(ctx, gate.Desired{GPU: u[0], Board: board, Layout: to, Current: cur}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 6
	}
	if os.Getenv("MIG_OFF") != "" { // the GPU is run whole: MIG mode off once empty
		devs, err := lib.Inventory()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 7
		}
		now, _, err := lib.Observe(u[0], board)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 7
		}
		if _, err := x.SetMIGMode(agent.GPUInfo{UUID: u[0], Board: board, MIG: devs[0].MIG, Instances: now}, false); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 7
		}
	}
	if os.Getenv("RESET") != "" { // an operator's reset of a failed change
		if err := x.Reset(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 8
		}
	}
	rolled := 0
	for _, n := range x.State().Notes {
		if n.Code == gate.ReasonRolledBack {
			rolled = 1
		}
	}
	fmt.Printf("points=%d phase=%s rolledBack=%d uncordons=%d uncordonFailures=%d\n", points.Load(), x.State().Phase(), rolled,
		uncordons, x.State().UncordonFailures)
	return 0
}

type okSmoker struct{}

func (okSmoker) Smoke(context.Context, string, gpu.Layout) error { return nil }

type failSmoker struct{}

func (failSmoker) Smoke(context.Context, string, gpu.Layout) error {
	return errors.New("smoke: CUDA program exited 1")
}

// failingUncordon is a node whose uncordon always fails; it counts the attempts.
type failingUncordon struct {
	agent.Node
	n *int
}

func (f failingUncordon) Uncordon(context.Context) error {
	*f.n++
	return errors.New("write cordon: read-only file system")
}
