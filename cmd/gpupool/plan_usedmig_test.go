package main

import (
	"encoding/json"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestPlanUsedMIGPassSeatsItsOwnAgain plans testdata/used-mig-reseat-400.yaml (testdata/review7's
// genscale.py 400 200 8 fixed) through the CLI. Settle's rescue serves tenants there through its
// pass onto used GPUs' MIG room, and the steps after it (the step down and up of fixed counts,
// the release) seat those tenants again in their repackings: 345 tenants served on 190 GPUs
// (333 before the step down's trials let the pass seat the tenants short before them, ADR
// 0123); seating none of them again, fewer.
func TestPlanUsedMIGPassSeatsItsOwnAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 400 tenants on 200 GPUs")
	}
	pl, served := planServed(t, "testdata/used-mig-reseat-400.yaml")
	if served != 345 || pl.Summary.GPUsUsed != 190 {
		t.Errorf("%d tenants served on %d GPUs, want 345 on 190", served, pl.Summary.GPUsUsed)
	}
}

// TestPlanUsedMIGPassSeatsShortInStepTrials plans testdata/used-mig-trial-400.yaml
// (testdata/review7's genscale.py 400 200 3 fixed) through the CLI. A trial of the step down of
// fixed counts lets the pass onto used GPUs' MIG room seat the tenants short before it
// (t00346), not counted as the step's gain, and they stay seated after the kept step, so a
// later trial (t00077 onto mig 2g.35gb of H200, which misses its SLO) gains nothing in their
// room: 382 tenants served on 190 GPUs; with the pass seating only settle's own in the trials,
// t00077 steps down for t00252 and 381 (ADR 0123).
func TestPlanUsedMIGPassSeatsShortInStepTrials(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 400 tenants on 200 GPUs")
	}
	pl, served := planServed(t, "testdata/used-mig-trial-400.yaml")
	stepped := false
	for _, tn := range pl.Tenants {
		if tn.Name == "t00077" && tn.Infeasible {
			stepped = true
		}
	}
	if served != 382 || pl.Summary.GPUsUsed != 190 || stepped {
		t.Errorf("%d tenants served on %d GPUs (t00077 short: %v), want 382 on 190, t00077 served", served, pl.Summary.GPUsUsed, stepped)
	}
}

// TestPlanUsedMIGTrialSeatsAreNoGain plans testdata/used-mig-trial-200.yaml (testdata/review7's
// genscale.py 200 100 9 fixed) through the CLI. The tenants the pass seats anew in a step-down
// trial do not count towards the step's gain, so a fixed count does not step down for room the
// pass found without it: 196 tenants served on 95 GPUs; counted, 194 (ADR 0123).
func TestPlanUsedMIGTrialSeatsAreNoGain(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 200 tenants on 100 GPUs")
	}
	pl, served := planServed(t, "testdata/used-mig-trial-200.yaml")
	if served != 196 || pl.Summary.GPUsUsed != 95 {
		t.Errorf("%d tenants served on %d GPUs, want 196 on 95", served, pl.Summary.GPUsUsed)
	}
}

// TestPlanUsedMIGSeatsShortAfterRelease plans testdata/used-mig-release-200.yaml
// (testdata/review7's genscale.py 200 100 6 fixed) through the CLI. After the release of short
// tenants the pool is packed once more with the pass onto used GPUs' MIG room free to seat the
// tenants still short: t00147 finds room there, so 196 tenants are served on 95 GPUs; without
// that packing it stays short (195 on 95; ADR 0124).
func TestPlanUsedMIGSeatsShortAfterRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 200 tenants on 100 GPUs")
	}
	pl, served := planServed(t, "testdata/used-mig-release-200.yaml")
	short := true
	for _, tn := range pl.Tenants {
		if tn.Name == "t00147" && !tn.Infeasible {
			short = false
		}
	}
	if served != 196 || pl.Summary.GPUsUsed != 95 || short {
		t.Errorf("%d tenants served on %d GPUs (t00147 short: %v), want 196 on 95, t00147 served", served, pl.Summary.GPUsUsed, short)
	}
}

// planServed plans pool through the CLI, at --sim-requests -1 as large pools are planned, and
// returns the plan and how many of its tenants are not infeasible.
func planServed(t *testing.T, pool string) (v1.Plan, int) {
	t.Helper()
	out, errOut, code := runCmd(t, "plan", pool, "--sim-requests", "-1", "-o", "json")
	if code != 0 && code != 2 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var pl v1.Plan
	if err := json.Unmarshal([]byte(out), &pl); err != nil {
		t.Fatal(err)
	}
	served := 0
	for _, tn := range pl.Tenants {
		if !tn.Infeasible {
			served++
		}
	}
	return pl, served
}
