package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// tenantState is one tenant of the pool as the simulation sees it.
type tenantState struct {
	spec     v1.Tenant
	replicas []int32 // indices into sim.replicas
	stats    tenantStats
}

// domain is the set of replicas that share one resource: a whole GPU (modes exclusive, mps,
// timeslice) or one MIG instance. Replicas of one domain slow each other while busy; replicas of
// different domains never do, except through the board's power limit (perf.Load.BoardBusy).
type domain struct {
	gpu      int32
	name     string  // "node/0" or "node/0 3g.40gb@4"
	smFrac   float64 // SMs of the domain as a fraction of the board's
	replicas []int32
	inStep   int   // replicas of the domain in a step now
	since    int64 // when inStep last went from 0 to 1
	busy     int64 // ns with inStep > 0
}

// gpuState is one GPU of the plan that runs replicas.
type gpuState struct {
	ref      string
	board    *gpu.Board
	mode     v1.Mode
	domains  []int32
	busySM   float64 // fraction of the board's SMs in a step now (sum over domains)
	tokens   int64   // output tokens generated on this GPU
	dynJ     float64 // dynamic energy of the steps run on this GPU, joules above idle
	timeline []float64
	// Power accounting (power.go): the cap on the steps' summed power, the replicas in a step
	// now, when the power was last integrated, the energy the cap took off, and scratch space.
	dynCap   float64
	stepping int
	powSince int64
	cappedJ  float64
	active   []int32
}

// replica is one inference engine.
type replica struct {
	tenant, domain, gpu int32
	name                string
	eng                 *perf.Engine
	smPct               float64 // MPS cap, 0 for none
	kvCap               int64
	maxLen              int64 // --max-model-len: a longer prompt + output is refused; 0 for none
	maxSeqs             int
	budget              int
	kvUsed              int64
	waiting             deque
	running             []int32
	sched               []schedItem
	inStep              bool
	stepStart           int64
	steps, preemptions  int64
	dynJ                float64 // dynamic energy of the replica's steps, joules above idle
	stepW               float64 // power of the step in flight, watts above idle (its energy / its time)
	stepEnd             int64   // when the step in flight ends
	outTokens, inTokens int64   // output tokens generated, prompt tokens computed (recomputes included)
}

// schedItem is one request's share of a step: tokens computed and whether they are prefill.
type schedItem struct {
	req     int32
	tokens  int32
	prefill bool
}

// build turns a pool and a plan into the simulation's topology, after checking the plan against
// the pool (v1.ValidatePlan) and every replica's slice against its model (weights and one request
// of mean length must fit). It returns every problem at once.
func (s *Sim) build(in Input) error {
	if in.Pool == nil || in.Plan == nil {
		return errors.New("build simulation: a pool and a plan are required")
	}
	if err := v1.ValidatePlan(in.Plan, in.Pool); err != nil {
		return fmt.Errorf("check plan %s against pool %s: %w", in.Plan.Metadata.Name, in.Pool.Metadata.Name, err)
	}
	s.measured = in.Profiles
	models, errs := s.models(in)
	byName := map[string]int32{}
	for i, t := range in.Pool.Tenants {
		byName[t.Name] = int32(i)
		if s.measured[t.Name] != nil {
			// A measured tenant's request is one batch item: one token in, one token out.
			t.Traffic.InputTokens, t.Traffic.OutputTokens = 1, 1
		}
		s.tenants = append(s.tenants, &tenantState{spec: t,
			stats: newTenantStats(sloNs(t.SLO.TTFTP99), sloNs(t.SLO.TPOTP99), sloNs(t.SLO.E2EP99))})
	}
	s.tenantIdx = byName
	for gi, g := range in.Plan.GPUs {
		if g.Role != v1.RolePool && g.Role != v1.RoleBurst || g.ReplicaCount() == 0 {
			continue
		}
		errs = append(errs, s.buildGPU(fmt.Sprintf("gpus[%d]", gi), g, models)...)
	}
	return errors.Join(errs...)
}

