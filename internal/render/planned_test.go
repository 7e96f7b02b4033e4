package render

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// renderProblems plans pool and renders the plan; it returns the renderer's problems.
func renderProblems(t *testing.T, pool *v1.Pool) []Problem {
	t.Helper()
	pl, err := plan.Build(pool, plan.Options{})
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

// The examples' pools plan and render without problems (so `plan --out` exits 0 on them), and on
// synthetic pools of 1–60 tenants no node needs two sharing settings for one resource or both
// time-slicing and MPS. Still open: on some synthetic pools shared MIG devices of one resource on
// a node hold tenants of different trust groups, which the device plugin cannot pair exactly;
// the test counts them.
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
	pairing := 0
	for i := range n {
		pool := plan.Synthetic(plan.SyntheticOptions{Tenants: 1 + rng.IntN(60), GPUs: 16 + rng.IntN(32)}, rng)
		bad := false
		for _, p := range renderProblems(t, pool) {
			if strings.Contains(p.Message, "trust groups together") {
				bad = true
				continue
			}
			t.Errorf("synthetic pool %d (%d tenants): %s", i, len(pool.Tenants), p)
		}
		if bad {
			pairing++
		}
	}
	t.Logf("%d of %d synthetic pools with trust groups mixed on one node's shared resource", pairing, n)
}
