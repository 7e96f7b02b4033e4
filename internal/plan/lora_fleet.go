package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// LoRABoard is one board the fleet offers a shared group's engines: the base model on one whole
// GPU of it and its LoRA cost model (perf.PlaceLoRA).
type LoRABoard struct {
	Board  string
	Engine *perf.Engine
	Cost   *perf.LoRACost
}

// LoRABound is a lower bound on the whole GPUs any set of engines needs for a shared group, by
// throughput alone: every request needs outputTokens − 1 decode tokens (its first token comes
// with its prefill), a decode step of d sequences yields at most d of them, and such a step on
// one GPU takes at least the step time of d decodes over their prompts' KV cache (each holds at
// least its prompt) plus the LoRA kernels for one adapter at the group's smallest rank (more
// adapters, higher ranks, prompts and longer contexts only lengthen a step); d is at most
// max_num_seqs and at most the sequences of prompt + 1 tokens the KV cache holds beside one
// adapter slot. So one GPU yields at most R = max over boards and such d of d / that time decode
// tokens per second, and
// the group needs at least ⌈Σ λᵢ·(outᵢ − 1) / R⌉ GPUs. It does not look at the planner's engines.
// The reason says the numbers. A group without traffic needs 0.
func LoRABound(g LoRAGroup, boards []LoRABoard) (int, string, error) {
	if len(boards) == 0 {
		return 0, "", fmt.Errorf("lora bound %s: no board", g.Key)
	}
	var demand float64
	minRank, minIn := math.MaxInt, math.MaxInt
	for _, a := range g.Adapters {
		demand += a.RPS * float64(max(a.OutputTokens-1, 0))
		minRank, minIn = min(minRank, max(a.Rank, 1)), min(minIn, max(a.InputTokens, 1))
	}
	if demand <= 0 {
		return 0, fmt.Sprintf("group %s asks for no decode tokens", g.Key), nil
	}
	best, bestBoard, bestD := 0.0, "", 0
	for _, b := range boards {
		if b.Engine == nil || b.Cost == nil {
			return 0, "", fmt.Errorf("lora bound %s: board %s: engine and cost are required", g.Key, b.Board)
		}
		// A decoding sequence holds at least its prompt and one token in the KV cache, which at
		// least one adapter slot of the smallest rank takes from.
		dmax := b.Engine.MaxSeqs()
		if kb := b.Engine.Model().KVBytesPerToken(); kb > 0 {
			kv := b.Engine.KVCapacityTokens() - b.Cost.SlotBytes(llm.RankFor(minRank))/kb
			dmax = min(dmax, int(kv/int64(minIn+1)))
		}
		for d := 1; d <= dmax; d++ {
			t := b.Engine.StepTime(perf.Batch{DecodeSeqs: d, KVTokens: int64(d) * int64(minIn)}, perf.Load{}) +
				b.Cost.StepOverhead(d, 1, minRank)
			if t <= 0 {
				continue
			}
			if r := float64(d) / t.Seconds(); r > best {
				best, bestBoard, bestD = r, b.Board, d
			}
		}
	}
	if best <= 0 {
		return 0, "", fmt.Errorf("lora bound %s: no board yields decode tokens", g.Key)
	}
	n := int(math.Ceil(demand/best - 1e-9))
	return n, fmt.Sprintf("group %s: %.0f decode tokens/s over at most %.0f per GPU (%s, %d sequences, LoRA kernels for one adapter of rank %d) = %d GPUs",
		g.Key, demand, best, bestBoard, bestD, minRank, n), nil
}

// LoRABoardPlan is a shared group, or a part of one, planned on whole GPUs of one board.
type LoRABoardPlan struct {
	Board string
	Plan  LoRAPlan
}

// LoRAFleetGroup is a planned shared group and what placing its engines on the fleet needs.
type LoRAFleetGroup struct {
	// Plan is the group planned on Board, the board it is best served on (Options[0]).
	Plan  LoRAPlan
	Board string
	// Options is the group planned on each board of the fleet that holds its base model on one
	// whole GPU, preferred first (PlanLoRABoards); Boards those boards' engines and costs, Group
	// the group and Prefix its engines' prefix, for re-planning a part that spills onto another
	// board. A group without Options is placed on Board alone.
	Options []LoRABoardPlan
	Boards  []LoRABoard
	Group   LoRAGroup
	Prefix  string
	// Placed is what PlaceLoRAEngines put on the fleet: the engines of each board it used.
	Placed []LoRABoardPlan
	// Model or ModelDir is the base model as the tenants give it; Quantization theirs.
	Model, ModelDir, Quantization string
	// AdapterName maps each tenant to its adapter's name (model.adapter.name).
	AdapterName map[string]string
	// Bound is LoRABound's GPUs for the group and Why its argument.
	Bound int
	Why   string
	// Held, when set, says that the plan held GPUs out of the fleet for the engines before the
	// other tenants were packed, and why (BuildWithLoRA).
	Held string
}

// PlanLoRABoards plans g on each of boards (PlanLoRA, engines named prefix-0, prefix-1, …) and
// lists the plans preferred first: fewest engines (the planner's objective counts GPUs), ties in
// the order of boards (the fleet's). A board the group needs too many engines on is left out; an
// error when that leaves none.
func PlanLoRABoards(g LoRAGroup, boards []LoRABoard, prefix string) ([]LoRABoardPlan, error) {
	var out []LoRABoardPlan
	var errs []error
	for _, b := range boards {
		p, err := PlanLoRA(LoRAInput{Group: g, Engine: b.Engine, Cost: b.Cost, Prefix: prefix})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Board, err))
			continue
		}
		out = append(out, LoRABoardPlan{Board: b.Board, Plan: p})
	}
	if len(out) == 0 {
		if len(errs) == 0 {
			errs = append(errs, errors.New("no board holds the base model on one GPU"))
		}
		return nil, fmt.Errorf("plan lora group %s: %w", g.Key, errors.Join(errs...))
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Plan.Engines) < len(out[j].Plan.Engines) })
	return out, nil
}

