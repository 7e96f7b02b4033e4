package v1

import (
	"slices"
	"strings"

	"gpupool.dev/gpupool/internal/llm"
)

// Valid values of the Pool's enumerations.
var (
	isolations    = []Isolation{IsolationHard, IsolationSoft, IsolationShared}
	energyClasses = []EnergyClass{EnergyPerformance, EnergyBalanced, EnergyEfficiency}
	patterns      = []Pattern{PatternPoisson, PatternConstant, PatternBursty, PatternDiurnal}
	lengthLaws    = []Lengths{LengthsFixed, LengthsUniform, LengthsExponential}
	kvCacheDtypes = []string{"auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2"}
)

// isolationModes lists the GPU modes each isolation tier can run on.
var isolationModes = map[Isolation][]Mode{
	IsolationHard:   {ModeExclusive, ModeMIG},
	IsolationSoft:   {ModeExclusive, ModeMIG, ModeMPS},
	IsolationShared: {ModeExclusive, ModeMIG, ModeMPS, ModeTimeSlice},
}

type poolChecker struct {
	errs   errList
	cat    Catalog
	boards *boards
	p      *Pool
	fleet  map[string][]string
	// adapters maps each LoRA adapter name to the path that first named it.
	adapters map[string]string
}

// Pool checks p and returns every problem as FieldErrors, or nil.
func (v Validator) Pool(p *Pool) error {
	if p == nil {
		return FieldErrors{{Msg: "no pool"}}
	}
	c := &poolChecker{cat: v.catalog(), p: p, fleet: fleetGPUs(p.Fleet)}
	c.boards = newBoards(c.cat)
	checkHeader(&c.errs, p.APIVersion, p.Kind, KindPool)
	checkName(&c.errs, "metadata.name", p.Metadata.Name, true)
	c.checkFleet()
	c.checkPolicy()
	c.checkTenants()
	return c.errs.result()
}

func (c *poolChecker) checkFleet() {
	nodes := c.p.Fleet.Nodes
	if len(nodes) == 0 {
		c.errs.add("fleet.nodes", "must list at least one node")
	}
	if n := fleetSize(c.p.Fleet); n > MaxFleetGPUs {
		c.errs.add("fleet.nodes", "%d GPUs in all, more than the %d a pool may have", n, MaxFleetGPUs)
	}
	names := dupTracker{}
	for i, n := range nodes {
		p := index("fleet.nodes", i)
		checkName(&c.errs, field(p, "name"), n.Name, true)
		if n.Name != "" {
			names.check(&c.errs, field(p, "name"), "name", n.Name)
		}
		checkLabels(&c.errs, field(p, "labels"), n.Labels)
		if len(n.GPUs) == 0 {
			c.errs.add(field(p, "gpus"), "must list at least one GPU group")
		}
		total := 0
		for j, g := range n.GPUs {
			gp := index(field(p, "gpus"), j)
			c.boards.check(&c.errs, field(gp, "board"), g.Board)
			if g.Count < 1 || g.Count > maxGPUsPerNode {
				c.errs.add(field(gp, "count"), "must be between 1 and %d (got %d)", maxGPUsPerNode, g.Count)
			}
			total += min(max(g.Count, 0), maxGPUsPerNode+1)
		}
		if total > maxGPUsPerNode {
			c.errs.add(field(p, "gpus"), "node has %d GPUs or more, more than the %d a node may have", total, maxGPUsPerNode)
		}
	}
}

