package sim

import (
	"fmt"
	"time"

	"gpupool.dev/gpupool/internal/fair"
)

// LoRAFairCaps turns the weights of an engine's adapters (the planner's LoRAShare weights for
// that engine) into per-adapter concurrency caps with the fair allocator: the engine's slots are
// the capacity, each adapter a tenant of its weight under the engine (reservations as given)
// wanting want[adapter] slots; what the allocator grants is the adapter's cap at the gateway.
// When the adapters want less than the engine holds, each gets what it wants; when they want
// more, weighted DRF splits the slots by weight, reservations first. now is the allocator's clock.
func LoRAFairCaps(engine string, weights map[string]float64, slots int, want, reserve map[string]int, now time.Time) (map[string]int, error) {
	if len(weights) == 0 {
		return nil, fmt.Errorf("lora fair caps: engine %s has no adapters", engine)
	}
	caps, err := fair.Split(engine, weights, slots, want, reserve, now)
	if err != nil {
		return nil, fmt.Errorf("lora fair caps: engine %s: %w", engine, err)
	}
	return caps, nil
}
