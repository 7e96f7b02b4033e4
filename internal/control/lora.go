package control

import (
	"slices"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// A shared LoRA engine of the applied plan (plan.loraEngines, docs/lora.md) is one replica on one
// whole GPU that serves many adapter tenants of one base model. The control plane grants it once,
// under its own name in the allocator (loraKey), on the exclusive slice the plan gives it; the
// adapter tenants it serves get no slices of their own while it is planned, and their weights,
// demand and reservations split the engine among them (LoRAShare, fairadapter.go).

// loraKey is the name a shared LoRA engine has in the allocator and on its grant. A ':' is never
// in a tenant's name (namePattern), so it meets no tenant.
func loraKey(engine string) string { return "lora:" + engine }

// loraEngine is one shared LoRA engine of the applied plan.
type loraEngine struct {
	name     string
	gpu      v1.GPURef
	adapters []v1.PlanLoRAAdapter // by tenant name
	rps      float64              // the adapters' planned parts, summed
}

// loraEnginesOf lists the plan's shared LoRA engines by name and, for each adapter tenant, the
// engines that serve it (in the plan's order).
func loraEnginesOf(p *v1.Plan) (map[string]*loraEngine, map[string][]string) {
	engines, of := map[string]*loraEngine{}, map[string][]string{}
	if p == nil {
		return engines, of
	}
	for _, e := range p.LoRAEngines {
		le := &loraEngine{name: e.Name, gpu: e.GPU, adapters: slices.Clone(e.Adapters)}
		slices.SortFunc(le.adapters, func(a, b v1.PlanLoRAAdapter) int {
			switch {
			case a.Tenant < b.Tenant:
				return -1
			case a.Tenant > b.Tenant:
				return 1
			}
			return 0
		})
		for _, a := range e.Adapters {
			le.rps += a.RPS
			of[a.Tenant] = append(of[a.Tenant], e.Name)
		}
		engines[e.Name] = le
	}
	return engines, of
}

// LoRAShare is an adapter tenant's part of one shared LoRA engine of the applied plan.
type LoRAShare struct {
	// Engine names the engine (plan.loraEngines); Grant is its grant, empty while it waits for
	// its slice.
	Engine string `json:"engine"`
	Grant  string `json:"grant,omitempty"`
	// PlannedRPS is the part of the tenant's traffic the plan gives this engine.
	PlannedRPS float64 `json:"plannedRps"`
	// Wanted is the fraction of the engine the tenant asks for now: its planned part over the
	// engine's planned traffic, scaled by its demand rate over its planned rate when it gave one;
	// 0 without demand.
	Wanted float64 `json:"wanted"`
	// Share is the fraction of the engine the fair allocator gives the tenant: what it wants
	// when the adapters want no more than the engine, else a weighted split (reservations,
	// the tenant's planned part, first).
	Share float64 `json:"share"`
}

// loraShareUnits is how finely an engine is split among its adapters: shares are multiples of
// 1/loraShareUnits of the engine.
const loraShareUnits = 1000

// followLoRA updates the engines of adapter tenant name after a change of it and applies what
// the allocator decides.
func (e *Engine) followLoRA(now time.Time, name string) error {
	ds, err := e.loraTouched(now, name)
	if err != nil {
		return err
	}
	e.decide(now, ds)
	return nil
}

// loraDemand reports whether engine key (loraKey) wants its slice: a registered adapter tenant
// of it has demand.
func (e *Engine) loraDemand(key string) (bool, bool) {
	for _, le := range e.lora {
		if loraKey(le.name) != key {
			continue
		}
		for _, a := range le.adapters {
			if t, ok := e.tenants[a.Tenant]; ok && (t.Demand > 0 || t.Rate > 0) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// loraWanted is the tenant's wanted rate on each of its engines, by engine: its demand rate
// spread over its engines like its planned rate, or its planned parts when its demand is given
// as replicas (any above zero), or nothing.
func (e *Engine) loraWanted(t *Tenant) map[string]float64 {
	out := map[string]float64{}
	var planned float64
	parts := map[string]float64{}
	for _, name := range e.adapterOf[t.Name] {
		for _, a := range e.lora[name].adapters {
			if a.Tenant == t.Name {
				parts[name] += a.RPS
				planned += a.RPS
			}
		}
	}
	for name, p := range parts {
		switch {
		case t.Rate > 0 && planned > 0:
			out[name] = t.Rate * p / planned
		case t.Rate > 0:
			out[name] = t.Rate / float64(len(parts))
		case t.Demand > 0:
			out[name] = p
		}
	}
	return out
}
