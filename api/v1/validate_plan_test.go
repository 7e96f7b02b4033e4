package v1

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestValidPlanIsValid(t *testing.T) {
	pool := loadValidPool(t)
	if err := testValidator.Plan(loadValidPlan(t), pool); err != nil {
		t.Fatalf("plan-valid.yaml:\n%v", err)
	}
	if err := testValidator.Plan(loadValidPlan(t), nil); err != nil {
		t.Fatalf("plan-valid.yaml without its pool:\n%v", err)
	}
}

// TestValidPlanIsValidWithBuiltinCatalog checks the example against the real gpu catalog,
// including its MIG layout rules.
func TestValidPlanIsValidWithBuiltinCatalog(t *testing.T) {
	if err := ValidatePlan(loadValidPlan(t), loadValidPool(t)); err != nil {
		t.Fatalf("plan-valid.yaml:\n%v", err)
	}
}

// TestValidatePlanRules changes one thing in plan-valid.yaml per case and expects exactly the
// listed errors. GPUs there: [0]–[2] gpu-node-a/0–2 exclusive with chat 0–2; [3] a/3 MIG
// 3g.40gb@0 + 3g.40gb@4 with code-complete 0 and 1; [4] a/4 MIG 4g.40gb@0 MPS (docs-qa 0,
// eval-batch 0) + 2g.20gb@4 (summarizer 0); [5] burst; [6], [7] idle; [8]–[10] gpu-node-b/0–2
// idle; [11] gpu-node-b/3 canary. Tenants: [0] chat, [1] code-complete, [2] summarizer,
// [3] docs-qa, [4] eval-batch.
func TestValidatePlanRules(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *Plan, pool *Pool)
		want   string
	}{
		// Header.
		{"kind", func(p *Plan, _ *Pool) { p.Kind = "Pool" }, `kind: must be "Plan" (got "Pool")`},
		{"pool name", func(p *Plan, _ *Pool) { p.Pool = "other" }, `pool: the plan is for pool "other", not "inference-prod"`},
		{"pool required", func(p *Plan, _ *Pool) { p.Pool = "" }, `pool: required`},

		// GPUs against the fleet.
		{"duplicate GPU", func(p *Plan, _ *Pool) { p.GPUs[7].Index = 6; p.Summary.GPUsTotal = 12 },
			`gpus: missing 1 GPU of the fleet: gpu-node-a/7` + "\n" + `gpus[7]: duplicate GPU "gpu-node-a/6" (first at gpus[6])`},
		{"unknown node", func(p *Plan, _ *Pool) { p.GPUs[6].Node = "gpu-node-z" },
			`gpus: missing 1 GPU of the fleet: gpu-node-a/6` + "\n" + `gpus[6]: unknown node "gpu-node-z"`},
		{"index out of range", func(p *Plan, _ *Pool) { p.GPUs[10].Index = 9 },
			`gpus: missing 1 GPU of the fleet: gpu-node-b/2` + "\n" + `gpus[10]: node "gpu-node-b" has 4 GPUs (indices 0–3), got index 9`},
		{"missing GPUs", func(p *Plan, _ *Pool) { p.GPUs = p.GPUs[:8]; p.Summary.GPUsTotal = 8 },
			`gpus: missing 4 GPUs of the fleet: gpu-node-b/0, gpu-node-b/1, gpu-node-b/2, gpu-node-b/3`},
		{"board differs from fleet", func(p *Plan, _ *Pool) { p.GPUs[8].Board = "H100-SXM5-80GB" },
			`gpus[8].board: "H100-SXM5-80GB", but the fleet has "A100-SXM4-80GB" at gpu-node-b/0`},
		{"unknown board", func(p *Plan, _ *Pool) { p.GPUs[8].Board = "B300" },
			`gpus[8].board: unknown board "B300" (valid: A100-SXM4-80GB, H100-SXM5-80GB, L40S-48GB)`},
		{"negative index", func(p *Plan, _ *Pool) { p.GPUs[8].Index = -1 },
			`gpus: missing 1 GPU of the fleet: gpu-node-b/0` + "\n" + `gpus[8].index: must be between 0 and 63 (got -1)`},

		// Role and mode.
		{"role required", func(p *Plan, _ *Pool) { p.GPUs[6].Role = "" }, `gpus[6].role: required`},
		{"role unknown", func(p *Plan, _ *Pool) { p.GPUs[6].Role = "spare" },
			`gpus[6].role: unknown value "spare" (valid: pool, canary, burst, idle)`},
		{"mode unknown", func(p *Plan, _ *Pool) { p.GPUs[6].Mode = "vgpu" },
			`gpus[6].mode: unknown value "vgpu" (valid: exclusive, mig, mps, timeslice)`},
		{"canary not canary", func(p *Plan, _ *Pool) { p.GPUs[11].Role = RoleIdle },
			`gpus[11].role: gpu-node-b/3 is a canary GPU in policy.canaryGPUs, so its role must be "canary" (got "idle")`},
		{"canary not in policy", func(p *Plan, _ *Pool) { p.GPUs[10].Role = RoleCanary },
			`gpus[10].role: gpu-node-b/2 is not in policy.canaryGPUs`},
		{"mode not allowed", func(p *Plan, pool *Pool) { pool.Policy.AllowedModes = []Mode{ModeExclusive, ModeMIG} },
			`gpus[4].instances[0].sharing.mode: "mps" is not in policy.allowedModes (exclusive, mig)`},
		{"idle with replicas", func(p *Plan, _ *Pool) { p.GPUs[2].Role = RoleIdle },
			`gpus[2].role: GPUs with role "idle" run no tenant replicas (this one has 1)`},

		// MIG layout.
		{"instances outside mig", func(p *Plan, _ *Pool) { p.GPUs[6].Instances = []PlanInstance{{Profile: "7g.80gb"}} },
			`gpus[6].instances: only for mode "mig" (mode is "exclusive")`},
		{"replicas beside instances", func(p *Plan, _ *Pool) {
			p.GPUs[3].Replicas = []PlanReplica{{Tenant: "code-complete", Index: 2}}
		}, `gpus[3].replicas: must be empty in mode "mig": replicas run inside instances`},
		{"unknown profile", func(p *Plan, _ *Pool) {
			p.GPUs[3].Instances[0].Profile = "3g.47gb"
			p.Tenants[1].Replicas[0].Instance.Profile = "3g.47gb"
		}, `gpus[3].instances[0].profile: unknown profile "3g.47gb" on board "H100-SXM5-80GB" (valid: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`},
		{"illegal start", func(p *Plan, _ *Pool) {
			p.GPUs[3].Instances[1].Start = 2
			p.Tenants[1].Replicas[1].Instance.Start = 2
		}, `gpus[3].instances[1].start: 3g.40gb cannot start at memory slice 2 on "H100-SXM5-80GB" (legal starts: [0 4])`},
		{"mig on a board without MIG", func(p *Plan, pool *Pool) {
			pool.Fleet.Nodes[1].GPUs = []GPUGroup{{Board: "A100", Count: 3}, {Board: "L40S-48GB", Count: 1}}
			p.GPUs[11].Board = "L40S-48GB"
			p.GPUs[11].Instances = []PlanInstance{{Profile: "1g.10gb"}}
		}, `gpus[11].mode: board "L40S-48GB" has no MIG`},
		{"sharing mode", func(p *Plan, _ *Pool) { p.GPUs[3].Instances[0].Sharing.Mode = "spatial" },
			`gpus[3].instances[0].sharing.mode: unknown value "spatial" (valid: none, mps, timeslice)` + "\n" +
				`tenants[1].replicas[0].slice: "mig", but gpus[3].instances[0].replicas[0] gives it a "" slice`},

		// Replicas.
		{"two replicas on an exclusive GPU", func(p *Plan, _ *Pool) {
			p.GPUs[0].Replicas = append(p.GPUs[0].Replicas, p.GPUs[1].Replicas...)
			p.GPUs[1].Replicas = nil
			p.Tenants[0].Replicas[1].GPU = GPURef{"gpu-node-a", 0}
			p.Summary.GPUsUsed = 4
		}, `gpus[0].replicas: memory limits add up to 152Gi, more than the 81559Mi the slice has` + "\n" + // 76Gi + 76Gi
			`gpus[0].replicas: slice kind "exclusive" holds one replica (got 2)`},
		{"unknown tenant", func(p *Plan, _ *Pool) { p.GPUs[2].Replicas[0].Tenant = "ghost" },
			`gpus[2].replicas[0].tenant: unknown tenant "ghost"` + "\n" + `tenants[0].replicas[2]: replica 2 of tenant "chat" is not placed under gpus`},
		{"duplicate replica", func(p *Plan, _ *Pool) { p.GPUs[2].Replicas[0].Index = 1 },
			`gpus[2].replicas[0]: duplicate replica 1 of tenant "chat" (first at gpus[1].replicas[0])` + "\n" +
				`tenants[0].replicas[2]: replica 2 of tenant "chat" is not placed under gpus`},
		{"smPercent range", func(p *Plan, _ *Pool) { p.GPUs[4].Instances[0].Replicas[0].Limits.SMPercent = 101 },
			`gpus[4].instances[0].replicas[0].limits.smPercent: must be between 1 and 100 (got 101)`},
		{"smPercent outside MPS", func(p *Plan, _ *Pool) { p.GPUs[0].Replicas[0].Limits.SMPercent = 50 },
			`gpus[0].replicas[0].limits.smPercent: only for MPS slices (slice is "exclusive")`},
		{"timeSliceReplicas outside time-slicing", func(p *Plan, _ *Pool) { p.GPUs[0].Replicas[0].Limits.TimeSliceReplicas = 2 },
			`gpus[0].replicas[0].limits.timeSliceReplicas: only for time-sliced slices (slice is "exclusive")`},
		{"negative memory", func(p *Plan, _ *Pool) { p.GPUs[0].Replicas[0].Limits.Memory = -1 },
			`gpus[0].replicas[0].limits.memory: must be ≥ 0 (got -1)`},
		{"memory over the instance", func(p *Plan, _ *Pool) { // 20Gi + 30Gi = 50Gi > 4g.40gb's 40448 MiB
			p.GPUs[4].Instances[0].Replicas[1].Limits.Memory = 30 * GiB
		}, `gpus[4].instances[0].replicas: memory limits add up to 50Gi, more than the 40448Mi the slice has`},
		{"memory over the GPU", func(p *Plan, _ *Pool) { p.GPUs[0].Replicas[0].Limits.Memory = 80 * GiB }, // 81920 MiB > 81559 MiB
			`gpus[0].replicas: memory limits add up to 80Gi, more than the 81559Mi the slice has`},
		{"empty vLLM argument", func(p *Plan, _ *Pool) { p.GPUs[0].Replicas[0].VLLMArgs[1] = "" },
			`gpus[0].replicas[0].vllmArgs[1]: must not be empty`},

		// Isolation.
		{"hard tenant shares", func(p *Plan, _ *Pool) {
			p.GPUs[4].Instances[0].Replicas[1].Tenant = "chat"
			p.GPUs[4].Instances[0].Replicas[1].Index = 3
			p.Tenants[0].Replicas = append(p.Tenants[0].Replicas, ReplicaRef{Index: 3, GPU: GPURef{"gpu-node-a", 4},
				Instance: InstanceRef{"4g.40gb", 0}, Slice: SliceMIGMPS})
			p.Tenants[4].Replicas = nil
			p.Tenants[4].Infeasible = true
			p.Tenants[4].Reasons = []Reason{{Code: ReasonNoCapacity}}
		}, `gpus[4].instances[0].replicas[1].tenant: tenant "chat" has isolation "hard" but shares a "mig+mps" slice with tenant "docs-qa"`},
		{"soft tenant time-sliced", func(p *Plan, _ *Pool) {
			p.GPUs[4].Instances[0].Sharing.Mode = SharingTimeSlice
			p.GPUs[4].Instances[0].Replicas[0] = PlanReplica{Tenant: "summarizer", Index: 1}
			p.GPUs[4].Instances[0].Replicas[1].Limits.SMPercent = 0
			p.Tenants[2].Replicas = append(p.Tenants[2].Replicas, ReplicaRef{Index: 1, GPU: GPURef{"gpu-node-a", 4},
				Instance: InstanceRef{"4g.40gb", 0}, Slice: SliceMIGTimeSlice})
			p.Tenants[3].Replicas = nil
			p.Tenants[3].Infeasible = true
			p.Tenants[3].Reasons = []Reason{{Code: ReasonNoCapacity}}
			p.Tenants[4].Replicas[0].Slice = SliceMIGTimeSlice
		}, `gpus[4].instances[0].replicas[0].tenant: tenant "summarizer" has isolation "soft", which forbids time-slicing with tenant "eval-batch"`},
		{"soft tenant outside its trust group", func(p *Plan, pool *Pool) {
			pool.Tenants[3].Isolation = IsolationSoft
			pool.Tenants[3].Path = "research/vision"
		}, `gpus[4].instances[0].replicas[0].tenant: tenant "docs-qa" has isolation "soft" and shares MPS only within its trust group (path "research/vision"); tenant "eval-batch" has path "research/nlp"`},

		{"soft tenant without a path", func(p *Plan, pool *Pool) {
			pool.Tenants[3].Isolation = IsolationSoft
			pool.Tenants[3].Path = ""
		}, `gpus[4].instances[0].replicas[0].tenant: tenant "docs-qa" has isolation "soft" and no path, so no trust group to share MPS with (it shares with tenant "eval-batch")`},

		// Tenants.
		{"tenant listed twice", func(p *Plan, _ *Pool) { p.Tenants = append(p.Tenants, PlanTenant{Name: "chat"}) },
			`tenants[5].name: duplicate tenant "chat" (first at tenants[0].name)` + "\n" +
				`tenants[5].replicas: replica 0 placed at gpus[0].replicas[0] is not listed` + "\n" +
				`tenants[5].replicas: replica 1 placed at gpus[1].replicas[0] is not listed` + "\n" +
				`tenants[5].replicas: replica 2 placed at gpus[2].replicas[0] is not listed`},
		{"tenant missing", func(p *Plan, _ *Pool) { p.Tenants = p.Tenants[:4] },
			`tenants: missing tenant "eval-batch" of the pool`},
		{"tenant unknown", func(p *Plan, _ *Pool) { p.Tenants[4].Name = "eval" },
			`tenants: missing tenant "eval-batch" of the pool` + "\n" + `tenants[4].name: unknown tenant "eval" (not in pool "inference-prod")` + "\n" +
				`tenants[4].replicas[0]: replica 0 of tenant "eval" is not placed under gpus`},
		{"replica on another GPU", func(p *Plan, _ *Pool) { p.Tenants[0].Replicas[2].GPU = GPURef{"gpu-node-a", 5} },
			`tenants[0].replicas[2].gpu: "gpu-node-a/5", but gpus[2].replicas[0] places it on "gpu-node-a/2"`},
		{"replica on another instance", func(p *Plan, _ *Pool) { p.Tenants[1].Replicas[0].Instance.Start = 4 },
			`tenants[1].replicas[0].instance: "3g.40gb@4", but gpus[3].instances[0].replicas[0] places it on "3g.40gb@0"`},
		{"replica without instance", func(p *Plan, _ *Pool) { p.Tenants[1].Replicas[0].Instance = InstanceRef{} },
			`tenants[1].replicas[0].instance: no instance, but gpus[3].instances[0].replicas[0] places it on "3g.40gb@0"`},
		{"wrong slice kind", func(p *Plan, _ *Pool) { p.Tenants[3].Replicas[0].Slice = SliceMPS },
			`tenants[3].replicas[0].slice: "mps", but gpus[4].instances[0].replicas[0] gives it a "mig+mps" slice`},
		{"slice required", func(p *Plan, _ *Pool) { p.Tenants[3].Replicas[0].Slice = "" },
			`tenants[3].replicas[0].slice: required`},
		{"unknown slice", func(p *Plan, _ *Pool) { p.Tenants[3].Replicas[0].Slice = "vgpu" },
			`tenants[3].replicas[0].slice: "vgpu", but gpus[4].instances[0].replicas[0] gives it a "mig+mps" slice` + "\n" +
				`tenants[3].replicas[0].slice: unknown value "vgpu" (valid: exclusive, mig, mig+mps, mig+timeslice, mps, timeslice)`},
		{"duplicate listed index", func(p *Plan, _ *Pool) { p.Tenants[1].Replicas[1].Index = 0 },
			`tenants[1].replicas: replica 1 placed at gpus[3].instances[1].replicas[0] is not listed` + "\n" +
				`tenants[1].replicas[1].index: duplicate replica index 0` + "\n" +
				`tenants[1].replicas[1].instance: "3g.40gb@4", but gpus[3].instances[0].replicas[0] places it on "3g.40gb@0"`},
		{"over cap", func(p *Plan, pool *Pool) { pool.Tenants[0].Cap = ptr(2); pool.Tenants[0].Reservation = 1 },
			`tenants[0].replicas: 3 replicas placed, more than cap 2`},
		{"fixed count not met", func(p *Plan, pool *Pool) { pool.Tenants[3].Replicas = ptr(2) },
			`tenants[3].replicas: 1 replica placed, but the pool fixes the count at 2 (mark the tenant infeasible if it cannot be met)`},
		{"fixed count plus redundancy", func(p *Plan, pool *Pool) { pool.Tenants[3].Redundancy = true }, // 1 + 1 spare
			`tenants[3].replicas: 1 replica placed, but the pool fixes the count at 2 (mark the tenant infeasible if it cannot be met)`},
		{"below reservation", func(p *Plan, pool *Pool) { pool.Tenants[0].Reservation = 4 },
			`tenants[0].replicas: 3 replicas placed, fewer than reservation 4 (mark the tenant infeasible if it cannot be met)`},
		{"infeasible may fall short", func(p *Plan, pool *Pool) {
			pool.Tenants[0].Reservation = 4
			p.Tenants[0].Infeasible = true
			p.Tenants[0].Reasons = []Reason{NewReason(ReasonNoCapacity, "4 whole GPUs needed, 3 free")}
		}, ``},
		{"infeasible without reason", func(p *Plan, _ *Pool) { p.Tenants[4].Infeasible = true; p.Tenants[4].Reasons = nil },
			`tenants[4].reasons: an infeasible tenant needs at least one reason`},
		{"unknown reason code", func(p *Plan, _ *Pool) { p.Tenants[4].Reasons[0].Code = "TooBig" },
			`tenants[4].reasons[0].code: unknown reason code "TooBig" (valid: ` + listOrNone(ReasonCodes()) + `)`},
		{"reason code required", func(p *Plan, _ *Pool) { p.GPUs[5].Reasons[0].Code = "" }, `gpus[5].reasons[0].code: required`},
		{"prediction negative", func(p *Plan, _ *Pool) {
			p.Tenants[0].Predicted.TTFTP99 = -1
			p.Tenants[0].Predicted.MaxRPS = -1
			p.Tenants[0].Predicted.TokensPerSecond = math.Inf(1)
		}, `tenants[0].predicted.maxRps: must be ≥ 0 and finite (got -1)` + "\n" +
			`tenants[0].predicted.tokensPerSecond: must be ≥ 0 and finite (got +Inf)` + "\n" +
			`tenants[0].predicted.ttftP99: must be ≥ 0 (got "-1ns")`},

		// Tensor parallelism: chat's replica 1 over gpu-node-a/1 and /2 (its replica 2 dropped).
		{"tensor parallel", func(p *Plan, _ *Pool) { tp2(p, TensorParallel{Size: 2, GPUs: []int{1, 2}}) }, ``},
		{"tensor parallel bad group", func(p *Plan, _ *Pool) {
			tp2(p, TensorParallel{Size: 3, GPUs: []int{2, 1}})
		}, `gpus[1].replicas[0].tensorParallel.gpus: must list size (3) GPUs of the node (got 2)` + "\n" +
			`gpus[1].replicas[0].tensorParallel.gpus[1]: indices must ascend (1 after 2)` + "\n" +
			`gpus[1].replicas[0].tensorParallel.size: must be one of [2 4 8] (got 3)` + "\n" +
			`gpus[2].replicas[0].tensorParallel.gpus: must list size (3) GPUs of the node (got 2)` + "\n" +
			`gpus[2].replicas[0].tensorParallel.gpus[1]: indices must ascend (1 after 2)` + "\n" +
			`gpus[2].replicas[0].tensorParallel.size: must be one of [2 4 8] (got 3)` + "\n" +
			`tenants[0].replicas[1].gpu: "gpu-node-a/1", but gpus[1].replicas[0] places it on "gpu-node-a/2"`},
		{"tensor parallel member missing", func(p *Plan, _ *Pool) {
			tp2(p, TensorParallel{Size: 2, GPUs: []int{1, 2}})
			p.GPUs[2].Replicas = nil
			p.Summary.GPUsUsed = 4
		}, `gpus[1].replicas[0].tensorParallel.gpus: names GPU gpu-node-a/2, which does not list replica 1 of tenant "chat"`},
		{"tensor parallel on a shared GPU", func(p *Plan, _ *Pool) {
			tp2(p, TensorParallel{Size: 2, GPUs: []int{1, 2}})
			p.GPUs[1].Mode, p.GPUs[2].Mode = ModeMPS, ModeMPS
		}, `gpus[1].replicas[0].tensorParallel: only on whole GPUs of mode "exclusive" (this replica's slice is "mps")` + "\n" +
			`gpus[2].replicas[0].tensorParallel: only on whole GPUs of mode "exclusive" (this replica's slice is "mps")` + "\n" +
			`tenants[0].replicas[1].slice: "exclusive", but gpus[1].replicas[0] gives it a "mps" slice`},
		{"tensor parallel listed apart", func(p *Plan, _ *Pool) {
			tp2(p, TensorParallel{Size: 2, GPUs: []int{1, 2}})
			p.GPUs[2].Replicas[0].TensorParallel = TensorParallel{}
		}, `gpus[1].replicas[0].tensorParallel.gpus: names GPU gpu-node-a/2, which does not list replica 1 of tenant "chat"` + "\n" +
			`gpus[2].replicas[0]: replica 1 of tenant "chat" is listed again with another tensor-parallel group or on another node (first at gpus[1].replicas[0])`},

		// Summary.
		{"gpusTotal", func(p *Plan, _ *Pool) { p.Summary.GPUsTotal = 8 }, `summary.gpusTotal: must equal the number of GPUs listed, 12 (got 8)`},
		{"gpusUsed", func(p *Plan, _ *Pool) { p.Summary.GPUsUsed = 4 },
			`summary.gpusUsed: must equal the number of GPUs that run a replica, 5 (got 4)`},
		{"lower bound above used", func(p *Plan, _ *Pool) { p.Summary.LowerBound = 6 },
			`summary.lowerBound: 6 is more than gpusUsed 5, but every tenant is feasible, so it is not a lower bound`},
		{"lower bound negative", func(p *Plan, _ *Pool) { p.Summary.LowerBound = -1 }, `summary.lowerBound: must be ≥ 0 (got -1)`},
		{"baselines", func(p *Plan, _ *Pool) {
			p.Summary.Baselines = []Baseline{{Name: "exclusive", GPUs: 8}, {Name: "exclusive", GPUs: -1}, {GPUs: 1}}
		}, `summary.baselines[1].gpus: must be ≥ 0 (got -1)` + "\n" +
			`summary.baselines[1].name: duplicate baseline "exclusive" (first at summary.baselines[0].name)` + "\n" +
			`summary.baselines[2].name: required`},
		{"objective NaN", func(p *Plan, _ *Pool) { p.Summary.Objective = math.NaN() }, `summary.objective: must be finite (got NaN)`},
		{"cost valid", func(p *Plan, _ *Pool) {
			p.Summary.Baselines = []Baseline{{Name: "exclusive", GPUs: 8}}
			p.Summary.Cost = &PlanCost{Basis: "planned", Currency: "USD", UsedHardwarePerHour: ptr(2.0), FleetHardwarePerHour: ptr(8.0),
				EnergyPerHour: ptr(0.5), TotalPerHour: ptr(8.5), ITEnergyKWhPerHour: 3, Baselines: []BaselineCost{{Name: "exclusive", HardwarePerHour: 5.33}}}
		}, ""},
		{"cost, all errors at once", func(p *Plan, _ *Pool) {
			p.Summary.Cost = &PlanCost{Basis: "measured", UsedHardwarePerHour: ptr(9.0), FleetHardwarePerHour: ptr(8.0),
				EnergyPerHour: ptr(math.NaN()), TotalPerHour: ptr(8.5), ITEnergyKWhPerHour: -1, GCO2ePerHourMarketBased: ptr(math.Inf(1)),
				Baselines: []BaselineCost{{Name: "greedy", HardwarePerHour: -2}}}
		}, `summary.cost.baselines[0].hardwarePerHour: must be finite and not negative (got -2)` + "\n" +
			`summary.cost.baselines[0].name: "greedy" is not in summary.baselines` + "\n" +
			`summary.cost.basis: must be "planned" (got "measured")` + "\n" +
			`summary.cost.currency: required with a money figure` + "\n" +
			`summary.cost.energyPerHour: must be finite and not negative (got NaN)` + "\n" +
			`summary.cost.gCO2ePerHourMarketBased: must be finite and not negative (got +Inf)` + "\n" +
			`summary.cost.itEnergyKWhPerHour: must be finite and not negative (got -1)` + "\n" +
			`summary.cost.usedHardwarePerHour: 9 is more than the fleet's 8`},
		{"cost total", func(p *Plan, _ *Pool) {
			p.Summary.Cost = &PlanCost{Basis: "planned", Currency: "usd", FleetHardwarePerHour: ptr(8.0), EnergyPerHour: ptr(0.5), TotalPerHour: ptr(9.0)}
		}, `summary.cost.currency: must be an ISO 4217 code, three upper-case letters (got "usd")` + "\n" +
			`summary.cost.totalPerHour: must be fleetHardwarePerHour + energyPerHour, 8.5 (got 9)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, pool := loadValidPlan(t), loadValidPool(t)
			tt.mutate(plan, pool)
			got := ""
			if err := testValidator.Plan(plan, pool); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("errors =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestValidatePlanChecksLayoutWithBoardRules adds 3g.40gb@4 (memory slices 4–7) beside
// 4g.40gb@0 (0–3) and 2g.20gb@4 (4–5): the board's own rules (gpu.Board.Validate) report the
// overlap and the 4 + 2 + 3 = 9 > 7 compute slices, in one error at the layout's path.
func TestValidatePlanChecksLayoutWithBoardRules(t *testing.T) {
	plan, pool := loadValidPlan(t), loadValidPool(t)
	plan.GPUs[4].Instances = append(plan.GPUs[4].Instances, PlanInstance{Profile: "3g.40gb", Start: 4})
	err := testValidator.Plan(plan, pool)
	var fe FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 {
		t.Fatalf("errors = %v, want one", err)
	}
	if fe[0].Path != "gpus[4].instances" || !strings.HasPrefix(fe[0].Msg, "illegal MIG layout: ") ||
		!strings.Contains(fe[0].Msg, "overlaps") || !strings.Contains(fe[0].Msg, "9 compute slices") {
		t.Errorf("error = %v", fe[0])
	}
}

func TestValidateNilPlan(t *testing.T) {
	if err := ValidatePlan(nil, nil); err == nil {
		t.Error("ValidatePlan(nil, nil): no error")
	}
}

// tp2 makes chat's replica 1 one tensor-parallel replica listed under gpu-node-a/1 and /2 with
// group tp, in place of chat's replicas 1 and 2.
func tp2(p *Plan, tp TensorParallel) {
	r := PlanReplica{Tenant: "chat", Index: 1, TensorParallel: tp}
	p.GPUs[1].Replicas = []PlanReplica{r}
	p.GPUs[2].Replicas = []PlanReplica{r}
	p.Tenants[0].Replicas = p.Tenants[0].Replicas[:2]
}

// withLoRAEngine adds two soft adapter tenants of one trust group to pool and a valid shared
// engine for them on gpu-node-a/6 (idle in the valid plan) to plan.
func withLoRAEngine(p *Plan, pool *Pool) {
	for _, n := range []string{"ad-1", "ad-2"} {
		pool.Tenants = append(pool.Tenants, Tenant{Name: n, Path: "acme/x", Isolation: IsolationSoft,
			Model: Model{Name: "llama-3.1-8b", Adapter: &Adapter{Name: n + "-lora", Repo: "acme/" + n, Rank: 16}}})
		p.Tenants = append(p.Tenants, PlanTenant{Name: n, LoRAEngines: []string{"e-0"}, Reasons: []Reason{{Code: ReasonLoRAEngine}}})
	}
	p.GPUs[6].Role, p.GPUs[6].LoRAEngine = RolePool, "e-0"
	p.Summary.GPUsUsed++
	p.LoRAEngines = []PlanLoRAEngine{{Name: "e-0", GPU: GPURef{Node: "gpu-node-a", Index: 6}, Model: "llama-3.1-8b",
		MaxLoRAs: 2, MaxLoRARank: 16, MaxCPULoRAs: 2,
		Adapters: []PlanLoRAAdapter{{Tenant: "ad-1", Adapter: "ad-1-lora", RPS: 1}, {Tenant: "ad-2", Adapter: "ad-2-lora", RPS: 0.5}}}}
}

// A plan with a shared LoRA engine is valid; each broken rule is reported at its field.
func TestValidatePlanLoRAEngines(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(p *Plan, pool *Pool)
		want   string
	}{
		{"valid", func(*Plan, *Pool) {}, ""},
		{"GPU mode", func(p *Plan, _ *Pool) { p.GPUs[6].Mode = ModeMPS },
			`gpus[6].mode: a GPU that runs a LoRA engine has mode "exclusive" (got "mps")`},
		{"GPU does not name it", func(p *Plan, _ *Pool) { p.GPUs[6].LoRAEngine = ""; p.GPUs[6].Role = RoleIdle; p.Summary.GPUsUsed-- },
			`loraEngines[0].gpu: no GPU names engine "e-0" in loraEngine`},
		{"GPU names an unknown engine", func(p *Plan, _ *Pool) { p.GPUs[7].LoRAEngine, p.GPUs[7].Role = "e-9", RolePool; p.Summary.GPUsUsed++ },
			`gpus[7].loraEngine: unknown LoRA engine "e-9" (not in loraEngines)`},
		{"engine GPU differs", func(p *Plan, _ *Pool) { p.LoRAEngines[0].GPU.Index = 7 },
			`loraEngines[0].gpu: "gpu-node-a/7", but the engine runs on "gpu-node-a/6"`},
		{"limits", func(p *Plan, _ *Pool) {
			p.LoRAEngines[0].MaxLoRAs, p.LoRAEngines[0].MaxLoRARank, p.LoRAEngines[0].MaxCPULoRAs = 0, 12, -1
		}, `loraEngines[0].maxCpuLoras: must be ≥ maxLoras 0 (got -1)` + "\n" +
			`loraEngines[0].maxLoraRank: must be one of vLLM's ranks [1 8 16 32 64 128 256 320 512] (got 12)` + "\n" +
			`loraEngines[0].maxLoras: must be ≥ 1 (got 0)`},
		{"adapter name", func(p *Plan, _ *Pool) { p.LoRAEngines[0].Adapters[1].Adapter = "other" },
			`loraEngines[0].adapters[1].adapter: "other", but tenant "ad-2"'s adapter is "ad-2-lora"`},
		{"hard tenant", func(_ *Plan, pool *Pool) { pool.Tenants[len(pool.Tenants)-1].Isolation = IsolationHard },
			`loraEngines[0].adapters[1].tenant: tenant "ad-2" is hard-isolated: it never shares an engine process`},
		{"tenant does not name it", func(p *Plan, _ *Pool) { p.Tenants[len(p.Tenants)-1].LoRAEngines = nil },
			`tenants[` + "6" + `].loraEngines: [], but the engines that list tenant "ad-2" are [e-0]`},
		{"replicas beside", func(p *Plan, _ *Pool) { p.GPUs[6].Replicas = []PlanReplica{{Tenant: "ad-1", Index: 0}} },
			`gpus[6].replicas: a GPU that runs a LoRA engine runs nothing else` + "\n" +
				`tenants[5].loraEngines: a tenant served by LoRA engines has no replicas of its own` + "\n" +
				`tenants[5].replicas: replica 0 placed at gpus[6].replicas[0] is not listed`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan, pool := loadValidPlan(t), loadValidPool(t)
			withLoRAEngine(plan, pool)
			tt.mutate(plan, pool)
			got := ""
			if err := testValidator.Plan(plan, pool); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("errors =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestValidatePlanMPSShares: an MPS GPU or instance holds at most MaxMPSClients replicas, and on
// the device-plugin path a whole-GPU MPS replica may not ask for more than the equal share of
// its GPU's replicas (the plugin gives each client the same); the DRA path accepts it.
func TestValidatePlanMPSShares(t *testing.T) {
	has := func(err error, want string) bool { return err != nil && strings.Contains(err.Error(), want) }

	p, pool := loadValidPlan(t), loadValidPool(t)
	in := &p.GPUs[4].Instances[0]
	for len(in.Replicas) <= MaxMPSClients {
		r := in.Replicas[0]
		r.Index = 100 + len(in.Replicas)
		in.Replicas = append(in.Replicas, r)
	}
	const clients = "an MPS server runs at most 48 clients (got 49 replicas)"
	if err := testValidator.Plan(p, pool); !has(err, clients) {
		t.Errorf("49 MPS replicas on one instance: got %v, want %q", err, clients)
	}
	in.Replicas = in.Replicas[:MaxMPSClients]
	if err := testValidator.Plan(p, pool); has(err, "MPS server runs at most") {
		t.Errorf("48 MPS replicas on one instance: %v", err)
	}

	// pair shares GPU a/1 by MPS between chat 1 (at pct and mem) and a second replica of chat
	// (at half), on the given device path.
	pair := func(api KubernetesDeviceAPI, pct int, mem Bytes) (*Plan, *Pool, *PlanGPU, PlanReplica) {
		p, pool := loadValidPlan(t), loadValidPool(t)
		pool.Policy.KubernetesDeviceAPI = api
		g := &p.GPUs[1]
		g.Mode = ModeMPS
		r := g.Replicas[0]
		r.Limits = Limits{SMPercent: 50, Memory: 30 * GiB}
		g.Replicas[0].Limits = Limits{SMPercent: pct, Memory: mem}
		r.Index = 90
		g.Replicas = append(g.Replicas, r)
		return p, pool, g, r
	}
	// GPU a/1 by MPS between two replicas, one of them above half.
	mps := func(api KubernetesDeviceAPI, pct int, mem Bytes) error {
		p, pool, _, _ := pair(api, pct, mem)
		return testValidator.Plan(p, pool)
	}
	const unequal = "more than the device plugin's equal share of 2 replicas"
	if err := mps("", 60, 30*GiB); !has(err, "gpus[1].replicas[0].limits: 60% SMs and 30Gi memory, "+unequal+" (50%, 40779Mi)") {
		t.Errorf("MPS replica at 60%% of 2 on the device plugin: got %v", err)
	}
	if err := mps("", 50, 45*GiB); !has(err, unequal) {
		t.Errorf("MPS replica with 45Gi of 80Gi among 2 on the device plugin: got %v", err)
	}
	if err := mps("", 50, 30*GiB); has(err, unequal) {
		t.Errorf("MPS replicas at equal shares on the device plugin: %v", err)
	}
	if err := mps(DeviceAPIDRA, 60, 45*GiB); has(err, unequal) {
		t.Errorf("unequal MPS replicas on the DRA path: %v", err)
	}

	// The plugin's MPS setting is one per node: beside a GPU of the same node whose MPS holds 3
	// replicas, the halves of GPU a/1 are above the node's equal share of 3.
	node := func(api KubernetesDeviceAPI, others int) error {
		p, pool, g, r := pair(api, 50, 30*GiB)
		o := slices.IndexFunc(p.GPUs, func(x PlanGPU) bool { return x.Node == g.Node && x.Index != g.Index })
		if o < 0 {
			t.Fatalf("the valid plan has no second GPU on node %s", g.Node)
		}
		og := &p.GPUs[o]
		og.Mode, og.Instances, og.Replicas = ModeMPS, nil, nil
		for i := range others {
			r.Index, r.Limits = 95+i, Limits{SMPercent: 100 / others, Memory: 20 * GiB}
			og.Replicas = append(og.Replicas, r)
		}
		return testValidator.Plan(p, pool)
	}
	const nodeWide = "more than the device plugin's equal share of 3 replicas (node"
	if err := node("", 3); !has(err, nodeWide) {
		t.Errorf("halves of one GPU beside 3 MPS replicas on another GPU of the node: got %v", err)
	}
	if err := node("", 2); has(err, "equal share") {
		t.Errorf("halves of one GPU beside 2 MPS replicas on another GPU of the node: %v", err)
	}
	if err := node(DeviceAPIDRA, 3); has(err, "equal share") {
		t.Errorf("MPS GPUs of different counts on one node on the DRA path: %v", err)
	}
}
