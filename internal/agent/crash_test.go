package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

// The crash test runs the agent's gate executor in a child process (this test binary, re-executed)
// that SIGKILLs itself at the k-th crash point (every journal write and fsync, every cordon file
// write, every MIG call of the fake GPU, before and after), for every k, then runs it again to
// resume. The fake GPU keeps its MIG state in a file, as hardware keeps it across a process.

const childEnv = "GPUPOOL_AGENT_CRASH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

// scenario is one change on GPU 0 of a 2-GPU fake H100 node; GPU 1 must stay untouched.
type scenario struct {
	name      string
	from, to  string
	failCall  string // NVML call to fail (its failNth-th occurrence in each process), or ""
	failNth   int
	failSmoke bool
	wantNew   bool // the run must end in the new layout (no failure injected)
}

var scenarios = []scenario{
	{name: "split", from: "7g.80gb@0", to: "3g.40gb@0 3g.40gb@4", wantNew: true},
	{name: "incremental", from: "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6",
		to: "2g.20gb@0 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6", wantNew: true},
	{name: "create-fails", from: "4g.40gb@0 3g.40gb@4", to: "2g.20gb@0 2g.20gb@2 3g.40gb@4",
		failCall: "GpuInstanceCreateComputeInstance", failNth: 2},
	{name: "smoke-fails", from: "3g.40gb@0 3g.40gb@4", to: "7g.80gb@0", failSmoke: true},
}

const otherLayout = "2g.20gb@0 2g.20gb@2 3g.40gb@4"

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
		return 0
	}
	j, rep, err := OpenJournal(filepath.Join(dir, "gate.journal"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	j.Hook = hook
	node := &LocalNode{Path: filepath.Join(dir, "cordon.json"), Hook: hook}
	var smoke Smoker = okSmoker{}
	if os.Getenv("FAIL_SMOKE") != "" {
		smoke = failSmoker{}
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	ctx := context.Background()
	x, err := NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: lib, Node: node, Smoke: smoke, Now: now})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
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
	rolled := 0
	for _, n := range x.State().Notes {
		if n.Code == gate.ReasonRolledBack {
			rolled = 1
		}
	}
	fmt.Printf("points=%d phase=%s rolledBack=%d\n", points.Load(), x.State().Phase(), rolled)
	return 0
}

type okSmoker struct{}

func (okSmoker) Smoke(context.Context, string, gpu.Layout) error { return nil }

type failSmoker struct{}

func (failSmoker) Smoke(context.Context, string, gpu.Layout) error {
	return errors.New("smoke: CUDA program exited 1")
}

func runChild(t *testing.T, dir string, sc scenario, env ...string) (killed bool, out string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "DIR="+dir, "FROM="+sc.from, "TO="+sc.to,
		"FAIL_CALL="+sc.failCall, "FAIL_NTH="+strconv.Itoa(sc.failNth))
	if sc.failSmoke {
		cmd.Env = append(cmd.Env, "FAIL_SMOKE=1")
	}
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, string(b)
		}
	}
	if err != nil {
		t.Fatalf("child %v: %v\n%s", env, err, b)
	}
	return false, string(b)
}

func TestCrashAtEveryPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test runs hundreds of child processes")
	}
	runs, rolledBack := 0, 0
	start := time.Now()
	for _, sc := range scenarios {
		for k := 1; ; k++ {
			dir := t.TempDir()
			runChild(t, dir, sc, "INIT=1")
			killed, out := runChild(t, dir, sc, "KILL_AT="+strconv.Itoa(k))
			if !killed {
				if k < 10 {
					t.Fatalf("%s: only %d crash points (%s)", sc.name, k-1, out)
				}
				checkEnd(t, dir, sc, k, out)
				break
			}
			runs++
			_, out = runChild(t, dir, sc) // restart: resume or roll back
			checkEnd(t, dir, sc, k, out)
			if sc.failCall != "" && strings.Contains(out, "rolledBack=1") {
				rolledBack++
			}
		}
	}
	t.Logf("%d SIGKILLed runs resumed in %s; %d create-fails runs rolled back after the restart", runs, time.Since(start).Round(time.Millisecond), rolledBack)
	if rolledBack == 0 {
		t.Fatal("no restarted create-fails run rolled back: the rollback path was not exercised under kills")
	}
	if runs < 200 {
		t.Fatalf("only %d killed runs; the bar is 200", runs)
	}
}

// checkEnd verifies a finished run: GPU 0 in its old or new layout with nothing half-made,
// GPU 1 untouched, the journal readable and idle, the node uncordoned.
func checkEnd(t *testing.T, dir string, sc scenario, k int, out string) {
	t.Helper()
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 2, StatePath: filepath.Join(dir, "mig.json")})
	if err != nil {
		t.Fatalf("%s kill %d: %v", sc.name, k, err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	u := fake.UUIDs()
	got, partial, err := lib.Observe(u[0], fake.Board().Name)
	if err != nil {
		t.Fatal(err)
	}
	from, _ := gpu.ParseLayout(sc.from)
	to, _ := gpu.ParseLayout(sc.to)
	old, neu := from.Sorted(), to.Sorted()
	switch {
	case len(partial) > 0:
		t.Fatalf("%s kill %d: leaked half-made instances %q", sc.name, k, partial)
	case sc.wantNew && !slices.Equal(got, neu):
		t.Fatalf("%s kill %d: GPU at %q, want new %q (%s)", sc.name, k, got, neu, out)
	case !slices.Equal(got, old) && !slices.Equal(got, neu):
		t.Fatalf("%s kill %d: GPU at %q, neither old %q nor new %q", sc.name, k, got, old, neu)
	case !sc.wantNew && sc.failSmoke && !slices.Equal(got, old):
		// The smoke check fails in every process, so the change can never complete. (A failed
		// create fails only at its n-th call per process: after a kill it may then succeed.)
		t.Fatalf("%s kill %d: injected failure but GPU at %q, want old %q", sc.name, k, got, old)
	}
	other, p1, _ := lib.Observe(u[1], fake.Board().Name)
	if other.String() != otherLayout || len(p1) > 0 {
		t.Fatalf("%s kill %d: untouched GPU 1 changed to %q", sc.name, k, other)
	}
	f, err := os.Open(filepath.Join(dir, "gate.journal"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, _, err := ReadJournal(f)
	if err != nil || rep.Last == nil {
		t.Fatalf("%s kill %d: journal: %v (last %v)", sc.name, k, err, rep.Last)
	}
	if rep.Last.Phase() != gate.PhaseIdle || rep.Last.Cordoned || rep.Last.Pending != nil {
		t.Fatalf("%s kill %d: journal ends in phase %s cordoned %t pending %v", sc.name, k, rep.Last.Phase(), rep.Last.Cordoned, rep.Last.Pending)
	}
	for _, n := range rep.Last.Notes {
		// Without an injected failure, a kill must be resumed, never turned into a failure.
		if sc.wantNew && (n.Code == gate.ReasonApplyFailed || n.Code == gate.ReasonVerifyMismatch || n.Code == gate.ReasonRolledBack) {
			t.Fatalf("%s kill %d: a crash became a failure: %s: %s", sc.name, k, n.Code, n.Message)
		}
	}
	if !strings.Contains(out, "phase=idle") {
		t.Fatalf("%s kill %d: resumed run did not end idle: %s", sc.name, k, out)
	}
	st, err := (&LocalNode{Path: filepath.Join(dir, "cordon.json")}).Read()
	if err != nil || st.Cordoned {
		t.Fatalf("%s kill %d: node left cordoned (%q) err %v", sc.name, k, st.Reason, err)
	}
}
