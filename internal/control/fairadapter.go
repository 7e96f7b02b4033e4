package control

// This file is the only one that speaks to internal/fair.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"gpupool.dev/gpupool/internal/fair"
)

// resSlices is the one resource the control plane allocates today: a replica takes one slice.
const resSlices = "slices"

type decisionKind uint8

const (
	decGrant decisionKind = iota + 1
	decStop
	decQueue
)

// decision is one allocator item, reduced to what the engine maps onto slices.
type decision struct {
	kind   decisionKind
	tenant string
	task   uint64
	count  int
	code   Code
	reason string // fair's reason name
	text   string // fair's item sentence
	by     string
	expiry time.Time // leases
}

// allocator wraps fair.Allocator.
type allocator struct{ a *fair.Allocator }

// fairTenant is a tenant as the allocator sees it. An adapter tenant that a shared LoRA engine of
// the applied plan serves asks for no slices of its own: the engine's slice is its (engineTenant).
func (e *Engine) fairTenant(t Tenant) fair.Tenant {
	ft := fair.Tenant{Name: t.Name, Path: t.Path, Weight: t.Weight, Task: fair.Vector{resSlices: 1},
		Demand: t.Demand, Reservation: t.Reservation, Cap: t.Cap}
	if len(e.adapterOf[t.Name]) > 0 {
		ft.Demand, ft.Reservation = 0, 0
	}
	return ft
}

// engineTenant is a shared LoRA engine as the allocator sees it: one slice (a whole GPU), under
// the path of its first registered adapter tenant (by name), of the weight of its registered
// adapters together (each weight 0 counting as 1), wanted while any of them has demand and
// reserved while any of them has a reservation.
func (e *Engine) engineTenant(le *loraEngine) fair.Tenant {
	ft := fair.Tenant{Name: loraKey(le.name), Task: fair.Vector{resSlices: 1}, Cap: 1}
	first := true
	for _, a := range le.adapters {
		t, ok := e.tenants[a.Tenant]
		if !ok {
			continue
		}
		if first {
			ft.Path, first = t.Path, false
		}
		ft.Weight += max(t.Weight, 0)
		if t.Weight == 0 {
			ft.Weight++
		}
		if t.Demand > 0 || t.Rate > 0 {
			ft.Demand = 1
		}
		if t.Reservation > 0 {
			ft.Reservation = 1
		}
	}
	return ft
}

