package control

import (
	"maps"

	v1 "gpupool.dev/gpupool/api/v1"
	"slices"
	"sort"
)

// View is an immutable copy of the engine's state for readers. HTTP handlers read the latest
// View without taking any lock.
type View struct {
	Revision uint64
	Capacity int
	Tenants  []TenantStatus         // by name
	Grants   []Grant                // by id
	Nodes    []Node                 // by name
	Slices   []Slice                // live slices, by id
	Events   []Event                // oldest first
	Tokens   map[string]TokenRecord // by hash
	// Plan is the last plan applied (never changed in place), the base of an incremental re-plan;
	// Pool is its Pool document.
	Plan *v1.Plan
	Pool *v1.Pool
	// Replan says whether a re-plan is wanted (Wanted > Done) and why.
	Replan Replan
}

// View returns a copy of the state at revision rev.
func (e *Engine) View(rev uint64) *View {
	v := &View{Revision: rev, Capacity: len(e.slices), Tokens: e.tokens, Events: slices.Clip(e.events), Plan: e.plan,
		Pool: e.pool, Replan: e.replan}
	count := map[string]int{}
	for _, id := range slices.Sorted(maps.Keys(e.grants)) {
		g := e.grants[id]
		v.Grants = append(v.Grants, *g)
		if g.Replaces == "" {
			count[g.Tenant]++
		}
	}
	shares := e.alloc.shares()
	fairs := fairShares(e.slicesClaims(), len(e.slices))
	costs := e.costs.of(e.plan, e.pool)
	engineGrant := map[string]string{}
	for _, g := range v.Grants {
		if g.Replaces == "" {
			engineGrant[g.Tenant] = g.ID
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.tenants)) {
		st := TenantStatus{Tenant: *e.tenants[name], Granted: count[name],
			DominantShare: shares[name], FairShare: fairs[name], Cost: costs[name]}
		for _, l := range e.loraShares[name] {
			l.Grant = engineGrant[loraKey(l.Engine)]
			st.LoRAEngines = append(st.LoRAEngines, l)
		}
		v.Tenants = append(v.Tenants, st)
	}
	for _, name := range slices.Sorted(maps.Keys(e.nodes)) {
		v.Nodes = append(v.Nodes, *e.nodes[name])
	}
	if e.sliceList == nil {
		e.sliceList = make([]Slice, 0, len(e.slices))
		for _, id := range slices.Sorted(maps.Keys(e.slices)) {
			e.sliceList = append(e.sliceList, e.slices[id])
		}
	}
	v.Slices = e.sliceList // never changed in place: a change makes a new list
	return v
}

// fairShares is weighted max-min water-filling of capacity over the tenants' demands, each capped
// by the tenant's cap when it has one (steady tasks never exceed a cap; flat: the hierarchy is
// left to the allocator), as a fraction of capacity.
func fairShares(ts map[string]*Tenant, capacity int) map[string]float64 {
	out := map[string]float64{}
	if capacity == 0 {
		return out
	}
	type claim struct {
		name   string
		w, dem float64
	}
	var cs []claim
	for _, t := range ts {
		w := t.Weight
		if w == 0 {
			w = 1
		}
		dem := t.Demand
		if t.Cap > 0 && t.Cap < dem {
			dem = t.Cap
		}
		if dem > 0 {
			cs = append(cs, claim{t.Name, w, float64(dem)})
		}
	}
	// Fill in order of demand per weight: a tenant whose demand is met leaves its rest to others.
	sort.Slice(cs, func(i, j int) bool { return cs[i].dem/cs[i].w < cs[j].dem/cs[j].w })
	left, wsum := float64(capacity), 0.0
	for _, c := range cs {
		wsum += c.w
	}
	for _, c := range cs {
		give := min(c.dem, left*c.w/wsum)
		out[c.name] = give / float64(capacity)
		left -= give
		wsum -= c.w
	}
	return out
}

// Layout returns a node's desired layout in this view.
func (v *View) Layout(node string) (Layout, bool) {
	i, ok := slices.BinarySearchFunc(v.Nodes, node, func(n Node, name string) int {
		switch {
		case n.Name < name:
			return -1
		case n.Name > name:
			return 1
		}
		return 0
	})
	if !ok {
		return Layout{}, false
	}
	l := Layout{Node: node, Revision: v.Nodes[i].LayoutRevision, Epoch: v.Nodes[i].Epoch, Slices: []LayoutSlice{}}
	for _, op := range v.Nodes[i].Gates {
		if op.State == GateApplying {
			l.GPUs = append(l.GPUs, GPULayout{UUID: op.GPU, Board: op.Board, MIG: op.Layout, MIGOff: op.MIGOff, Op: op.ID, Attempt: op.Attempts})
		}
	}
	bySlice := map[string]Grant{}
	for _, g := range v.Grants {
		if g.Node == node {
			bySlice[g.Slice] = g
		}
	}
	for _, s := range v.Slices {
		if s.Node == node {
			g := bySlice[s.ID]
			l.Slices = append(l.Slices, LayoutSlice{Slice: s, Tenant: g.Tenant, Grant: g.ID, Standby: g.Replaces != "", Limits: g.Limits})
		}
	}
	// A cordoned node's slices are out of the pool, but their replicas run until their standbys
	// are ready.
	if v.Nodes[i].Cordoned && !v.Nodes[i].Lost {
		for _, gp := range v.Nodes[i].Inventory.GPUs {
			for k, kind := range gp.Slices {
				id := sliceID(node, gp.UUID, k)
				if g, ok := bySlice[id]; ok {
					l.Slices = append(l.Slices, LayoutSlice{Slice: Slice{ID: id, Node: node, GPU: gp.UUID, Board: gp.Board, Kind: kind},
						Tenant: g.Tenant, Grant: g.ID, Draining: true, Limits: g.Limits})
				}
			}
		}
	}
	// A draining GPU's slices are out of the pool, but their replicas run until their standbys
	// are ready.
	for _, op := range v.Nodes[i].Gates {
		if op.State != GateDraining || v.Nodes[i].Cordoned && !v.Nodes[i].Lost { // listed above
			continue
		}
		for _, gp := range v.Nodes[i].Inventory.GPUs {
			if gp.UUID != op.GPU {
				continue
			}
			for k, kind := range gp.Slices {
				id := sliceID(node, gp.UUID, k)
				if g, ok := bySlice[id]; ok {
					l.Slices = append(l.Slices, LayoutSlice{Slice: Slice{ID: id, Node: node, GPU: gp.UUID, Board: gp.Board, Kind: kind},
						Tenant: g.Tenant, Grant: g.ID, Draining: true, Limits: g.Limits})
				}
			}
		}
	}
	return l, true
}
