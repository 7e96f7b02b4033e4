package cost

import (
	"errors"
	"fmt"
	"math"
	"sort"
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
	var total float64
	for n, t := range tokens {
		if t < 0 {
			return nil, fmt.Errorf("split by tokens: adapter %s: %d tokens", n, t)
		}
		names = append(names, n)
		total += float64(t)
	}
	sort.Strings(names)
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
