package plan

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// LoRAAdapter is one adapter tenant's demand on a shared LoRA engine.
type LoRAAdapter struct {
	Tenant string
	// Adapter is the name requests use; Rank its LoRA rank; Bytes its tensor bytes.
	Adapter string
	Rank    int
	Bytes   int64
	// RPS, InputTokens and OutputTokens are its traffic; SLO its p99 objectives; Weight its
	// fair-share weight (0 counts as 1).
	RPS                       float64
	InputTokens, OutputTokens int
	SLO                       perf.SLO
	Weight                    float64
	// Lengths is the tenant's length law (traffic.lengths; "" for fixed) and MaxContext the
	// context that caps a drawn length (0: none), as the dense planner sizes for (lengths.go).
	Lengths    v1.Lengths
	MaxContext int
}

// LoRAGroup is adapters that may share an engine process: one base model at one quantization, in
// one sharing group, of one energy class (docs/lora.md).
type LoRAGroup struct {
	// Key names the group: base model, quantization and sharing group, and the energy class
	// when it is not balanced.
	Key      string
	Adapters []LoRAAdapter
	// Class is its adapters' energy class: it locks the clocks of every GPU of its engines, as
	// it does a dense tenant's (clocks are per GPU).
	Class v1.EnergyClass
}

// LoRAGroupClock is the clock lock of g's energy class, a fraction of boost (perf.Options.ClockCap
// under DefaultOptions, which the engines are placed with; 0: the power-limited boost clock): the
// clock its engines run at and are sized at (ADR 0095).
func LoRAGroupClock(g LoRAGroup) (float64, error) {
	c, err := perf.DefaultOptions().ClockCap(string(g.Class))
	if err != nil {
		return 0, fmt.Errorf("lora group %s: energyClass: %w", g.Key, err)
	}
	return c, nil
}

// LoRASolo is an adapter tenant that may not share an engine, and why.
type LoRASolo struct {
	Tenant string
	Reason string
}

// LoRANeedsDevicePlugin is why an adapter tenant of a pool on the DRA device path gets no shared
// engine: an engine's pod asks for a whole GPU through the device plugin, and the renderer
// writes no engine for the DRA path, so the tenant is planned on replicas of its own.
const LoRANeedsDevicePlugin = "shared LoRA engines are planned on the device-plugin path only " +
	"(an engine's pod asks for nvidia.com/gpu; none is rendered for policy.kubernetesDeviceAPI: dra): " +
	"serves its adapter from replicas of its own"

// GroupLoRA sorts a pool's adapter tenants into groups that may share engines. A hard-tier tenant
// never shares an engine process (one process is one fault and memory domain), and a soft tenant
// shares only with its trust group (the same path), so those are the groups' boundaries besides
// the base model and its quantization; and the energy class, which locks an engine's GPU for all
// its adapters (ADR 0095). On the DRA device path no tenant shares an engine
// (LoRANeedsDevicePlugin). Tenants without an adapter are not listed. loaded holds
// the adapters read from PEFT folders, by tenant: their rank (the largest of rank_pattern) and
// bytes take the place of the Pool's; a tenant not in it keeps model.adapter.rank and no bytes.
func GroupLoRA(p *v1.Pool, loaded map[string]llm.Adapter) ([]LoRAGroup, []LoRASolo) {
	by := map[string]*LoRAGroup{}
	var solos []LoRASolo
	for _, t := range p.Tenants {
		a := t.Model.Adapter
		if a == nil {
			continue
		}
		g := sharingGroup(t)
		if g == "" {
			solos = append(solos, LoRASolo{Tenant: t.Name, Reason: "isolation hard: serves its adapter from an engine process of its own"})
			continue
		}
		if p.Policy.DeviceAPI() == v1.DeviceAPIDRA {
			solos = append(solos, LoRASolo{Tenant: t.Name, Reason: LoRANeedsDevicePlugin})
			continue
		}
		base := t.Model.Name
		if base == "" {
			base = "dir:" + t.Model.Dir
		}
		key := fmt.Sprintf("%s/%s/%s", base, quantOrDefault(t.Model.Quantization), g)
		// One class a group: its engines' GPUs are locked by it, as a dense tenant's are.
		e := energyOf(t)
		if e != v1.EnergyBalanced {
			key += "/" + string(e)
		}
		grp := by[key]
		if grp == nil {
			grp = &LoRAGroup{Key: key, Class: e}
			by[key] = grp
		}
		w := 1.0
		if t.Weight != nil {
			w = *t.Weight
		}
		la := LoRAAdapter{Tenant: t.Name, Adapter: a.Name, Rank: a.Rank,
			RPS: t.Traffic.RPS, InputTokens: t.Traffic.InputTokens, OutputTokens: t.Traffic.OutputTokens,
			SLO: sloOf(t.SLO), Weight: w, Lengths: lengthLaw(t.Traffic), MaxContext: t.MaxContext}
		if l, ok := loaded[t.Name]; ok {
			la.Rank, la.Bytes = l.Config.MaxRank, l.Bytes
		}
		grp.Adapters = append(grp.Adapters, la)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]LoRAGroup, 0, len(keys))
	for _, k := range keys {
		out = append(out, *by[k])
	}
	return out, solos
}

