package plan

import (
	"fmt"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// bigFixedShort is testdata/confirm-fixed-short.yaml's t00033 (short-150-on-60's, a count of 2
// fixed by the pool, which the tests' simulator t00033Short finds short) among n tenants of the synthetic pool's
// generator: a pool above confirmFullTenants.
func bigFixedShort(t *testing.T, n int) *v1.Pool {
	t.Helper()
	pool := synthPool(n - 1)
	one := loadPool(t, "testdata/confirm-fixed-short.yaml")
	pool.Fleet.Nodes = append(pool.Fleet.Nodes, one.Fleet.Nodes...)
	pool.Tenants = append(pool.Tenants, one.Tenants...)
	return pool
}

// TestConfirmLargePoolJudgesAtRisk: in a pool of more than confirmFullTenants tenants (ADR
// 0086) the pool-wide runs give t00033 too few requests to judge it, and its sharing component,
// that of a tenant at risk (a fixed count, long prompts), is simulated on its own: it is found
// short and reported SLOUnmet at the pool's count, where before the pool was not simulated and
// the model alone called it served.
func TestConfirmLargePoolJudgesAtRisk(t *testing.T) {
	n := confirmFullTenants + 1
	pool := bigFixedShort(t, n)
	off := buildWith(t, pool, Options{Simulate: simRun, ConfirmRequests: -1})
	if pt := planTenantOf(t, off, "t00033"); pt.Infeasible || len(pt.Replicas) != 2 {
		t.Fatalf("without the runs t00033 is not served at its 2 replicas: %+v", pt)
	}
	// a budget of 15,000 requests a run gives t00033 about 1,100 requests in the pool-wide runs
	pl := buildWith(t, pool, Options{Simulate: t00033Short, ConfirmRequests: 15_000})
	pt := planTenantOf(t, pl, "t00033")
	if !pt.Infeasible || len(pt.Reasons) == 0 || pt.Reasons[0].Code != v1.ReasonSLOUnmet ||
		!strings.Contains(pt.Reasons[0].Message, "the pool fixes its count at 2") {
		t.Fatalf("%d tenants: t00033 is not reported short at its fixed count: %+v", n, pt)
	}
	if r := simReasonOf(pl, "t00033"); !strings.Contains(r, "its sharing component of the plan") {
		t.Errorf("t00033's Simulated reason %q does not name its component's runs", r)
	}
	// every tenant the model sized says what the runs did with it
	var unjudged int
	for _, pt := range pl.Tenants {
		if pt.Infeasible && len(pt.Replicas) == 0 {
			continue
		}
		r := simReasonOf(pl, pt.Name)
		switch {
		case r == "":
			t.Errorf("%s has no Simulated reason", pt.Name)
		case strings.HasPrefix(r, "not judged") && !strings.Contains(r, fmt.Sprintf("more than %d tenants", confirmFullTenants)) &&
			!strings.Contains(r, "were longer than") && !strings.Contains(r, "runs of its sharing component") &&
			!strings.Contains(r, "went to cheaper components first"):
			t.Errorf("%s: %q does not say why its component was not simulated", pt.Name, r)
		case strings.HasPrefix(r, "not judged"):
			unjudged++
		}
	}
	t.Logf("%d tenants, %d simulated but not judged", len(pl.Tenants), unjudged)
}

// TestConfirmLargePoolKept: the plan in force of a pool above confirmFullTenants, held by a move
// budget of 0, is confirmed with the same at-risk rule on the candidates it runs (ADR 0086);
// every tenant it runs that the model sized carries a Simulated reason.
func TestConfirmLargePoolKept(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("simulates a pool of 65 tenants twice: 5-12 s")
	}
	pool := bigFixedShort(t, confirmFullTenants+1)
	o := Options{Simulate: simRun, ConfirmRequests: 15_000}
	first := buildWith(t, pool, o)
	zero := 0
	o.Current, o.MaxMoves = first, &zero
	pl := buildWith(t, pool, o)
	for _, pt := range pl.Tenants {
		if len(pt.Replicas) > 0 && pt.Name != "t00033" && simReasonOf(pl, pt.Name) == "" {
			t.Errorf("%s runs %d replica(s) with no Simulated reason", pt.Name, len(pt.Replicas))
		}
	}
}

// TestConfirmLargePoolReachesUnreached: in short-150-on-60 (150 tenants) the component runs'
// share of the budget reached the boards' components of 22 tenants at risk and left 17 others,
// t00031 (0.1 req/s against the 0.104 its replica carries by the model) among them, served
// unjudged; t00031 then fell below 99 % in 4 of 20 runs of 2,000 requests of its board's
// component. Their components (the board's where it costs at most 4 times the MIG instance
// alone, else the instance) now run in short runs of a share of the budget of their own (ADR
// 0092), which reach most of them; some judge tenants on their instances alone. Since the
// energy-class clock (ADR 0090) and the capped slot (ADR 0091) moved the plan, 9 tenants at risk
// were left unreached with those runs and 15 without them; 3 before ADR 0097, which moved the
// plan again (a long prompt's TPOT bounded by the later prompts its slots admit: 77 tenants
// served where 73 were, on 57 GPUs where 56), and 12 since.
func TestConfirmLargePoolReachesUnreached(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("plans a pool of 150 tenants with simulation: about 30 s")
	}
	pl := buildWith(t, loadPool(t, "testdata/short-150-on-60.yaml"), Options{Simulate: simRun})
	if r := simReasonOf(pl, "t00031"); strings.Contains(r, confirmUnreached) {
		t.Errorf("t00031 is left unreached: %q", r)
	}
	var unreached, judged int
	for _, pt := range pl.Tenants {
		switch r := simReasonOf(pl, pt.Name); {
		case strings.Contains(r, confirmUnreached):
			unreached++
		case strings.Contains(r, "without its board's other MIG instances") && !strings.HasPrefix(r, "not judged"):
			judged++
		}
	}
	if unreached > 13 || judged == 0 {
		t.Errorf("%d tenants at risk left unreached (at most 13), %d judged on their MIG instances alone", unreached, judged)
	}
	t.Logf("%d tenants at risk left unreached, %d judged on their MIG instances alone", unreached, judged)
}
