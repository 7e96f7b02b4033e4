package agent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
	"gpupool.dev/gpupool/internal/testbin"
)

// The crash test runs the agent's gate executor in a child process (testdata/crashchild, built once)
// that SIGKILLs itself at the k-th crash point (every journal write and fsync, every cordon file
// write, every MIG call of the fake GPU, before and after), for every k, then runs it again to
// resume. The fake GPU keeps its MIG state in a file, as hardware keeps it across a process.

// buildChild builds testdata/crashchild once, without the race detector.
func buildChild(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, "./testdata/crashchild", "crashchild")
}

// scenario is one change on GPU 0 of a 2-GPU fake H100 node; GPU 1 must stay untouched.
type scenario struct {
	name      string
	from, to  string
	failCall  string // NVML call to fail (its failNth-th occurrence in each process), or ""
	failNth   int
	failSmoke bool
	wantNew   bool // the run must end in the new layout (no failure injected)
	migOff    bool // the GPU is to run whole: no instance, then MIG mode off (Executor.SetMIGMode)
	migOn     bool // the GPU starts out of MIG mode: MIG mode on, then the change
}

var scenarios = []scenario{
	{name: "split", from: "7g.80gb@0", to: "3g.40gb@0 3g.40gb@4", wantNew: true},
	{name: "incremental", from: "1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6",
		to: "2g.20gb@0 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6", wantNew: true},
	{name: "create-fails", from: "4g.40gb@0 3g.40gb@4", to: "2g.20gb@0 2g.20gb@2 3g.40gb@4",
		failCall: "GpuInstanceCreateComputeInstance", failNth: 2},
	{name: "smoke-fails", from: "3g.40gb@0 3g.40gb@4", to: "7g.80gb@0", failSmoke: true},
	{name: "whole", from: "3g.40gb@0 3g.40gb@4", to: "", wantNew: true, migOff: true},
	{name: "mig-on", from: "", to: "3g.40gb@0 3g.40gb@4", wantNew: true, migOn: true},
}

const otherLayout = "2g.20gb@0 2g.20gb@2 3g.40gb@4"

func runChild(t *testing.T, bin, dir string, sc scenario, env ...string) (killed bool, out string) {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DIR="+dir, "FROM="+sc.from, "TO="+sc.to,
		"FAIL_CALL="+sc.failCall, "FAIL_NTH="+strconv.Itoa(sc.failNth))
	if sc.failSmoke {
		cmd.Env = append(cmd.Env, "FAIL_SMOKE=1")
	}
	if sc.migOff {
		cmd.Env = append(cmd.Env, "MIG_OFF=1")
	}
	if sc.migOn {
		cmd.Env = append(cmd.Env, "MIG_ON=1")
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
	bin := buildChild(t)
	runs, rolledBack := 0, 0
	start := time.Now()
	base := t.TempDir()
	// A SIGKILL loses no page-cache data, so the runs may use a memory file system (fsync is then
	// nearly free and the test takes seconds, not a minute); power loss is not what is tested here.
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "gpupool-crash-"); err == nil {
			base = d
			defer os.RemoveAll(d)
		}
	}
	for _, sc := range scenarios {
		for k := 1; ; k++ {
			dir, err := os.MkdirTemp(base, sc.name+"-")
			if err != nil {
				t.Fatal(err)
			}
			runChild(t, bin, dir, sc, "INIT=1")
			killed, out := runChild(t, bin, dir, sc, "KILL_AT="+strconv.Itoa(k))
			if !killed {
				if k < 10 {
					t.Fatalf("%s: only %d crash points (%s)", sc.name, k-1, out)
				}
				checkEnd(t, dir, sc, k, out)
				break
			}
			runs++
			_, out = runChild(t, bin, dir, sc) // restart: resume or roll back
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
	devs, err := lib.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case sc.migOff && devs[0].MIG:
		t.Fatalf("%s kill %d: GPU 0 still in MIG mode at %q", sc.name, k, got)
	case !sc.migOff && !devs[0].MIG:
		t.Fatalf("%s kill %d: GPU 0 left MIG mode", sc.name, k)
	case !devs[1].MIG:
		t.Fatalf("%s kill %d: untouched GPU 1 left MIG mode", sc.name, k)
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

type okSmoker struct{}

func (okSmoker) Smoke(context.Context, string, gpu.Layout) error { return nil }

// A SIGKILL during an uncordon retry's backoff loses nothing: the restarted process resumes the
// retry with the journaled attempt count (so it makes only the attempts left, not a fresh
// MaxUncordonAttempts), gives up with the node cordoned, and an operator's reset then uncordons.
// The same holds with jitter (each run of the process draws from a source seeded apart): the
// journaled due time at the kill is then off the whole seconds of the child's clock, which the
// fixed schedule keeps to.
func TestCrashDuringUncordonBackoff(t *testing.T) {
	bin := buildChild(t)
	for _, jitter := range []bool{false, true} {
		t.Run(map[bool]string{false: "fixed", true: "jitter"}[jitter], func(t *testing.T) {
			seed := func(n int) []string {
				if !jitter {
					return nil
				}
				return []string{"JITTER=" + strconv.Itoa(n)}
			}
			sc := scenario{name: "uncordon-backoff", from: "3g.40gb@0 3g.40gb@4", to: "7g.80gb@0", wantNew: true}
			dir := t.TempDir()
			runChild(t, bin, dir, sc, "INIT=1")
			// The child's clock moves a second per reading, so a 1s backoff may have passed before its
			// wait: the count at the kill is read from the journal.
			const killIn = 3
			if killed, out := runChild(t, bin, dir, sc, append(seed(1), "UNCORDON_FAIL=1", "KILL_IN_BACKOFF="+strconv.Itoa(killIn))...); !killed {
				t.Fatalf("not killed during a backoff (no wait before a retry?): %s", out)
			}
			last := readJournal(t, filepath.Join(dir, "gate.journal"))
			failed := last.UncordonFailures
			if last.Phase() != gate.PhaseUncordon || failed < killIn || failed >= gate.MaxUncordonAttempts || last.Pending == nil ||
				last.Pending.Kind != gate.ActUncordon || last.Pending.NotBefore.IsZero() {
				t.Fatalf("journal at the kill: phase %s failures %d pending %+v", last.Phase(), last.UncordonFailures, last.Pending)
			}
			if off := last.Pending.NotBefore.Nanosecond() != 0; off != jitter {
				t.Fatalf("journal at the kill: retry due at %s, jitter %t (a jittered wait is off the clock's whole seconds)",
					last.Pending.NotBefore.Format(time.RFC3339Nano), jitter)
			}
			_, out := runChild(t, bin, dir, sc, append(seed(2), "UNCORDON_FAIL=1")...)
			want := "phase=failed rolledBack=0 uncordons=" + strconv.Itoa(gate.MaxUncordonAttempts-failed) + " uncordonFailures=" + strconv.Itoa(gate.MaxUncordonAttempts)
			if !strings.Contains(out, want) {
				t.Fatalf("restart: %q, want %q (the attempt count resumed from the journal)", out, want)
			}
			if st, _ := (&LocalNode{Path: filepath.Join(dir, "cordon.json")}).Read(); !st.Cordoned || !strings.Contains(st.Reason, "uncordon failed 8 times") {
				t.Fatalf("after giving up: cordon %+v", st)
			}
			_, out = runChild(t, bin, dir, sc, append(seed(3), "RESET=1")...)
			checkEnd(t, dir, sc, killIn, out)
		})
	}
}
