package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

// fakeClock moves only when the executor sleeps on it; it records each wait.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// flakyNode is a LocalNode whose Uncordon fails its first fails calls (all of them when fails < 0),
// recording when each call came.
type flakyNode struct {
	*LocalNode
	clock *fakeClock
	fails int
	calls []time.Time
}

func (n *flakyNode) Uncordon(ctx context.Context) error {
	n.calls = append(n.calls, n.clock.Now())
	if n.fails < 0 || len(n.calls) <= n.fails {
		return errors.New("write cordon: no space left on device")
	}
	return n.LocalNode.Uncordon(ctx)
}

func newUncordonExecutor(t *testing.T, fails int) (*Executor, *flakyNode, *fakeClock, string, context.Context) {
	t.Helper()
	return newUncordonExecutorWith(t, fails, gate.Policy{}, nil)
}

// newUncordonExecutorWith is newUncordonExecutor with a policy and a random source.
func newUncordonExecutorWith(t *testing.T, fails int, policy gate.Policy, draw func() float64) (*Executor, *flakyNode, *fakeClock, string, context.Context) {
	t.Helper()
	fake, _ := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	lib := nvml.New(fake.Interface(), nvml.Options{})
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	node := &flakyNode{LocalNode: &LocalNode{Path: filepath.Join(dir, "cordon.json")}, clock: clock, fails: fails}
	// A bound on the test, not on the executor: an unbounded retry would run into it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	j, rep, err := OpenJournal(filepath.Join(dir, "j"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	x, err := NewExecutor(ctx, j, rep, gate.State{Policy: policy}, Deps{MIG: lib, Node: node, Smoke: okSmoker{}, Now: clock.Now, Sleep: clock.Sleep, Rand: draw})
	if err != nil {
		t.Fatal(err)
	}
	to, _ := gpu.ParseLayout("7g.80gb@0")
	if err := x.Submit(ctx, gate.Desired{GPU: fake.UUIDs()[0], Board: fake.Board().Name, Layout: to, Current: gpu.Layout{}}); err != nil {
		t.Fatalf("submit: %v (after %d uncordon attempts)", err, len(node.calls))
	}
	return x, node, clock, dir, ctx
}

var backoffs = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}

// checkSpacing asserts the uncordon calls came the backoffs apart.
func checkSpacing(t *testing.T, calls []time.Time, want []time.Duration) {
	t.Helper()
	for i := 1; i < len(calls); i++ {
		if got := calls[i].Sub(calls[i-1]); i-1 >= len(want) || got != want[i-1] {
			t.Fatalf("uncordon %d came %s after the previous one; want the backoffs %v", i+1, got, want)
		}
	}
}

// An uncordon that always fails is tried MaxUncordonAttempts times, 1s, 2s, 4s … 30s apart; then
// the change fails with the node cordoned and the count and last error on record, journaled.
// An operator's reset tries again as many times and answers (still cordoned); once the node can be
// written, a reset uncordons it.
func TestUncordonAlwaysFailingGivesUp(t *testing.T) {
	x, node, clock, dir, ctx := newUncordonExecutor(t, -1)
	if len(node.calls) != gate.MaxUncordonAttempts || !slices.Equal(clock.waits, backoffs) {
		t.Fatalf("%d uncordon attempts, waits %v; want %d attempts, waits %v", len(node.calls), clock.waits, gate.MaxUncordonAttempts, backoffs)
	}
	checkSpacing(t, node.calls, backoffs)
	st := x.State()
	if st.Phase() != gate.PhaseFailed || !st.Cordoned || st.Pending != nil || st.UncordonFailures != 8 ||
		!strings.Contains(st.CordonReason, "uncordon failed 8 times") || !strings.Contains(st.CordonReason, "no space left on device") {
		t.Fatalf("after the attempts: phase %s cordoned %t pending %v failures %d reason %q", st.Phase(), st.Cordoned, st.Pending, st.UncordonFailures, st.CordonReason)
	}
	if c, _ := node.Read(); !c.Cordoned || c.Reason != st.CordonReason {
		t.Fatalf("cordon file %+v, want cordoned with %q", c, st.CordonReason)
	}
	rep := readJournal(t, filepath.Join(dir, "j"))
	if rep.Phase() != gate.PhaseFailed || rep.UncordonFailures != 8 || rep.Counts[gate.ReasonUncordonGaveUp] != 1 {
		t.Fatalf("journal ends in phase %s with %d failures, %v", rep.Phase(), rep.UncordonFailures, rep.Counts)
	}
	// A reset is answered, bounded: the node stays cordoned.
	node.calls, clock.waits = nil, nil
	if err := x.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if st := x.State(); len(node.calls) != gate.MaxUncordonAttempts || st.Phase() != gate.PhaseFailed || !st.Cordoned {
		t.Fatalf("reset: %d attempts, phase %s cordoned %t", len(node.calls), st.Phase(), st.Cordoned)
	}
	node.fails = 0
	if err := x.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if st, c := x.State(), must(node.Read()); st.Phase() != gate.PhaseIdle || st.Cordoned || st.UncordonFailures != 0 || c.Cordoned {
		t.Fatalf("reset with a working node: phase %s cordoned %t failures %d file %+v", st.Phase(), st.Cordoned, st.UncordonFailures, c)
	}
}