func (c *poolChecker) checkPolicy() {
	pol := c.p.Policy
	c.checkCanaries()
	if b := pol.BurstPoolPercent; b != nil && (*b < 0 || *b > 50) {
		c.errs.add("policy.burstPoolPercent", "must be between 0 and 50 (got %d)", *b)
	}
	if pol.AllowedModes != nil && len(pol.AllowedModes) == 0 {
		c.errs.add("policy.allowedModes", "must list at least one mode (leave it out to allow all)")
	}
	seen := dupTracker{}
	for i, m := range pol.AllowedModes {
		p := index("policy.allowedModes", i)
		if m == "" {
			c.errs.add(p, "required")
			continue
		}
		checkEnum(&c.errs, p, m, allModes)
		seen.check(&c.errs, p, "mode", string(m))
	}
	if mu := pol.MaxUnavailable; mu != nil {
		switch {
		case mu.Percent && (mu.Value < 1 || mu.Value > 100):
			c.errs.add("policy.maxUnavailable", "must be between 1%% and 100%% (got %q)", mu.String())
		case !mu.Percent && (mu.Value < 1 || mu.Value > MaxUnavailableCount):
			c.errs.add("policy.maxUnavailable", "must be between 1 and %d or a percentage (got %d)", MaxUnavailableCount, mu.Value)
		}
	}
	if d := pol.ReconfigCooldown; d != nil && (*d < 0 || *d > MaxCooldown) {
		c.errs.add("policy.reconfigCooldown", "must be between 0s and %s (got %s)", MaxCooldown, quoted(*d))
	}
	checkEnum(&c.errs, "policy.kubernetesDeviceAPI", pol.KubernetesDeviceAPI, deviceAPIs)
	if m := pol.MaxMoves; m != nil && (*m < 0 || *m > MaxMovesLimit) {
		c.errs.add("policy.maxMoves", "must be between 0 and %d (got %d)", MaxMovesLimit, *m)
	}
	c.checkCost()
}

func (c *poolChecker) checkCanaries() {
	seen := dupTracker{}
	for i, r := range c.p.Policy.CanaryGPUs {
		p := index("policy.canaryGPUs", i)
		if checkGPURef(&c.errs, p, r, c.fleet) {
			seen.check(&c.errs, p, "GPU", r.String())
		}
	}
	total := 0
	for _, gpus := range c.fleet {
		total += len(gpus)
	}
	if total > 0 && len(seen) >= total {
		c.errs.add("policy.canaryGPUs", "all %d GPUs of the fleet are canaries, which leaves none for the pool", total)
	}
}

func (c *poolChecker) checkTenants() {
	if n := len(c.p.Tenants); n > MaxTenants {
		c.errs.add("tenants", "%d tenants, more than the %d a pool may have", n, MaxTenants)
	}
	names := dupTracker{}
	full := map[string]string{} // "path/name" → path of the tenant
	for i, t := range c.p.Tenants {
		p := index("tenants", i)
		checkName(&c.errs, field(p, "name"), t.Name, false)
		if t.Name != "" {
			names.check(&c.errs, field(p, "name"), "name", t.Name)
			full[joinPath(t.Path, t.Name)] = p
		}
		c.checkTenant(p, t)
	}
	for i, t := range c.p.Tenants {
		parts := strings.Split(t.Path, "/")
		for k := 1; k <= len(parts) && t.Path != ""; k++ {
			prefix := strings.Join(parts[:k], "/")
			if owner, ok := full[prefix]; ok {
				c.errs.add(field(index("tenants", i), "path"), "%q is the tenant at %s, so it cannot also be a group", prefix, owner)
			}
		}
	}
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "/" + name
}

func (c *poolChecker) checkTenant(p string, t Tenant) {
	if t.Path != "" {
		for _, part := range strings.Split(t.Path, "/") {
			if !isLabel(part) {
				c.errs.add(field(p, "path"), "must be slash-separated DNS-1123 labels, like \"org/team\" (got %q)", t.Path)
				break
			}
		}
	}
	if w := t.Weight; w != nil && !(*w >= MinWeight && *w <= MaxWeight) {
		c.errs.add(field(p, "weight"), "must be between %g and %g (got %v)", MinWeight, MaxWeight, *w)
	}
	checkEnum(&c.errs, field(p, "isolation"), t.Isolation, isolations)
	c.checkIsolationModes(p, t.Isolation)
	maxPos := c.checkModel(field(p, "model"), t.Model, t.Profile != "")
	c.checkLoad(p, t, maxPos)
	c.checkSLO(field(p, "slo"), t.SLO)
	c.checkCounts(p, t)
	checkEnum(&c.errs, field(p, "energyClass"), t.EnergyClass, energyClasses)
	if t.Profile != "" && strings.TrimSpace(t.Profile) == "" {
		c.errs.add(field(p, "profile"), "must be a path, not blank")
	}
}

