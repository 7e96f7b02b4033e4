package plan

import (
	"context"
	"testing"
)

// TestSpillByRatio plans testdata/review7's c-mixed pools (eight H100s, four A100 80GB, two A100
// 40GB and four H200s; 13 tenants, most cheapest on one board), whose first packing leaves units
// short, so that the choice runs again with each board held to a limit (boardCap). Spilling off
// a full board by least added cost per GPU-equivalent freed (spillOver) serves every tenant on
// 10 GPUs on the device-plugin path and 11 on DRA, where the local search alone, moving tenants
// off in pool order, took 11 and 12.
func TestSpillByRatio(t *testing.T) {
	for _, c := range []struct {
		file string
		want int
	}{{"c-mixed-pool.yaml", 10}, {"c-mixed-dra-pool.yaml", 11}} {
		pool := loadPool(t, "../../testdata/review7/"+c.file)
		pl, err := Build(context.Background(), pool, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range pl.Tenants {
			if tn.Infeasible {
				t.Errorf("%s: %s infeasible", c.file, tn.Name)
			}
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Errorf("%s: %v", c.file, err)
		}
		t.Logf("%s: %d GPUs used, bound %d", c.file, pl.Summary.GPUsUsed, pl.Summary.LowerBound)
		if pl.Summary.GPUsUsed > c.want {
			t.Errorf("%s: %d GPUs used, want at most %d", c.file, pl.Summary.GPUsUsed, c.want)
		}
	}
}
