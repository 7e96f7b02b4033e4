package plan

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// d0 → d1 (testdata/review7): t02, t07 and t11 leave, four rates halve and newcomer joins, whose
// one replica needs a mig 1g.20gb of an H100. The departures leave 1g.20gb instances empty on
// GPUs that keep running other tenants.
func loadD0D1(t *testing.T) (first *v1.Plan, pool *v1.Pool) {
	t.Helper()
	return loadReplan(t, "../../testdata/review7/d0-pool.yaml", "../../testdata/review7/d1-pool.yaml")
}

// loadReplan plans the pool in file before (the plan in force) and loads the pool in file after.
func loadReplan(t *testing.T, before, after string) (first *v1.Plan, pool *v1.Pool) {
	t.Helper()
	first, err := Build(context.Background(), loadPool(t, before), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return first, loadPool(t, after)
}

// usedStill counts the GPUs of pl that run a replica of a tenant of pool: those the plan in force
// keeps busy once the departed tenants stop.
func usedStill(pl *v1.Plan, pool *v1.Pool) int {
	in := map[string]bool{}
	for _, t := range pool.Tenants {
		in[t.Name] = true
	}
	n := 0
	for _, g := range pl.GPUs {
		busy := slices.ContainsFunc(g.Replicas, func(r v1.PlanReplica) bool { return in[r.Tenant] })
		for _, inst := range g.Instances {
			busy = busy || slices.ContainsFunc(inst.Replicas, func(r v1.PlanReplica) bool { return in[r.Tenant] })
		}
		if busy {
			n++
		}
	}
	return n
}

// With max-moves 0 (and 4, still short of the re-pack's moves) the plan in force is kept and
// newcomer starts in an instance the departures left free on a GPU that keeps its layout: no GPU
// is added to those the plan in force keeps busy, none changes, nothing moves. Before, newcomer
// started on a freshly partitioned GPU, one more than the re-pack needs.
func TestMaxMovesFillsKeptSlots(t *testing.T) {
	first, pool := loadD0D1(t)
	fresh, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	busy := usedStill(first, pool)
	for _, budget := range []int{0, 4} {
		pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &budget})
		if err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if pl.Summary.GPUsUsed != busy || pl.Summary.GPUsUsed > fresh.Summary.GPUsUsed {
			t.Errorf("max-moves %d: %d GPUs, want the %d the plan in force keeps busy (a fresh plan: %d)",
				budget, pl.Summary.GPUsUsed, busy, fresh.Summary.GPUsUsed)
		}
		steps := Migration(first, pl, 1)
		if n := CountMoves(steps); n != 0 {
			t.Errorf("max-moves %d: %d moves, want 0", budget, n)
		}
		if g := gpuChanges(steps); len(g) != 0 {
			t.Errorf("max-moves %d: GPU changes %+v, want none", budget, g)
		}
		for _, s := range steps {
			if s.Kind != StepStop && !(s.Kind == StepStart && s.Tenant == "newcomer") {
				t.Errorf("max-moves %d: step %+v, want only the departed tenants' stops and newcomer's start", budget, s)
			}
		}
		where := replicasOn(pl, "newcomer")
		if len(where) != 1 {
			t.Fatalf("max-moves %d: newcomer on %v, want one replica", budget, where)
		}
		// its slot is an instance of the plan in force on a GPU that runs a tenant staying
		ref, inst, _ := strings.Cut(where[0], " ")
		kept := false
		for _, g := range first.GPUs {
			if g.Ref().String() != ref {
				continue
			}
			for _, in := range g.Instances {
				kept = kept || in.Ref().String() == inst
			}
			kept = kept && usedStill(&v1.Plan{GPUs: []v1.PlanGPU{g}}, pool) == 1
		}
		if !kept {
			t.Errorf("max-moves %d: newcomer on %s, not an instance the plan in force has on a GPU kept busy", budget, where[0])
		}
		r := pl.Tenants[len(pl.Tenants)-1].Reasons
		if m := r[len(r)-1].Message; !strings.Contains(m, "plan in force is kept") || !strings.Contains(m, "newcomer starts 1 replica in room the plan in force leaves free") {
			t.Errorf("max-moves %d: last reason %s", budget, m)
		}
	}
}