// allocate chooses where grp's engines go given avail, the GPUs each board offers (which it
// takes from): the first option, preferred first, whose engines all fit its board; else the
// group spills: the preferred board takes the engines it has room for, the adapters (or parts of
// their rate) of the rest are planned again on the next board (engines numbered on), and so on.
// Where a board has room for only some of a plan's engines, those carry the most adapters of
// least rate they meet the objectives for when that serves more adapters whole (fitSome); else
// those that keep their GPU of the plan in force (keep: engine → the board of that GPU, when it
// is idle) go first, the rest in plan order. It returns the placed parts and the engines no board had room for, with the board they
// were planned on.
func (grp LoRAFleetGroup) allocate(avail map[string]int, keep map[string]string) (placed []LoRABoardPlan, short LoRABoardPlan) {
	opts := grp.Options
	if len(opts) == 0 {
		opts = []LoRABoardPlan{{Board: grp.Board, Plan: grp.Plan}}
	}
	for _, o := range opts {
		if avail[o.Board] >= len(o.Plan.Engines) {
			avail[o.Board] -= len(o.Plan.Engines)
			return []LoRABoardPlan{o}, LoRABoardPlan{}
		}
	}
	left, next := grp.Group, 0
	for i, o := range opts {
		p := o.Plan
		if next > 0 {
			b := grp.boardNamed(o.Board)
			if b == nil {
				continue
			}
			var err error
			if p, err = PlanLoRA(LoRAInput{Group: left, Engine: b.Engine, Cost: b.Cost, Prefix: grp.Prefix, First: next}); err != nil {
				continue
			}
		}
		k := min(avail[o.Board], len(p.Engines))
		avail[o.Board] -= k
		if k > 0 && k < len(p.Engines) {
			if fit, rest, restPlan, ok := grp.fitSome(left, o.Board, k, next, p); ok {
				placed = append(placed, LoRABoardPlan{Board: o.Board, Plan: fit})
				short = LoRABoardPlan{Board: o.Board, Plan: restPlan}
				if i+1 < len(opts) {
					left, next = rest, next+k
				}
				continue
			}
		}
		if k < len(p.Engines) {
			es := slices.Clone(p.Engines)
			sort.SliceStable(es, func(i, j int) bool { return keep[es[i].Name] == o.Board && keep[es[j].Name] != o.Board })
			p.Engines = es
		}
		if k > 0 {
			placed = append(placed, LoRABoardPlan{Board: o.Board, Plan: subPlan(p, p.Engines[:k])})
		}
		if k == len(p.Engines) {
			return placed, LoRABoardPlan{}
		}
		short = LoRABoardPlan{Board: o.Board, Plan: subPlan(p, p.Engines[k:])}
		if k > 0 && i+1 < len(opts) {
			left, next = leftOver(grp.Group, p.Engines[k:]), next+k
		}
	}
	return placed, short
}

// fitSome plans, for a board with room for k of the engines of p (left planned on it, engines
// numbered from first), the most of left's adapters that k engines carry within their objectives:
// the adapters of least rate first, the largest such count found by bisection (PlanLoRAWith on k
// engines). It is used when that serves more adapters in full than p's first k engines do (an
// adapter spread over a placed and an unplaced engine is not served); it returns that plan, the
// adapters left (the whole rate of each) and their plan on the board, engines numbered on.
func (grp LoRAFleetGroup) fitSome(left LoRAGroup, board string, k, first int, p LoRAPlan) (LoRAPlan, LoRAGroup, LoRAPlan, bool) {
	b := grp.boardNamed(board)
	if b == nil {
		return LoRAPlan{}, LoRAGroup{}, LoRAPlan{}, false
	}
	on := map[string]int{}  // adapter → engines of p it is on
	out := map[string]int{} // adapter → those beyond the first k
	for i, e := range p.Engines {
		for _, t := range e.Adapters {
			on[t]++
			if i >= k {
				out[t]++
			}
		}
	}
	served := 0
	for t := range on {
		if out[t] == 0 {
			served++
		}
	}
	as := slices.Clone(left.Adapters)
	sort.SliceStable(as, func(i, j int) bool {
		if as[i].RPS != as[j].RPS {
			return as[i].RPS < as[j].RPS
		}
		return as[i].Tenant < as[j].Tenant
	})
	in := func(m int) LoRAInput {
		return LoRAInput{Group: LoRAGroup{Key: left.Key, Class: left.Class, Adapters: as[:m]}, Engine: b.Engine, Cost: b.Cost, Prefix: grp.Prefix, First: first}
	}
	try := func(m int) (LoRAPlan, bool) {
		pl, ok, err := PlanLoRAWith(in(m), k)
		if err != nil || !ok {
			return LoRAPlan{}, false
		}
		for _, e := range pl.Engines {
			if len(e.Adapters) == 0 {
				return LoRAPlan{}, false
			}
		}
		return pl, true
	}
	lo, hi := served, len(as) // lo: no better found yet; hi: the most that could fit
	var fit LoRAPlan
	for lo < hi {
		m := (lo + hi + 1) / 2
		if pl, ok := try(m); ok {
			lo, fit = m, pl
		} else {
			hi = m - 1
		}
	}
	if lo <= served || lo == len(as) || len(fit.Engines) == 0 {
		return LoRAPlan{}, LoRAGroup{}, LoRAPlan{}, false
	}
	rest := LoRAGroup{Key: left.Key, Class: left.Class}
	keep := map[string]bool{}
	for _, a := range as[lo:] {
		keep[a.Tenant] = true
	}
	for _, a := range left.Adapters { // in group order
		if keep[a.Tenant] {
			rest.Adapters = append(rest.Adapters, a)
		}
	}
	restPlan, err := PlanLoRA(LoRAInput{Group: rest, Engine: b.Engine, Cost: b.Cost, Prefix: grp.Prefix, First: first + k})
	if err != nil {
		return LoRAPlan{}, LoRAGroup{}, LoRAPlan{}, false
	}
	return fit, rest, restPlan, true
}

