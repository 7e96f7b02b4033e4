package gate

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"gpupool.dev/gpupool/internal/gpu"
)

// simDevice is a GPU whose creates may half-happen (a GPU instance without its compute instance)
// and whose ops may fail before or after taking effect.
type simDevice struct {
	board    *gpu.Board
	complete gpu.Layout
	partial  gpu.Layout
	cordoned bool
	ops      int // destroy and create calls
}

func (d *simDevice) observe() *Observation {
	return &Observation{Layout: slices.Clone(d.complete), Partial: slices.Clone(d.partial)}
}

func remove(l gpu.Layout, in gpu.Instance) (gpu.Layout, bool) {
	if i := slices.Index(l, in); i >= 0 {
		return slices.Delete(slices.Clone(l), i, i+1), true
	}
	return l, false
}

// do performs a; effect says how much of a create happens before a failure: 0 none, 1 the GPU
// instance only, 2 all of it.
func (d *simDevice) do(a Action, fail bool, effect int) (Event, error) {
	ev := Event{Kind: EvDone, ID: a.ID}
	switch a.Kind {
	case ActCordon:
		d.cordoned = true
	case ActUncordon:
		d.cordoned = false
	case ActObserve:
		ev.Observed = d.observe()
	case ActDestroy:
		d.ops++
		if fail && effect == 0 {
			break
		}
		var ok bool
		if d.complete, ok = remove(d.complete, a.Instance); !ok {
			if d.partial, ok = remove(d.partial, a.Instance); !ok {
				return ev, fmt.Errorf("destroy %s: no such instance in %q / partial %q", a.Instance, d.complete, d.partial)
			}
		}
	case ActCreate:
		d.ops++
		if !fail {
			effect = 2
		}
		next := append(append(slices.Clone(d.complete), d.partial...), a.Instance)
		if err := d.board.Validate(next); err != nil {
			return ev, fmt.Errorf("create %s on %q: %w", a.Instance, d.complete, err)
		}
		switch effect {
		case 1:
			d.partial = append(d.partial, a.Instance)
		case 2:
			d.complete = append(d.complete, a.Instance)
		}
	}
	if fail {
		ev = Event{Kind: EvFailed, ID: a.ID, Error: "injected"}
	}
	return ev, nil
}

// TestPropertyOldOrNew drives random changes between legal layouts with random failures (before
// or after an op takes effect, half-made creates) and random restarts: every run ends with the
// GPU in its old or its new layout, nothing partial left, and the node uncordoned, or cordoned
// in phase failed with the reason on record.
func TestPropertyOldOrNew(t *testing.T) {
	b, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		t.Fatal(err)
	}
	layouts, err := b.Enumerate(nil)
	if err != nil || len(layouts) < 10 {
		t.Fatalf("enumerate: %d layouts, %v", len(layouts), err)
	}
	rapid.Check(t, func(t *rapid.T) {
		from := layouts[rapid.IntRange(0, len(layouts)-1).Draw(t, "from")]
		to := layouts[rapid.IntRange(0, len(layouts)-1).Draw(t, "to")]
		failRate := rapid.IntRange(0, 30).Draw(t, "failPercent")
		dev := &simDevice{board: b, complete: slices.Clone(from)}
		s := State{Policy: Policy{Cooldown: time.Hour}}
		now := epoch
		s, acts := Step(s, Event{Kind: EvDesire, Desired: Desired{GPU: "G0", Board: b.Name, Layout: to, Current: from}}, now)
		for step := 0; len(acts) > 0; step++ {
			if step > 500 {
				t.Fatalf("no end after 500 steps; phase %s", s.Phase())
			}
			now = now.Add(time.Second)
			restart := rapid.IntRange(0, 99).Draw(t, "restart")
			if restart < 5 {
				s, acts = Step(s, Event{Kind: EvRecover}, now) // the executor died before acting
				continue
			}
			fail := acts[0].Kind != ActUncordon && acts[0].Kind != ActCordon && rapid.IntRange(0, 99).Draw(t, "fail") < failRate
			ev, err := dev.do(acts[0], fail, rapid.IntRange(0, 2).Draw(t, "effect"))
			if err != nil {
				t.Fatalf("gate issued an illegal op: %v", err)
			}
			if restart < 10 {
				s, acts = Step(s, Event{Kind: EvRecover}, now) // died after acting, before the answer was journaled
				continue
			}
			s, acts = Step(s, ev, now)
		}
		got := slices.Clone(dev.complete).Sorted()
		old, neu := slices.Clone(from).Sorted(), slices.Clone(to).Sorted()
		switch {
		case s.Phase() == PhaseFailed:
			if !s.Cordoned || s.CordonReason == "" || !dev.cordoned {
				t.Fatalf("failed change but node cordoned=%t reason=%q", s.Cordoned, s.CordonReason)
			}
		case s.Phase() != PhaseIdle:
			t.Fatalf("run stopped in phase %s with no action", s.Phase())
		case !slices.Equal(got, old) && !slices.Equal(got, neu):
			t.Fatalf("GPU ends at %q: neither old %q nor new %q", got, old, neu)
		case len(dev.partial) > 0:
			t.Fatalf("partial instances leaked: %q", dev.partial)
		case s.Cordoned || dev.cordoned:
			t.Fatalf("idle but cordoned (%q)", s.CordonReason)
		case failRate == 0 && !slices.Equal(got, neu):
			t.Fatalf("no failures injected but GPU ends at %q, want %q", got, neu)
		}
	})
}

