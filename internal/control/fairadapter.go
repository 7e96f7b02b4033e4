package control

// This file is the only one that speaks to internal/fair.

import (
	"fmt"
	"math"
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

func fairTenant(t Tenant) fair.Tenant {
	return fair.Tenant{Name: t.Name, Path: t.Path, Weight: t.Weight, Task: fair.Vector{resSlices: 1},
		Demand: t.Demand, Reservation: t.Reservation, Cap: t.Cap}
}

// newAllocator builds the allocator over tenants and capacity slices and makes its first decision.
func newAllocator(now time.Time, cfg0 EngineConfig, tenants []Tenant, capacity int) (*allocator, []decision, error) {
	// fair.New refuses reservations that do not fit the capacity, but capacity may have shrunk
	// after they were accepted (a node left). So build over enough room for every reservation
	// and make the real capacity the first step, exactly as a node leaving does at run time.
	room := capacity
	cfg := fair.Config{BurstPoolPercent: cfg0.BurstPoolPercent, LeaseDuration: cfg0.LeaseDuration}
	for _, t := range tenants {
		cfg.Tenants = append(cfg.Tenants, fairTenant(t))
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
	return &allocator{a: a}, convert(d), nil
}

func (x *allocator) apply(now time.Time, evs ...fair.Event) ([]decision, error) {
	d, err := x.a.Apply(now, evs...)
	if err != nil {
		return nil, err
	}
	return convert(d), nil
}

func (x *allocator) addTenant(now time.Time, t Tenant) ([]decision, error) {
	return x.apply(now, fair.AddTenant{Tenant: fairTenant(t)})
}

func (x *allocator) updateTenant(now time.Time, t Tenant) ([]decision, error) {
	return x.apply(now, fair.UpdateTenant{Tenant: fairTenant(t)})
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