func quantOrDefault(q llm.Quantization) string {
	if q == "" {
		return "as-stored"
	}
	return string(q)
}

func sloOf(s v1.SLO) perf.SLO {
	var o perf.SLO
	if s.TTFTP99 != nil {
		o.TTFT = time.Duration(*s.TTFTP99)
	}
	if s.TPOTP99 != nil {
		o.TPOT = time.Duration(*s.TPOTP99)
	}
	return o
}

// LoRAEngine is one engine of a shared group: its LoRA limits and the adapters it serves.
type LoRAEngine struct {
	Name                           string
	MaxLoRAs, MaxRank, MaxCPULoRAs int
	Adapters                       []string // tenant names
	// Load is each adapter's req/s on this engine: all of its traffic, or its part when it is
	// spread over several engines.
	Load map[string]float64
	RPS  float64
	// ActiveP99 is the 99th percentile of distinct adapters with a request in flight (what
	// MaxLoRAs covers).
	ActiveP99 int
	// Predicted is what the queueing model that sized the engine says of it (engineMeets).
	Predicted LoRAPrediction
}

// LoRAPrediction is the queueing model's prediction for one engine at its planned load: the p99
// TTFT and TPOT every adapter on it sees (the model takes the engine's aggregate load at its
// adapters' mean request shape, so one figure holds for all of them), with the LoRA kernels'
// time included, and MaxRPS, the highest aggregate rate at the same mix of adapters within the
// strictest objectives of its adapters (0 when even its planned load misses them).
type LoRAPrediction struct {
	TTFT, TPOT time.Duration
	MaxRPS     float64
}

// LoRAShare is an adapter's fair share of its engine: its weight over the engine's weights.
type LoRAShare struct {
	Tenant, Engine string
	Weight, Share  float64
}

// LoRAPlan is a shared group's engines, with a reason per adapter.
type LoRAPlan struct {
	Group   string
	Engines []LoRAEngine
	Reasons map[string]string // tenant → why it is where it is
	Shares  []LoRAShare
}

// LoRAInput is a group and the engine each of its replicas is (the base model on its slice).
type LoRAInput struct {
	Group LoRAGroup
	// Engine is one replica; Cost its LoRA cost model.
	Engine *perf.Engine
	Cost   *perf.LoRACost
	// Prefix names the engines: Prefix-First, Prefix-(First+1), … (First is 0 but for the part of
	// a group that spills onto another board, PlaceLoRAEngines).
	Prefix string
	First  int
}

// maxLoRAEngines bounds the engine search.
const maxLoRAEngines = 1024

// PlanLoRA chooses the fewest engines, and each engine's max_loras, that carry the group's
// adapters within every adapter's own objectives. The queueing model (queue.go) sizes the
// engines for the group's aggregate traffic at the strictest objectives in the group, each engine
// with the KV cache its adapter slots leave and the objectives tightened by what the LoRA kernels
// add to a step (perf.LoRACost at max_loras distinct adapters: an upper bound); adapters go to
// engines by rate, largest first onto the least loaded (LPT); max_loras is the smallest power of
// two at or above twice the 99th percentile of distinct adapters in flight on each engine, or
// the engine's number of adapters when that is fewer.
func PlanLoRA(in LoRAInput) (LoRAPlan, error) {
	if err := in.validate(); err != nil {
		return LoRAPlan{}, err
	}
	for n := 1; n <= maxLoRAEngines; n++ {
		p, ok, err := PlanLoRAWith(in, n)
		if err != nil {
			return LoRAPlan{}, err
		}
		if ok {
			return p, nil
		}
	}
	return LoRAPlan{}, fmt.Errorf("plan lora group %s: more than %d engines would be needed", in.Group.Key, maxLoRAEngines)
}