// An uncordon that fails twice is tried a third time, 1s then 2s later, and the change ends idle.
func TestUncordonFailsTwiceThenSucceeds(t *testing.T) {
	x, node, clock, _, _ := newUncordonExecutor(t, 2)
	if len(node.calls) != 3 || !slices.Equal(clock.waits, backoffs[:2]) {
		t.Fatalf("%d uncordon attempts, waits %v; want 3, %v", len(node.calls), clock.waits, backoffs[:2])
	}
	checkSpacing(t, node.calls, backoffs)
	st := x.State()
	if st.Phase() != gate.PhaseIdle || st.Cordoned || st.UncordonFailures != 0 || st.Counts[gate.ReasonUncordonFailed] != 2 {
		t.Fatalf("phase %s cordoned %t failures %d counts %v", st.Phase(), st.Cordoned, st.UncordonFailures, st.Counts)
	}
	if c, _ := node.Read(); c.Cordoned {
		t.Fatalf("node left cordoned: %+v", c)
	}
}

// During a backoff the executor holds no lock: State answers, /healthz (Agent.Healthy) says why
// the node is still cordoned, and a tick returns at once, leaving the retry to the waiting call.
func TestUncordonBackoffLeavesExecutorResponsive(t *testing.T) {
	fake, _ := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	lib := nvml.New(fake.Interface(), nvml.Options{})
	dir := t.TempDir()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	node := &flakyNode{LocalNode: &LocalNode{Path: filepath.Join(dir, "cordon.json")}, clock: clock, fails: 1}
	waiting, release := make(chan struct{}), make(chan struct{})
	sleep := func(ctx context.Context, d time.Duration) error {
		close(waiting)
		<-release
		return clock.Sleep(ctx, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j, rep, _ := OpenJournal(filepath.Join(dir, "j"))
	defer j.Close()
	x, err := NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: lib, Node: node, Smoke: okSmoker{}, Now: clock.Now, Sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	to, _ := gpu.ParseLayout("7g.80gb@0")
	done := make(chan error, 1)
	go func() {
		done <- x.Submit(ctx, gate.Desired{GPU: fake.UUIDs()[0], Board: fake.Board().Name, Layout: to, Current: gpu.Layout{}})
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("submit returned (%v) without waiting before the retry; %d uncordon attempts", err, len(node.calls))
	}
	answered := make(chan gate.State, 1)
	health := make(chan error, 1)
	go func() {
		_ = x.Tick(ctx)
		health <- (&Agent{Exec: x, lastPoll: clock.Now()}).Healthy()
		answered <- x.State()
	}()
	select {
	case st := <-answered:
		if st.Phase() != gate.PhaseUncordon || st.UncordonFailures != 1 || st.Pending == nil || st.Pending.NotBefore.IsZero() {
			t.Fatalf("during the backoff: phase %s failures %d pending %+v", st.Phase(), st.UncordonFailures, st.Pending)
		}
		if err := <-health; err == nil || !strings.Contains(err.Error(), "uncordon failed 1 of 8 attempts") || !strings.Contains(err.Error(), "no space left") {
			t.Fatalf("healthz during the backoff: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("State and Tick blocked during the backoff")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := x.State(); st.Phase() != gate.PhaseIdle || len(node.calls) != 2 {
		t.Fatalf("phase %s after %d attempts", st.Phase(), len(node.calls))
	}
}

func readJournal(t *testing.T, path string) gate.State {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, _, err := ReadJournal(f)
	if err != nil || rep.Last == nil {
		t.Fatalf("journal: %v", err)
	}
	return *rep.Last
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// With a policy of its own (5 attempts, waits up to 4s, half of each random) and the executor's
// seeded random source, an uncordon that always fails is tried 5 times; each wait is the one the
// gate computes from the draw the executor made for that failure, inside D·(1−0.5)..D, and
// together they are not the fixed schedule; two sources seeded apart wait differently. The failure
// reason and /healthz-facing state count 5 attempts, not 8.
func TestUncordonJitteredBackoff(t *testing.T) {
	policy := gate.Policy{Uncordon: gate.UncordonPolicy{Attempts: 5, MaxDelay: 4 * time.Second, Jitter: 0.5}}
	run := func(seed uint64) []time.Duration {
		src := rand.New(rand.NewPCG(seed, 7))
		var draws []float64
		x, node, clock, _, _ := newUncordonExecutorWith(t, -1, policy, func() float64 {
			d := src.Float64()
			draws = append(draws, d)
			return d
		})
		st := x.State()
		if len(node.calls) != 5 || st.Phase() != gate.PhaseFailed || st.UncordonFailures != 5 ||
			!strings.Contains(st.CordonReason, "uncordon failed 5 times") {
			t.Fatalf("seed %d: %d attempts, phase %s, failures %d, reason %q; want 5 attempts, failed", seed,
				len(node.calls), st.Phase(), st.UncordonFailures, st.CordonReason)
		}
		if len(clock.waits) != 4 || len(draws) != 5 {
			t.Fatalf("seed %d: waits %v, draws %v; want 4 waits and a draw per failure", seed, clock.waits, draws)
		}
		fixed := true
		for k, w := range clock.waits {
			full := min(time.Second<<k, 4*time.Second)
			if want := policy.Uncordon.Delay(k+1, draws[k]); w != want || w > full || w < full/2 {
				t.Errorf("seed %d: wait %d is %s, want %s (draw %v, within %s..%s)", seed, k+1, w, want, draws[k], full/2, full)
			}
			fixed = fixed && w == full
		}
		if fixed {
			t.Errorf("seed %d: waits %v are the fixed schedule: no jitter", seed, clock.waits)
		}
		checkSpacing(t, node.calls, clock.waits)
		return clock.waits
	}
	if a, b := run(1), run(2); slices.Equal(a, b) {
		t.Errorf("two sources, one schedule: %v", a)
	}
}