func (grp LoRAFleetGroup) boardNamed(name string) *LoRABoard {
	for i := range grp.Boards {
		if grp.Boards[i].Board == name {
			return &grp.Boards[i]
		}
	}
	return nil
}

// subPlan is p's engines es with their adapters' reasons and shares.
func subPlan(p LoRAPlan, es []LoRAEngine) LoRAPlan {
	out := LoRAPlan{Group: p.Group, Engines: es, Reasons: map[string]string{}}
	on := map[string]bool{}
	for _, e := range es {
		on[e.Name] = true
		for _, t := range e.Adapters {
			out.Reasons[t] = p.Reasons[t]
		}
	}
	for _, s := range p.Shares {
		if on[s.Engine] {
			out.Shares = append(out.Shares, s)
		}
	}
	return out
}

// leftOver is g's adapters that engines es carry, each at the rate they carry of it.
func leftOver(g LoRAGroup, es []LoRAEngine) LoRAGroup {
	rate := map[string]float64{}
	for _, e := range es {
		for _, t := range e.Adapters {
			rate[t] += e.Load[t]
		}
	}
	out := LoRAGroup{Key: g.Key, Class: g.Class}
	for _, a := range g.Adapters {
		if r, ok := rate[a.Tenant]; ok {
			a.RPS = r
			out.Adapters = append(out.Adapters, a)
		}
	}
	return out
}

