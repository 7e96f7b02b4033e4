package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestBoardFillServesOnFewerGPUs plans testdata/board-fill-100.yaml (testdata/review7's
// genscale.py 100 100 3 fixed: four boards of 24–26 pool GPUs, the B200 the cheapest board for
// most tenants and too small for their load). The limited choice, its tenants leaving the full
// B200 one at a time, served the 99 tenants it can serve on 43 GPUs; with each tenant kept to
// the board of a greedy fill (fillBoards: the B200 filled to 90 % of its pool GPUs by its
// cheapest tenants, the rest on their cheapest other board with room) the same 99 are served on
// 42. Without the fill plans the test fails.
func TestBoardFillServesOnFewerGPUs(t *testing.T) {
	plan := func(fills []struct{ fill, room float64 }) *v1.Plan {
		old := boardFills
		boardFills = fills
		defer func() { boardFills = old }()
		pool := loadPool(t, "testdata/board-fill-100.yaml")
		pl, err := Build(context.Background(), pool, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatal(err)
		}
		return pl
	}
	served := func(pl *v1.Plan) []string {
		var s []string
		for _, tn := range pl.Tenants {
			if !tn.Infeasible {
				s = append(s, tn.Name)
			}
		}
		return s
	}
	before, after := plan(nil), plan(boardFills)
	t.Logf("GPUs used %d, before the fill plans %d; served %d, %d", after.Summary.GPUsUsed, before.Summary.GPUsUsed, len(served(after)), len(served(before)))
	if !slices.Equal(served(after), served(before)) {
		t.Errorf("served %v, before the fill plans %v", served(after), served(before))
	}
	if after.Summary.GPUsUsed > 42 || after.Summary.GPUsUsed >= before.Summary.GPUsUsed {
		t.Errorf("%d GPUs used (before the fill plans %d), want at most 42 and fewer", after.Summary.GPUsUsed, before.Summary.GPUsUsed)
	}
	// A tenant kept off its cheaper board says why.
	said := false
	for _, tn := range after.Tenants {
		for _, r := range tn.Reasons {
			said = said || strings.Contains(r.Message, "the choice kept that board's tenants within 90 %")
		}
	}
	if !said {
		t.Error("no tenant's reason says its cheaper board was kept to 90 % of its pool GPUs")
	}
}