// checkIsolationModes reports a tier that no allowed mode can serve.
func (c *poolChecker) checkIsolationModes(p string, iso Isolation) {
	allowed := c.p.Policy.AllowedModes
	if len(allowed) == 0 {
		return
	}
	if iso == "" {
		iso = DefaultIsolation
	}
	need, ok := isolationModes[iso]
	if !ok {
		return
	}
	var valid []Mode // the allowed modes that exist, each once, in the usual order
	for _, m := range allModes {
		if slices.Contains(allowed, m) {
			if slices.Contains(need, m) {
				return
			}
			valid = append(valid, m)
		}
	}
	c.errs.add(field(p, "isolation"), "%q needs one of the modes %s, but policy.allowedModes allows only %s",
		string(iso), listOrNone(need), listOrNone(valid))
}

// checkModel checks the model block and returns the model's maximum context (0 when unknown).
// A tenant sized from a measured profile may name a model the catalog does not know (a model
// measured elsewhere, e.g. one of ParvaGPU's CNNs): the planner sizes it from the table.
func (c *poolChecker) checkModel(p string, m Model, measured bool) int {
	switch {
	case m.Name == "" && m.Dir == "":
		c.errs.add(p, "set exactly one of name or dir (got neither)")
	case m.Name != "" && m.Dir != "":
		c.errs.add(p, "set exactly one of name or dir (got both)")
	}
	if q := canonicalQuantization(m.Quantization); q != m.Quantization {
		c.errs.add(field(p, "quantization"), "%q is an alias of %q: Default or Decode stores the canonical name", string(m.Quantization), string(q))
	} else {
		checkEnum(&c.errs, field(p, "quantization"), m.Quantization, llm.Quantizations())
	}
	checkEnum(&c.errs, field(p, "kvCacheDtype"), m.KVCacheDtype, kvCacheDtypes)
	if m.Adapter != nil {
		c.checkAdapter(field(p, "adapter"), *m.Adapter)
	}
	if m.Name == "" {
		return 0
	}
	arch, err := c.cat.Model(m.Name)
	if err != nil {
		if !measured {
			c.errs.add(field(p, "name"), "unknown model %q (valid: %s)", m.Name, listOrNone(c.cat.ModelNames()))
		}
		return 0
	}
	return arch.MaxPositions
}

func (c *poolChecker) checkLoad(p string, t Tenant, maxPos int) {
	switch {
	case t.MaxContext < 0 || t.MaxContext > MaxTokens:
		c.errs.add(field(p, "maxContext"), "must be between 0 and %d (got %d)", MaxTokens, t.MaxContext)
	case maxPos > 0 && t.MaxContext > maxPos:
		// vLLM refuses a max_model_len above the model's max_position_embeddings.
		c.errs.add(field(p, "maxContext"), "%d tokens is more than the model's maximum of %d", t.MaxContext, maxPos)
	}
	if t.Concurrency < 0 || t.Concurrency > MaxConcurrency {
		c.errs.add(field(p, "concurrency"), "must be between 0 and %d (got %d)", MaxConcurrency, t.Concurrency)
	}
	tp := field(p, "traffic")
	tr := t.Traffic
	if !(tr.RPS >= 0 && tr.RPS <= MaxRPS) {
		c.errs.add(field(tp, "rps"), "must be between 0 and %d (got %v)", int(MaxRPS), tr.RPS)
	}
	if tr.InputTokens < 0 || tr.InputTokens > MaxTokens {
		c.errs.add(field(tp, "inputTokens"), "must be between 0 and %d (got %d)", MaxTokens, tr.InputTokens)
	}
	if tr.OutputTokens < 0 || tr.OutputTokens > MaxTokens {
		c.errs.add(field(tp, "outputTokens"), "must be between 0 and %d (got %d)", MaxTokens, tr.OutputTokens)
	}
	checkEnum(&c.errs, field(tp, "pattern"), tr.Pattern, patterns)
	checkEnum(&c.errs, field(tp, "lengths"), tr.Lengths, lengthLaws)
	limit, what := t.MaxContext, "maxContext"
	if limit == 0 {
		limit, what = maxPos, "the model's maximum context"
	}
	if sum := int64(tr.InputTokens) + int64(tr.OutputTokens); limit > 0 && sum > int64(limit) {
		c.errs.add(tp, "inputTokens + outputTokens = %d is more than %s %d", sum, what, limit)
	}
}