func (in LoRAInput) validate() error {
	var errs []error
	if in.Engine == nil || in.Cost == nil {
		errs = append(errs, errors.New("engine and cost are required"))
	}
	if len(in.Group.Adapters) == 0 {
		errs = append(errs, errors.New("the group has no adapters"))
	}
	for i, a := range in.Group.Adapters {
		if a.Rank < 1 || a.Rank > llm.MaxLoRARank || a.InputTokens < 1 || a.OutputTokens < 1 || !(a.RPS >= 0) {
			errs = append(errs, fmt.Errorf("adapters[%d] (%s): rank 1-%d, token counts ≥ 1 and rps ≥ 0 are required", i, a.Tenant, llm.MaxLoRARank))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("plan lora group %s: %w", in.Group.Key, errors.Join(errs...))
	}
	return nil
}

// PlanLoRAWith places the group on exactly n engines and says whether every engine meets the
// objectives (the plan is returned either way, for searches that compare counts).
func PlanLoRAWith(in LoRAInput, n int) (LoRAPlan, bool, error) {
	if err := in.validate(); err != nil {
		return LoRAPlan{}, false, err
	}
	g := in.Group
	maxRank := 0
	for _, a := range g.Adapters {
		maxRank = max(maxRank, a.Rank)
	}
	maxRank = llm.RankFor(maxRank)
	parts := splitHot(g.Adapters, n)
	bins := lptAssign(parts, n)
	p := LoRAPlan{Group: g.Key, Reasons: map[string]string{}}
	engines := map[string][]string{} // tenant → its engines
	ok := true
	for i, bin := range bins {
		eng := LoRAEngine{Name: fmt.Sprintf("%s-%d", in.Prefix, in.First+i), MaxRank: maxRank, MaxCPULoRAs: len(bin), Load: map[string]float64{}}
		for _, a := range bin {
			eng.Adapters = append(eng.Adapters, a.Tenant)
			eng.Load[a.Tenant] = a.RPS
			eng.RPS += a.RPS
		}
		eng.ActiveP99 = activeP99(in.Engine, in.Cost, maxRank, bin)
		// More slots than adapters buy nothing and cost KV cache: every adapter is resident then.
		eng.MaxLoRAs = max(1, min(pow2AtLeast(loraSlotHeadroom*eng.ActiveP99), len(bin)))
		eng.MaxCPULoRAs = max(eng.MaxCPULoRAs, eng.MaxLoRAs)
		if !engineMeets(in, bin, eng) {
			ok = false
		}
		p.Engines = append(p.Engines, eng)
		var wsum float64
		for _, a := range bin {
			wsum += weightOf(a)
		}
		for _, a := range bin {
			engines[a.Tenant] = append(engines[a.Tenant], eng.Name)
			slots := fmt.Sprintf("max_loras %d covers twice the p99 of %d adapters in flight", eng.MaxLoRAs, eng.ActiveP99)
			if eng.MaxLoRAs == len(bin) && eng.MaxLoRAs < loraSlotHeadroom*eng.ActiveP99 {
				slots = fmt.Sprintf("max_loras %d keeps every adapter resident (p99 of %d in flight)", eng.MaxLoRAs, eng.ActiveP99)
			}
			p.Reasons[a.Tenant] = fmt.Sprintf("shares engine %s with %d other adapters of %s (%s; %.3g of the engine's %.3g req/s)",
				eng.Name, len(bin)-1, g.Key, slots, a.RPS, eng.RPS)
			p.Shares = append(p.Shares, LoRAShare{Tenant: a.Tenant, Engine: eng.Name, Weight: weightOf(a), Share: weightOf(a) / wsum})
		}
	}
	// Predictions once the count is known: the engine searches try counts that miss, and a max
	// rate is a search of its own, so a plan that misses keeps the p99s at its load only.
	for i, bin := range bins {
		if ok {
			p.Engines[i].Predicted = enginePredict(in, bin, p.Engines[i])
		} else {
			p.Engines[i].Predicted, _ = engineModel(in, bin, p.Engines[i], 1, p.Engines[i].ActiveP99)
		}
	}
	for t, es := range engines {
		if len(es) > 1 {
			p.Reasons[t] = fmt.Sprintf("its traffic is more than an engine's share: served by %d engines of %s (%s), the gateway spreading its requests",
				len(es), g.Key, strings.Join(es, ", "))
		}
	}
	return p, ok, nil
}

// splitHot cuts an adapter whose rate is above the mean engine's load (total / n) into equal
// parts, one per engine, so that LPT can spread it; weights are split alike, so that an adapter's
// shares still add up to its weight.
func splitHot(as []LoRAAdapter, n int) []LoRAAdapter {
	var total float64
	for _, a := range as {
		total += a.RPS
	}
	mean := total / float64(n)
	out := make([]LoRAAdapter, 0, len(as))
	for _, a := range as {
		k := 1
		if mean > 0 && a.RPS > mean {
			k = min(n, int(math.Ceil(a.RPS/mean)))
		}
		w := weightOf(a) / float64(k)
		for range k {
			part := a
			part.RPS, part.Weight = a.RPS/float64(k), w
			out = append(out, part)
		}
	}
	return out
}

func weightOf(a LoRAAdapter) float64 {
	if a.Weight > 0 {
		return a.Weight
	}
	return 1
}

// lptAssign spreads adapters over n engines, largest rate first onto the least loaded engine
// that does not yet have a part of the same adapter (ties to the fewer adapters, then the lower
// index); each engine keeps its adapters in tenant order. splitHot makes at most n parts.
func lptAssign(as []LoRAAdapter, n int) [][]LoRAAdapter {
	order := append([]LoRAAdapter(nil), as...)
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].RPS != order[j].RPS {
			return order[i].RPS > order[j].RPS
		}
		return order[i].Tenant < order[j].Tenant
	})
	bins := make([][]LoRAAdapter, n)
	load := make([]float64, n)
	has := make([]map[string]bool, n) // parts of one adapter go to different engines
	for i := range has {
		has[i] = map[string]bool{}
	}
	for _, a := range order {
		best := -1
		for i := range n {
			if has[i][a.Tenant] {
				continue
			}
			if best < 0 || load[i] < load[best] || load[i] == load[best] && len(bins[i]) < len(bins[best]) {
				best = i
			}
		}
		has[best][a.Tenant] = true
		bins[best] = append(bins[best], a)
		load[best] += a.RPS
	}
	for _, b := range bins {
		sort.Slice(b, func(i, j int) bool { return b[i].Tenant < b[j].Tenant })
	}
	return bins
}

