package v1

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

var sliceKinds = []SliceKind{SliceExclusive, SliceMIG, SliceMIGMPS, SliceMIGTimeSlice, SliceMPS, SliceTimeSlice}

// checkMissingGPUs reports fleet GPUs the plan does not list.
func (c *planChecker) checkMissingGPUs() {
	if c.fleet == nil {
		return
	}
	nodes := make([]string, 0, len(c.fleet))
	for n := range c.fleet {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var missing []string
	for _, n := range nodes {
		for i := range c.fleet[n] {
			if _, ok := c.gpuAt[GPURef{Node: n, Index: i}]; !ok {
				missing = append(missing, GPURef{Node: n, Index: i}.String())
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	shown := missing[:min(len(missing), 8)]
	more := ""
	if len(missing) > len(shown) {
		more = ", …"
	}
	c.errs.add("gpus", "missing %s of the fleet: %s%s", describeCount(len(missing), "GPU"), strings.Join(shown, ", "), more)
}

func (c *planChecker) checkTenants() {
	seen := dupTracker{}
	for i, t := range c.plan.Tenants {
		p := index("tenants", i)
		if t.Name == "" {
			c.errs.add(field(p, "name"), "required")
		} else {
			seen.check(&c.errs, field(p, "name"), "tenant", t.Name)
			if _, ok := c.tenants[t.Name]; !ok && c.pool != nil {
				c.errs.add(field(p, "name"), "unknown tenant %q (not in pool %q)", t.Name, c.pool.Metadata.Name)
			}
		}
		if t.Infeasible && len(t.Reasons) == 0 {
			c.errs.add(field(p, "reasons"), "an infeasible tenant needs at least one reason")
		}
		c.checkReasons(field(p, "reasons"), t.Reasons)
		c.checkPrediction(field(p, "predicted"), t.Predicted)
		c.checkTenantReplicas(p, t)
	}
	if c.pool == nil {
		return
	}
	for _, t := range c.pool.Tenants {
		if _, ok := seen[t.Name]; !ok && t.Name != "" {
			c.errs.add("tenants", "missing tenant %q of the pool", t.Name)
		}
	}
}

func (c *planChecker) checkReasons(p string, reasons []Reason) {
	for i, r := range reasons {
		rp := field(index(p, i), "code")
		switch {
		case r.Code == "":
			c.errs.add(rp, "required")
		case !r.Code.Known():
			c.errs.add(rp, "unknown reason code %q (valid: %s)", string(r.Code), listOrNone(ReasonCodes()))
		}
	}
}

func (c *planChecker) checkPrediction(p string, pr Prediction) {
	for _, d := range []struct {
		name string
		v    Duration
	}{{"ttftP99", pr.TTFTP99}, {"tpotP99", pr.TPOTP99}, {"e2eP99", pr.E2EP99}} {
		if d.v < 0 {
			c.errs.add(field(p, d.name), "must be ≥ 0 (got %s)", quoted(d.v))
		}
	}
	if !finiteNonNegative(pr.TokensPerSecond) {
		c.errs.add(field(p, "tokensPerSecond"), "must be ≥ 0 and finite (got %v)", pr.TokensPerSecond)
	}
	if !finiteNonNegative(pr.MaxRPS) {
		c.errs.add(field(p, "maxRps"), "must be ≥ 0 and finite (got %v)", pr.MaxRPS)
	}
}

// checkTenantReplicas checks that a tenant's replica list mirrors the replicas under gpus.
func (c *planChecker) checkTenantReplicas(p string, t PlanTenant) {
	rp := field(p, "replicas")
	onGPUs := c.replicas[t.Name]
	listed := map[int]bool{}
	for j, r := range t.Replicas {
		jp := index(rp, j)
		if listed[r.Index] {
			c.errs.add(field(jp, "index"), "duplicate replica index %d", r.Index)
		}
		listed[r.Index] = true
		if r.Slice == "" {
			c.errs.add(field(jp, "slice"), "required")
		}
		checkEnum(&c.errs, field(jp, "slice"), r.Slice, sliceKinds)
		got, ok := onGPUs[r.Index]
		if !ok {
			c.errs.add(jp, "replica %d of tenant %q is not placed under gpus", r.Index, t.Name)
			continue
		}
		if got.ref.GPU != r.GPU {
			c.errs.add(field(jp, "gpu"), "%q, but %s places it on %q", r.GPU.String(), got.path, got.ref.GPU.String())
		}
		if got.ref.Instance != r.Instance {
			c.errs.add(field(jp, "instance"), "%s, but %s places it on %s", instanceText(r.Instance), got.path, instanceText(got.ref.Instance))
		}
		if r.Slice != "" && got.ref.Slice != r.Slice {
			c.errs.add(field(jp, "slice"), "%q, but %s gives it a %q slice", r.Slice, got.path, got.ref.Slice)
		}
	}
	indices := make([]int, 0, len(onGPUs))
	for i := range onGPUs {
		if !listed[i] {
			indices = append(indices, i)
		}
	}
	slices.Sort(indices)
	for _, i := range indices {
		c.errs.add(rp, "replica %d placed at %s is not listed", i, onGPUs[i].path)
	}
	c.checkReplicaCount(rp, t, len(onGPUs))
}

func instanceText(r InstanceRef) string {
	if r.IsZero() {
		return "no instance"
	}
	return strconv.Quote(r.String())
}

// checkReplicaCount holds the placed replica count to the pool tenant's cap, fixed count and
// reservation. A tenant marked infeasible may fall short of its fixed count and reservation.
func (c *planChecker) checkReplicaCount(rp string, t PlanTenant, n int) {
	if c.pool == nil {
		return
	}
	pt, ok := c.tenants[t.Name]
	if !ok {
		return
	}
	if pt.Cap != nil && n > *pt.Cap {
		c.errs.add(rp, "%s placed, more than cap %d", describeCount(n, "replica"), *pt.Cap)
	}
	if t.Infeasible || len(t.LoRAEngines) > 0 {
		// An adapter tenant on shared engines has no replicas of its own: its engines serve it.
		return
	}
	if pt.Replicas != nil {
		want := *pt.Replicas
		if pt.Redundancy {
			want++
		}
		if n != want {
			c.errs.add(rp, "%s placed, but the pool fixes the count at %d (mark the tenant infeasible if it cannot be met)", describeCount(n, "replica"), want)
		}
	}
	if n < pt.Reservation {
		c.errs.add(rp, "%s placed, fewer than reservation %d (mark the tenant infeasible if it cannot be met)", describeCount(n, "replica"), pt.Reservation)
	}
}

func (c *planChecker) checkSummary() {
	s := c.plan.Summary
	infeasible := slices.ContainsFunc(c.plan.Tenants, func(t PlanTenant) bool { return t.Infeasible })
	if s.GPUsTotal != len(c.plan.GPUs) {
		c.errs.add("summary.gpusTotal", "must equal the number of GPUs listed, %d (got %d)", len(c.plan.GPUs), s.GPUsTotal)
	}
	if s.GPUsUsed != c.used {
		c.errs.add("summary.gpusUsed", "must equal the number of GPUs that run a replica, %d (got %d)", c.used, s.GPUsUsed)
	}
	switch {
	case s.LowerBound < 0:
		c.errs.add("summary.lowerBound", "must be ≥ 0 (got %d)", s.LowerBound)
	case !infeasible && s.LowerBound > s.GPUsUsed:
		c.errs.add("summary.lowerBound", "%d is more than gpusUsed %d, but every tenant is feasible, so it is not a lower bound", s.LowerBound, s.GPUsUsed)
	}
	names := dupTracker{}
	for i, b := range s.Baselines {
		p := index("summary.baselines", i)
		if b.Name == "" {
			c.errs.add(field(p, "name"), "required")
		} else {
			names.check(&c.errs, field(p, "name"), "baseline", b.Name)
		}
		if b.GPUs < 0 {
			c.errs.add(field(p, "gpus"), "must be ≥ 0 (got %d)", b.GPUs)
		}
	}
	if math.IsNaN(s.Objective) || math.IsInf(s.Objective, 0) {
		c.errs.add("summary.objective", "must be finite (got %v)", s.Objective)
	}
	c.checkPlanCost(s)
}

// checkPlanCost checks summary.cost: basis planned, a currency with money, every figure finite
// and not negative, the total the fleet's hardware plus energy, and baselines that
// summary.baselines lists.
func (c *planChecker) checkPlanCost(s Summary) {
	pc := s.Cost
	if pc == nil {
		return
	}
	const base = "summary.cost"
	if pc.Basis != "planned" {
		c.errs.add(field(base, "basis"), `must be "planned" (got %q)`, pc.Basis)
	}
	money := pc.UsedHardwarePerHour != nil || pc.FleetHardwarePerHour != nil || pc.EnergyPerHour != nil || pc.TotalPerHour != nil || len(pc.Baselines) > 0
	switch {
	case money && pc.Currency == "":
		c.errs.add(field(base, "currency"), "required with a money figure")
	case pc.Currency != "" && !currencyRe.MatchString(pc.Currency):
		c.errs.add(field(base, "currency"), "must be an ISO 4217 code, three upper-case letters (got %q)", pc.Currency)
	}
	num := func(name string, v *float64) {
		if v != nil && !(*v >= 0 && !math.IsInf(*v, 0)) {
			c.errs.add(field(base, name), "must be finite and not negative (got %v)", *v)
		}
	}
	num("usedHardwarePerHour", pc.UsedHardwarePerHour)
	num("fleetHardwarePerHour", pc.FleetHardwarePerHour)
	num("energyPerHour", pc.EnergyPerHour)
	num("totalPerHour", pc.TotalPerHour)
	num("itEnergyKWhPerHour", &pc.ITEnergyKWhPerHour)
	num("gCO2ePerHourLocationBased", pc.GCO2ePerHourLocationBased)
	num("gCO2ePerHourMarketBased", pc.GCO2ePerHourMarketBased)
	if u, f := pc.UsedHardwarePerHour, pc.FleetHardwarePerHour; u != nil && f != nil && *u > *f*(1+1e-9) {
		c.errs.add(field(base, "usedHardwarePerHour"), "%v is more than the fleet's %v", *u, *f)
	}
	if f, e, t := pc.FleetHardwarePerHour, pc.EnergyPerHour, pc.TotalPerHour; f != nil && e != nil && t != nil &&
		math.Abs(*f+*e-*t) > 1e-9*max(1, math.Abs(*t)) {
		c.errs.add(field(base, "totalPerHour"), "must be fleetHardwarePerHour + energyPerHour, %v (got %v)", *f+*e, *t)
	}
	listed := map[string]bool{}
	for _, b := range s.Baselines {
		listed[b.Name] = true
	}
	for i, b := range pc.Baselines {
		p := index(field(base, "baselines"), i)
		if !listed[b.Name] {
			c.errs.add(field(p, "name"), "%q is not in summary.baselines", b.Name)
		}
		num(field(index("baselines", i), "hardwarePerHour"), &b.HardwarePerHour)
	}
}
