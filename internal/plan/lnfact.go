package plan

import (
	"math"
	"sync"
)

// lnFactTable holds ln n! = math.Lgamma(n+1) for the counts the queueing model's Poisson and
// Erlang sums reach most often, computed once: those sums take it term by term, for every rate
// the sizing tries, and math.Lgamma was a tenth of a large pool's planning time. The values are
// math.Lgamma's own, so every sum is bit for bit what it was. It is filled on first use, not
// when a binary that never plans starts.
var lnFactTable = sync.OnceValue(func() []float64 {
	t := make([]float64, 1<<13)
	for n := range t {
		t[n], _ = math.Lgamma(float64(n) + 1)
	}
	return t
})

// lnFact is ln n! for n ≥ 0, as math.Lgamma(n+1) gives it.
func lnFact(n int) float64 {
	if t := lnFactTable(); n >= 0 && n < len(t) {
		return t[n]
	}
	lg, _ := math.Lgamma(float64(n) + 1)
	return lg
}
