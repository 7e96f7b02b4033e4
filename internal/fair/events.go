package fair

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Recompute is the full reconciliation at now: every waiting tenant's claim is examined again
// and the decision lists a queue item for every tenant that still waits. A control plane calls it
// once at start and then periodically (the way a preemption monitor runs), and Apply on events.
func (a *Allocator) Recompute(now time.Time) (Decision, error) {
	if err := a.checkNow(now); err != nil {
		return Decision{At: now}, err
	}
	a.begin(now)
	return a.step(true), nil
}

// Apply applies events at now, in order, then decides. Events are validated first and, if any
// is invalid, none is applied and every problem is returned. With no events it is a tick: leases
// expire and waiting claims whose retry time has come are examined.
func (a *Allocator) Apply(now time.Time, events ...Event) (Decision, error) {
	if err := a.checkNow(now); err != nil {
		return Decision{At: now}, err
	}
	if err := a.validateEvents(events); err != nil {
		return Decision{At: now}, err
	}
	a.begin(now)
	for _, ev := range events {
		a.applyEvent(ev)
	}
	return a.step(false), nil
}

// SetDemand is Apply(now, SetDemand{name, demand}) without boxing the event: the hot path.
func (a *Allocator) SetDemand(now time.Time, name string, demand int) (Decision, error) {
	if err := a.checkNow(now); err != nil {
		return Decision{At: now}, err
	}
	i, ok := a.byName[name]
	if !ok || a.tenants[i].removed {
		return Decision{At: now}, fmt.Errorf("set demand: tenant %q: not found", name)
	}
	if err := a.checkDemand(name, a.tenants[i].cfg.Demand, demand, a.demandSum); err != nil {
		return Decision{At: now}, err
	}
	a.begin(now)
	a.setDemand(a.tenants[i], demand)
	return a.step(false), nil
}

func (a *Allocator) applyEvent(ev Event) {
	switch e := ev.(type) {
	case SetDemand:
		a.setDemand(a.tenants[a.byName[e.Tenant]], e.Demand)
	case AddTenant:
		a.touch(a.addTenantRec(e.Tenant))
		a.needRebuild = true
	case RemoveTenant:
		a.removeTenant(a.tenants[a.byName[e.Tenant]])
	case UpdateTenant:
		a.updateTenant(a.tenants[a.byName[e.Tenant.Name]], e.Tenant)
	case SetCapacity:
		a.capacity = cloneVector(e.Capacity)
		for name := range e.Capacity {
			a.known[name] = true
		}
		for name := range a.known {
			if _, ok := a.capacity[name]; !ok {
				a.capacity[name] = 0
			}
		}
		a.needRebuild, a.allPending = true, true
	case SetGroup:
		a.setGroup(e.Group)
		a.needRebuild, a.allPending = true, true
	}
}

func (a *Allocator) setDemand(t *tenantRec, n int) {
	if n > t.cfg.Demand {
		a.markPending(t)
	}
	a.demandSum += int64(n - t.cfg.Demand)
	t.cfg.Demand = n
	a.trim(t)
	a.touch(t)
	a.refreshSteady(t)
	a.refreshLease(t)
}

// trim releases what t holds beyond its demand (leases first, then newest steady tasks) and
// steady tasks beyond its cap.
func (a *Allocator) trim(t *tenantRec) {
	for t.total() > t.cfg.Demand {
		if n := len(t.leases); n > 0 {
			a.emit(t, Item{Kind: KindRelease, Task: t.leases[n-1].seq, Reason: ReasonDemandDropped})
			t.leases = t.leases[:n-1]
			a.totalDelta(t, -1)
			continue
		}
		a.releaseNewest(t, ReasonDemandDropped)
	}
	for t.cfg.Cap > 0 && len(t.steady) > t.cfg.Cap {
		a.releaseNewest(t, ReasonCapLowered)
	}
}

func (a *Allocator) releaseNewest(t *tenantRec, r Reason) {
	i := t.leastImportant(len(t.steady))
	rec := t.steady[i]
	a.emit(t, Item{Kind: KindRelease, Task: rec.seq, Reason: r, Class: t.className(rec.class)})
	t.steady = slices.Delete(t.steady, i, i+1)
	t.dropClass(rec)
	a.steadyDelta(t, -1)
	a.totalDelta(t, -1)
}

func (a *Allocator) removeTenant(t *tenantRec) {
	for i := len(t.leases) - 1; i >= 0; i-- {
		a.emit(t, Item{Kind: KindRelease, Task: t.leases[i].seq, Reason: ReasonTenantRemoved})
	}
	for i := len(t.steady) - 1; i >= 0; i-- {
		a.emit(t, Item{Kind: KindRelease, Task: t.steady[i].seq, Reason: ReasonTenantRemoved})
	}
	t.steady, t.leases, t.removed = nil, nil, true
	a.demandSum -= int64(t.cfg.Demand)
	delete(a.byName, t.cfg.Name)
	a.needRebuild = true
}

func (a *Allocator) updateTenant(t *tenantRec, n Tenant) {
	if n.Demand > t.cfg.Demand {
		a.markPending(t)
	}
	a.demandSum += int64(n.Demand - t.cfg.Demand)
	t.cfg.Weight, t.cfg.Demand, t.cfg.Reservation = n.Weight, n.Demand, n.Reservation
	t.cfg.Cap, t.cfg.MinRuntime, t.cfg.Deserved = n.Cap, n.MinRuntime, n.Deserved
	t.cfg.Classes = append([]ReplicaClass(nil), n.Classes...)
	t.countClasses()
	a.trim(t)
	a.touch(t)
	a.needRebuild, a.allPending = true, true
}