// With no budget the filled plan in force competes with the re-pack on GPUs first, then moves:
// it is taken when it uses no more GPUs than a fresh plan of the pool, and it moves nothing.
func TestReplanFilledNotWorse(t *testing.T) {
	first, pool := loadD0D1(t)
	fresh, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Build(context.Background(), pool, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	if pl.Summary.GPUsUsed > fresh.Summary.GPUsUsed {
		t.Errorf("%d GPUs, more than a fresh plan's %d", pl.Summary.GPUsUsed, fresh.Summary.GPUsUsed)
	}
	if n, fn := CountMoves(Migration(first, pl, 1)), CountMoves(Migration(first, fresh, 1)); n != 0 || fn == 0 {
		t.Errorf("%d moves (a fresh plan: %d), want 0 where a fresh plan moves some", n, fn)
	}
	for _, tn := range pl.Tenants {
		if tn.Infeasible {
			t.Errorf("tenant %s short", tn.Name)
		}
	}
}

// trustPathMPSPool is a pool of one node of 4 H100s, MPS only, with one llama-3.2-1b tenant per name,
// all of trust path org/a: the planner runs 16 of them per GPU (mps 1/16).
func trustPathMPSPool(t *testing.T, names []string) *v1.Pool {
	t.Helper()
	var b strings.Builder
	b.WriteString(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: mps-replan}
fleet:
  nodes:
  - name: n1
    gpus:
    - {board: H100, count: 4}
policy:
  burstPoolPercent: 0
  allowedModes: [mps]
tenants:
`)
	for _, n := range names {
		fmt.Fprintf(&b, `- name: %s
  path: org/a
  isolation: soft
  model: {name: llama-3.2-1b}
  traffic: {rps: 0.5, inputTokens: 400, outputTokens: 100}
  slo: {ttftP99: 1000ms, tpotP99: 60ms}
`, n)
	}
	pool, err := v1.LoadPool([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// Twenty tenants of one trust path run 16 + 4 on two MPS GPUs; four of the first GPU's leave and
// newcomer joins. Its replica starts in the room they leave on that GPU (same board, share and
// trust path: the node keeps its one sharing setting), not on a third GPU, and with max-moves 0
// the pool stays on 2 GPUs with nothing moved. Before, newcomer took a third GPU.
func TestMaxMovesFillsKeptMPSRoom(t *testing.T) {
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("a%02d", i))
	}
	first, err := Build(context.Background(), trustPathMPSPool(t, names), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Summary.GPUsUsed != 2 || len(first.GPUs[0].Replicas) != 16 || first.GPUs[0].Mode != v1.ModeMPS {
		t.Fatalf("setup: %d GPUs, %d replicas on %s (%s), want 2 GPUs, 16 on the first, MPS",
			first.Summary.GPUsUsed, len(first.GPUs[0].Replicas), first.GPUs[0].Ref(), first.GPUs[0].Mode)
	}
	var gone []string
	for _, r := range first.GPUs[0].Replicas[:4] {
		gone = append(gone, r.Tenant)
	}
	rest := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return slices.Contains(gone, n) })
	pool := trustPathMPSPool(t, append(rest, "newcomer"))
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	if pl.Summary.GPUsUsed != usedStill(first, pool) {
		t.Errorf("%d GPUs, want the %d the plan in force keeps busy", pl.Summary.GPUsUsed, usedStill(first, pool))
	}
	steps := Migration(first, pl, 1)
	if n, g := CountMoves(steps), gpuChanges(steps); n != 0 || len(g) != 0 {
		t.Errorf("%d moves, GPU changes %+v, want none", n, g)
	}
	if where := replicasOn(pl, "newcomer"); !slices.Equal(where, []string{first.GPUs[0].Ref().String() + " mps"}) {
		t.Errorf("newcomer on %v, want the room on %s", where, first.GPUs[0].Ref())
	}
}

// A tenant started in room says so in a reason of its own, also when the re-pack, making the
// same starts, is the plan taken (a-mps1 against a-mps0's plan: new-same joins n2/0's MPS
// clients); and where the kept plan is taken over a re-pack that saves no GPU (review 7's d1), its
// MoveBudget reason does not blame the budget ("instead of 5 (0 fewer)", "more than max-moves 0").
func TestRoomStartsSayWhere(t *testing.T) {
	roomReason := func(pl *v1.Plan, name string) string {
		tp, _ := planTenant(pl, name)
		for _, r := range tp.Reasons {
			if r.Code == v1.ReasonMoveBudget && strings.HasPrefix(r.Message, "tenant "+name+" starts ") && strings.Contains(r.Message, "in room the plan in force leaves free") {
				return r.Message
			}
		}
		return ""
	}
	first, err := Build(context.Background(), loadPool(t, "../../testdata/review8/a-mps0-pool.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool := loadPool(t, "../../testdata/review8/a-mps1-pool.yaml")
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if where := replicasOn(pl, "new-same"); !slices.Equal(where, []string{"n2/0 mps"}) {
		t.Fatalf("setup: new-same on %v, want n2/0's room", where)
	}
	if r := roomReason(pl, "new-same"); !strings.HasSuffix(r, ": n2/0") {
		t.Errorf("new-same's reasons do not say it starts in n2/0's room (%q)", r)
	}
	if r := roomReason(pl, "new-otherpath"); r != "" {
		t.Errorf("new-otherpath, not started in room, says %q", r)
	}

	first, pool = loadD0D1(t)
	pl, err = Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if r := roomReason(pl, "newcomer"); !strings.Contains(r, "1g.20gb@4 of n1/0") {
		t.Errorf("newcomer's room reason %q", r)
	}
	kept := 0
	for _, tp := range pl.Tenants {
		for _, r := range tp.Reasons {
			if r.Code != v1.ReasonMoveBudget || !strings.HasPrefix(r.Message, "the plan in force is kept") {
				continue
			}
			kept++
			if !strings.Contains(r.Message, "re-packing would save no GPU (it runs the pool on 5 too)") || strings.Contains(r.Message, "fewer") || strings.Contains(r.Message, "max-moves") {
				t.Errorf("tenant %s: %q, want the re-pack said to save no GPU, the budget not named", tp.Name, r.Message)
			}
		}
	}
	if kept != len(pl.Tenants) {
		t.Errorf("%d of %d tenants say the plan in force is kept", kept, len(pl.Tenants))
	}
}
