package cost

import (
	"errors"
	"fmt"
	"math"
	"sort"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// SplitByTokens divides an amount (a shared LoRA engine's energy, cost or carbon) among the
// adapters it served in proportion to the tokens it computed for each (input and output, as the
// simulator or the engine's counters give them). The parts add up to amount to within
// floating-point rounding: the adapters are summed in name order and the last one gets what the
// others leave, so Σ parts = amount holds to 1e-9 of it. An engine that computed no tokens gives
// every adapter an equal part.
func SplitByTokens(amount float64, tokens map[string]int64) (map[string]float64, error) {
	if math.IsNaN(amount) || math.IsInf(amount, 0) || amount < 0 {
		return nil, fmt.Errorf("split by tokens: amount %v is not a finite non-negative number", amount)
	}
	if len(tokens) == 0 {
		return nil, errors.New("split by tokens: no adapters")
	}
	names := make([]string, 0, len(tokens))
	for n := range tokens {
		names = append(names, n)
	}
	sort.Strings(names) // the first bad adapter by name, the same on every call
	var total float64
	for _, n := range names {
		t := tokens[n]
		if t < 0 {
			return nil, fmt.Errorf("split by tokens: adapter %s: %d tokens", n, t)
		}
		total += float64(t)
	}
	out := make(map[string]float64, len(names))
	var given float64
	for i, n := range names {
		if i == len(names)-1 {
			out[n] = math.Max(0, amount-given)
			break
		}
		share := 1 / float64(len(names))
		if total > 0 {
			share = float64(tokens[n]) / total
		}
		out[n] = amount * share
		given += out[n]
	}
	return out, nil
}

// EngineUse is what one shared LoRA engine did over the period: its dynamic energy above idle
// (the power model's, simulated or planned) and, per adapter tenant, the tokens it computed for
// it (prompt and output) and the output tokens among them.
type EngineUse struct {
	DynamicJ     float64
	Tokens       map[string]int64
	OutputTokens map[string]int64
}

// AddLoRAEngines bills the plan's shared LoRA engines (plan.loraEngines) on the devices of its
// GPUs (FromPlan, FromRun): the engine's GPU gets its dynamic energy, and one slice per adapter
// tenant whose reserved fraction of the GPU and active GPU-seconds are the engine's, split among
// its adapters by the tokens it computed for each (SplitByTokens). Since the attribution splits
// hardware by the reserved fraction and the usage, and energy (hence carbon) by activity, each
// engine's GPU cost, energy and carbon are split among its adapters by tokens, and the parts add
// up to the engine's (to 1e-9). An engine without a use entry is billed as idle capacity.
func AddLoRAEngines(devs []Device, pl *v1.Plan, use map[string]EngineUse, idleFraction float64) error {
	at := map[string]int{}
	for i, d := range devs {
		at[d.GPU] = i
	}
	for _, e := range pl.LoRAEngines {
		u, ok := use[e.Name]
		if !ok {
			continue
		}
		i, ok := at[e.GPU.String()]
		if !ok {
			return fmt.Errorf("cost of lora engine %s: no device for its gpu %s", e.Name, e.GPU)
		}
		if !(u.DynamicJ >= 0) || math.IsInf(u.DynamicJ, 0) {
			return fmt.Errorf("cost of lora engine %s: dynamic energy %v must be finite and not negative", e.Name, u.DynamicJ)
		}
		d := &devs[i]
		b, err := gpu.Lookup(d.Board)
		if err != nil {
			return fmt.Errorf("cost of lora engine %s: %w", e.Name, err)
		}
		tokens := map[string]int64{}
		for _, a := range e.Adapters {
			tokens[a.Tenant] = u.Tokens[a.Tenant]
		}
		shares, err := SplitByTokens(1, tokens)
		if err != nil {
			return fmt.Errorf("cost of lora engine %s: %w", e.Name, err)
		}
		act := 0.0
		if span := b.TDPWatts * (1 - idleFraction); span > 0 {
			act = u.DynamicJ / span
		}
		names := make([]string, 0, len(shares))
		for n := range shares {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			d.Slices = append(d.Slices, Slice{Tenant: n, Reserved: shares[n], Active: act * shares[n],
				OutputTokens: float64(u.OutputTokens[n]), Tokens: float64(u.Tokens[n])})
		}
		d.EnergyJ += u.DynamicJ
	}
	return nil
}