// activeP99 is the 99th percentile of distinct adapters with a request in flight on an engine:
// adapter i is busy with probability 1 − exp(−λᵢ·S), S a request's time in the engine (a
// Poisson-binomial count, taken as normal with its mean and variance). S is found at the loaded
// engine: N = λ·S requests in flight decode together, every step paying the LoRA kernels for
// the adapters among them and the prompts that arrive meanwhile, so S = its prefill step plus
// (out − 1) such steps, iterated to a fixed point.
func activeP99(e *perf.Engine, c *perf.LoRACost, rank int, bin []LoRAAdapter) int {
	var lam, inTok, outTok float64
	for _, a := range bin {
		lam += a.RPS
		inTok += a.RPS * float64(a.InputTokens)
		outTok += a.RPS * float64(a.OutputTokens)
	}
	if lam <= 0 {
		return 0
	}
	in, out := inTok/lam, outTok/lam
	busy := func(svc float64) (mean, v float64) {
		for _, a := range bin {
			p := 1 - math.Exp(-a.RPS*svc)
			mean += p
			v += p * (1 - p)
		}
		return mean, v
	}
	svc := 0.0
	for range 50 {
		n := max(1, math.Min(lam*svc, float64(e.MaxSeqs())))
		d := int(math.Ceil(n))
		active, _ := busy(svc)
		k := max(1, int(math.Ceil(active)))
		kv := int64(n * (in + out/2))
		decode := e.StepTime(perf.Batch{DecodeSeqs: d, KVTokens: kv}, perf.Load{}).Seconds() + c.StepOverhead(d, k, rank).Seconds()
		prefill := e.StepTime(perf.Batch{PrefillTokens: int(in), PrefillSeqs: 1, DecodeSeqs: d, KVTokens: kv}, perf.Load{}).Seconds() +
			c.StepOverhead(d+int(in), k, rank).Seconds()
		// The other requests' prompts run in the same steps: λ·t prompts arrive during a step of
		// t, each adding what a prompt adds to a step, so t = decode + λ·t·(prefill − decode).
		rho := lam * (prefill - decode)
		if rho >= 1 {
			return len(bin) // saturated: every adapter is always in flight
		}
		step := decode / (1 - rho)
		next := prefill + (out-1)*step
		if math.Abs(next-svc) < 1e-6 {
			break
		}
		svc = (svc + next) / 2
	}
	mean, v := busy(svc)
	return min(len(bin), int(math.Ceil(mean+zP99*math.Sqrt(v))))
}

