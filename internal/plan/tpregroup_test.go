package plan

import (
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// The review's re-plan of a llama-3.1-70b that regroups (tensor-parallel 2 groups becoming one of
// 4) on a pool with idle nodes: the new group starts on GPUs that run nothing before any old
// group stops (a move, make-before-break), so the tenant always runs a replica; the re-plan uses
// as many GPUs as the re-pack and changes no other tenant.
func TestTensorParallelRegroupMakesBeforeBreaking(t *testing.T) {
	p0 := reviewPool(t, "e3-tp-replan0-pool.yaml")
	p1 := reviewPool(t, "e3-tp-replan1-pool.yaml")
	for _, twoGroups := range []bool{false, true} {
		cur := build(t, p0)
		if twoGroups {
			// the plan in force as the confirming simulation made it: two groups of 2 on n1
			cur = tpRegroupCurrent(t, cur)
			if err := v1.ValidatePlan(cur, p0); err != nil {
				t.Fatalf("the plan in force with two groups: %v", err)
			}
		}
		next := buildWith(t, p1, Options{Current: cur})
		fresh := build(t, p1)
		if next.Summary.GPUsUsed != fresh.Summary.GPUsUsed {
			t.Errorf("two groups %v: re-plan uses %d GPUs, the re-pack %d", twoGroups, next.Summary.GPUsUsed, fresh.Summary.GPUsUsed)
		}
		if err := v1.ValidatePlan(next, p1); err != nil {
			t.Fatal(err)
		}
		steps := Migration(cur, next, 2)
		running := map[string]bool{} // l70's groups that run, by slot
		for tn, ss := range replicaSlots(cur) {
			for _, s := range ss {
				if tn == "l70" {
					running[s.String()] = true
				}
			}
		}
		for _, s := range steps {
			t.Logf("two groups %v: wave %d %s %s %s -> %s", twoGroups, s.Wave, s.Kind, s.Tenant, s.From, s.To)
			if s.Tenant != "l70" {
				if s.Tenant != "" {
					t.Errorf("another tenant's replica changes: %+v", s)
				}
				continue
			}
			switch s.Kind {
			case StepRestart:
				t.Errorf("l70 restarts (stop, then start): %+v", s)
			case StepMove, StepStart:
				running[s.To] = true
				delete(running, s.From) // a move stops the old one once the new one is ready
			case StepStop:
				delete(running, s.From)
			}
			if len(running) == 0 {
				t.Errorf("l70 runs no replica after wave %d", s.Wave)
			}
		}
	}
}

// tpRegroupCurrent turns cur's single tensor-parallel 2 group of l70 on n1/0-1 into two, on
// n1/0-1 and n1/2-3, where n1/2-3 run nothing in cur.
func tpRegroupCurrent(t *testing.T, cur *v1.Plan) *v1.Plan {
	t.Helper()
	var rep v1.PlanReplica
	for _, g := range cur.GPUs {
		for _, r := range g.Replicas {
			if r.Tenant == "l70" && g.Node == "n1" && g.Index == 0 {
				rep = r
			}
		}
	}
	if rep.TensorParallel.Size != 2 {
		t.Fatalf("l70 is not a tensor-parallel 2 group on n1/0: %+v", rep)
	}
	second := rep
	second.Index = 1
	second.TensorParallel = v1.TensorParallel{Size: 2, GPUs: []int{2, 3}}
	for i, g := range cur.GPUs {
		if g.Node == "n1" && (g.Index == 2 || g.Index == 3) {
			if len(g.Replicas) > 0 || len(g.Instances) > 0 {
				// the MIG GPU the small tenants use: trade it with an idle GPU of the node
				for j, h := range cur.GPUs {
					if h.Node == "n1" && h.Index > 3 && len(h.Replicas) == 0 && len(h.Instances) == 0 {
						cur.GPUs[i], cur.GPUs[j] = h, g
						cur.GPUs[i].Index, cur.GPUs[j].Index = g.Index, h.Index
						for k := range cur.Tenants {
							for r := range cur.Tenants[k].Replicas {
								if ref := &cur.Tenants[k].Replicas[r].GPU; *ref == g.Ref() {
									ref.Index = h.Index
								}
							}
						}
						break
					}
				}
			}
			cur.GPUs[i].Mode, cur.GPUs[i].Role = v1.ModeExclusive, v1.RolePool
			cur.GPUs[i].Replicas = []v1.PlanReplica{second}
		}
	}
	for i := range cur.Tenants {
		if cur.Tenants[i].Name == "l70" {
			cur.Tenants[i].Replicas = append(cur.Tenants[i].Replicas, v1.ReplicaRef{Index: 1, GPU: v1.GPURef{Node: "n1", Index: 2}, Slice: v1.SliceExclusive})
		}
	}
	cur.Summary.GPUsUsed += 2
	return cur
}