func (c *poolChecker) checkSLO(p string, s SLO) {
	for _, f := range []struct {
		name string
		d    *Duration
	}{{"ttftP99", s.TTFTP99}, {"tpotP99", s.TPOTP99}, {"e2eP99", s.E2EP99}} {
		switch {
		case f.d == nil:
		case *f.d <= 0:
			c.errs.add(field(p, f.name), "must be > 0 (got %s)", quoted(*f.d))
		case *f.d > MaxSLO:
			c.errs.add(field(p, f.name), "must be at most %s (got %s)", MaxSLO, quoted(*f.d))
		}
	}
	// End-to-end latency includes the first token, so its p99 cannot be below TTFT's p99.
	if s.TTFTP99 != nil && s.E2EP99 != nil && *s.TTFTP99 > 0 && *s.E2EP99 > 0 && *s.E2EP99 < *s.TTFTP99 {
		c.errs.add(field(p, "e2eP99"), "must be ≥ ttftP99 %s (got %s)", quoted(*s.TTFTP99), quoted(*s.E2EP99))
	}
}

func (c *poolChecker) checkCounts(p string, t Tenant) {
	if t.Reservation < 0 || t.Reservation > MaxReplicaCount {
		c.errs.add(field(p, "reservation"), "must be between 0 and %d (got %d)", MaxReplicaCount, t.Reservation)
	}
	if t.Cap != nil {
		switch {
		case *t.Cap < 1 || *t.Cap > MaxReplicaCount:
			c.errs.add(field(p, "cap"), "must be between 1 and %d (got %d)", MaxReplicaCount, *t.Cap)
		case *t.Cap < t.Reservation:
			c.errs.add(field(p, "cap"), "must be ≥ reservation %d (got %d)", t.Reservation, *t.Cap)
		}
	}
	if t.Replicas != nil {
		switch r := *t.Replicas; {
		case r < 1 || r > MaxReplicaCount:
			c.errs.add(field(p, "replicas"), "must be between 1 and %d (got %d)", MaxReplicaCount, r)
		case r < t.Reservation:
			c.errs.add(field(p, "replicas"), "must be ≥ reservation %d (got %d)", t.Reservation, r)
		case t.Cap != nil && *t.Cap >= 1 && r > *t.Cap:
			c.errs.add(field(p, "replicas"), "must be ≤ cap %d (got %d)", *t.Cap, r)
		}
	}
	for _, b := range []struct {
		name string
		v    *int
	}{{"minReplicas", t.MinReplicas}, {"maxReplicas", t.MaxReplicas}} {
		switch {
		case b.v == nil:
		case *b.v < 1:
			c.errs.add(field(p, b.name), "must be ≥ 1 (got %d)", *b.v)
		case t.Replicas != nil:
			c.errs.add(field(p, b.name), "must not be set with replicas (got %d)", *b.v)
		}
	}
	if t.MinReplicas != nil && t.MaxReplicas != nil && *t.MinReplicas >= 1 && *t.MaxReplicas < *t.MinReplicas {
		c.errs.add(field(p, "maxReplicas"), "must be ≥ minReplicas %d (got %d)", *t.MinReplicas, *t.MaxReplicas)
	}
}
