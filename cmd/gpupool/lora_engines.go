package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/sim"
)

// loraEngineModel is a planned shared engine's performance model: its base model on a whole GPU
// of its board (perf.PlaceLoRA).
type loraEngineModel struct {
	engine *perf.Engine
	cost   *perf.LoRACost
	arch   llm.Arch
}

// loraEngineModels builds the model of every engine of pl: the base model of its adapter tenants
// (a catalog name, or the checkpoint folder models holds by tenant) at their quantization, on the
// board of its GPU.
func loraEngineModels(pl *v1.Plan, pool *v1.Pool, models map[string]llm.Model) (map[string]loraEngineModel, error) {
	boards := map[v1.GPURef]string{}
	for _, g := range pl.GPUs {
		boards[g.Ref()] = g.Board
	}
	out := map[string]loraEngineModel{}
	for _, e := range pl.LoRAEngines {
		t := tenantNamed(pool, e.Adapters[0].Tenant)
		var a llm.Arch
		if m, ok := models[t.Name]; ok && t.Model.Dir != "" {
			a = m.Arch
		} else {
			var err error
			if a, err = llm.Lookup(t.Model.Name); err != nil {
				return nil, fmt.Errorf("lora engine %s: %w", e.Name, err)
			}
		}
		b, err := gpu.Lookup(boards[e.GPU])
		if err != nil {
			return nil, fmt.Errorf("lora engine %s: %w", e.Name, err)
		}
		clock, err := loraEngineClock(e, pool)
		if err != nil {
			return nil, fmt.Errorf("lora engine %s: %w", e.Name, err)
		}
		eng, lc, err := perf.PlaceLoRAAt(a, t.Model.Quantization, b, clock)
		if err != nil {
			return nil, fmt.Errorf("lora engine %s: %w", e.Name, err)
		}
		out[e.Name] = loraEngineModel{engine: eng, cost: lc, arch: a}
	}
	return out, nil
}

// loraEngineClock is the clock engine e's GPU runs at, a fraction of boost (0: the power-limited
// boost clock): its adapters' energy class locks it, as a dense tenant's locks its GPU. The
// planner gives an engine adapters of one class (plan.GroupLoRA); a plan whose engine mixes them
// runs at the lowest of their locks, the one that slows the engine most.
func loraEngineClock(e v1.PlanLoRAEngine, pool *v1.Pool) (float64, error) {
	o := perf.DefaultOptions()
	low := 0.0
	for i, a := range e.Adapters {
		c, err := o.ClockCap(string(tenantNamed(pool, a.Tenant).EnergyClass))
		if err != nil {
			return 0, fmt.Errorf("adapters[%d] (%s): energyClass: %w", i, a.Tenant, err)
		}
		if c > 0 && (low == 0 || c < low) {
			low = c
		}
	}
	return low, nil
}

// withoutLoRAEngines is pool and pl less the shared engines and the adapter tenants they serve
// (their GPUs idle), for the replica simulator; pool and pl themselves when pl has no engines.
// The copy's lower bound is cleared: it is an input to the simulator, not a plan to keep.
func withoutLoRAEngines(pool *v1.Pool, pl *v1.Plan) (*v1.Pool, *v1.Plan) {
	if len(pl.LoRAEngines) == 0 {
		return pool, pl
	}
	served := map[string]bool{}
	for _, t := range pl.Tenants {
		if len(t.LoRAEngines) > 0 {
			served[t.Name] = true
		}
	}
	p := *pool
	p.Tenants = nil
	for _, t := range pool.Tenants {
		if !served[t.Name] {
			p.Tenants = append(p.Tenants, t)
		}
	}
	q := *pl
	q.LoRAEngines, q.Tenants, q.GPUs = nil, nil, append([]v1.PlanGPU(nil), pl.GPUs...)
	for _, t := range pl.Tenants {
		if !served[t.Name] {
			q.Tenants = append(q.Tenants, t)
		}
	}
	for i := range q.GPUs {
		if q.GPUs[i].LoRAEngine != "" {
			q.GPUs[i].LoRAEngine, q.GPUs[i].Role = "", v1.RoleIdle
			q.GPUs[i].Reasons = []v1.Reason{v1.NewReason(v1.ReasonIdle, "runs a shared LoRA engine, simulated apart")}
			q.Summary.GPUsUsed--
		}
	}
	q.Summary.LowerBound = 0
	return &p, &q
}

