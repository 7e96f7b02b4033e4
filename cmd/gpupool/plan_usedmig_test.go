package main

import (
	"encoding/json"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestPlanUsedMIGPassSeatsItsOwnAgain plans testdata/used-mig-reseat-400.yaml (testdata/review7's
// genscale.py 400 200 8 fixed) through the CLI. Settle's rescue serves tenants there through its
// pass onto used GPUs' MIG room, and the steps after it (the step down and up of fixed counts,
// the release) seat those tenants again in their repackings: 333 tenants served on 190 GPUs;
// seating none of them again, 332 (ADR 0121).
func TestPlanUsedMIGPassSeatsItsOwnAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 400 tenants on 200 GPUs")
	}
	out, errOut, code := runCmd(t, "plan", "testdata/used-mig-reseat-400.yaml", "--sim-requests", "-1", "-o", "json")
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
	if served != 333 || pl.Summary.GPUsUsed != 190 {
		t.Errorf("%d tenants served on %d GPUs, want 333 on 190", served, pl.Summary.GPUsUsed)
	}
}