// models builds one perf.Model per tenant. Catalog names are looked up; directory models come
// from in.Models.
func (s *Sim) models(in Input) (map[string]*perf.Model, []error) {
	out := map[string]*perf.Model{}
	s.served = map[string]llm.Model{}
	var errs []error
	for i, t := range in.Pool.Tenants {
		p := fmt.Sprintf("tenants[%d] (%s)", i, t.Name)
		if in.Profiles[t.Name] != nil {
			continue // sized from its measured table (NewMeasuredEngine)
		}
		var arch llm.Arch
		switch {
		case t.Model.Name != "":
			a, err := llm.Lookup(t.Model.Name)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				continue
			}
			arch = a
			s.served[t.Name] = llm.FromArch(a)
		default:
			m, ok := in.Models[t.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: model directory %q was not loaded", p, t.Model.Dir))
				continue
			}
			arch = m.Arch
			s.served[t.Name] = m
		}
		q := t.Model.Quantization
		if q == "" && arch.Quantization != "" {
			q = llm.Quantization(arch.Quantization)
		}
		o := s.cfg.Perf
		kvb, err := llm.KVElemBytes(t.Model.KVCacheDtype)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		o.KVElemBytes = kvb
		o.IdlePowerFraction = s.cfg.IdlePowerFraction
		if t.Concurrency > 0 {
			o.MaxSeqs = t.Concurrency
		}
		m, err := perf.New(arch, q, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		out[t.Name] = m
	}
	return out, errs
}

func (s *Sim) buildGPU(p string, g v1.PlanGPU, models map[string]*perf.Model) []error {
	board, err := gpu.Lookup(g.Board)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", p, err)}
	}
	gs := &gpuState{ref: g.Ref().String(), board: board, mode: g.Mode, timeline: make([]float64, s.cfg.TimelineBuckets)}
	gi := int32(len(s.gpus))
	s.gpus = append(s.gpus, gs)
	var errs []error
	if g.Mode != v1.ModeMIG {
		mode := perf.Exclusive
		switch g.Mode {
		case v1.ModeMPS:
			mode = perf.MPS
		case v1.ModeTimeSlice:
			mode = perf.TimeSlice
		}
		// A tensor-parallel replica runs once, on its group's first GPU, as one engine over the
		// group (perf's tensor-parallel model); the group's other GPUs hold no engine.
		reps := make([]v1.PlanReplica, 0, len(g.Replicas))
		for _, r := range g.Replicas {
			if tp := r.TensorParallel.GPUs; len(tp) == 0 || tp[0] == g.Index {
				reps = append(reps, r)
			}
		}
		errs = append(errs, s.buildDomain(p, gi, gs.ref, board, nil, mode, reps, models)...)
		return errs
	}
	for ii, in := range g.Instances {
		if len(in.Replicas) == 0 {
			continue
		}
		ip := fmt.Sprintf("%s.instances[%d]", p, ii)
		prof, err := board.Profile(in.Profile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ip, err))
			continue
		}
		mode := perf.Exclusive
		switch in.Sharing.Mode {
		case v1.SharingMPS:
			mode = perf.MPS
		case v1.SharingTimeSlice:
			mode = perf.TimeSlice
		}
		name := gs.ref + " " + in.Ref().String()
		errs = append(errs, s.buildDomain(ip, gi, name, board, prof, mode, in.Replicas, models)...)
	}
	return errs
}

