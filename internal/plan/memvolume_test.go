package plan

import (
	"cmp"
	"context"
	"math"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// memoryVolume is a lower bound on the GPUs of any plan that serves every tenant of p at its
// candidates' replica counts, by GPU memory: every replica takes at least its share of a GPU's
// memory (a MIG instance's memory slices over the board's, divided among its sharers; a whole
// GPU divided among its sharers), and a whole GPU shared by MPS or time-slicing holds one
// sharing group's replicas (keyOf). Each tenant is counted at its least memory over the
// candidates that are not a shared whole GPU; a shared whole GPU of group G and share k saves at
// most the memory its members would otherwise take less the GPU it costs, bounded here per
// (group, k) by taking G's tenants that have such a candidate in chunks of k, most memory first.
// It is a relaxation (MIG layouts, compute and node rules aside), computed from the candidates
// alone.
func memoryVolume(p *planner) float64 {
	type gk struct {
		group string
		share int
	}
	least := make([]float64, len(p.tenants))
	slots := map[gk]map[int]int{} // tenant → its replicas on a shared whole GPU of the group and share
	wholeOnly := make([]float64, len(p.tenants))
	total := 0.0
	for i, tn := range p.tenants {
		least[i], wholeOnly[i] = math.Inf(1), math.Inf(1)
		for _, c := range tn.feasible {
			if c.whole() && c.share > 1 {
				k := gk{tn.group, c.share}
				if slots[k] == nil {
					slots[k] = map[int]int{}
				}
				if r, ok := slots[k][i]; !ok || c.replicas < r {
					slots[k][i] = c.replicas
				}
				wholeOnly[i] = min(wholeOnly[i], float64(c.replicas)/float64(c.share))
				continue
			}
			m := float64(c.replicas) * float64(max(c.tp, 1)) / float64(c.share)
			if !c.whole() {
				m = float64(c.replicas) * c.memFrac / float64(c.share)
			}
			least[i] = min(least[i], m)
		}
		if math.IsInf(least[i], 1) { // only shared whole GPUs: its replicas' shares of them
			least[i] = wholeOnly[i]
			for k := range slots {
				delete(slots[k], i)
			}
		}
		total += least[i]
	}
	// A shared whole GPU of group and share k holds k replicas; a tenant that moves its r replicas
	// there frees at most least/r per replica. Each GPU saves at most its replicas' freed memory
	// less the GPU, so the most the group and share can save is that of the replicas taken k at a
	// time, most memory first.
	for k, m := range slots {
		var per []float64
		for i, r := range m {
			for range r {
				per = append(per, least[i]/float64(r))
			}
		}
		slices.SortFunc(per, func(a, b float64) int { return cmp.Compare(b, a) })
		for lo := 0; lo < len(per); lo += k.share {
			chunk := 0.0
			for _, v := range per[lo:min(lo+k.share, len(per))] {
				chunk += v
			}
			total -= max(0, chunk-1)
		}
	}
	return total
}

// The synthetic 100-tenant pool on the device-plugin path takes 23 GPUs against a lower bound of
// 21 (1.095, above the 1.05). At the sized replica counts no plan does better: every
// tenant but six takes its least GPU memory already, and the six (on unshared 3g.40gb) save
// memory only on a whole GPU shared by MPS with their sharing group, whose other members would
// take no less than the GPU holds (memoryVolume: 22.17 GPUs of memory, 22.42 before ADR 0037,
// so at least 23 GPUs; exactly, with shared units whole, 22.5: TestSynthetic100MemoryExact).
// The planner's own bound counts the fewest replicas any plan could use (lbReplicas), which is
// why it says 21: at those counts the packer itself serves every tenant on 21 GPUs
// (TestSynthetic100PacksAtBoundCounts), so the whole gap lies in the replica counts.
func TestSynthetic100AtMemoryVolume(t *testing.T) {
	pool := synthPool(100)
	p, err := newPlanner(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.ctx = context.Background()
	p.evaluate()
	vol := memoryVolume(p)
	pl := build(t, synthPool(100))
	t.Logf("memory volume %.3f GPUs, plan %d GPUs, planner's bound %d", vol, pl.Summary.GPUsUsed, pl.Summary.LowerBound)
	if need := int(math.Ceil(vol - 1e-9)); pl.Summary.GPUsUsed > need {
		t.Errorf("plan uses %d GPUs, the memory volume at the sized replicas allows %d", pl.Summary.GPUsUsed, need)
	}
}

// planAtBoundCounts plans pool with every feasible candidate lowered to its bound's count
// (lbReplicas) where that is below its sized count, through the planner's own choice and
// packing, and fails the test if a tenant is left short. It returns the plan and how many
// candidates were lowered.
func planAtBoundCounts(t *testing.T, pool *v1.Pool) (*v1.Plan, int) {
	t.Helper()
	p := evaluated(t, pool)
	lowered := 0
	for _, tn := range p.tenants {
		for _, c := range tn.feasible {
			if c.lbReplicas > 0 && c.lbReplicas < c.replicas {
				c.replicas = c.lbReplicas
				c.cost = float64(c.replicas) / float64(c.share) * c.unitFrac
				lowered++
			}
		}
		sortCands(tn.feasible)
	}
	if err := p.optimise(); err != nil {
		t.Fatal(err)
	}
	pl, err := p.result()
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range pl.Tenants {
		if tp.Infeasible {
			t.Fatalf("%s (%s): %s short at the bound's counts", pool.Metadata.Name, pool.Policy.KubernetesDeviceAPI, tp.Name)
		}
	}
	return pl, lowered
}

// TestSynthetic100PacksAtBoundCounts plans the synthetic 100-tenant pool with every candidate at
// the lower bound's replica count (lbReplicas) instead of the sized one. The bound claims no plan
// of those counts uses fewer GPUs, so a packing below it would prove the bound wrong; a packing
// equal to it shows that the bound is tight for its counts, so that the gap between the plan and
// the bound (23 against 21 on the device-plugin path) lies wholly in the replica counts, not in
// the packing or the bound's relaxation of it. Both device paths.
func TestSynthetic100PacksAtBoundCounts(t *testing.T) {
	for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
		pool := synthPool(100)
		pool.Policy.KubernetesDeviceAPI = api
		bound := build(t, pool).Summary.LowerBound
		pl, lowered := planAtBoundCounts(t, pool)
		t.Logf("%s: %d candidates lowered to the bound's count; %d GPUs against the bound's %d", api, lowered, pl.Summary.GPUsUsed, bound)
		if lowered == 0 {
			t.Errorf("%s: no candidate's count lowered: the test checks nothing", api)
		}
		if pl.Summary.GPUsUsed < bound {
			t.Errorf("%s: %d GPUs serve every tenant at the bound's counts, below the bound %d: the bound is wrong", api, pl.Summary.GPUsUsed, bound)
		}
		if pl.Summary.GPUsUsed > bound {
			t.Errorf("%s: %d GPUs at the bound's counts against the bound %d: the packing or the bound lost its tightness here", api, pl.Summary.GPUsUsed, bound)
		}
	}
}

// TestSynthetic100AtGroupFigure prices the synthetic 100-tenant pool's plans against the
// per-sharing-group figure at the planner's own replica counts (groupBoundAt over the 21 prices
// between memory and compute): every tenant at one of its candidates as sized, a shared unit
// holding one sharing group's replicas, a GPU's MIG instances at most its memory and compute.
// No plan of these slice kinds at these counts uses fewer GPUs than that figure rounded up. Both
// paths' plans take exactly that many (device plugin 22.125 → 23, DRA 20.875 → 21, 20.771
// before the group searches rounded to the prices' grid, ADR 0058), so neither
// packing loses a GPU; the device-plugin path's gap to its bound of 21 is the SLO sizing (the
// bound counts 20.500 at its own replica counts) and its GPU over the DRA plan is MIG+MPS, which
// the device plugin cannot serve. The test fails if a plan takes a GPU more than the figure
// allows, or one fewer (the figure would then be wrong).
func TestSynthetic100AtGroupFigure(t *testing.T) {
	for _, api := range []v1.KubernetesDeviceAPI{v1.DeviceAPIDevicePlugin, v1.DeviceAPIDRA} {
		pool := synthPool(100)
		pool.Policy.KubernetesDeviceAPI = api
		p, pl := planWith(t, pool, func(*planner) {})
		lams := make([]float64, 21)
		for i := range lams {
			lams[i] = float64(i) / 20
		}
		fig := p.groupBoundAt(lams)
		need := int(math.Ceil(fig - boundSlack))
		t.Logf("%s: per-group figure at the sized counts %.3f, plan %d GPUs, bound %d", api, fig, pl.Summary.GPUsUsed, pl.Summary.LowerBound)
		if pl.Summary.GPUsUsed != need {
			t.Errorf("%s: plan uses %d GPUs, the per-group figure at the sized counts %.3f needs %d", api, pl.Summary.GPUsUsed, fig, need)
		}
	}
}
