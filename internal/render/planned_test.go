package render

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// renderProblems plans pool and renders the plan; it returns the renderer's problems.
func renderProblems(t *testing.T, pool *v1.Pool) []Problem {
	t.Helper()
	pl, err := plan.Build(context.Background(), pool, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Artifacts(pl, pool)
	var pe *ProblemsError
	switch {
	case errors.As(err, &pe):
		return pe.Problems
	case err != nil:
		t.Fatal(err)
	}
	return nil
}

// Every plan the planner produces can be served by the device plugin as planned: the examples'
// pools and synthetic pools of 1–60 tenants on 16–47 GPUs (mixed tiers, ten trust groups; every
// other pool with varied lengths, SLOs and concurrency) render
// without problems, so `plan --out` does not exit 2 for the artifacts' sake: no node needs two
// sharing settings for one resource, time-slicing and MPS together, or shared instances of one
// profile holding tenants of different trust paths.
func TestPlannedPoolsRenderClean(t *testing.T) {
	for _, f := range []string{"h100x8-mixed.yaml", "h100-7b-exclusive.yaml", "h100-7b-sharing.yaml", "h100-7b-sharing-4.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", f))
		if err != nil {
			t.Fatal(err)
		}
		pool, err := v1.LoadPool(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range renderProblems(t, pool) {
			t.Errorf("%s: %s", f, p)
		}
	}
	n := 60
	if testing.Short() {
		n = 15
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range n {
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 1 + rng.IntN(60), GPUs: 16 + rng.IntN(32), Varied: i%2 == 1}, rng)
		for _, p := range renderProblems(t, pool) {
			t.Errorf("synthetic pool %d (%d tenants): %s", i, len(pool.Tenants), p)
		}
	}
}
