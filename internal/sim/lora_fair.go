package sim

import (
	"fmt"
	"time"

	"gpupool.dev/gpupool/internal/fair"
	"gpupool.dev/gpupool/internal/plan"
)

// loraSlotResource is the one resource of a shared LoRA engine as the fair allocator sees it:
// its sequence slots (max-num-seqs).
const loraSlotResource = "slots"

// LoRAFairCaps turns an engine's adapter shares into per-adapter concurrency caps with the fair
// allocator: the engine's slots are the capacity, each adapter a tenant of its share's weight
// under the engine (reservations as given) wanting want[adapter] slots; what the allocator grants
// is the adapter's cap at the gateway. When the adapters want less than the engine holds, each
// gets what it wants; when they want more, weighted DRF splits the slots by weight, reservations
// first. now is the allocator's clock.
func LoRAFairCaps(engine string, shares []plan.LoRAShare, slots int, want, reserve map[string]int, now time.Time) (map[string]int, error) {
	cfg := fair.Config{Capacity: fair.Vector{loraSlotResource: float64(slots)}}
	for _, s := range shares {
		if s.Engine != engine {
			continue
		}
		cfg.Tenants = append(cfg.Tenants, fair.Tenant{Name: s.Tenant, Path: engine, Weight: s.Weight,
			Task: fair.Vector{loraSlotResource: 1}, Demand: want[s.Tenant], Reservation: reserve[s.Tenant]})
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