// loraSlotHeadroom: max_loras is twice the p99 of adapters in flight (then a power of two), so
// that an adapter arriving at a busy engine finds a slot whose adapter is idle rather than wait
// behind vLLM's distinct-adapter limit; the simulator shows swaps at 1× (docs/lora.md).
const loraSlotHeadroom = 2

func pow2AtLeast(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// engineMeets sizes one engine with the queueing model: the bin's aggregate rate at its mean
// request shape, within the strictest objectives of the bin less the LoRA kernels' time.
func engineMeets(in LoRAInput, bin []LoRAAdapter, eng LoRAEngine) bool {
	_, ok := engineModel(in, bin, eng, 1, eng.ActiveP99)
	return ok
}

// engineModel is the queueing model of one engine carrying its bin's adapters at scale times
// their rates, with active distinct adapters in a step: the predicted p99 TTFT and TPOT (the LoRA
// kernels' time included) and whether they meet the strictest objectives of the bin. The
// engine's request shape is the bin's rate-weighted mean, drawn by the widest length law among
// its adapters (loraLengths); fixed lengths leave the model as it was without them.
func engineModel(in LoRAInput, bin []LoRAAdapter, eng LoRAEngine, scale float64, active int) (LoRAPrediction, bool) {
	if len(bin) == 0 {
		return LoRAPrediction{}, true
	}
	var lam, inTok, outTok float64
	slo := perf.SLO{}
	for _, a := range bin {
		lam += a.RPS
		inTok += a.RPS * float64(a.InputTokens)
		outTok += a.RPS * float64(a.OutputTokens)
		slo.TTFT = minPositive(slo.TTFT, a.SLO.TTFT)
		slo.TPOT = minPositive(slo.TPOT, a.SLO.TPOT)
	}
	if lam <= 0 {
		return LoRAPrediction{}, true
	}
	w := perf.Workload{InputTokens: max(1, int(math.Round(inTok/lam))), OutputTokens: max(1, int(math.Round(outTok/lam)))}
	lam *= scale
	e := in.Engine
	if kb := e.Model().KVBytesPerToken(); kb > 0 {
		e = e.WithKVCapacity(e.KVCapacityTokens() - in.Cost.SlotBytes(eng.MaxRank)*int64(eng.MaxLoRAs)/kb)
	}
	// The LoRA kernels lengthen every step: requests stay longer, so more are in flight, as if
	// the rate were higher by (t + o)/t at a mean step t and LoRA time o; and each p99 step is
	// longer by o, which comes off the objectives.
	law, maxCtx := loraLengths(bin)
	q := newQModel(e, w, perf.Load{}).withLengths(law, maxCtx)
	active = max(1, active)
	eff := lam
	var o time.Duration
	for range 10 {
		t, ok := q.meanStep(eff)
		if !ok {
			return LoRAPrediction{}, false
		}
		d := max(1, int(math.Ceil(eff*float64(w.OutputTokens-1)*t)))
		o = in.Cost.StepOverhead(d, active, eng.MaxRank)
		next := lam * (1 + o.Seconds()/t)
		if math.Abs(next-eff) < 1e-3*eff {
			break
		}
		eff = next
	}
	// A prompt's chunks each pay the LoRA kernels over a full step budget: the p99 prompt's
	// chunks under a length law, the mean prompt's for fixed lengths.
	chunk := in.Cost.StepOverhead(e.MaxBatchedTokens(), active, eng.MaxRank)
	k := math.Ceil(q.promptP99() / float64(max(e.MaxBatchedTokens()-1, 1)))
	extraTTFT := o + time.Duration(k)*chunk
	if slo.TPOT > 0 {
		slo.TPOT -= o
	}
	if slo.TTFT > 0 {
		slo.TTFT -= extraTTFT
	}
	st := q.state(eff, 1)
	if st.limit != perf.LimitNone {
		return LoRAPrediction{}, false
	}
	p := LoRAPrediction{TTFT: seconds(st.ttft) + extraTTFT, TPOT: seconds(st.tpot) + o}
	if slo.TPOT < 0 || slo.TTFT < 0 {
		return p, false
	}
	return p, meets(st, slo) == perf.LimitNone
}

// loraLengths is the length law an engine is sized for: the widest of its adapters' (exponential
// over uniform over fixed), applied to the engine's mean request shape, and the context that caps
// a drawn length: the largest of the adapters' maxContext, 0 (none) when one has none.
func loraLengths(bin []LoRAAdapter) (v1.Lengths, int) {
	var law v1.Lengths
	maxCtx := 0
	for i, a := range bin {
		switch {
		case a.Lengths == v1.LengthsExponential:
			law = v1.LengthsExponential
		case a.Lengths == v1.LengthsUniform && law == "":
			law = v1.LengthsUniform
		}
		if a.MaxContext <= 0 {
			maxCtx = -1
		} else if maxCtx >= 0 && (i == 0 || a.MaxContext > maxCtx) {
			maxCtx = a.MaxContext
		}
	}
	return law, max(maxCtx, 0)
}

// enginePredict is eng's prediction at its planned load (engineModel) and its max rate: the
// highest rate, at the same mix of adapters, within the strictest objectives of its adapters,
// the LoRA kernels paid for the adapters in flight at that rate (activeP99, at most max_loras).
// An engine that misses them at its planned load keeps its p99s and a max rate of 0.
func enginePredict(in LoRAInput, bin []LoRAAdapter, eng LoRAEngine) LoRAPrediction {
	p, ok := engineModel(in, bin, eng, 1, eng.ActiveP99)
	if !ok || eng.RPS <= 0 {
		return p
	}
	scaled := make([]LoRAAdapter, len(bin))
	meetsAt := func(s float64) bool {
		for i, a := range bin {
			scaled[i] = a
			scaled[i].RPS = a.RPS * s
		}
		active := min(activeP99(in.Engine, in.Cost, eng.MaxRank, scaled), eng.MaxLoRAs)
		_, ok := engineModel(in, bin, eng, s, max(active, eng.ActiveP99))
		return ok
	}
	lo, hi := 1.0, 2.0
	for ; hi < 1e6 && meetsAt(hi); hi *= 2 {
		lo = hi
	}
	for range 40 {
		if (hi-lo)/hi < 1e-3 {
			break
		}
		if mid := (lo + hi) / 2; meetsAt(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	p.MaxRPS = lo * eng.RPS
	return p
}

func minPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

// LoRAArgs are the vLLM flags of a planned engine; paths maps a tenant to its adapter's path.
func (e LoRAEngine) LoRAArgs(paths map[string]string) llm.LoRAArgs {
	mods := map[string]string{}
	for _, t := range e.Adapters {
		if p, ok := paths[t]; ok {
			mods[t] = p
		}
	}
	return llm.LoRAArgs{MaxLoRAs: e.MaxLoRAs, MaxRank: e.MaxRank, MaxCPULoRAs: e.MaxCPULoRAs, Modules: mods}
}

// String is a one-line summary.
func (p LoRAPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d engines", p.Group, len(p.Engines))
	for _, e := range p.Engines {
		fmt.Fprintf(&b, "; %s %d adapters %.3g req/s max_loras %d", e.Name, len(e.Adapters), e.RPS, e.MaxLoRAs)
	}
	return b.String()
}
