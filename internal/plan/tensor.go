package plan

import (
	"fmt"
	"math"
	"strconv"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// maxNodeGPUs is the most GPUs of board b one node of the fleet offers the pool (canaries
// excluded): a tensor-parallel group never spans nodes. Computed once per board.
func (p *planner) maxNodeGPUs(b *gpu.Board) int {
	if n, ok := p.nodeGPUs[b]; ok {
		return n
	}
	per := map[string]int{}
	most := 0
	for _, g := range p.fleet {
		if g.board == b && !g.canary {
			per[g.ref.Node]++
			most = max(most, per[g.ref.Node])
		}
	}
	if p.nodeGPUs == nil {
		p.nodeGPUs = map[*gpu.Board]int{}
	}
	p.nodeGPUs[b] = most
	return most
}

// measureTP evaluates one replica over c.tp whole GPUs: perf's tensor-parallel engine (its KV
// capacity: memory × utilization − weights/tp − reserve per GPU), which must hold vLLM's
// max-model-len (vLLM refuses to start otherwise), and the queueing model over that engine.
// vLLM's arguments are those of one GPU (context, quantization, KV dtype) with the engine's
// batch limits and --tensor-parallel-size.
func (p *planner) measureTP(tn *tenant, c *cand) *evalResult {
	b := c.board
	r := &evalResult{fit: &noFit}
	dev := llm.VisibleBytes(b.MemoryMiB)
	one, err := p.cache.fit(tn, llm.Slice{Board: b.Name, Kind: llm.SliceGPU, Name: "gpu",
		MemoryBytes: dev, GPUBytes: dev, SMs: b.SMs})
	if err != nil {
		r.err = fmt.Errorf("fit %s on %s %s: %w", tn.t.Name, b.Name, c.label(), err)
		return r
	}
	e, err := p.cache.place(tn, perf.Slice{Board: b, TensorParallel: c.tp, ClockCap: tn.clock})
	if err != nil {
		r.err = err
		return r
	}
	kv := e.KVCapacityTokens()
	args := one.Args
	args.GPUMemoryUtilization = p.popts.GPUMemoryUtilization
	args.MaxNumSeqs, args.MaxNumBatchedTokens = e.MaxSeqs(), e.MaxBatchedTokens()
	args.EnforceEager = tn.llmOpt.EnforceEager
	r.fit = &llm.Fit{Slice: llm.Slice{Board: b.Name, Kind: llm.SliceGPU, Name: "tp" + strconv.Itoa(c.tp),
		MemoryBytes: dev * int64(c.tp), GPUBytes: dev, SMs: b.SMs * c.tp}, MaxTokens: kv, Args: args,
		Memory: one.Memory} // what the model needs (weights, KV cache at its context, workspace), as on one GPU
	if need := int64(max(args.MaxModelLen, tn.work.InputTokens+tn.work.OutputTokens)); kv < need {
		r.fit.Reasons = []string{fmt.Sprintf("%d GPUs tensor-parallel leave a KV cache of %d tokens, less than max-model-len %d",
			c.tp, max(kv, 0), need)}
		return r
	}
	r.fit.Fits = true
	r.q = newQModel(e, tn.work, sizingLoad(c)).withLengths(lengthLaw(tn.t.Traffic), tn.t.MaxContext).withSeqCap(tn.t.Concurrency)
	r.slo, r.out = tn.slo, tn.work.OutputTokens
	return r
}

// vllmFlags are the replica's vLLM flags: the fit's, with --max-num-seqs at seqCap where it caps,
// and --tensor-parallel-size for a tensor-parallel replica.
func vllmFlags(c *cand) []string {
	args := c.ev.fit.Args
	if n := seqCap(c); n > 0 {
		args.MaxNumSeqs = n
	}
	f := args.Flags()
	if c.tp > 1 {
		f = append(f, "--tensor-parallel-size", strconv.Itoa(c.tp))
	}
	return f
}

// takeGroup takes n free GPUs of board on one node (the node whose free GPUs come first in fleet
// order among those with n free and a compatible use) for a tensor-parallel unit, and records the
// node's use; nil when no node has n.
func (p *planner) takeGroup(board *gpu.Board, free map[string][]*gpuPlan, want map[string]migUse, n int) []*gpuPlan {
	gs := free[board.Name]
	count, order := p.reuse.nodeCounts()
	defer func() { p.reuse.takeOrder = order }()
	for _, g := range gs {
		if g == nil { // taken (takeCompatible)
			continue
		}
		node := g.fg.ref.Node
		if count[node] == 0 {
			order = append(order, node)
		}
		count[node]++
	}
	for _, node := range order {
		if count[node] < n || !p.compatible(node, want) {
			continue
		}
		out := make([]*gpuPlan, 0, n) // the node's first n, in fleet order
		rest := make([]*gpuPlan, 0, len(gs)-n)
		for _, g := range gs {
			switch {
			case g == nil:
			case len(out) < n && g.fg.ref.Node == node:
				out = append(out, g)
			default:
				rest = append(rest, g)
			}
		}
		free[board.Name] = rest
		p.reserve(node, want)
		return out
	}
	return nil
}

// tpGroup is the plan's tensorParallel field of a unit placed on gs.
func tpGroup(gs []*gpuPlan) v1.TensorParallel {
	t := v1.TensorParallel{Size: len(gs)}
	for _, g := range gs {
		t.GPUs = append(t.GPUs, g.fg.ref.Index)
	}
	return t
}

// seqCap is the --max-num-seqs a replica of c runs with in place of its default: the slots of
// its queueing model where the model caps them (qmodel.seqCapped), 0 otherwise.
func seqCap(c *cand) int {
	if c == nil || c.ev == nil || c.ev.q == nil || !c.ev.q.capped {
		return 0
	}
	return c.ev.q.slots
}

// withSeqCap sets whether q's engine runs with --max-num-seqs at q's slots for a tenant whose
// pool sets concurrency conc (0 when unset), seqCapped, and returns q. For varying lengths the
// cap, and with it the slots of the model, is longPlaces (ADR 0093). Call it after withLengths.
func (q *qmodel) withSeqCap(conc int) *qmodel {
	q.capped = q.seqCapped(conc)
	if q.capped && q.lengths != "" {
		q.slots = min(q.slots, q.longPlaces())
	}
	return q
}

// seqCapped reports whether the planner caps --max-num-seqs at q's slots (ADR 0088): where its KV
// cache and not max-num-seqs sets them, prompts are longer than one chunk and the pool leaves
// concurrency (conc) unset, and for fixed lengths where those slots are also the requests the
// cache holds at their full length. Left at the default, the engine admits a request beyond the
// places the cache holds whenever its first prefill chunk fits; its later chunks do not, so it
// preempts itself and is admitted again a step later, over and over once a queue has formed, and
// the replica serves less than its load. At the cap the engine runs what the model sizes for; the
// loop it closes is the one firstChunkThrash counts where the cap does not apply.
//
// For fixed lengths the model's slots are unchanged. For varying lengths (ADR 0093) a long
// request fills the cache with fewer requests than the slots of the mean length, so the cap is
// longPlaces, the requests the cache holds at the law's 99th-percentile total length, and the
// model's slots are lowered to it: capped at the mean length's slots, one replica of llama-3.2-3b
// on an H200 1g.18gb at uniform 3,000–5,000 + 150 tokens met the SLO for 89.5–99.7 % of the
// requests at the model's rate, with up to 256 preemptions a run, and at longPlaces for
// 99.57–100 % with none (TestSeqCapVaryingLengths). A law whose 99th-percentile request does not fit the cache at all
// (longPlaces 0) is left uncapped.
//
// Prompts within one chunk (q.k <= 1) are left out: admitted whole or not at all, they never
// loop, and there the engine's admission beyond the full-length places is capacity the model does
// not count (capping them took one llama-2-13b replica on a 1g.20gb from 99.7 to 98.9 % of
// requests within the SLO in TestBoundCountsAtSimulatorEdge, and TestTokenAdmissionSlotWait's slot
// model past the simulator's p99).
func (q *qmodel) seqCapped(conc int) bool {
	if !q.kvBound || q.k <= 1 || q.in+q.out <= 0 || q.slots >= q.e.MaxSeqs() || conc != 0 {
		return false
	}
	if q.lengths != "" {
		return q.longPlaces() >= 1
	}
	return int(math.Floor(float64(q.e.KVCapacityTokens())/(q.in+q.out))) >= q.slots
}

// longPlaces is the requests q's KV cache holds at the length law's 99th-percentile total length
// (totalP99, longPercentile): the cap of a replica of varying lengths (seqCapped).
func (q *qmodel) longPlaces() int {
	return q.placesAt(longPercentile)
}

// placesAt is the requests q's KV cache holds at the length law's pct-th-percentile total length
// (totalAt).
func (q *qmodel) placesAt(pct int) int {
	return int(math.Floor(float64(q.e.KVCapacityTokens()) / q.totalAt(pct)))
}

// longPercentile is the percentile of the total length whose places cap a replica of varying
// lengths (longPlaces), for both laws. Lower ones cap exponential lengths less harshly but are
// not safe: on llama-3.2-3b (H200 1g.18gb) and qwen2.5-3b (H100 1g.10gb), exponential 3,000 and
// 4,000 + 150 tokens, TPOT 60 and 150 ms, one and two replicas (16 shapes, seeds 1–3 of about
// 2,500 requests), the model's rate at the cap left a run below 99 % within the SLO in 12 shapes
// at the 90th percentile, 7 at the 95th, 5 at the 96th, 4 at the 97th and 3 at the 98th (one
// replica of llama-3.2-3b at 4,000-token prompts, TPOT 60 ms: 4 places and 0.204 req/s, where
// the simulator meets 99 % only up to 0.143), against 1 at the 99th (two such replicas, 98.94 %
// at seed 2; uncapped 98.71 %). Uniform lengths met 99 % at the 90th percentile too, but gained
// little (ADR 0093 and its amendment; TestSeqCapExponentialPercentile).
const longPercentile = 99

// noteBlockedGroup records, for a tensor-parallel unit that takeGroup could not place, the
// device-plugin rule that the first node of board with u.c.tp free GPUs breaks (nothing when no
// node has that many free: the pool is simply full), as noteBlocked does for one GPU.
func (p *planner) noteBlockedGroup(u *unit, board *gpu.Board, free map[string][]*gpuPlan) {
	n := map[string]int{}
	for _, g := range free[board.Name] {
		if g == nil {
			continue
		}
		node := g.fg.ref.Node
		if n[node]++; n[node] < u.c.tp {
			continue
		}
		if rule := p.conflictRule(node, wholeWant(u)); rule != "" {
			p.blocked[u] = blockage{rule: rule, kind: u.c.kind}
		}
		return
	}
}
