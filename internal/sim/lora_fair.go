package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"gpupool.dev/gpupool/internal/fair"
)

// loraSlotResource is the one resource of a shared LoRA engine as the fair allocator sees it:
// its sequence slots (max-num-seqs).
const loraSlotResource = "slots"

// LoRAFairCaps turns the weights of an engine's adapters (the planner's LoRAShare weights for
// that engine) into per-adapter concurrency caps with the fair allocator: the engine's slots are
// the capacity, each adapter a tenant of its weight under the engine (reservations as given)
// wanting want[adapter] slots; what the allocator grants is the adapter's cap at the gateway.
// When the adapters want less than the engine holds, each gets what it wants; when they want
// more, weighted DRF splits the slots by weight, reservations first. now is the allocator's clock.
func LoRAFairCaps(engine string, weights map[string]float64, slots int, want, reserve map[string]int, now time.Time) (map[string]int, error) {
	cfg := fair.Config{Capacity: fair.Vector{loraSlotResource: float64(slots)}}
	for _, n := range slices.Sorted(maps.Keys(weights)) {
		cfg.Tenants = append(cfg.Tenants, fair.Tenant{Name: n, Path: engine, Weight: weights[n],
			Task: fair.Vector{loraSlotResource: 1}, Demand: want[n], Reservation: reserve[n]})
	}
	if len(cfg.Tenants) == 0 {
		return nil, fmt.Errorf("lora fair caps: engine %s has no adapters", engine)
	}
	a, _, err := fair.Allocate(cfg, now)
	if err != nil {
		return nil, fmt.Errorf("lora fair caps: engine %s: %w", engine, err)
	}
	caps := map[string]int{}
	for _, st := range a.Snapshot() {
		caps[st.Name] = st.Tasks
	}
	return caps, nil
}
