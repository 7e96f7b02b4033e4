package plan

import (
	"fmt"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/perf"
)

// CheckMeasured checks plan pl of pool against ParvaGPU's rule (Lee et al., SC 2024) for the
// tenants with a measured profile in profiles (what Options.Profiles held for Build), from the
// plan, the pool and the tables alone, independently of how the plan was sized:
//
//   - a whole GPU or MIG instance that runs such a tenant runs it alone, as n ≤ 3 processes;
//   - the tenant's table has a runnable batch at (the slice's GPCs, n) whose latency is at most
//     0.45 × its slo.e2eP99, where a whole GPU counts the board's compute slices and a MIG
//     instance its profile's;
//   - the tenant is served, and its slices together carry its rate: Σ n × the per-process
//     throughput of the best such batch ≥ traffic.rps.
//
// It returns every violation, each naming the GPU or instance and the tenant; none when the plan
// keeps the rule. Tenants without a profile are not checked.
func CheckMeasured(pl *v1.Plan, pool *v1.Pool, profiles map[string]*perf.Measured) []error {
	c := &measuredCheck{tenants: map[string]v1.Tenant{}, profiles: profiles, carried: map[string]float64{}}
	for _, tn := range pool.Tenants {
		c.tenants[tn.Name] = tn
	}
	for _, g := range pl.GPUs {
		c.gpu(g)
	}
	for _, tn := range pl.Tenants {
		if c.profiles[tn.Name] == nil {
			continue
		}
		if tn.Infeasible {
			c.errs = append(c.errs, fmt.Errorf("check plan: tenant %s: infeasible: %v", tn.Name, tn.Reasons))
			continue
		}
		if rps, got := c.tenants[tn.Name].Traffic.RPS, c.carried[tn.Name]; got < rps {
			c.errs = append(c.errs, fmt.Errorf("check plan: tenant %s: its slices carry %.1f req/s, less than traffic.rps %.1f", tn.Name, got, rps))
		}
	}
	return c.errs
}

// measuredCheck is CheckMeasured's state: the pool's tenants by name, the rate each measured
// tenant's slices carry so far, and the violations found.
type measuredCheck struct {
	tenants  map[string]v1.Tenant
	profiles map[string]*perf.Measured
	carried  map[string]float64
	errs     []error
}

// gpu checks the whole GPU g and each of its MIG instances.
func (c *measuredCheck) gpu(g v1.PlanGPU) {
	where := g.Ref().String()
	b, err := gpu.Lookup(g.Board)
	gpcs := 0
	if err == nil {
		gpcs = b.ComputeSlices
	}
	c.slice(where, gpcs, err, g.Replicas)
	for _, in := range g.Instances {
		gpcs, perr := 0, err
		if err == nil {
			var p *gpu.Profile
			if p, perr = b.Profile(in.Profile); perr == nil {
				gpcs = p.ComputeSlices
			}
		}
		c.slice(where+"/"+in.Ref().String(), gpcs, perr, in.Replicas)
	}
}

// slice checks the replicas reps on one slice of gpcs GPCs (lookup: why gpcs is unknown).
func (c *measuredCheck) slice(where string, gpcs int, lookup error, reps []v1.PlanReplica) {
	measured := false
	for _, r := range reps {
		measured = measured || c.profiles[r.Tenant] != nil
	}
	if !measured {
		return
	}
	name, n := reps[0].Tenant, len(reps)
	for _, r := range reps[1:] {
		if r.Tenant != name {
			c.errs = append(c.errs, fmt.Errorf("check plan: %s: tenants %s and %s share it", where, name, r.Tenant))
		}
	}
	m, tn := c.profiles[name], c.tenants[name]
	switch {
	case m == nil: // another tenant is measured: the sharing is reported above
		return
	case lookup != nil:
		c.errs = append(c.errs, fmt.Errorf("check plan: %s: tenant %s: %w", where, name, lookup))
		return
	case tn.SLO.E2EP99 == nil:
		c.errs = append(c.errs, fmt.Errorf("check plan: %s: tenant %s has no slo.e2eP99 in the pool", where, name))
		return
	case n > measuredMaxProcs:
		c.errs = append(c.errs, fmt.Errorf("check plan: %s: %d processes of %s, more than %d", where, n, name, measuredMaxProcs))
		return
	}
	limit := time.Duration(measuredLatencyShare * float64(tn.SLO.E2EP99.Std()))
	pt, err := m.Best(gpcs, n, limit)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("check plan: %s: %d process(es) of %s: no batch within %v: %w", where, n, name, limit, err))
		return
	}
	c.carried[name] += float64(n) * pt.Throughput
}
