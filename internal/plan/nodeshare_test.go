package plan

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// loadEGrow is testdata/review8's e-grow pair: ten qwen2.5-0.5b of one trust path on one A100
// MPS GPU (1/32 each) in force; three leave, g0 needs 15 replicas and new-big (llama-3.1-8b, an
// mps 1/4 of an A100 in the re-pack) joins.
func loadEGrow(t *testing.T) (first *v1.Plan, pool *v1.Pool) {
	t.Helper()
	return loadReplan(t, "../../testdata/review8/e-grow0-pool.yaml", "../../testdata/review8/e-grow1-pool.yaml")
}

// With max-moves 0, g0's 14 added replicas take n2/0's MPS room (21 references a GPU on n2 then)
// and new-big, whose 1/4 share that setting would cut to 1/21, is placed off node n2. Before, the
// kept plan put new-big on n2/1 at 1/4, validation refused it, and with max-moves 0 the plan in
// force was held with g0 and new-big short.
func TestKeptPlanKeepsNodeMPSSetting(t *testing.T) {
	first, pool := loadEGrow(t)
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	for _, tp := range pl.Tenants {
		if tp.Infeasible {
			t.Errorf("tenant %s short: %s", tp.Name, tp.Reasons[0].Message)
		}
	}
	if broken := mpsSettingBroken(pool, pl); len(broken) > 0 {
		t.Errorf("nodes %v: a whole-GPU MPS replica above its node's equal share", broken)
	}
	g0 := replicasOn(pl, "g0")
	if len(g0) != 15 || slices.ContainsFunc(g0, func(s string) bool { return s != "n2/0 mps" }) {
		t.Errorf("g0 on %v, want 15 replicas on n2/0 (1 in force, 14 in its room)", g0)
	}
	if where := replicasOn(pl, "new-big"); len(where) == 0 || slices.ContainsFunc(where, func(s string) bool { return strings.HasPrefix(s, "n2/") }) {
		t.Errorf("new-big on %v, want off node n2, whose MPS setting is 21 references a GPU", where)
	}
	steps := Migration(first, pl, 1)
	if n, g := CountMoves(steps), gpuChanges(steps); n != 0 || len(g) != 1 || g[0].GPU.String() != "n1/0" {
		t.Errorf("%d moves, GPU changes %+v, want none but n1/0's (idle in force)", n, g)
	}
}

// When no GPU that keeps its node's setting is left for a tenant, it is short and says why: here
// node n1's H100s are canaries, so new-big has only n2/1, where its 1/4 share would break n2's
// setting of 21 references a GPU.
func TestKeptPlanSaysNodeMPSSetting(t *testing.T) {
	first, pool := loadEGrow(t)
	pool.Policy.CanaryGPUs = []v1.GPURef{{Node: "n1", Index: 0}, {Node: "n1", Index: 1}}
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := v1.ValidatePlan(pl, pool); err != nil {
		t.Fatal(err)
	}
	big, ok := planTenant(pl, "new-big")
	if !ok || !big.Infeasible {
		t.Fatalf("new-big served (%v), want short: n2/1 is the only GPU left and breaks n2's setting", replicasOn(pl, "new-big"))
	}
	why := big.Reasons[0].Message
	for _, want := range []string{"n2/1", "node n2's device-plugin MPS setting: 21 references a GPU"} {
		if !strings.Contains(why, want) {
			t.Errorf("new-big's first reason %q does not name %q", why, want)
		}
	}
	if g0 := replicasOn(pl, "g0"); len(g0) != 15 {
		t.Errorf("g0 runs %d replicas, want 15: its growth in room keeps the setting", len(g0))
	}
}

// The kept plan's reasons are its own: n2/0's names the 21 clients it runs now (not g1–g3, who
// left), and g0 says what its 15 replicas carry at 60 req/s, where the plan in force sized one
// for 1 req/s.
func TestKeptPlanReasonsRefreshed(t *testing.T) {
	first, pool := loadEGrow(t)
	zero := 0
	pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	var n20 []string
	for _, g := range pl.GPUs {
		if g.Ref().String() == "n2/0" {
			for _, r := range g.Reasons {
				n20 = append(n20, r.Message)
			}
		}
	}
	if len(n20) == 0 || !strings.HasPrefix(n20[0], "MPS with 21 of 32 client slots used by g0, g4, g5, g6, g7, g8, g9 ") {
		t.Errorf("n2/0's reasons %q, want its 21 clients of g0, g4–g9", n20)
	}
	g0, _ := planTenant(pl, "g0")
	if !slices.ContainsFunc(g0.Reasons, func(r v1.Reason) bool {
		return strings.HasPrefix(r.Message, "kept where it runs: 60 req/s now over 15 replicas on mps 1/32 of A100-SXM4-80GB")
	}) {
		t.Errorf("g0's reasons do not say what its 15 replicas carry now: %v", g0.Reasons)
	}
}

// Room on a whole-GPU MPS GPU fills only to the finest share of its node's MPS GPUs. In force
// here: e-grow0's 1/32 clients on n2/0 and new-big at 1/4 on n2/1; with g6–g9 gone too n2/0 keeps
// 3 (g0, g4, g5), node n2's setting of 3 within new-big's 1/4. n2/0's room is then one replica
// (4 references a GPU), not the 29 its own 1/32 share leaves; on the DRA path, which runs unequal
// limits, it is 29.
func TestKeptRoomCappedByNodeFinestShare(t *testing.T) {
	first, pool := loadEGrow(t)
	pool.Tenants = slices.DeleteFunc(pool.Tenants, func(t v1.Tenant) bool { return slices.Contains([]string{"g6", "g7", "g8", "g9"}, t.Name) })
	fresh, err := Build(context.Background(), pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	big, ok := planTenant(fresh, "new-big")
	if !ok || len(big.Replicas) != 1 || big.Replicas[0].Slice != v1.SliceMPS || big.Replicas[0].GPU.Node != "n2" {
		t.Fatalf("setup: new-big in a fresh plan %+v, want one MPS replica on n2", big.Replicas)
	}
	var rep v1.PlanReplica
	for _, g := range fresh.GPUs {
		for _, r := range g.Replicas {
			if r.Tenant == "new-big" {
				rep = r
			}
		}
	}
	cur := *first
	cur.GPUs = slices.Clone(first.GPUs)
	at := slices.IndexFunc(cur.GPUs, func(g v1.PlanGPU) bool { return g.Ref().String() == "n2/1" })
	if at < 0 || cur.GPUs[at].ReplicaCount() != 0 {
		t.Fatalf("setup: n2/1 not idle in e-grow0's plan")
	}
	g := &cur.GPUs[at]
	g.Mode, g.Role, g.Replicas = v1.ModeMPS, v1.RolePool, []v1.PlanReplica{rep}
	for _, dra := range []bool{false, true} {
		pl := *pool
		if dra {
			pl.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
		}
		p, err := newPlanner(&pl, Options{Current: &cur})
		if err != nil {
			t.Fatal(err)
		}
		p.ctx = context.Background()
		p.evaluate()
		byName := map[string]*tenant{}
		for _, tn := range p.tenants {
			byName[tn.t.Name] = tn
		}
		gpus, uses := p.inForce()
		room := p.keptRoom(&v1.Plan{GPUs: gpus}, byName, uses)
		free := -1
		for i, s := range room.slots {
			if gpus[s.g].Ref().String() == "n2/0" {
				free = room.free[i]
			}
		}
		if want := map[bool]int{false: 1, true: 29}[dra]; free != want {
			t.Errorf("dra %v: n2/0's room %d replicas, want %d", dra, free, want)
		}
	}
}