// allocTenants lists the registered tenants (by name), then the applied plan's engines (by name).
func (e *Engine) allocTenants() []fair.Tenant {
	var out []fair.Tenant
	for _, name := range slices.Sorted(maps.Keys(e.tenants)) {
		out = append(out, e.fairTenant(*e.tenants[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(e.lora)) {
		out = append(out, e.engineTenant(e.lora[name]))
	}
	return out
}

// syncLoRA follows a newly applied plan: engines no longer planned leave the allocator, new ones
// join it, and every tenant whose standing changed (an adapter tenant that an engine now serves,
// or no longer does) is updated, in one step. It refreshes the shares.
func (e *Engine) syncLoRA(now time.Time) ([]decision, error) {
	oldEngines, oldOf := e.lora, e.adapterOf
	e.lora, e.adapterOf = loraEnginesOf(e.plan)
	var evs []fair.Event
	for _, name := range slices.Sorted(maps.Keys(e.tenants)) {
		if (len(oldOf[name]) > 0) != (len(e.adapterOf[name]) > 0) {
			evs = append(evs, fair.UpdateTenant{Tenant: e.fairTenant(*e.tenants[name])})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(oldEngines)) {
		if _, ok := e.lora[name]; !ok {
			evs = append(evs, fair.RemoveTenant{Tenant: loraKey(name)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.lora)) {
		if _, ok := oldEngines[name]; ok {
			evs = append(evs, fair.UpdateTenant{Tenant: e.engineTenant(e.lora[name])})
		} else {
			evs = append(evs, fair.AddTenant{Tenant: e.engineTenant(e.lora[name])})
		}
	}
	var ds []decision
	if len(evs) > 0 {
		var err error
		if ds, err = e.alloc.apply(now, evs...); err != nil {
			return nil, fmt.Errorf("lora engines: %w", err)
		}
	}
	return ds, e.refreshLoRAShares(now)
}

// loraTouched follows a change of tenant name (added, updated, removed, new demand): when it is
// an adapter tenant of engines of the applied plan, those engines' standing in the allocator is
// updated and the shares refreshed.
func (e *Engine) loraTouched(now time.Time, name string) ([]decision, error) {
	if len(e.adapterOf[name]) == 0 {
		return nil, nil
	}
	var evs []fair.Event
	for _, en := range e.adapterOf[name] {
		evs = append(evs, fair.UpdateTenant{Tenant: e.engineTenant(e.lora[en])})
	}
	ds, err := e.alloc.apply(now, evs...)
	if err != nil {
		return nil, fmt.Errorf("lora engines of tenant %s: %w", name, err)
	}
	return ds, e.refreshLoRAShares(now)
}

// refreshLoRAShares splits every engine among its registered adapter tenants with the fair
// allocator (fair.Split): the engine is loraShareUnits units; each adapter wants its wanted rate
// on the engine over the engine's planned rate (loraWanted), reserves its planned part when it
// has a reservation, and weighs its weight.
func (e *Engine) refreshLoRAShares(now time.Time) error {
	e.loraShares = map[string][]LoRAShare{}
	for _, name := range slices.Sorted(maps.Keys(e.lora)) {
		le := e.lora[name]
		weights, want, reserve := map[string]float64{}, map[string]int{}, map[string]int{}
		rows := map[string]LoRAShare{}
		for _, a := range le.adapters {
			t, ok := e.tenants[a.Tenant]
			if !ok {
				continue
			}
			total, part := le.rps, a.RPS
			if total <= 0 { // a plan without traffic: equal parts
				total, part = float64(len(le.adapters)), 1
			}
			w := e.loraWanted(t)[name]
			if le.rps <= 0 && w > 0 {
				w = 1
			}
			weights[a.Tenant] = t.Weight
			want[a.Tenant] = int(math.Ceil(loraShareUnits*w/total - 1e-9))
			if t.Reservation > 0 {
				reserve[a.Tenant] = int(math.Floor(loraShareUnits * part / total))
			}
			r := rows[a.Tenant]
			r.Engine, r.PlannedRPS = name, r.PlannedRPS+a.RPS
			r.Wanted = float64(want[a.Tenant]) / loraShareUnits
			rows[a.Tenant] = r
		}
		if len(weights) == 0 {
			continue
		}
		got, err := fair.Split(loraKey(name), weights, loraShareUnits, want, reserve, now)
		if err != nil {
			return fmt.Errorf("lora engine %s: %w", name, err)
		}
		for _, t := range slices.Sorted(maps.Keys(rows)) {
			r := rows[t]
			r.Share = float64(got[t]) / loraShareUnits
			e.loraShares[t] = append(e.loraShares[t], r)
		}
	}
	return nil
}

// slicesClaims are the claims on slices: the registered tenants but the adapter tenants a
// shared LoRA engine serves, and each such engine (one slice, of its adapters' weight, wanted
// while one of them has demand), under its key.
func (e *Engine) slicesClaims() map[string]*Tenant {
	out := map[string]*Tenant{}
	for n, t := range e.tenants {
		if len(e.adapterOf[n]) == 0 {
			out[n] = t
		}
	}
	for _, le := range e.lora {
		ft := e.engineTenant(le)
		out[ft.Name] = &Tenant{Name: ft.Name, Weight: ft.Weight, Demand: ft.Demand}
	}
	return out
}

// newAllocator builds the allocator over tenants and capacity slices and makes its first decision.
// held is how many tasks each tenant held before (its stored grants, on a restart; nil for none):
// the allocator first decides over demands cut to what was held, which grants every tenant what it
// held where it still fits, and then raises the demands as events, so that a restart starts from
// the allocation it stopped at rather than from a fresh filling (which breaks ties by name, and
// would move a slice from a tenant that came first to one that came later).
func newAllocator(now time.Time, cfg0 EngineConfig, tenants []fair.Tenant, capacity int, held map[string]int) (*allocator, []decision, error) {
	// fair.New refuses reservations that do not fit the capacity, but capacity may have shrunk
	// after they were accepted (a node left). So build over enough room for every reservation
	// and make the real capacity the first step, exactly as a node leaving does at run time.
	room := capacity
	cfg := fair.Config{BurstPoolPercent: cfg0.BurstPoolPercent, LeaseDuration: cfg0.LeaseDuration}
	var raise []fair.Event
	for _, t := range tenants {
		if h := min(held[t.Name], t.Demand); h < t.Demand {
			raise = append(raise, fair.SetDemand{Tenant: t.Name, Demand: t.Demand})
			t.Demand = h
		}
		cfg.Tenants = append(cfg.Tenants, t)
		room += t.Reservation
	}
	if b := cfg0.BurstPoolPercent; b > 0 && b < 100 {
		room = int(math.Ceil(float64(room)*100/(100-b))) + 1 // the burst pool is withheld from steady room
	}
	cfg.Capacity = fair.Vector{resSlices: float64(room)}
	a, err := fair.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("build allocator: %w", err)
	}
	d, err := a.Apply(now, fair.SetCapacity{Capacity: fair.Vector{resSlices: float64(capacity)}})
	if err != nil {
		return nil, nil, fmt.Errorf("build allocator: %w", err)
	}
	ds := convert(d)
	if len(raise) > 0 {
		kept := ds[:0] // the queue items of the cut demands say nothing
		for _, x := range ds {
			if x.kind != decQueue {
				kept = append(kept, x)
			}
		}
		if d, err = a.Apply(now, raise...); err != nil {
			return nil, nil, fmt.Errorf("build allocator: %w", err)
		}
		ds = append(kept, convert(d)...)
	}
	return &allocator{a: a}, ds, nil
}

func (x *allocator) apply(now time.Time, evs ...fair.Event) ([]decision, error) {
	d, err := x.a.Apply(now, evs...)
	if err != nil {
		return nil, err
	}
	return convert(d), nil
}

func (x *allocator) addTenant(now time.Time, t fair.Tenant) ([]decision, error) {
	return x.apply(now, fair.AddTenant{Tenant: t})
}

func (x *allocator) updateTenant(now time.Time, t fair.Tenant) ([]decision, error) {
	return x.apply(now, fair.UpdateTenant{Tenant: t})
}

func (x *allocator) removeTenant(now time.Time, name string) ([]decision, error) {
	return x.apply(now, fair.RemoveTenant{Tenant: name})
}

func (x *allocator) setDemand(now time.Time, name string, n int) ([]decision, error) {
	d, err := x.a.SetDemand(now, name, n)
	if err != nil {
		return nil, err
	}
	return convert(d), nil
}

func (x *allocator) setCapacity(now time.Time, n int) ([]decision, error) {
	return x.apply(now, fair.SetCapacity{Capacity: fair.Vector{resSlices: float64(n)}})
}

func (x *allocator) tick(now time.Time) ([]decision, error) {
	if now.Before(x.a.Now()) {
		now = x.a.Now()
	}
	return x.apply(now)
}

// shares returns each tenant's dominant share.
func (x *allocator) shares() map[string]float64 {
	out := map[string]float64{}
	for _, s := range x.a.Snapshot() {
		out[s.Name] = s.DominantShare
	}
	return out
}

func convert(d fair.Decision) []decision {
	out := make([]decision, 0, len(d.Items))
	for _, it := range d.Items {
		dc := decision{tenant: it.Tenant, task: it.Task, count: it.Count, reason: it.Reason.String(),
			text: it.Reason.Describe(), by: it.By, expiry: it.Expires}
		switch it.Kind {
		case fair.KindGrant, fair.KindLease:
			dc.kind, dc.code = decGrant, CodeGranted
		case fair.KindPreempt, fair.KindReclaim:
			dc.kind, dc.code = decStop, CodePreempted
		case fair.KindRelease:
			dc.kind, dc.code = decStop, CodeReleased
		case fair.KindQueue:
			dc.kind, dc.code = decQueue, CodeQueued
		default:
			continue
		}
		out = append(out, dc)
	}
	return out
}