// PlaceLoRAEngines puts the shared groups' engines into pl, a plan of the pool's other tenants
// made on the whole fleet: each engine takes a whole GPU of its board that pl leaves idle. A
// group goes, in group order, to its preferred board (Options) when that has idle GPUs for all
// its engines, else to the next that has; when none has, it spills (allocate): the preferred
// board takes what it can and the rest is planned again on the next board. Within a board an
// engine takes the GPU the plan in force, cur, gives the same engine when that is idle (these
// first), else the first left in fleet order on a node whose whole GPUs are not shared by MPS or
// time-slicing, else the first left; the GPU becomes a pool GPU of mode exclusive naming the
// engine. Every adapter tenant gets its plan entry with the engines that serve it and the
// planner's reason; an engine no idle GPU is left for makes its adapters infeasible
// (NoCapacity). groups[i].Placed records each group's placed engines by board. The summary
// counts the engines' GPUs as used, adds the groups' bounds (LoRABound: the engines run on GPUs
// of their own, so the bounds add) and adds the engines to every baseline, which plans the rest
// alike. Tenants are put back in pool order. pl must be a plan of pool less the groups' tenants.
func PlaceLoRAEngines(pl *v1.Plan, pool *v1.Pool, groups []LoRAFleetGroup, cur *v1.Plan) {
	was := map[string]v1.GPURef{}
	if cur != nil {
		for _, e := range cur.LoRAEngines {
			was[e.Name] = e.GPU
		}
	}
	free, boardsOn := engineGPUs(pl, pool)
	avail := map[string]int{}
	for i, g := range pl.GPUs {
		if free(i) {
			avail[g.Board]++
		}
	}
	// The device plugin shares every whole GPU of a node alike: an engine (an unshared whole GPU)
	// goes to a node whose whole GPUs are not MPS- or time-slice-shared when there is one.
	sharedWhole := map[string]bool{}
	for _, g := range pl.GPUs {
		if (g.Mode == v1.ModeMPS || g.Mode == v1.ModeTimeSlice) && len(g.Replicas) > 0 {
			sharedWhole[g.Node] = true
		}
	}
	keep := map[string]string{} // engine → the board of its GPU in force, when that is idle
	for i, g := range pl.GPUs {
		for name, ref := range was {
			if free(i) && g.Ref() == ref {
				keep[name] = g.Board
			}
		}
	}
	// Each group's engines by board, and those left without a GPU.
	shorts := make([]LoRABoardPlan, len(groups))
	for gi := range groups {
		groups[gi].Placed, shorts[gi] = groups[gi].allocate(avail, keep)
	}
	// Engines that keep their GPU of the plan in force take it first, so that an engine placed
	// before them in order does not take it and make them move too.
	type key struct{ g, p, e int }
	gpuOf := map[key]int{}
	taken := map[int]bool{}
	for gi, grp := range groups {
		for pi, part := range grp.Placed {
			for ei, e := range part.Plan.Engines {
				prev, ok := was[e.Name]
				if !ok {
					continue
				}
				for i, g := range pl.GPUs {
					if free(i) && !taken[i] && g.Board == part.Board && g.Ref() == prev {
						gpuOf[key{gi, pi, ei}], taken[i] = i, true
						break
					}
				}
			}
		}
	}
	for gi, grp := range groups {
		for pi, part := range grp.Placed {
			for ei := range part.Plan.Engines {
				if _, ok := gpuOf[key{gi, pi, ei}]; ok {
					continue
				}
				at := -1
				for i, g := range pl.GPUs {
					if !free(i) || taken[i] || g.Board != part.Board {
						continue
					}
					if at < 0 || sharedWhole[pl.GPUs[at].Node] && !sharedWhole[g.Node] {
						at = i
					}
				}
				gpuOf[key{gi, pi, ei}] = at // allocate counted the board's idle GPUs: at ≥ 0
				if at >= 0 {
					taken[at] = true
				}
			}
		}
	}
	entries := map[string]*v1.PlanTenant{}
	var order []string
	entry := func(t string) *v1.PlanTenant {
		if entries[t] == nil {
			entries[t] = &v1.PlanTenant{Name: t}
			order = append(order, t)
		}
		return entries[t]
	}
	placed := 0
	for gi, grp := range groups {
		var why []map[string]string
		for pi, part := range grp.Placed {
			why = append(why, part.Plan.Reasons)
			for ei, e := range part.Plan.Engines {
				at := gpuOf[key{gi, pi, ei}]
				if at < 0 {
					shorts[gi].Plan.Engines = append(shorts[gi].Plan.Engines, e) // not reached: allocate counted
					continue
				}
				placed++
				g := &pl.GPUs[at]
				g.Role, g.Mode, g.LoRAEngine = v1.RolePool, v1.ModeExclusive, e.Name
				g.Reasons = []v1.Reason{v1.NewReason(v1.ReasonLoRAEngine, "runs LoRA engine %s: %s with %d adapters of %s, %.3g req/s, max_loras %d",
					e.Name, baseName(grp), len(e.Adapters), grp.Group.Key, e.RPS, e.MaxLoRAs)}
				if c := grp.Group.Class; c != "" && c != v1.EnergyBalanced {
					g.Reasons = append(g.Reasons, v1.NewReason(v1.ReasonEnergyClass,
						"energy class %s: every adapter of its engine is %s, so its clocks can be set for them (the engine is sized at them)", c, c))
				}
				pe := v1.PlanLoRAEngine{Name: e.Name, Group: part.Plan.Group, GPU: g.Ref(), Model: grp.Model, ModelDir: grp.ModelDir,
					Quantization: grp.Quantization, MaxLoRAs: e.MaxLoRAs, MaxLoRARank: e.MaxRank,
					MaxCPULoRAs: max(e.MaxCPULoRAs, e.MaxLoRAs), ActiveP99: e.ActiveP99}
				for _, t := range sortedCopy(e.Adapters) {
					pe.Adapters = append(pe.Adapters, v1.PlanLoRAAdapter{Tenant: t, Adapter: grp.AdapterName[t], RPS: e.Load[t]})
					entry(t).LoRAEngines = append(entry(t).LoRAEngines, e.Name)
					predictAdapter(entry(t), e, e.Load[t])
				}
				pl.LoRAEngines = append(pl.LoRAEngines, pe)
			}
		}
		short := shorts[gi]
		why = append(why, short.Plan.Reasons)
		for _, e := range short.Plan.Engines {
			for _, t := range e.Adapters {
				pe := entry(t)
				pe.Infeasible = true
				pe.Reasons = append(pe.Reasons, v1.NewReason(v1.ReasonNoCapacity,
					"engine %s needs a whole %s GPU and the other tenants leave none idle (nor one of another board the base model fits)", e.Name, short.Board))
			}
		}
		// Each part's reasons, first part first, ahead of the NoCapacity ones.
		for i := len(why) - 1; i >= 0; i-- {
			for t, w := range why[i] {
				if pe := entries[t]; pe != nil {
					pe.Reasons = append([]v1.Reason{v1.NewReason(v1.ReasonLoRAEngine, "%s", w)}, pe.Reasons...)
				}
			}
		}
		pl.Summary.LowerBound += grp.Bound
	}
	if placed > 0 {
		hideOtherBoardsIn(pl, boardsOn, migAllowed(pool))
	}
	offered := map[string]float64{}
	for _, t := range pool.Tenants {
		offered[t.Name] = t.Traffic.RPS
	}
	for _, t := range order {
		pe := entries[t]
		pe.Reasons = headlineReasons(pe.Reasons, pe.Infeasible)
		if pe.Infeasible {
			pe.Predicted = v1.Prediction{} // an engine it needs has no GPU: no prediction holds
		} else {
			pe.Predicted.MaxRPS = roundRate(pe.Predicted.MaxRPS, offered[t])
		}
		pl.Tenants = append(pl.Tenants, *pe)
	}
	rank := map[string]int{}
	for i, t := range pool.Tenants {
		rank[t.Name] = i
	}
	sort.SliceStable(pl.Tenants, func(i, j int) bool { return rank[pl.Tenants[i].Name] < rank[pl.Tenants[j].Name] })
	pl.Summary.GPUsUsed += placed
	for i := range pl.Summary.Baselines {
		pl.Summary.Baselines[i].GPUs += placed
	}
}

// predictAdapter adds engine e, which carries load req/s of the adapter tenant pt, to pt's
// prediction: its p99 TTFT and TPOT are the worst of its engines' (each engine's queueing model,
// LoRA kernels included: LoRAPrediction), and its max rate is, summed over its engines, the rate
// it may offer an engine with the engine's other adapters at their planned rates before the
// engine's aggregate passes the engine's max rate (the strictest objectives of its adapters):
// its own load plus the engine's headroom. Adapters of one engine share that headroom: it is
// each one's alone, not all of theirs at once.
func predictAdapter(pt *v1.PlanTenant, e LoRAEngine, load float64) {
	p := &pt.Predicted
	p.TTFTP99 = max(p.TTFTP99, v1.Duration(e.Predicted.TTFT))
	p.TPOTP99 = max(p.TPOTP99, v1.Duration(e.Predicted.TPOT))
	p.MaxRPS += max(0, e.Predicted.MaxRPS-(e.RPS-load))
}

// headlineReasons drops repeated reasons (an adapter spread over engines of two parts of a
// group gets the same text from each) and, for an infeasible adapter, puts the NoCapacity
// reasons that make it so first, as every other tenant's headline reason is.
func headlineReasons(rs []v1.Reason, infeasible bool) []v1.Reason {
	var out []v1.Reason
	seen := map[v1.Reason]bool{}
	for _, r := range rs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	if infeasible {
		sort.SliceStable(out, func(i, j int) bool {
			return out[i].Code == v1.ReasonNoCapacity && out[j].Code != v1.ReasonNoCapacity
		})
	}
	return out
}