// validateEvents checks a batch against the state as the earlier events of the batch leave it.
func (a *Allocator) validateEvents(events []Event) error {
	var errs []error
	added, removed := map[string]bool{}, map[string]bool{}
	exists := func(name string) bool {
		_, ok := a.byName[name]
		return (ok || added[name]) && !removed[name]
	}
	structural := false
	sum, batch := a.demandSum, a.batchDemand
	if batch == nil {
		batch = map[string]int{}
		a.batchDemand = batch
	}
	defer clear(batch)
	for i, ev := range events {
		var err error
		switch e := ev.(type) {
		case SetDemand:
			if !exists(e.Tenant) {
				err = fmt.Errorf("set demand: tenant %q: not found", e.Tenant)
				break
			}
			old, ok := batch[e.Tenant]
			if !ok && !added[e.Tenant] {
				old = a.tenants[a.byName[e.Tenant]].cfg.Demand
			}
			if err = a.checkDemand(e.Tenant, old, e.Demand, sum); err == nil {
				sum += int64(e.Demand - old)
				batch[e.Tenant] = e.Demand
			}
		case AddTenant:
			if exists(e.Tenant.Name) {
				err = fmt.Errorf("add tenant %q: already present", e.Tenant.Name)
			}
			added[e.Tenant.Name], removed[e.Tenant.Name], structural = true, false, true
		case RemoveTenant:
			if !exists(e.Tenant) {
				err = fmt.Errorf("remove tenant %q: not found", e.Tenant)
			}
			removed[e.Tenant] = true
		case UpdateTenant:
			err = a.checkUpdate(e.Tenant, exists(e.Tenant.Name), added[e.Tenant.Name])
			structural = true
		case SetCapacity, SetGroup:
			structural = true
		case nil:
			err = errors.New("event is nil")
		default:
			err = fmt.Errorf("event of type %T is not supported", ev)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("events[%d]: %w", i, err))
		}
	}
	if len(errs) == 0 && structural {
		errs = append(errs, a.validateShadow(events))
	}
	return errors.Join(errs...)
}

// checkDemand checks a tenant's new demand against the limits, given the total demand before.
func (a *Allocator) checkDemand(name string, old, demand int, sum int64) error {
	lim := a.limits.withDefaults()
	if err := checkCount(demand, lim.MaxDemand); err != nil {
		return fmt.Errorf("set demand: tenant %q: %w", name, onField("demand", fmt.Errorf("demand: %w", err)))
	}
	if total := sum - int64(old) + int64(demand); total > int64(lim.MaxTotalDemand) {
		return fmt.Errorf("set demand: tenant %q: %w", name, onField("demand", fmt.Errorf("total demand %d would exceed the limit of %d (limits.maxTotalDemand)", total, lim.MaxTotalDemand)))
	}
	return nil
}

func (a *Allocator) checkUpdate(n Tenant, ok, isNew bool) error {
	if !ok {
		return fmt.Errorf("update tenant %q: not found", n.Name)
	}
	if isNew {
		return nil
	}
	old := a.tenants[a.byName[n.Name]].cfg
	if n.Path != old.Path {
		return fmt.Errorf("update tenant %q: path cannot change (%q → %q): remove and add it", n.Name, old.Path, n.Path)
	}
	if len(n.Task) != len(old.Task) {
		return fmt.Errorf("update tenant %q: task cannot change: remove and add it", n.Name)
	}
	for k, v := range n.Task {
		if ov, ok := old.Task[k]; !ok || ov != v {
			return fmt.Errorf("update tenant %q: task cannot change: remove and add it", n.Name)
		}
	}
	return nil
}

// validateShadow applies a structural batch to a copy of the configuration and validates it.
// Reservations are checked against the steady pool only when the batch raises some.
func (a *Allocator) validateShadow(events []Event) error {
	cfg := a.Config()
	idx := map[string]int{}
	for i, t := range cfg.Tenants {
		idx[t.Name] = i
	}
	raises := false
	for _, ev := range events {
		switch e := ev.(type) {
		case SetDemand:
			cfg.Tenants[idx[e.Tenant]].Demand = e.Demand
		case AddTenant:
			idx[e.Tenant.Name] = len(cfg.Tenants)
			cfg.Tenants = append(cfg.Tenants, e.Tenant)
			raises = raises || e.Tenant.Reservation > 0
		case RemoveTenant:
			cfg.Tenants[idx[e.Tenant]].Name = "" // dropped below
		case UpdateTenant:
			i := idx[e.Tenant.Name]
			raises = raises || e.Tenant.Reservation > cfg.Tenants[i].Reservation
			cfg.Tenants[i] = e.Tenant
		case SetCapacity:
			cfg.Capacity = e.Capacity
		case SetGroup:
			cfg.Groups = upsertGroup(cfg.Groups, e.Group)
		}
	}
	kept := cfg.Tenants[:0]
	for _, t := range cfg.Tenants {
		if t.Name != "" {
			kept = append(kept, t)
		}
	}
	cfg.Tenants = kept
	return validateConfig(cfg, raises, sortedKeys(a.known)...)
}

func upsertGroup(gs []Group, g Group) []Group {
	for i := range gs {
		if gs[i].Path == g.Path {
			gs[i] = g
			return gs
		}
	}
	return append(gs, g)
}

// Allocate is the one-shot form: a fresh Allocator for cfg and its first decision at now.
func Allocate(cfg Config, now time.Time) (*Allocator, Decision, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, Decision{}, err
	}
	d, err := a.Recompute(now)
	return a, d, err
}
