package plan

import (
	"fmt"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// gpuReasons explains one GPU's role, mode and layout.
func (p *planner) gpuReasons(g *gpuPlan, pg v1.PlanGPU) []v1.Reason {
	switch pg.Role {
	case v1.RoleCanary:
		return []v1.Reason{v1.NewReason(v1.ReasonCanary, "in policy.canaryGPUs: kept out of the pool for trying drivers, geometries and models first")}
	case v1.RoleBurst:
		return []v1.Reason{v1.NewReason(v1.ReasonBurstPool, "held free for burst leases: policy.burstPoolPercent of %d pool GPUs, rounded up, is %d GPU(s)",
			len(p.fleet)-p.canaries(), p.burst)}
	case v1.RoleIdle:
		return []v1.Reason{v1.NewReason(v1.ReasonIdle, "not needed by this plan")}
	}
	tenants := map[string]*tenant{}
	var names []string
	for _, u := range g.units() {
		for _, r := range u.reps {
			if tenants[r.tn.t.Name] == nil {
				names = append(names, r.tn.t.Name)
			}
			tenants[r.tn.t.Name] = r.tn
		}
	}
	var out []v1.Reason
	list := strings.Join(names, ", ")
	switch pg.Mode {
	case v1.ModeExclusive:
		tn := tenants[names[0]]
		out = append(out, v1.NewReason(wholeCode(tn), "whole GPU for %s: %s", list, tn.choice.label()))
	case v1.ModeMPS:
		c := g.whole.c
		out = append(out, v1.NewReason(v1.ReasonTrustGroup, "MPS with %d of %d client slots used by %s (%d%% of SMs and %s pinned memory each), all of %s",
			len(g.whole.reps), c.share, list, 100/c.share, gib(tenants[names[0]].choice.ev.capBytes), groupText(g.whole.key.group)))
	case v1.ModeTimeSlice:
		out = append(out, v1.NewReason(v1.ReasonLowFrequency, "time-sliced by %d low-frequency shared tenant replica(s): %s", len(g.whole.reps), list))
	case v1.ModeMIG:
		out = append(out, migReason(g, names, tenants))
	}
	if e := g.units()[0].key.energy; e != v1.EnergyBalanced {
		out = append(out, v1.NewReason(v1.ReasonEnergyClass, "energy class %s: every tenant on this GPU is %s, so its clocks can be set for them", e, e))
	}
	return out
}

// wholeCode of a whole-GPU tenant: memory-bound when a smaller slice would not hold it.
func wholeCode(tn *tenant) v1.ReasonCode {
	for _, c := range tn.cands {
		if c.board == tn.choice.board && c.ev != nil && c.ev.fit.Fits && c.ev.fit.Slice.MemoryBytes < tn.choice.ev.fit.Slice.MemoryBytes {
			return v1.ReasonComputeBound
		}
	}
	return v1.ReasonMemoryBound
}

// migReason says why the MIG layout: uniform or mixed SLO shapes among its tenants.
func migReason(g *gpuPlan, names []string, tenants map[string]*tenant) v1.Reason {
	var parts []string
	for _, pi := range g.insts {
		if pi.u == nil {
			parts = append(parts, pi.in.String()+" free")
			continue
		}
		var who []string
		for _, r := range pi.u.reps {
			who = append(who, r.tn.t.Name)
		}
		parts = append(parts, pi.in.String()+" "+strings.Join(who, "+"))
	}
	ttfts := make([]time.Duration, len(names))
	for i, n := range names {
		ttfts[i] = tenants[n].slo.TTFT
	}
	return migLayoutReason(parts, ttfts)
}

// migLayoutReason words a MIG GPU's layout (parts: each instance with its tenants, or free) and
// the SLO shape of its tenants (their TTFT targets, 0 for none): uniform or mixed.
func migLayoutReason(parts []string, ttfts []time.Duration) v1.Reason {
	var lo, hi time.Duration
	for _, t := range ttfts {
		if t == 0 {
			continue
		}
		if lo == 0 || t < lo {
			lo = t
		}
		hi = max(hi, t)
	}
	code, shape := v1.ReasonSLOShapeUniform, "similar SLOs share equal hardware-isolated instances"
	if lo > 0 && hi > 2*lo {
		code, shape = v1.ReasonSLOShapeMixed, fmt.Sprintf("TTFT targets from %s to %s get differently sized instances", lo, hi)
	}
	return v1.NewReason(code, "MIG layout %s: %s", strings.Join(parts, ", "), shape)
}