// engineGPUs says which GPUs of pl a shared LoRA engine may take: idle ones without replicas;
// on the device-plugin path, on a node with GPUs of more than one board, only those of the
// node's engine board (engineBoards), since the plugin would hand the engine's pod any whole GPU
// of the node. boardsOn lists those nodes' boards (nil on the DRA path), for hideOtherBoardsIn
// once the engines are placed.
func engineGPUs(pl *v1.Plan, pool *v1.Pool) (free func(i int) bool, boardsOn map[string][]*gpu.Board) {
	var onBoard map[string]string
	if pool.Policy.DeviceAPI() != v1.DeviceAPIDRA {
		boardsOn = planBoardsOn(pl)
		onBoard = engineBoards(pl, boardsOn)
	}
	return func(i int) bool {
		g := pl.GPUs[i]
		if b, mixed := onBoard[g.Node]; mixed && b != g.Board {
			return false
		}
		return g.Role == v1.RoleIdle && g.ReplicaCount() == 0
	}, boardsOn
}

// migAllowed reports whether pool's policy.allowedModes has mig (all modes when it is empty).
func migAllowed(pool *v1.Pool) bool {
	return len(pool.Policy.AllowedModes) == 0 || slices.Contains(pool.Policy.AllowedModes, v1.ModeMIG)
}