// loraEngineRun is one shared engine's run in simulate's report: its adapters' outcomes (the
// engine's part of each adapter's traffic), its adapter loads and its GPU's energy.
type loraEngineRun struct {
	Name string `json:"name"`
	GPU  string `json:"gpu"`
	// MeetsAll says whether every adapter met its objectives on this engine.
	MeetsAll  bool  `json:"meetsAll"`
	Loads     int64 `json:"loads"`
	DiskLoads int64 `json:"diskLoads"`
	// BusySeconds is the engine's time in steps; DynamicJoules the steps' energy above idle;
	// EnergyJoules the GPU's energy over the run (idle power over the run plus the steps').
	BusySeconds   float64                 `json:"busySeconds"`
	DynamicJoules float64                 `json:"dynamicJoules"`
	EnergyJoules  float64                 `json:"energyJoules"`
	Adapters      []sim.LoRAAdapterResult `json:"adapters"`
}

// simulateLoRAEngines runs every shared engine of pl with its adapters' traffic for d
// (sim.SimulateLoRA: per-adapter queues and objectives, adapter slots and loads), engine i with
// the random stream (seed, 1000 + i), apart from the replica simulator's. loaded holds the
// adapters read from PEFT folders, by tenant (their rank and bytes); the others are sized from
// their rank. Request lengths follow each tenant's traffic.lengths, or lengths for all when set.
func simulateLoRAEngines(pl *v1.Plan, pool *v1.Pool, ms map[string]loraEngineModel, loaded map[string]llm.Adapter, d time.Duration, seed uint64, lengths sim.Lengths) ([]loraEngineRun, error) {
	idle := perf.DefaultOptions().IdlePowerFraction
	boards := map[v1.GPURef]string{}
	for _, g := range pl.GPUs {
		boards[g.Ref()] = g.Board
	}
	var out []loraEngineRun
	for i, e := range pl.LoRAEngines {
		m := ms[e.Name]
		cfg := sim.LoRAConfig{Engine: m.engine, Cost: m.cost, MaxLoRAs: e.MaxLoRAs, MaxRank: e.MaxLoRARank, MaxCPULoRAs: e.MaxCPULoRAs, Duration: d}
		for _, a := range e.Adapters {
			t := tenantNamed(pool, a.Tenant)
			rank := e.MaxLoRARank
			if t.Model.Adapter != nil && t.Model.Adapter.Rank > 0 {
				rank = t.Model.Adapter.Rank
			}
			bytes, _ := llm.LoRAAdapterBytes(m.arch, rank, nil)
			if l, ok := loaded[a.Tenant]; ok {
				rank, bytes = l.Config.MaxRank, l.Bytes
			}
			slo := sloOfTenant(t)
			law := t.Traffic.Lengths
			if lengths != "" {
				law = lengths // the run's --lengths overrides every tenant's
			}
			cfg.Adapters = append(cfg.Adapters, sim.LoRAAdapter{Name: a.Tenant, RPS: a.RPS, InputTokens: t.Traffic.InputTokens,
				OutputTokens: t.Traffic.OutputTokens, Lengths: law, MaxContext: t.MaxContext, Bytes: bytes, Rank: rank, TTFT: slo.TTFT, TPOT: slo.TPOT})
		}
		r, err := sim.SimulateLoRA(cfg, rand.New(rand.NewPCG(seed, 1000+uint64(i))))
		if err != nil {
			return nil, fmt.Errorf("simulate lora engine %s: %w", e.Name, err)
		}
		b, err := gpu.Lookup(boards[e.GPU])
		if err != nil {
			return nil, err
		}
		run := max(d, r.End).Seconds()
		out = append(out, loraEngineRun{Name: e.Name, GPU: e.GPU.String(), MeetsAll: r.MeetsAll(), Loads: r.Loads, DiskLoads: r.DiskLoads,
			BusySeconds: r.Busy.Seconds(), DynamicJoules: r.DynamicJoules, EnergyJoules: idle*b.TDPWatts*run + r.DynamicJoules,
			Adapters: r.Adapters})
	}
	return out, nil
}

