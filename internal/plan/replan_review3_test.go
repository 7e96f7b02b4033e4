package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// review3 holds the pools of an outside review; r7 and r8 are one B200 node before and after its
// tenants' rates change (t-32b 3 to 1 req/s, t-14b 10 to 25, t-8b-c2 6 to 12).
const review3 = "../../cmd/gpupool/testdata/review3/"

// r7r8 is the plan of r7 and the pool of r8.
func r7r8(t *testing.T) (cur *v1.Plan, pool *v1.Pool) {
	t.Helper()
	return build(t, loadPool(t, review3+"r7-b200-dense.yaml")), loadPool(t, review3+"r8-b200-dense-v2.yaml")
}

// checkStops fails when a replica's or engine's stop is listed twice, or after the drain of its
// GPU (the drain ended it already).
func checkStops(t *testing.T, steps []Step) {
	t.Helper()
	drainedAt := map[v1.GPURef]int{}
	for _, s := range steps {
		if s.Kind == StepGPU && s.Drain {
			drainedAt[s.GPU] = s.Wave
		}
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if s.Kind != StepStop {
			continue
		}
		k := s.Tenant + s.LoRAEngine + " " + s.From
		if seen[k] {
			t.Errorf("stop of %s listed twice", k)
		}
		seen[k] = true
		if w, ok := drainedAt[s.GPU]; ok && s.Wave >= w {
			t.Errorf("stop of %s in wave %d, after the drain of %s in wave %d", k, s.Wave, s.GPU, w)
		}
	}
}

// Re-planning r8 against r7's plan drains b/2, b/3 and b/4, each of which ran a t-32b replica
// on 3g.90gb@4 that the new plan drops. Each of those stops is listed once, in the waves before
// its GPU's drain; before, all three came last, after the drains that had ended them.
func TestMigrationStopsBeforeDrainReview3(t *testing.T) {
	cur, pool := r7r8(t)
	pl, err := Build(context.Background(), pool, Options{Current: cur})
	if err != nil {
		t.Fatal(err)
	}
	steps := Migration(cur, pl, 1)
	stops := 0
	for _, s := range steps {
		if s.Kind == StepStop && s.Tenant == "t-32b" {
			stops++
		}
	}
	if stops == 0 {
		t.Fatalf("no t-32b stop: the test needs a re-plan that drops some\n%v", steps)
	}
	checkStops(t, steps)
	for _, mu := range []int{2, 3} {
		checkStops(t, Migration(cur, pl, mu))
	}
}

// t-8b-c2's replicas that the re-pack moves from 1g.23gb to 1g.45gb instances of the same GPUs
// (b/2, b/3, re-partitioned) are restarts in place after the drain, reconfigurations that do not
// count as moves; before, they were listed as moves (start the new beside the old) and counted
// against --max-moves.
func TestMigrationReslicesInPlaceReview3(t *testing.T) {
	cur, pool := r7r8(t)
	pl, err := Build(context.Background(), pool, Options{Current: cur, repackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	steps := Migration(cur, pl, 1)
	drained := map[v1.GPURef]bool{}
	for _, s := range steps {
		if s.Kind == StepGPU && s.Drain {
			drained[s.GPU] = true
		}
	}
	inPlace, moves := 0, 0
	for _, s := range steps {
		if s.Kind == StepGPU || s.From == "none" || s.To == "none" {
			continue
		}
		same := strings.Fields(s.From)[0] == strings.Fields(s.To)[0]
		if same != s.InPlace() {
			t.Errorf("%s %s %s -> %s: in place %v", s.Kind, s.Tenant, s.From, s.To, s.InPlace())
		}
		if same && drained[s.GPU] && s.Kind != StepRestart {
			t.Errorf("%s of %s from %s to %s on a drained GPU: want a restart in place", s.Kind, s.Tenant, s.From, s.To)
		}
		if same {
			inPlace++
		} else {
			moves++
		}
	}
	if inPlace == 0 {
		t.Fatalf("no replica stays on its GPU: the test needs a re-slice\n%v", steps)
	}
	if CountMoves(steps) != moves || Reconfigurations(steps) != inPlace {
		t.Errorf("CountMoves %d, Reconfigurations %d; want %d and %d", CountMoves(steps), Reconfigurations(steps), moves, inPlace)
	}
}

// With --max-moves 0 or 3 the r7→r8 re-plan used to fail ("the tenants the plan in force does
// not serve move 12 replicas by themselves"). t-14b and t-8b-c2 outgrew their replicas in force
// (t-8b-c2's ten 1g.23gb replicas carry about 6 req/s, it now has 12) and the plan in force
// leaves no GPU idle to start more; the re-pack moves 4 replicas. Now the best plan within the
// budget is returned: every tenant keeps what it runs, nothing moves or restarts, the two are
// short with a reason that says what serving them would take.
func TestMaxMovesHoldsShortReview3(t *testing.T) {
	cur, pool := r7r8(t)
	for _, budget := range []int{0, 3} {
		pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &budget})
		if err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		steps := Migration(cur, pl, 1)
		if m := CountMoves(steps); m > budget {
			t.Errorf("max-moves %d: %d moves", budget, m)
		}
		for _, tn := range pl.Tenants {
			if len(tn.Replicas) == 0 {
				t.Errorf("max-moves %d: %s runs nothing", budget, tn.Name)
			}
			last := tn.Reasons[len(tn.Reasons)-1]
			if last.Code != v1.ReasonMoveBudget || !strings.Contains(last.Message, fmt.Sprintf("max-moves %d", budget)) {
				t.Errorf("max-moves %d: %s's last reason %s: %s", budget, tn.Name, last.Code, last.Message)
			}
			if !tn.Infeasible {
				continue
			}
			if first := tn.Reasons[0]; first.Code != v1.ReasonNoCapacity || !strings.Contains(first.Message, "needs") || !strings.Contains(first.Message, "re-packing moves") {
				t.Errorf("max-moves %d: %s short, first reason %s: %s", budget, tn.Name, first.Code, first.Message)
			}
		}
		if got := shortNames(pl, &v1.Plan{Tenants: []v1.PlanTenant{{Name: "t-14b"}, {Name: "t-8b-c2"}, {Name: "t-72b"}, {Name: "t-32b"}, {Name: "t-mix"}}}); len(got) > 2 ||
			slices.ContainsFunc(got, func(n string) bool { return n != "t-14b" && n != "t-8b-c2" }) {
			t.Errorf("max-moves %d: short %v, want at most t-14b and t-8b-c2", budget, got)
		}
	}
}

// A tenant that nothing runs now and nothing can run (no slice meets a 1 ms TTFT) is left as the
// re-pack has it in the held plan, short for its own reason; the others are held as above.
func TestMaxMovesHoldsUnplannableReview3(t *testing.T) {
	cur, pool := r7r8(t)
	never := pool.Tenants[len(pool.Tenants)-1]
	never.Name, never.Path = "t-never", "a/f"
	ms := v1.Duration(time.Millisecond)
	never.SLO.TTFTP99, never.SLO.TPOTP99 = &ms, &ms
	pool.Tenants = append(slices.Clone(pool.Tenants), never)
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	tn, ok := planTenant(pl, "t-never")
	if !ok || !tn.Infeasible || len(tn.Replicas) > 0 || tn.Reasons[0].Code == v1.ReasonMoveBudget {
		t.Errorf("t-never: %+v", tn)
	}
	if m := CountMoves(Migration(cur, pl, 1)); m != 0 {
		t.Errorf("%d moves, want 0", m)
	}
}
