package plan

import (
	"bytes"
	"os"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// baselineOf is the baseline called name in pl.
func baselineOf(t *testing.T, pl *v1.Plan, name string) v1.Baseline {
	t.Helper()
	for _, b := range pl.Summary.Baselines {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no baseline %q in %v", name, pl.Summary.Baselines)
	return v1.Baseline{}
}

// wholeGPUs is the whole GPUs that run tenant name's replicas in pl (exclusive GPUs; each GPU of
// a tensor-parallel replica) and whether it has replicas on other slices.
func wholeGPUs(pl *v1.Plan, name string) (n int, other bool) {
	for _, g := range pl.GPUs {
		if g.Mode != v1.ModeExclusive && slices.ContainsFunc(g.Instances, func(in v1.PlanInstance) bool {
			return slices.ContainsFunc(in.Replicas, func(r v1.PlanReplica) bool { return r.Tenant == name })
		}) {
			other = true
		}
		if slices.ContainsFunc(g.Replicas, func(r v1.PlanReplica) bool { return r.Tenant == name }) {
			if g.Mode == v1.ModeExclusive {
				n++
			} else {
				other = true
			}
		}
	}
	return n, other
}

// Review 12's s7: the queueing model sizes docs-qa (diurnal, judged at its peak, ADR 0071) at 2
// replicas on whole H100s, the plan's runs find 2 short and the plan runs 3. The exclusive
// baseline of the same tenant is then at least the 3 whole GPUs the plan needed, not the model's
// 2 that the runs found short, and says it was confirmed; rule-of-thumb, which gives the 14B
// model whole GPUs, follows it; mig-first-fit, whose MIG count the runs never judged, stays the
// model's and says so.
func TestBaselineTakesTheConfirmedExclusiveCount(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates a pool 6 times")
	}
	pool := loadPool(t, "../../testdata/review12/s7-h100-14b-longprompt-diurnal.yaml")
	off := buildWith(t, pool, Options{})
	on := buildWith(t, pool, confirmed)
	need, other := wholeGPUs(on, "docs-qa")
	if other || need == 0 {
		t.Fatalf("docs-qa is not planned on whole GPUs alone (%d whole GPUs): the test checks nothing", need)
	}
	modelEx := baselineOf(t, off, BaselineExclusive)
	if modelEx.GPUs >= need {
		t.Fatalf("the model's exclusive baseline is %d, the confirmed plan needs %d whole GPUs: the confirmation raised nothing, the test checks nothing", modelEx.GPUs, need)
	}
	ex := baselineOf(t, on, BaselineExclusive)
	t.Logf("docs-qa: %d whole GPUs planned; exclusive baseline %d by the model alone, %+v confirmed", need, modelEx.GPUs, ex)
	if ex.GPUs < need {
		t.Errorf("exclusive baseline %d is below the %d whole GPUs the confirmed plan needs for the same tenant", ex.GPUs, need)
	}
	if !ex.Confirmed {
		t.Errorf("exclusive baseline %d: not marked confirmed, though the runs passed docs-qa on %d whole H100s", ex.GPUs, need)
	}
	if rt := baselineOf(t, on, BaselineRuleOfThumb); rt.GPUs < need || !rt.Confirmed {
		t.Errorf("rule-of-thumb gives docs-qa whole GPUs: want at least %d, confirmed; got %+v", need, rt)
	}
	if ff := baselineOf(t, on, BaselineMIGFirstFit); ff.Confirmed || ff.GPUs != baselineOf(t, off, BaselineMIGFirstFit).GPUs {
		t.Errorf("mig-first-fit: the runs never judged docs-qa on MIG, so want the model's %d, not confirmed; got %+v", baselineOf(t, off, BaselineMIGFirstFit).GPUs, ff)
	}
	for _, b := range off.Summary.Baselines {
		if b.Confirmed {
			t.Errorf("plan without simulation: baseline %+v marked confirmed", b)
		}
	}
}

// Beside s7's docs-qa, on whole GPUs alone, a hard-isolated tenant the runs judge and pass at the model's count: the
// exclusive baseline changes by docs-qa's raise alone, the other tenant's count is the model's,
// and the baseline is confirmed since the runs passed both counts on whole GPUs.
func TestBaselineKeepsCountsTheConfirmationDidNotRaise(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("simulates a pool 6 times")
	}
	doc, err := os.ReadFile("../../testdata/review12/s7-h100-14b-longprompt-diurnal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Whole GPUs alone, so that steady's count is an exclusive one.
	doc = bytes.Replace(doc, []byte("policy: {burstPoolPercent: 0}"), []byte("policy: {burstPoolPercent: 0, allowedModes: [exclusive]}"), 1)
	doc = append(doc, `
- name: steady
  path: ops/steady
  isolation: hard
  model: {name: qwen2.5-0.5b, quantization: bf16}
  traffic: {rps: 20, inputTokens: 200, outputTokens: 50}
  slo: {ttftP99: 2s}
`...)
	pool, err := v1.LoadPool(doc)
	if err != nil {
		t.Fatal(err)
	}
	off := buildWith(t, pool, Options{})
	on := buildWith(t, pool, confirmed)
	qaOff, _ := wholeGPUs(off, "docs-qa")
	qaOn, _ := wholeGPUs(on, "docs-qa")
	stOff, _ := wholeGPUs(off, "steady")
	stOn, other := wholeGPUs(on, "steady")
	t.Logf("docs-qa %d → %d whole GPUs, steady %d → %d; %s; %s", qaOff, qaOn, stOff, stOn, simReasonOf(on, "docs-qa"), simReasonOf(on, "steady"))
	if qaOn <= qaOff {
		t.Fatalf("docs-qa not raised (%d → %d): the test checks nothing", qaOff, qaOn)
	}
	if other || stOn == 0 || stOn != stOff {
		t.Fatalf("steady: %d whole GPUs with the runs, %d without (other kinds: %v): want it on whole GPUs, not raised", stOn, stOff, other)
	}
	if r := simReasonOf(on, "steady"); r == "" || !confirmedState(on, "steady") {
		t.Fatalf("steady not judged by the runs: %q", r)
	}
	exOff, exOn := baselineOf(t, off, BaselineExclusive), baselineOf(t, on, BaselineExclusive)
	if exOn.GPUs-exOff.GPUs != qaOn-qaOff {
		t.Errorf("exclusive baseline %d → %d: want it to change by docs-qa's raise alone, %d", exOff.GPUs, exOn.GPUs, qaOn-qaOff)
	}
	if !exOn.Confirmed {
		t.Errorf("exclusive baseline %+v not confirmed, though the runs passed both tenants' counts on whole GPUs", exOn)
	}
}

// confirmedState reports whether tenant name's Simulated reason says its runs judged it (not
// "not judged").
func confirmedState(pl *v1.Plan, name string) bool {
	r := simReasonOf(pl, name)
	return r != "" && !(len(r) >= 10 && r[:10] == "not judged")
}