func baseName(g LoRAFleetGroup) string {
	if g.Model != "" {
		return g.Model
	}
	return g.ModelDir
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// LoRAPlanOf is the shared-group plan a Plan file records: its engines of group, with each
// adapter's load, for rendering the gateway objects of a planned pool.
func LoRAPlanOf(pl *v1.Plan, group string) LoRAPlan {
	p := LoRAPlan{Group: group, Reasons: map[string]string{}}
	for _, e := range pl.LoRAEngines {
		if e.Group != group {
			continue
		}
		en := LoRAEngine{Name: e.Name, MaxLoRAs: e.MaxLoRAs, MaxRank: e.MaxLoRARank, MaxCPULoRAs: e.MaxCPULoRAs,
			ActiveP99: e.ActiveP99, Load: map[string]float64{}}
		for _, a := range e.Adapters {
			en.Adapters = append(en.Adapters, a.Tenant)
			en.Load[a.Tenant] = a.RPS
			en.RPS += a.RPS
		}
		p.Engines = append(p.Engines, en)
	}
	return p
}

// LoRAGroupsOf lists the groups of a Plan file's engines, in the order they first appear.
func LoRAGroupsOf(pl *v1.Plan) []string {
	var out []string
	for _, e := range pl.LoRAEngines {
		if !slices.Contains(out, e.Group) {
			out = append(out, e.Group)
		}
	}
	return out
}

// LoRAEnginePrefix names a group's engines (PREFIX-0, PREFIX-1, …) after its base model: the
// catalog name with '.' as '-' ("llama-3-1-8b-lora"), "model-lora" for a checkpoint folder; the
// n-th group (from 1) of one prefix adds "-g<n>" from the second on.
func LoRAEnginePrefix(t v1.Tenant, n int) string {
	name := t.Model.Name
	if name == "" {
		name = "model"
	}
	p := strings.ReplaceAll(name, ".", "-") + "-lora"
	if n > 1 {
		p = fmt.Sprintf("%s-g%d", p, n)
	}
	return p
}

// BuildWithLoRA plans pool with its adapter tenants that may share a base-model engine
// (GroupLoRA) on shared LoRA engines: the groups are planned by LoRAFleetGroups, the other
// tenants (hard-isolated adapter tenants among them) by Build; then PlaceLoRAEngines puts the
// engines on the GPUs Build leaves idle. When that leaves an adapter tenant infeasible, the pool
// is planned again with the engines' GPUs held out of the fleet first (buildHeld), and that plan
// is returned where it serves more. adapters holds the adapters read from PEFT folders, by
// tenant (their rank and bytes); a base model given by dir comes from o.Models. Without shared
// adapter tenants it is Build. It returns the groups too.
func BuildWithLoRA(ctx context.Context, pool *v1.Pool, o Options, adapters map[string]llm.Adapter) (*v1.Plan, []LoRAFleetGroup, error) {
	if pool == nil {
		return nil, nil, errors.New("build plan: no pool")
	}
	fg, rest, err := LoRAFleetGroups(pool, o, adapters)
	if err != nil {
		return nil, nil, err
	}
	pl, err := Build(ctx, rest, o)
	if err != nil {
		return nil, nil, err
	}
	if len(fg) > 0 {
		vs, err := confirmLoRA(ctx, pl, pool, fg, o)
		if err != nil {
			return nil, nil, err
		}
		PlaceLoRAEngines(pl, pool, fg, o.Current)
		loraVerdictReasons(pl, fg, vs)
		if adapterShort(pl, fg) {
			held, hfg, err := buildHeld(ctx, pool, rest, o, adapters, pl)
			if err != nil {
				return nil, nil, err
			}
			if held != nil {
				pl, fg = held, hfg
			}
		}
	}
	if pool.Policy.DeviceAPI() == v1.DeviceAPIDRA {
		noEngineReasons(pl, pool)
	}
	markEstimated(pl) // again: the adapter tenants' engines are placed now
	return pl, fg, nil
}

// LoRAFleetGroups plans pool's adapter tenants that may share a base-model engine (GroupLoRA):
// each group by PlanLoRABoards on whole GPUs of every board of the fleet that holds its base model
// on one GPU (preferred first), bounded by LoRABound over those boards. It returns the groups and the pool less their
// tenants (pool itself when there are none), which a plan of the other tenants is made of before
// PlaceLoRAEngines puts the groups' engines on it. adapters and o.Models as for BuildWithLoRA.
func LoRAFleetGroups(pool *v1.Pool, o Options, adapters map[string]llm.Adapter) ([]LoRAFleetGroup, *v1.Pool, error) {
	groups, _ := GroupLoRA(pool, adapters)
	if len(groups) == 0 {
		return nil, pool, nil
	}
	var boards []*gpu.Board
	for _, n := range pool.Fleet.Nodes {
		for _, g := range n.GPUs {
			if b, err := gpu.Lookup(g.Board); err == nil && !slices.Contains(boards, b) {
				boards = append(boards, b)
			}
		}
	}
	if len(boards) == 0 {
		return nil, nil, errors.New("build plan: shared LoRA engines need a fleet with a known board")
	}
	names := map[string]string{}
	for _, t := range pool.Tenants {
		if t.Model.Adapter != nil {
			names[t.Name] = t.Model.Adapter.Name
		}
	}
	var fg []LoRAFleetGroup
	taken := map[string]bool{}
	prefixes := map[string]int{}
	for _, g := range groups {
		t := tenantOf(pool, g.Adapters[0].Tenant)
		a, err := baseArchOf(t, o.Models)
		if err != nil {
			return nil, nil, fmt.Errorf("build plan: lora group %s: %w", g.Key, err)
		}
		for i := range g.Adapters {
			if g.Adapters[i].Bytes == 0 {
				g.Adapters[i].Bytes, _ = llm.LoRAAdapterBytes(a, g.Adapters[i].Rank, nil)
			}
			taken[g.Adapters[i].Tenant] = true
		}
		clock, err := LoRAGroupClock(g)
		if err != nil {
			return nil, nil, fmt.Errorf("build plan: %w", err)
		}
		var lb []LoRABoard
		for _, b := range boards {
			// At the clock its energy class locks the GPU at, as the simulator runs it (ADR 0095).
			eng, lc, err := perf.PlaceLoRAAt(a, t.Model.Quantization, b, clock)
			if err != nil {
				continue // the base model does not fit a whole GPU of this board
			}
			lb = append(lb, LoRABoard{Board: b.Name, Engine: eng, Cost: lc})
		}
		if len(lb) == 0 {
			return nil, nil, fmt.Errorf("build plan: lora group %s: the base model fits a whole GPU of no board of the fleet", g.Key)
		}
		base := LoRAEnginePrefix(t, 1)
		prefixes[base]++
		prefix := LoRAEnginePrefix(t, prefixes[base])
		opts, err := PlanLoRABoards(g, lb, prefix)
		if err != nil {
			return nil, nil, fmt.Errorf("build plan: %w", err)
		}
		bound, why, err := LoRABound(g, lb)
		if err != nil {
			return nil, nil, fmt.Errorf("build plan: %w", err)
		}
		fg = append(fg, LoRAFleetGroup{Plan: opts[0].Plan, Board: opts[0].Board, Options: opts, Boards: lb, Group: g, Prefix: prefix,
			Model: t.Model.Name, ModelDir: t.Model.Dir, Quantization: string(t.Model.Quantization), AdapterName: names, Bound: bound, Why: why})
	}
	rest := *pool
	rest.Tenants = nil
	for _, t := range pool.Tenants {
		if !taken[t.Name] {
			rest.Tenants = append(rest.Tenants, t)
		}
	}
	return fg, &rest, nil
}

func tenantOf(p *v1.Pool, name string) v1.Tenant {
	for _, t := range p.Tenants {
		if t.Name == name {
			return t
		}
	}
	return v1.Tenant{}
}

// baseArchOf is a tenant's base model: its checkpoint folder as loaded (models, by tenant), or
// its catalog entry.
func baseArchOf(t v1.Tenant, models map[string]llm.Model) (llm.Arch, error) {
	if t.Model.Dir != "" {
		m, ok := models[t.Name]
		if !ok {
			return llm.Arch{}, fmt.Errorf("tenant %s: model dir %s is not loaded", t.Name, t.Model.Dir)
		}
		return m.Arch, nil
	}
	return llm.Lookup(t.Model.Name)
}

// engineSteps lists the shared LoRA engines that start, move, restart or stop between the plan
// in force cur and next, for Migration to order with the replica steps: an engine of next not in
// cur starts on its GPU, one whose GPU changes moves (its Deployment stops the old pod and starts
// the new: no surge), one of cur not in next stops (these are returned in steps, with the slots
// they leave and take: an engine holds its whole GPU); one whose limits or adapters change
// restarts in place (restarts: it changes no GPU's occupants).
func engineSteps(cur, next *v1.Plan) (steps, restarts []Step) {
	was := map[string]v1.PlanLoRAEngine{}
	for _, e := range cur.LoRAEngines {
		was[e.Name] = e
	}
	describe := func(e v1.PlanLoRAEngine) string {
		return fmt.Sprintf("lora engine (%d adapters, max_loras %d)", len(e.Adapters), e.MaxLoRAs)
	}
	var starts, moves, stops []Step
	for _, e := range next.LoRAEngines {
		old, ok := was[e.Name]
		switch {
		case !ok:
			starts = append(starts, Step{Kind: StepStart, GPU: e.GPU, LoRAEngine: e.Name, From: "none", To: describe(e), to: ptr(slot{gpu: e.GPU})})
		case old.GPU != e.GPU:
			moves = append(moves, Step{Kind: StepMove, GPU: e.GPU, LoRAEngine: e.Name, From: old.GPU.String(), To: e.GPU.String(),
				from: ptr(slot{gpu: old.GPU}), to: ptr(slot{gpu: e.GPU}), text: [2]string{describe(old), describe(e)}})
		case !sameEngine(old, e):
			restarts = append(restarts, Step{Kind: StepRestart, GPU: e.GPU, LoRAEngine: e.Name, From: describe(old), To: describe(e)})
		}
		delete(was, e.Name)
	}
	for _, e := range cur.LoRAEngines {
		if _, gone := was[e.Name]; gone {
			stops = append(stops, Step{Kind: StepStop, GPU: e.GPU, LoRAEngine: e.Name, From: describe(e), To: "none", from: ptr(slot{gpu: e.GPU})})
		}
	}
	return append(append(starts, moves...), stops...), restarts
}

// withEngines is slots (replicaSlots of pl) with each of pl's shared LoRA engines as an occupant
// of its whole GPU, under a key no tenant has: for a migration's room (slotCapacity).
func withEngines(slots map[string][]slot, pl *v1.Plan) map[string][]slot {
	out := make(map[string][]slot, len(slots)+len(pl.LoRAEngines))
	for k, v := range slots {
		out[k] = v
	}
	for _, e := range pl.LoRAEngines {
		k := "\x00lora:" + e.Name
		out[k] = append(out[k], slot{gpu: e.GPU})
	}
	return out
}

// sameEngine says whether two listings of an engine run the same server: base model, limits
// and adapters (rates aside, which the server does not see).
func sameEngine(a, b v1.PlanLoRAEngine) bool {
	if a.Model != b.Model || a.ModelDir != b.ModelDir || a.Quantization != b.Quantization || a.MaxLoRAs != b.MaxLoRAs ||
		a.MaxLoRARank != b.MaxLoRARank || a.MaxCPULoRAs != b.MaxCPULoRAs || len(a.Adapters) != len(b.Adapters) {
		return false
	}
	for i := range a.Adapters {
		if a.Adapters[i].Tenant != b.Adapters[i].Tenant || a.Adapters[i].Adapter != b.Adapters[i].Adapter {
			return false
		}
	}
	return true
}

// noEngineReasons tells each adapter tenant of a DRA pool that could have shared an engine why it
// has none (LoRANeedsDevicePlugin).
func noEngineReasons(pl *v1.Plan, pool *v1.Pool) {
	could := map[string]bool{}
	for _, t := range pool.Tenants {
		if t.Model.Adapter != nil && sharingGroup(t) != "" {
			could[t.Name] = true
		}
	}
	for i := range pl.Tenants {
		if could[pl.Tenants[i].Name] {
			pl.Tenants[i].Reasons = append(pl.Tenants[i].Reasons, v1.NewReason(v1.ReasonModeNotAllowed, "%s", LoRANeedsDevicePlugin))
		}
	}
}

// adapterShort reports whether pl leaves an adapter tenant of the groups fg infeasible.
func adapterShort(pl *v1.Plan, fg []LoRAFleetGroup) bool {
	in := map[string]bool{}
	for _, g := range fg {
		for _, a := range g.Group.Adapters {
			in[a.Tenant] = true
		}
	}
	for _, t := range pl.Tenants {
		if t.Infeasible && in[t.Name] {
			return true
		}
	}
	return false
}

// engineHold is a GPU of the fleet held out of the plan of the other tenants for shared LoRA
// engines (buildHeld).
type engineHold struct {
	ref   v1.GPURef
	board string
}

// holdForEngines chooses the GPUs the groups' engines need before the other tenants are packed:
// each group, in group order, takes as many GPUs as its engines on the first of its boards
// (Options, preferred first) with that many left, from the last nodes of the fleet and their
// highest indices first; only nodes whose GPUs are all of one board give GPUs (on a node of two
// boards the device plugin hands an engine's pod any whole GPU of it). A group no board has room
// for takes none. It returns the held GPUs and the fleet without them (nodes left with none
// dropped).
func holdForEngines(pool *v1.Pool, fg []LoRAFleetGroup) ([]engineHold, []v1.Node) {
	type slot struct {
		node, n int // node index, GPUs of it not yet held
		board   string
	}
	var slots []slot
	left := map[string]int{}
	for ni, n := range pool.Fleet.Nodes {
		board, count := "", 0
		for _, g := range n.GPUs {
			b, err := gpu.Lookup(g.Board)
			if err != nil || board != "" && b.Name != board {
				board = "\x00"
				break
			}
			board, count = b.Name, count+g.Count
		}
		if board == "" || board == "\x00" {
			continue
		}
		slots = append(slots, slot{node: ni, n: count, board: board})
		left[board] += count
	}
	var held []engineHold
	for _, grp := range fg {
		opts := grp.Options
		if len(opts) == 0 {
			opts = []LoRABoardPlan{{Board: grp.Board, Plan: grp.Plan}}
		}
		for _, o := range opts {
			k := len(o.Plan.Engines)
			if k == 0 || left[o.Board] < k {
				continue
			}
			left[o.Board] -= k
			for i := len(slots) - 1; i >= 0 && k > 0; i-- {
				s := &slots[i]
				for ; s.board == o.Board && s.n > 0 && k > 0; k-- {
					s.n--
					held = append(held, engineHold{ref: v1.GPURef{Node: pool.Fleet.Nodes[s.node].Name, Index: s.n}, board: o.Board})
				}
			}
			break
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	keep := map[int]int{} // node index → GPUs it keeps, where it gives some
	for _, s := range slots {
		keep[s.node] = s.n
	}
	var nodes []v1.Node
	for ni, n := range pool.Fleet.Nodes {
		k, ok := keep[ni]
		if !ok {
			nodes = append(nodes, n)
			continue
		}
		if k == 0 {
			continue
		}
		m := n
		m.GPUs = nil
		for _, g := range n.GPUs {
			c := min(g.Count, k)
			k -= c
			if c > 0 {
				g.Count = c
				m.GPUs = append(m.GPUs, g)
			}
		}
		nodes = append(nodes, m)
	}
	return held, nodes
}

// buildHeld plans pool with the GPUs its shared LoRA engines need held out of the fleet the
// other tenants are planned on (holdForEngines), then places the engines, the held GPUs given
// back idle first: the engines compete with the other tenants for GPUs. first is the plan that
// packs the other tenants first (BuildWithLoRA), which leaves an adapter tenant short; rest is
// pool less the groups' tenants. The held plan is returned, with its groups, when it serves
// more tenants than first (adapter tenants count), or as many on fewer GPUs, every engine it
// places is on a node whose whole GPUs are not MPS- or time-slice-shared (the device plugin
// shares a node's whole GPUs alike) and it is a valid plan of pool; else nil, as when the
// smaller fleet cannot be planned. Re-planning, the other tenants are planned as from scratch
// (the plan in force names GPUs the smaller fleet renumbers or lacks) and the engines keep their
// GPUs in force where idle; the plan is dropped when it leaves short a tenant the plan in force
// serves (a running tenant is not stopped for an engine), and under a move budget when its
// migration moves more than the budget. Its lower bound and
// baselines are first's: they are the pool's, not the plan's. Each tenant that first serves and it does not gets the reason in place
// of its own (which speak of the smaller fleet), as do the groups (Held) and the held GPUs.
func buildHeld(ctx context.Context, pool, rest *v1.Pool, o Options, adapters map[string]llm.Adapter, first *v1.Plan) (*v1.Plan, []LoRAFleetGroup, error) {
	fg, _, err := LoRAFleetGroups(pool, o, adapters)
	if err != nil {
		return nil, nil, err
	}
	held, nodes := holdForEngines(pool, fg)
	if len(held) == 0 {
		return nil, nil, nil
	}
	r := *rest
	r.Fleet.Nodes = nodes
	// Planned as from scratch: the plan in force names GPUs the smaller fleet renumbers or lacks.
	oh := o
	oh.Current, oh.MaxMoves = nil, nil
	pl, err := Build(ctx, &r, oh)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, err
		}
		return nil, nil, nil // the smaller fleet cannot be planned (a policy names a node held whole): first stands
	}
	mode := v1.ModeExclusive
	if m := pool.Policy.AllowedModes; len(m) > 0 && !slices.Contains(m, v1.ModeExclusive) {
		mode = m[0]
	}
	isHeld := map[v1.GPURef]bool{}
	for _, h := range held {
		isHeld[h.ref] = true
		pl.GPUs = append(pl.GPUs, v1.PlanGPU{Node: h.ref.Node, Index: h.ref.Index, Board: h.board, Role: v1.RoleIdle, Mode: mode})
	}
	nodeAt := map[string]int{}
	for i, n := range pool.Fleet.Nodes {
		nodeAt[n.Name] = i
	}
	sort.SliceStable(pl.GPUs, func(i, j int) bool {
		a, b := pl.GPUs[i], pl.GPUs[j]
		if a.Node != b.Node {
			return nodeAt[a.Node] < nodeAt[b.Node]
		}
		return a.Index < b.Index
	})
	pl.Summary.GPUsTotal = len(pl.GPUs)
	vs, err := confirmLoRA(ctx, pl, pool, fg, oh)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, err
		}
		return nil, nil, nil
	}
	sharedWhole := map[string]bool{}
	for _, g := range pl.GPUs {
		if (g.Mode == v1.ModeMPS || g.Mode == v1.ModeTimeSlice) && len(g.Replicas) > 0 {
			sharedWhole[g.Node] = true
		}
	}
	PlaceLoRAEngines(pl, pool, fg, o.Current)
	loraVerdictReasons(pl, fg, vs)
	for _, g := range pl.GPUs {
		if g.LoRAEngine != "" && sharedWhole[g.Node] {
			return nil, nil, nil
		}
	}
	if v1.ValidatePlan(pl, pool) != nil {
		return nil, nil, nil
	}
	if cur := o.Current; cur != nil {
		if len(shortNames(pl, cur)) > 0 {
			return nil, nil, nil // it stops a tenant that runs now
		}
		if o.MaxMoves != nil && CountMoves(Migration(cur, pl, pool.Policy.MaxUnavailable.Resolve(len(pl.GPUs)))) > *o.MaxMoves {
			return nil, nil, nil // past the move budget
		}
	}
	nf, nh := len(first.Tenants)-shortTenants(first), len(pl.Tenants)-shortTenants(pl)
	if nh < nf || nh == nf && pl.Summary.GPUsUsed >= first.Summary.GPUsUsed {
		return nil, nil, nil
	}
	pl.Summary.LowerBound, pl.Summary.Baselines = first.Summary.LowerBound, first.Summary.Baselines
	counts := map[string]int{}
	for _, h := range held {
		counts[h.board]++
	}
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[b], b))
	}
	note := fmt.Sprintf("%s held for shared LoRA engines before the other tenants were packed: %d of %d tenants served, %d when the engines take the GPUs the packing leaves idle",
		strings.Join(parts, " + "), nh, len(pl.Tenants), nf)
	for i := range fg {
		fg[i].Held = note
	}
	for i := range pl.GPUs {
		if g := &pl.GPUs[i]; isHeld[g.Ref()] {
			g.Reasons = append(g.Reasons, v1.NewReason(v1.ReasonLoRAEngine, "%s", note))
		}
	}
	for _, name := range shortNames(pl, first) {
		for i := range pl.Tenants {
			if pt := &pl.Tenants[i]; pt.Name == name {
				// The reasons of its plan on the smaller fleet would speak of that fleet alone.
				pt.Reasons = []v1.Reason{v1.NewReason(v1.ReasonNoCapacity, "the GPUs it was planned on run shared LoRA engines: %s", note)}
			}
		}
	}
	return pl, fg, nil
}
