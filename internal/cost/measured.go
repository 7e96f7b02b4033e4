package cost

import (
	"fmt"
	"sort"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// MeasuredGPU is one GPU over the period: the increase of its energy counter, of its idle line
// and of each tenant's energy on it, as the node agent attributes them (docs/agent.md).
type MeasuredGPU struct {
	EnergyJ, IdleJ float64
	Tenants        map[string]float64
	// Split is how the agent split the GPU's active energy (its gpupool_gpu_energy_split_info;
	// empty when not exported).
	Split string
}

// MeasuredOptions are the measurements of a running pool over a period.
type MeasuredOptions struct {
	Seconds float64
	// GPUs by plan reference, "node/index"; GPUs of the plan not listed are left out of the bill.
	GPUs map[string]MeasuredGPU
	// Tokens are each tenant's tokens (prompt and generated) over the period, OutputTokens the
	// generated ones (the agent's gpupool_tenant_output_tokens_total, from vLLM's
	// vllm:generation_tokens_total). A tenant missing from OutputTokens gets no per-output-token
	// figures.
	Tokens       map[string]float64
	OutputTokens map[string]float64
}

// FromMeasured builds the devices of plan pl's measured GPUs (Measured basis): a GPU's energy is
// its counter's increase and its idle power the agent's idle line over the period; a replica's
// reserved fraction follows its slice, and its activity is its tenant's energy on the GPU (split
// evenly over the tenant's replicas there) over the board's dynamic range. Energy the agent gave a
// tenant with no replica on that GPU in the plan is an error: the plan is not the one that ran.
func FromMeasured(pl *v1.Plan, o MeasuredOptions) ([]Device, error) {
	if !(o.Seconds > 0) {
		return nil, fmt.Errorf("cost of measurements: period %g s must be positive", o.Seconds)
	}
	all, err := devices(pl, Measured, PlanOptions{Seconds: o.Seconds}, func(d *Device, _ float64, r v1.PlanReplica, reserved, _ float64) {
		d.Slices = append(d.Slices, Slice{Tenant: r.Tenant, Reserved: reserved})
	})
	if err != nil {
		return nil, err
	}
	var out []Device
	var errs []string
	tokensGiven := map[string]bool{}
	for _, d := range all {
		m, ok := o.GPUs[d.GPU]
		if !ok {
			continue
		}
		b, err := gpu.Lookup(d.Board)
		if err != nil {
			return nil, fmt.Errorf("cost of measurements: gpu %s: %w", d.GPU, err)
		}
		d.EnergyJ, d.IdleWatts, d.Split = m.EnergyJ, m.IdleJ/o.Seconds, m.Split
		count := map[string]int{}
		for _, s := range d.Slices {
			count[s.Tenant]++
		}
		for t, j := range m.Tenants {
			if count[t] == 0 && j > 0 {
				errs = append(errs, fmt.Sprintf("gpu %s: tenant %s drew %.1f J but has no replica there in the plan", d.GPU, t, j))
			}
		}
		span := b.TDPWatts - d.IdleWatts
		for i := range d.Slices {
			s := &d.Slices[i]
			if span > 0 {
				s.Active = m.Tenants[s.Tenant] / float64(count[s.Tenant]) / span
			}
			if !tokensGiven[s.Tenant] {
				s.Tokens, tokensGiven[s.Tenant] = o.Tokens[s.Tenant], true
				s.OutputTokens = o.OutputTokens[s.Tenant]
			}
		}
		out = append(out, d)
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("cost of measurements: %d problem(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cost of measurements: none of the plan's %d GPUs was measured", len(all))
	}
	return out, nil
}