func (s *Sim) buildDomain(p string, gi int32, name string, b *gpu.Board, prof *gpu.Profile, mode perf.Mode,
	reps []v1.PlanReplica, models map[string]*perf.Model) []error {
	d := &domain{gpu: gi, name: name, smFrac: 1}
	if prof != nil {
		d.smFrac = domainSMFrac(b, prof)
	}
	di := int32(len(s.domains))
	s.domains = append(s.domains, d)
	s.gpus[gi].domains = append(s.gpus[gi].domains, di)
	var errs []error
	for ri, r := range reps {
		rp := fmt.Sprintf("%s.replicas[%d]", p, ri)
		ti, ok := s.tenantIdx[r.Tenant]
		m, tab := models[r.Tenant], s.measured[r.Tenant]
		if !ok || m == nil && tab == nil {
			continue // reported by ValidatePlan or models
		}
		sl := perf.Slice{Board: b, Profile: prof, Mode: mode, Replicas: len(reps)}
		if n := r.TensorParallel.Size; n > 1 {
			sl.TensorParallel = n
		}
		// The tenant's energy class locks the GPU's clocks (the planner puts one class per GPU).
		cp, err := s.cfg.Perf.ClockCap(string(s.tenants[ti].spec.EnergyClass))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: tenant %s: %w", rp, r.Tenant, err))
			continue
		}
		sl.ClockCap = cp
		if mode == perf.MPS && r.Limits.SMPercent > 0 {
			sl.SMPercent = float64(r.Limits.SMPercent)
		}
		if mode != perf.Exclusive && r.Limits.Memory > 0 {
			sl.MemoryMiB = int64(r.Limits.Memory) >> 20
		}
		var eng *perf.Engine
		if tab != nil {
			o := s.cfg.Perf
			o.IdlePowerFraction = s.cfg.IdlePowerFraction
			eng, err = perf.NewMeasuredEngine(tab, sl, o)
		} else {
			eng, err = m.Place(sl)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: tenant %s: %w", rp, r.Tenant, err))
			continue
		}
		t := s.tenants[ti].spec
		if tab == nil && sl.TensorParallel == 0 {
			// The replica's KV cache is the vLLM the plan starts: the planner's memory fit of this
			// slice with the replica's --max-model-len and --gpu-memory-utilization.
			eng, err = s.planCache(eng, t, b, prof, mode, r, len(reps))
		}
		if n := maxNumSeqs(r.VLLMArgs); err == nil && tab == nil && n > 0 && n < eng.MaxSeqs() {
			// A replica the plan starts with fewer sequences than the engine's default runs
			// that many at once (the planner caps some where the KV cache binds).
			eng = eng.WithMaxSeqs(n)
		}
		if err == nil {
			err = checkFit(eng, t)
		}
		if err != nil {
			at := rp
			if sl.MemoryMiB > 0 { // the replica's own memory limit is what is too small
				at = fmt.Sprintf("%s.limits.memory (%d MiB)", rp, sl.MemoryMiB)
			}
			errs = append(errs, fmt.Errorf("%s: tenant %s on %s (%s): %w", at, r.Tenant, name, sl.Name(), err))
			continue
		}
		seqs := eng.MaxSeqs()
		if tab != nil {
			seqs = parvaBatch(tab, sl, mode, len(reps), t, seqs)
		}
		rep := &replica{tenant: ti, domain: di, gpu: gi, eng: eng, smPct: sl.SMPercent, kvCap: eng.KVCapacityTokens(),
			maxLen: maxModelLen(r.VLLMArgs, t.MaxContext), maxSeqs: seqs, budget: max(eng.MaxBatchedTokens(), seqs),
			name: fmt.Sprintf("%s/%d", r.Tenant, r.Index)}
		idx := int32(len(s.replicas))
		s.replicas = append(s.replicas, rep)
		d.replicas = append(d.replicas, idx)
		s.tenants[ti].replicas = append(s.tenants[ti].replicas, idx)
	}
	return errs
}

// planCache returns eng with the KV cache of the vLLM the plan starts for replica r of tenant t,
// share replicas sharing its GPU or instance in mode: llm's memory fit (the planner's) of the
// replica's slice (llm.ReplicaSlice: its MIG instance or whole GPU, inside its memory limit) at
// the tenant's serving options as the planner sets them (quantization, KV-cache dtype,
// concurrency as --max-num-seqs) and the replica's --max-model-len, --gpu-memory-utilization and
// --enforce-eager (Options.WithVLLMArgs; the tenant's maxContext, else the model's default
// context, where the arguments give no length). A replica whose vLLM would not start (its cache
// holds no sequence of its --max-model-len) is an error.
func (s *Sim) planCache(eng *perf.Engine, t v1.Tenant, b *gpu.Board, prof *gpu.Profile, mode perf.Mode,
	r v1.PlanReplica, share int) (*perf.Engine, error) {
	capBytes := int64(r.Limits.Memory)
	if mode == perf.Exclusive { // a limit on an unshared slice is not applied (as perf.Slice.MemoryMiB)
		share, capBytes = 1, 0
	}
	kv := t.Model.KVCacheDtype
	if kv == "" {
		kv = llm.KVCacheAuto
	}
	o, err := llm.Options{Quantization: t.Model.Quantization, KVCacheDType: kv, Context: t.MaxContext,
		MaxNumSeqs: t.Concurrency}.WithVLLMArgs(r.VLLMArgs)
	if err != nil {
		return nil, err
	}
	fit, err := llm.FitSlice(s.served[t.Name], o, llm.ReplicaSlice(b, prof, capBytes, share))
	if err != nil {
		return nil, err
	}
	if !fit.Fits {
		return nil, fmt.Errorf("slice too small for model %s: its vLLM would not start: %s", eng.Model().Name(), strings.Join(fit.Reasons, "; "))
	}
	return eng.WithKVCapacity(fit.MaxTokens), nil
}

