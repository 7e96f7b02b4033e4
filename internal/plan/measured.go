package plan

import (
	"fmt"
	"math"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// ParvaGPU's sizing rule for tenants with a measured profile (Lee et al., SC 2024): a batch's
// measured latency may take at most 45 % of the latency SLO (the rest covers the wait for the
// batch to form and the batch before it), and an instance runs at most 3 MPS processes.
const (
	measuredLatencyShare = 0.45
	measuredMaxProcs     = 3
)

// newMeasuredTenant sets up a tenant sized from its measured profile m instead of the LLM
// memory and performance models: its model name need not be in the LLM catalog. The latency
// SLO is slo.e2eP99; a batch may take measuredLatencyShare of it.
func newMeasuredTenant(tn *tenant, m *perf.Measured) (*tenant, error) {
	t := tn.t
	if t.SLO.E2EP99 == nil || t.SLO.E2EP99.Std() <= 0 {
		return nil, fmt.Errorf("build plan: tenant %s: a measured profile needs slo.e2eP99 (the latency SLO its batches are sized against)", t.Name)
	}
	name := t.Model.Name
	if name == "" {
		name = t.Model.Dir
	}
	tn.measured = m
	tn.model = llm.Model{Arch: llm.Arch{Name: name}}
	tn.modKey = "measured:" + t.Name
	tn.batchLimit = time.Duration(measuredLatencyShare * float64(t.SLO.E2EP99.Std()))
	tn.group = sharingGroup(t)
	return tn, nil
}

// measuredGPCs is the instance size a candidate slice is looked up at in a measured table:
// the MIG profile's compute slices (GPCs), or the board's for a whole GPU (on A100 and H100 a
// whole GPU is measured as the 7-GPC instance, which has slightly fewer SMs: conservative).
func measuredGPCs(c *cand) int {
	if c.profile != nil {
		return c.profile.ComputeSlices
	}
	return c.board.ComputeSlices
}

// measureProfile evaluates one replica (one MPS process) of a measured tenant on c's slice:
// the row with the highest throughput whose batch latency is within the tenant's batch limit,
// at the slice's instance size and c.share processes. A size and process count with no
// runnable row (measured 0,0, out of memory) does not fit.
func (p *planner) measureProfile(tn *tenant, c *cand) *evalResult {
	b := c.board
	dev := llm.VisibleBytes(b.MemoryMiB)
	kind, slName := llm.SliceGPU, "gpu"
	if c.profile != nil {
		dev, kind, slName = c.profile.MemoryMiB*llm.MiB, llm.SliceMIG, c.profile.Name
	}
	r := &evalResult{fit: &llm.Fit{Slice: llm.Slice{Board: b.Name, Kind: kind, Name: slName, MemoryBytes: dev, GPUBytes: dev}}}
	if c.kind == v1.SliceMPS || c.kind == v1.SliceMIGMPS {
		r.smPct = 100 / c.share
		r.capBytes = dev / int64(c.share) / llm.MiB * llm.MiB
	}
	gpcs := measuredGPCs(c)
	runnable := false
	for _, pt := range tn.measured.Points() {
		if pt.GPCs == gpcs && pt.Procs == c.share && pt.Runnable {
			runnable = true
			break
		}
	}
	if !runnable {
		r.fit.Reasons = []string{fmt.Sprintf("measured profile %s has no runnable row for a %d-GPC instance with %d process(es) (0,0 or not measured)",
			tn.measured.Name(), gpcs, c.share)}
		return r
	}
	r.fit.Fits = true
	pt, err := tn.measured.Best(gpcs, c.share, tn.batchLimit)
	if err != nil {
		fastest := time.Duration(math.MaxInt64)
		for _, q := range tn.measured.Points() {
			if q.GPCs == gpcs && q.Procs == c.share && q.Runnable {
				fastest = min(fastest, q.Latency)
			}
		}
		r.why = fmt.Sprintf("measured profile %s: the fastest batch on a %d-GPC instance with %d process(es) takes %s, more than %.0f%% of slo.e2eP99 (%s)",
			tn.measured.Name(), gpcs, c.share, roundDur(fastest), 100*measuredLatencyShare, roundDur(tn.batchLimit))
		return r
	}
	r.point = pt
	r.memo = perf.Rate{RequestsPerSec: pt.Throughput, TTFT: pt.Latency}
	return r
}

// measuredComputeReason is step 2 for a measured tenant: the batch chosen under ParvaGPU's rule,
// the rate per replica and the replicas.
func (p *planner) measuredComputeReason(tn *tenant) v1.Reason {
	c := tn.choice
	pt := c.ev.point
	msg := fmt.Sprintf("measured profile %s: on %s %s (%d GPCs, %d process(es)) the largest-throughput batch within %.0f%% of slo.e2eP99 (%s) is %g, taking %s; one replica sustains %.4g req/s, %.4g req/s needs %d replica(s) = %.3f GPU-equivalents",
		tn.measured.Name(), c.board.Name, c.label(), pt.GPCs, pt.Procs, 100*measuredLatencyShare, roundDur(tn.batchLimit),
		pt.Batch, roundDur(pt.Latency), pt.Throughput, tn.t.Traffic.RPS, c.replicas, c.cost)
	for _, x := range tn.feasible {
		if x != c {
			msg += fmt.Sprintf("; next cheapest: %s on %s, %d replica(s) = %.3f", x.label(), x.board.Name, x.replicas, x.cost)
			break
		}
	}
	msg += p.spilledWhy(tn)
	return v1.NewReason(v1.ReasonMeasuredProfile, "%s", msg)
}

// measuredMemoryReason is step 1 for a measured tenant: memory fit comes from the table (a
// configuration that ran fits).
func measuredMemoryReason(tn *tenant) v1.Reason {
	c := tn.choice
	var smallest *cand
	for _, x := range tn.cands {
		if x.board == c.board && x.ev != nil && x.ev.fit.Fits && (smallest == nil || x.unitFrac < smallest.unitFrac) {
			smallest = x
		}
	}
	msg := fmt.Sprintf("sized from measured profile %s (not the LLM memory model): a configuration fits where it was measured as runnable; the smallest such slice of %s is %s",
		tn.measured.Name(), c.board.Name, smallest.label())
	code := v1.ReasonMemoryBound
	if c.unitFrac > smallest.unitFrac+1e-9 {
		code = v1.ReasonComputeBound
		msg += fmt.Sprintf("; %s was chosen for throughput", c.label())
	}
	return v1.NewReason(code, "%s", msg)
}

// measuredNoFitReason explains a measured tenant no allowed slice runs.
func measuredNoFitReason(tn *tenant) v1.Reason {
	return v1.NewReason(v1.ReasonNoFit, "measured profile %s has no runnable row (0,0 or not measured) for any allowed slice", tn.measured.Name())
}

// measuredAdd wraps a candidate adder so that a measured tenant gets no more than
// measuredMaxProcs processes per GPU or instance.
func measuredAdd(add func(v1.SliceKind, *gpu.Profile, int)) func(v1.SliceKind, *gpu.Profile, int) {
	return func(kind v1.SliceKind, prof *gpu.Profile, share int) {
		if share <= measuredMaxProcs {
			add(kind, prof, share)
		}
	}
}