// TestIncrementalSevenInstances counts the device ops of a change on a GPU with seven
// instances where two differ: two destroys and one create, nothing else touched.
func TestIncrementalSevenInstances(t *testing.T) {
	b, _ := gpu.Lookup("H100-SXM5-80GB")
	from, _ := gpu.ParseLayout("1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6")
	to, _ := gpu.ParseLayout("2g.20gb@0 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6")
	ops := Ops(b.Name, from, to, nil)
	// 1g@0 and 1g@1 are not in the target (2 destroys); 2g@0 is new (1 create); five untouched.
	want := []Op{{OpDestroy, from[0]}, {OpDestroy, from[1]}, {OpCreate, to[0]}}
	if !slices.Equal(ops, want) {
		t.Fatalf("ops = %v, want %v", ops, want)
	}
}

func TestStaleOutcomeIgnored(t *testing.T) {
	s, acts := Step(State{}, Event{Kind: EvDesire, Desired: Desired{GPU: "G0", Board: "H100-SXM5-80GB",
		Layout: gpu.Layout{{Profile: "7g.80gb", Start: 0}}}}, epoch)
	if len(acts) != 1 || acts[0].Kind != ActCordon {
		t.Fatalf("want a cordon, got %v", acts)
	}
	s2, acts2 := Step(s, Event{Kind: EvDone, ID: acts[0].ID + 7}, epoch)
	if len(acts2) != 0 || s2.Pending.ID != s.Pending.ID || s2.Cordoned {
		t.Fatalf("a stale outcome changed the state: %+v", s2)
	}
}

func BenchmarkStep(b *testing.B) {
	from, _ := gpu.ParseLayout("1g.10gb@0 1g.10gb@1 1g.10gb@2 1g.10gb@3 1g.10gb@4 1g.10gb@5 1g.10gb@6")
	to, _ := gpu.ParseLayout("3g.40gb@0 3g.40gb@4")
	for b.Loop() {
		dev := &simDevice{board: mustBoard(b), complete: slices.Clone(from)}
		s, acts := Step(State{}, Event{Kind: EvDesire, Desired: Desired{GPU: "G0", Board: "H100-SXM5-80GB", Layout: to, Current: from}}, epoch)
		for len(acts) > 0 {
			ev, _ := dev.do(acts[0], false, 2)
			s, acts = Step(s, ev, epoch)
		}
	}
}

func mustBoard(b *testing.B) *gpu.Board {
	bd, err := gpu.Lookup("H100-SXM5-80GB")
	if err != nil {
		b.Fatal(err)
	}
	return bd
}
