package plan

import (
	"context"
	"testing"

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
