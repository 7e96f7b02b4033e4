package plan

import (
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Review 13's n1 pool runs on two RTX PRO 5000s, whose BF16 and FP8 TFLOPS are the catalog's
// estimates (derived from sparse FP4): the tenant placed there (t1) carries an EstimatedFigures
// reason, after its other reasons, naming the board and both figures; t0, infeasible with no
// placement, does not. The same pool on H100s, whose figures are table values, has none.
func TestEstimatedFiguresReason(t *testing.T) {
	pool := loadPool(t, "../../testdata/review13/n1-rtx-pro-5000-unknown-compute.yaml")
	pl := buildWith(t, pool, Options{ConfirmRequests: -1})
	for _, tn := range pl.Tenants {
		r, ok := tn.Reason(v1.ReasonEstimatedFigures)
		switch {
		case len(tn.Replicas) == 0 && ok:
			t.Errorf("%s has no placement but an EstimatedFigures reason: %s", tn.Name, r.Message)
		case len(tn.Replicas) > 0 && !ok:
			t.Errorf("%s runs on RTX PRO 5000s but has no EstimatedFigures reason: %v", tn.Name, tn.Reasons)
		case ok:
			for _, want := range []string{"RTX-PRO-5000-Blackwell-48GB", "BF16 TFLOPS (258)", "FP8 TFLOPS (516)"} {
				if !strings.Contains(r.Message, want) {
					t.Errorf("%s: EstimatedFigures reason %q lacks %q", tn.Name, r.Message, want)
				}
			}
			if last := tn.Reasons[len(tn.Reasons)-1]; last.Code != v1.ReasonEstimatedFigures {
				t.Errorf("%s: EstimatedFigures is not the last reason: %v", tn.Name, tn.Reasons)
			}
		}
	}
	if _, ok := pl.Tenants[1].Reason(v1.ReasonEstimatedFigures); pl.Tenants[1].Name != "t1" || !ok {
		t.Errorf("t1 is not flagged: %+v", pl.Tenants[1])
	}

	pool = loadPool(t, "../../testdata/review13/n1-rtx-pro-5000-unknown-compute.yaml")
	pool.Fleet.Nodes[0].GPUs[0].Board = "H100-SXM5-80GB"
	pl = buildWith(t, pool, Options{ConfirmRequests: -1})
	for _, tn := range pl.Tenants {
		if r, ok := tn.Reason(v1.ReasonEstimatedFigures); ok {
			t.Errorf("%s on H100s has an EstimatedFigures reason: %s", tn.Name, r.Message)
		}
	}
}

// markEstimated on a hand-made plan: a tenant on a GB200 (estimated SM count) and an H100 is
// flagged for the GB200 alone; a measured-profile tenant on an RTX PRO 4500 is not (its table,
// not the catalog's figures, gives its predictions); an adapter tenant is flagged through its
// shared engine's GPU; a stale reason on an H100 tenant (a kept plan's) is dropped; and a second
// pass changes nothing.
func TestMarkEstimated(t *testing.T) {
	ref := func(i int) v1.GPURef { return v1.GPURef{Node: "n", Index: i} }
	stale := v1.NewReason(v1.ReasonEstimatedFigures, "old")
	pl := &v1.Plan{
		GPUs: []v1.PlanGPU{
			{Node: "n", Index: 0, Board: "GB200-186GB"},
			{Node: "n", Index: 1, Board: "H100-SXM5-80GB"},
			{Node: "n", Index: 2, Board: "RTX-PRO-4500-Blackwell-32GB"},
			{Node: "n", Index: 3, Board: "GB300-278GB", LoRAEngine: "e0"},
		},
		LoRAEngines: []v1.PlanLoRAEngine{{Name: "e0", GPU: ref(3)}},
		Tenants: []v1.PlanTenant{
			{Name: "mixed", Replicas: []v1.ReplicaRef{{GPU: ref(1)}, {GPU: ref(0)}, {Index: 1, GPU: ref(0)}},
				Reasons: []v1.Reason{{Code: v1.ReasonComputeBound}}},
			{Name: "h100", Replicas: []v1.ReplicaRef{{GPU: ref(1)}}, Reasons: []v1.Reason{stale}},
			{Name: "measured", Replicas: []v1.ReplicaRef{{GPU: ref(2)}}, Reasons: []v1.Reason{{Code: v1.ReasonMeasuredProfile}}},
			{Name: "adapter", LoRAEngines: []string{"e0"}, Reasons: []v1.Reason{{Code: v1.ReasonLoRAEngine}}},
		},
	}
	markEstimated(pl)
	want := map[string]string{
		"mixed":   "predictions rest on GB200-186GB's SM count (152): the catalog's estimate, not an NVIDIA table value; check them on hardware, or give the tenant a measured profile",
		"adapter": "predictions rest on GB300-278GB's SM count (152): the catalog's estimate, not an NVIDIA table value; check them on hardware, or give the tenant a measured profile",
	}
	check := func(pass int) {
		for _, tn := range pl.Tenants {
			n := 0
			var got string
			for _, r := range tn.Reasons {
				if r.Code == v1.ReasonEstimatedFigures {
					n++
					got = r.Message
				}
			}
			if got != want[tn.Name] || n > 1 {
				t.Errorf("pass %d: %s: %d EstimatedFigures reason(s), message %q, want %q", pass, tn.Name, n, got, want[tn.Name])
			}
		}
		if pl.Tenants[1].Reasons != nil {
			t.Errorf("pass %d: h100's reasons %v, want none (the stale one dropped)", pass, pl.Tenants[1].Reasons)
		}
		if pl.Tenants[0].Reasons[0].Code != v1.ReasonComputeBound {
			t.Errorf("pass %d: mixed's first reason is %v", pass, pl.Tenants[0].Reasons[0])
		}
	}
	check(1)
	markEstimated(pl)
	check(2)
}
