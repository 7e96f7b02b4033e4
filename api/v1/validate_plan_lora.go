package v1

import (
	"math"
	"slices"
)

// checkLoRAGPU checks a GPU that runs a shared LoRA engine: role pool, mode exclusive, no tenant
// replicas beside it; the engine must be listed in loraEngines on this GPU (checkLoRAEngines).
func (c *planChecker) checkLoRAGPU(p string, g PlanGPU) {
	if g.LoRAEngine == "" {
		return
	}
	if c.loraGPU == nil {
		c.loraGPU = map[string]GPURef{}
	}
	if _, dup := c.loraGPU[g.LoRAEngine]; dup {
		c.errs.add(field(p, "loraEngine"), "engine %q runs on one GPU only", g.LoRAEngine)
	}
	c.loraGPU[g.LoRAEngine] = g.Ref()
	if g.Mode != ModeExclusive {
		c.errs.add(field(p, "mode"), "a GPU that runs a LoRA engine has mode %q (got %q)", ModeExclusive, g.Mode)
	}
	if g.Role != RolePool {
		c.errs.add(field(p, "role"), "a GPU that runs a LoRA engine has role %q (got %q)", RolePool, g.Role)
	}
	if len(g.Replicas) > 0 || len(g.Instances) > 0 {
		c.errs.add(field(p, "replicas"), "a GPU that runs a LoRA engine runs nothing else")
	}
}

// checkLoRAEngines checks loraEngines against gpus, the tenants and the pool: each engine on the
// GPU that names it, with vLLM's limits and at least one adapter; each adapter an adapter tenant
// of the pool under its adapter name; each tenant's loraEngines the engines that list it.
func (c *planChecker) checkLoRAEngines() {
	names := dupTracker{}
	serves := map[string][]string{} // tenant → engines that list it
	for i, e := range c.plan.LoRAEngines {
		p := index("loraEngines", i)
		if e.Name == "" {
			c.errs.add(field(p, "name"), "required")
		} else {
			names.check(&c.errs, field(p, "name"), "LoRA engine", e.Name)
			switch ref, ok := c.loraGPU[e.Name]; {
			case !ok:
				c.errs.add(field(p, "gpu"), "no GPU names engine %q in loraEngine", e.Name)
			case ref != e.GPU:
				c.errs.add(field(p, "gpu"), "%q, but the engine runs on %q", e.GPU.String(), ref.String())
			}
		}
		if (e.Model == "") == (e.ModelDir == "") {
			c.errs.add(p, "set exactly one of model or modelDir")
		}
		if e.MaxLoRAs < 1 {
			c.errs.add(field(p, "maxLoras"), "must be ≥ 1 (got %d)", e.MaxLoRAs)
		}
		if !slices.Contains(loraRanks, e.MaxLoRARank) {
			c.errs.add(field(p, "maxLoraRank"), "must be one of vLLM's ranks %v (got %d)", loraRanks, e.MaxLoRARank)
		}
		if e.MaxCPULoRAs < e.MaxLoRAs {
			c.errs.add(field(p, "maxCpuLoras"), "must be ≥ maxLoras %d (got %d)", e.MaxLoRAs, e.MaxCPULoRAs)
		}
		if e.ActiveP99 < 0 {
			c.errs.add(field(p, "activeP99"), "must be ≥ 0 (got %d)", e.ActiveP99)
		}
		if len(e.Adapters) == 0 {
			c.errs.add(field(p, "adapters"), "an engine serves at least one adapter")
		}
		seen := dupTracker{}
		for j, a := range e.Adapters {
			ap := index(field(p, "adapters"), j)
			seen.check(&c.errs, field(ap, "tenant"), "adapter tenant", a.Tenant)
			serves[a.Tenant] = append(serves[a.Tenant], e.Name)
			if !(a.RPS >= 0) || math.IsInf(a.RPS, 1) {
				c.errs.add(field(ap, "rps"), "must be ≥ 0 and finite (got %v)", a.RPS)
			}
			t, ok := c.tenants[a.Tenant]
			switch {
			case !ok:
				c.errs.add(field(ap, "tenant"), "unknown tenant %q", a.Tenant)
			case c.pool == nil:
			case t.Model.Adapter == nil:
				c.errs.add(field(ap, "tenant"), "tenant %q has no model.adapter", a.Tenant)
			case t.Model.Adapter.Name != a.Adapter:
				c.errs.add(field(ap, "adapter"), "%q, but tenant %q's adapter is %q", a.Adapter, a.Tenant, t.Model.Adapter.Name)
			case t.Isolation == IsolationHard:
				c.errs.add(field(ap, "tenant"), "tenant %q is hard-isolated: it never shares an engine process", a.Tenant)
			}
		}
	}
	for i, g := range c.plan.GPUs {
		if g.LoRAEngine != "" && !slices.ContainsFunc(c.plan.LoRAEngines, func(e PlanLoRAEngine) bool { return e.Name == g.LoRAEngine }) {
			c.errs.add(field(index("gpus", i), "loraEngine"), "unknown LoRA engine %q (not in loraEngines)", g.LoRAEngine)
		}
	}
	for i, t := range c.plan.Tenants {
		p := field(index("tenants", i), "loraEngines")
		if len(t.LoRAEngines) > 0 && (len(t.Replicas) > 0 || len(c.replicas[t.Name]) > 0) {
			c.errs.add(p, "a tenant served by LoRA engines has no replicas of its own")
		}
		if !slices.Equal(sorted(t.LoRAEngines), sorted(serves[t.Name])) {
			c.errs.add(p, "%v, but the engines that list tenant %q are %v", t.LoRAEngines, t.Name, sorted(serves[t.Name]))
		}
	}
}

// loraRanks are vLLM's --max-lora-rank choices (vllm/config/lora.py).
var loraRanks = []int{1, 8, 16, 32, 64, 128, 256, 320, 512}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}
