package metrics

import "sort"

// Share is one slice's claim on a GPU's energy over an interval.
type Share struct {
	Tenant string
	// Weight is the compute slices of a MIG instance, or the SM utilisation (percent × seconds) of
	// an MPS or time-sliced process. Only ratios matter.
	Weight float64
}

// Attribute splits joules among the shares in proportion to their weights; with no positive
// weight it splits evenly. The result sums to joules (up to rounding). Tenants with several
// shares get their sum.
func Attribute(joules float64, shares []Share) map[string]float64 {
	out := map[string]float64{}
	if len(shares) == 0 || joules <= 0 {
		return out
	}
	total := 0.0
	for _, s := range shares {
		if s.Weight > 0 {
			total += s.Weight
		}
	}
	for _, s := range shares {
		w := 1.0 / float64(len(shares))
		if total > 0 {
			w = max(s.Weight, 0) / total
		}
		out[s.Tenant] += joules * w
	}
	return out
}

// SplitIdle splits a GPU's energy over an interval into active energy, which goes to its tenants,
// and idle energy, which stays on the GPU's idle line (docs/cost.md): idle is the idle power over
// the interval, at most the energy; with no tenant on the GPU everything is idle.
func SplitIdle(joules, idleWatts, seconds float64, tenants bool) (active, idle float64) {
	if !(joules > 0) {
		return 0, 0
	}
	idle = min(joules, max(0, idleWatts*seconds))
	if !tenants {
		idle = joules
	}
	return joules - idle, idle
}

// JoulesPerToken returns joules/tokens, or 0 without tokens.
func JoulesPerToken(joules, tokens float64) float64 {
	if tokens <= 0 {
		return 0
	}
	return joules / tokens
}

// CounterDelta returns the increase of a counter between two readings; a reset (cur < prev, e.g.
// the driver or the engine restarted) counts the current value as the increase.
func CounterDelta(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// Tenants returns the tenants of a map in name order.
func Tenants(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
