package fair

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// splitResource is the one resource of Split.
const splitResource = "units"

// Split divides one shared thing of capacity units (a shared LoRA engine's sequence slots, or
// its capacity in parts) among claimants under one group: each claimant is a tenant of its
// weight under path wanting want[name] units, reserve[name] of them reserved. When they want less
// than the capacity each gets what it wants; when they want more, weighted DRF splits the units
// by weight, reservations first. It returns the units each claimant is granted. now is the
// allocator's clock.
func Split(path string, weights map[string]float64, capacity int, want, reserve map[string]int, now time.Time) (map[string]int, error) {
	cfg := Config{Capacity: Vector{splitResource: float64(capacity)}}
	for _, n := range slices.Sorted(maps.Keys(weights)) {
		cfg.Tenants = append(cfg.Tenants, Tenant{Name: n, Path: path, Weight: weights[n],
			Task: Vector{splitResource: 1}, Demand: want[n], Reservation: reserve[n]})
	}
	if len(cfg.Tenants) == 0 {
		return nil, fmt.Errorf("split %s: no claimants", path)
	}
	a, _, err := Allocate(cfg, now)
	if err != nil {
		return nil, fmt.Errorf("split %s: %w", path, err)
	}
	out := map[string]int{}
	for _, st := range a.Snapshot() {
		out[st.Name] = st.Tasks
	}
	return out, nil
}
