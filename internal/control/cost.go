package control

import (
	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/plan"
)

// planCosts caches the applied plan's bill per tenant: plans and Pool documents are never
// changed in place, so one per pair is enough.
type planCosts struct {
	plan    *v1.Plan
	pool    *v1.Pool
	tenants map[string]*TenantCost
}

// of returns each tenant's cost per hour under plan pl of pool: docs/cost.md's rule on the
// planned basis over one hour, with the Pool's policy.cost. nil without a plan or a policy, or
// when the plan cannot be billed.
func (c *planCosts) of(pl *v1.Plan, pool *v1.Pool) map[string]*TenantCost {
	if pl == c.plan && pool == c.pool {
		return c.tenants
	}
	c.plan, c.pool, c.tenants = pl, pool, nil
	if pl == nil || pool == nil || pool.Policy.Cost == nil {
		return nil
	}
	o := perf.DefaultOptions()
	devs, err := cost.FromPlan(pl, pool, cost.PlanOptions{Seconds: 3600, IdlePowerFraction: o.IdlePowerFraction,
		DynamicWatts: plan.ReplicaPower(pool, pl, o)})
	if err != nil || len(devs) == 0 {
		return nil
	}
	rep, err := cost.Compute(devs, cost.PricesFrom(pool.Policy.Cost))
	if err != nil {
		return nil
	}
	c.tenants = map[string]*TenantCost{}
	for _, l := range rep.Tenants {
		// The period is one hour: the line's energy and carbon are per hour.
		c.tenants[l.Name] = &TenantCost{Basis: string(rep.Basis), Currency: rep.Currency, ReservedGPUs: l.ReservedGPUs,
			ITEnergyKWh: l.ITEnergyKWh, ChargebackPerHour: l.ChargebackPerHour, ShowbackPerHour: l.ShowbackPerHour,
			GCO2eLocation: l.GCO2eLocation, GCO2eMarket: l.GCO2eMarket}
	}
	return c.tenants
}