func sloOfTenant(t v1.Tenant) perf.SLO {
	var o perf.SLO
	if t.SLO.TTFTP99 != nil {
		o.TTFT = time.Duration(*t.SLO.TTFTP99)
	}
	if t.SLO.TPOTP99 != nil {
		o.TPOT = time.Duration(*t.SLO.TPOTP99)
	}
	return o
}

// simulatedEngineUse is each engine's use from its simulated run, for the bill.
func simulatedEngineUse(runs []loraEngineRun) map[string]cost.EngineUse {
	out := map[string]cost.EngineUse{}
	for _, r := range runs {
		u := cost.EngineUse{DynamicJ: r.DynamicJoules, Tokens: map[string]int64{}, OutputTokens: map[string]int64{}}
		for _, a := range r.Adapters {
			u.Tokens[a.Name] = a.InputTokens + a.OutputTokens
			u.OutputTokens[a.Name] = a.OutputTokens
		}
		out[r.Name] = u
	}
	return out
}

// plannedEngineUse is each engine's use over seconds on the planned basis: each adapter's
// offered tokens at its rate on the engine, and the engine's dynamic power at its aggregate rate
// and mean request shape (perf.Engine.PowerAt; the LoRA kernels are not in it).
func plannedEngineUse(pl *v1.Plan, pool *v1.Pool, ms map[string]loraEngineModel, seconds float64) map[string]cost.EngineUse {
	out := map[string]cost.EngineUse{}
	for _, e := range pl.LoRAEngines {
		u := cost.EngineUse{Tokens: map[string]int64{}, OutputTokens: map[string]int64{}}
		var rps, in, outTok float64
		for _, a := range e.Adapters {
			tr := tenantNamed(pool, a.Tenant).Traffic
			n := a.RPS * seconds
			u.Tokens[a.Tenant] = int64(math.Round(n * float64(tr.InputTokens+tr.OutputTokens)))
			u.OutputTokens[a.Tenant] = int64(math.Round(n * float64(tr.OutputTokens)))
			rps += a.RPS
			in += a.RPS * float64(tr.InputTokens)
			outTok += a.RPS * float64(tr.OutputTokens)
		}
		if m, ok := ms[e.Name]; ok && rps > 0 {
			w := perf.Workload{InputTokens: max(1, int(math.Round(in/rps))), OutputTokens: max(1, int(math.Round(outTok/rps)))}
			if watts, err := m.engine.PowerAt(w, rps, perf.Load{}); err == nil {
				u.DynamicJ = watts * seconds
			}
		}
		out[e.Name] = u
	}
	return out
}

// loraRunLines describes the shared engines' runs: per engine its adapters, loads, the worst
// attainment and TTFT p99 among them, and its GPU's energy.
func loraRunLines(runs []loraEngineRun) []string {
	var lines []string
	for _, r := range runs {
		worst, ttft := 1.0, time.Duration(0)
		names := make([]string, 0, len(r.Adapters))
		for _, a := range r.Adapters {
			worst, ttft = min(worst, a.Attainment), max(ttft, a.TTFTP99)
			names = append(names, a.Name)
		}
		sort.Strings(names)
		lines = append(lines, fmt.Sprintf("%s on %s: %d adapters, every one meets its SLO: %v; worst attainment %.4f, worst TTFT p99 %s; %d adapter loads (%d from disk); busy %.1f s, %.1f kJ",
			r.Name, r.GPU, len(r.Adapters), r.MeetsAll, worst, ttft.Round(time.Millisecond), r.Loads, r.DiskLoads, r.BusySeconds, r.EnergyJoules/1000))
	}
	return lines
}