// maxNumSeqs is the replica's --max-num-seqs: the last one in its vLLM arguments, in the
// "--max-num-seqs N" or "--max-num-seqs=N" form; 0 when none (or none that parses) is given.
func maxNumSeqs(args []string) int {
	n := 0
	for i, a := range args {
		v, ok := "", false
		switch {
		case a == "--max-num-seqs" && i+1 < len(args):
			v, ok = args[i+1], true
		case strings.HasPrefix(a, "--max-num-seqs="):
			v, ok = strings.TrimPrefix(a, "--max-num-seqs="), true
		}
		if x, err := strconv.Atoi(v); ok && err == nil && x > 0 {
			n = x
		}
	}
	return n
}

// maxModelLen is the replica's --max-model-len: the last one in its vLLM arguments (vLLM's
// parser keeps the last), in the "--max-model-len N" or "--max-model-len=N" form; the tenant's
// maxContext when the arguments name none (or none that parses); 0 when neither is set.
func maxModelLen(args []string, maxContext int) int64 {
	n := int64(maxContext)
	for i, a := range args {
		v, ok := "", false
		switch {
		case a == "--max-model-len" && i+1 < len(args):
			v, ok = args[i+1], true
		case strings.HasPrefix(a, "--max-model-len="):
			v, ok = strings.TrimPrefix(a, "--max-model-len="), true
		}
		if !ok {
			continue
		}
		if x, err := strconv.ParseInt(v, 10, 64); err == nil && x > 0 {
			n = x
		}
	}
	return max(n, 0)
}

// parvaBatch is the batch a measured tenant's replica runs at, by ParvaGPU's rule: the
// highest-throughput runnable batch whose latency is within 0.45 × slo.e2eP99, with the MPS
// processes sharing the instance; def when the tenant has no end-to-end objective or the table
// has no such row.
func parvaBatch(tab *perf.Measured, sl perf.Slice, mode perf.Mode, n int, t v1.Tenant, def int) int {
	if t.SLO.E2EP99 == nil {
		return def
	}
	gpcs := sl.Board.ComputeSlices
	if sl.Profile != nil {
		gpcs = sl.Profile.ComputeSlices
	}
	procs := 1
	if mode == perf.MPS {
		procs = n
	}
	p, err := tab.Best(gpcs, procs, time.Duration(0.45*float64(sloNs(t.SLO.E2EP99))))
	if err != nil {
		return def
	}
	return max(int(p.Batch), 1)
}

// checkFit rejects a slice that cannot serve the tenant at all: the weights do not fit, or the KV
// cache cannot hold one request of the tenant's mean length.
func checkFit(e *perf.Engine, t v1.Tenant) error {
	if !e.FitsWeights() {
		return fmt.Errorf("slice too small for model %s: %.1f GB of weights and the engine's reserve do not fit",
			e.Model().Name(), float64(e.Model().WeightBytes())/1e9)
	}
	need := int64(max(t.Traffic.InputTokens, 1) + max(t.Traffic.OutputTokens, 1))
	if e.KVCapacityTokens() < need {
		return fmt.Errorf("slice too small for model %s: KV cache holds %d tokens, one request needs %d",
			e.Model().Name(), e.KVCapacityTokens(), need)
	}
	return nil
}

// domainSMFrac is a MIG instance's SMs as a fraction of the board's.
func domainSMFrac(b *gpu.Board, p *gpu.Profile) float64 {
	if p.SMs > 0 && b.SMs > 0 {
		return math.Min(1, float64(p.SMs)/float64(b.SMs))
	}
	if b.ComputeSlices > 0 {
		return float64(p.ComputeSlices) / float64(b.ComputeSlices)
	}
	return 1
}

func sloNs(d *v1.Duration) int64 {
	if d == nil {
		return 0
	}
	return int64(d.Std())
}
