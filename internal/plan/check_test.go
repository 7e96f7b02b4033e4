package plan

import (
	"fmt"
	"os"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// loadPool reads, defaults and validates a pool file of the repository.
func loadPool(t testing.TB, path string) *v1.Pool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := v1.LoadPool(data)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// checkPlan asserts the planner's invariants on pl and returns the first violation.
func checkPlan(pool *v1.Pool, pl *v1.Plan) error {
	if err := v1.ValidatePlan(pl, pool); err != nil {
		return fmt.Errorf("invalid plan: %w", err)
	}
	tenants := map[string]v1.Tenant{}
	for _, t := range pool.Tenants {
		tenants[t.Name] = t
	}
	infeasible := false
	for _, t := range pl.Tenants {
		infeasible = infeasible || t.Infeasible
	}
	if !infeasible && pl.Summary.LowerBound > pl.Summary.GPUsUsed {
		return fmt.Errorf("lower bound %d above GPUs used %d", pl.Summary.LowerBound, pl.Summary.GPUsUsed)
	}
	for _, g := range pl.GPUs {
		if err := checkGPU(g, tenants); err != nil {
			return fmt.Errorf("%s: %w", g.Ref(), err)
		}
	}
	for _, t := range pl.Tenants {
		if err := checkSpread(t, tenants[t.Name]); err != nil {
			return err
		}
	}
	return nil
}

// checkSpread: a redundant tenant's replicas are not all on one GPU, unless a Redundancy reason
// says why.
func checkSpread(t v1.PlanTenant, pt v1.Tenant) error {
	if !pt.Redundancy || len(t.Replicas) < 2 {
		return nil
	}
	for _, r := range t.Replicas {
		if r.GPU != t.Replicas[0].GPU {
			return nil
		}
	}
	for _, r := range t.Reasons {
		if r.Code == v1.ReasonRedundancy && strings.Contains(r.Message, "no other GPU") {
			return nil
		}
	}
	return fmt.Errorf("redundant tenant %s has all %d replicas on %s", t.Name, len(t.Replicas), t.Replicas[0].GPU)
}

func checkGPU(g v1.PlanGPU, tenants map[string]v1.Tenant) error {
	b, err := gpu.Lookup(g.Board)
	if err != nil {
		return err
	}
	if g.Mode == v1.ModeMIG {
		var l gpu.Layout
		for _, in := range g.Instances {
			l = append(l, gpu.Instance{Profile: in.Profile, Start: in.Start})
		}
		if err := b.Validate(l); err != nil {
			return fmt.Errorf("illegal layout %s: %w", l, err)
		}
	}
	energies := map[v1.EnergyClass]bool{}
	domains := [][]v1.PlanReplica{g.Replicas}
	for _, in := range g.Instances {
		domains = append(domains, in.Replicas)
	}
	for _, d := range domains {
		groups := map[string]bool{}
		names := map[string]bool{}
		for _, r := range d {
			t := tenants[r.Tenant]
			energies[energyOf(t)] = true
			groups[sharingGroup(t)] = true
			names[r.Tenant] = true
			if isolationOf(t) == v1.IsolationHard && len(d) > 1 {
				return fmt.Errorf("hard tenant %s shares a slice", r.Tenant)
			}
		}
		if len(names) > 1 && len(groups) > 1 {
			return fmt.Errorf("a shared slice mixes sharing groups %v", groups)
		}
	}
	if len(energies) > 1 {
		return fmt.Errorf("mixes energy classes %v", energies)
	}
	return nil
}

// sharingConflicts counts the nodes and MIG profiles whose used instances have more than one
// sharing mode (the device plugin applies one sharing setting per resource and node).
func sharingConflicts(pl *v1.Plan) int {
	modes := map[string]v1.SharingMode{}
	bad := map[string]bool{}
	for _, g := range pl.GPUs {
		for _, in := range g.Instances {
			if len(in.Replicas) == 0 {
				continue
			}
			k, m := g.Node+"/"+in.Profile, in.Sharing.Mode
			if m == "" {
				m = v1.SharingNone
			}
			if old, ok := modes[k]; ok && old != m {
				bad[k] = true
			}
			modes[k] = m
		}
	}
	return len(bad)
}
