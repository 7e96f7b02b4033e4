package plan

import (
	"cmp"
	"slices"

	"gpupool.dev/gpupool/internal/gpu"
)

// useOf is how a MIG unit's instance is shared.
func useOf(u *unit) migUse { return migUse{u.c.kind, u.c.share} }

// packMIG packs the MIG units of one board and energy class. The units are split into classes in
// which every profile is used one way (unshared, or shared k ways), largest use first; each class
// is packed as cutting stock over the board's patterns, and each of its GPUs goes to the first
// free GPU whose node does not use one of its profiles another way (the device plugin applies one
// sharing setting per resource and node). Only when no such GPU is left does a GPU go where it
// conflicts. It returns the units that found no GPU.
func (p *planner) packMIG(board *gpu.Board, mig []*unit, free map[string][]*gpuPlan, pc *patternCache) ([]*unit, error) {
	pats, err := pc.get(board)
	if err != nil {
		return nil, err
	}
	var unplaced []*unit
	for _, class := range useClasses(pats, mig) {
		queues := map[string][]*unit{}
		dem := make([]int, len(pats.profiles))
		uses := map[string]migUse{}
		for _, u := range class {
			dem[pats.index(u.c.profile.Name)]++
			queues[u.c.profile.Name] = append(queues[u.c.profile.Name], u)
			uses[u.c.profile.Name] = useOf(u)
		}
		bins := greedyPack(pats, dem)
		if sum(dem) <= p.o.ExactUnits && len(bins) > volumeBound(pats, dem) {
			if exact, ok := exactPack(pats, dem, len(bins)-1, 200000); ok {
				bins = exact
			}
		}
		for _, bin := range bins {
			want := map[string]migUse{}
			for i, n := range bin {
				if n > 0 {
					want[pats.profiles[i].Name] = uses[pats.profiles[i].Name]
				}
			}
			g := p.takeCompatible(board, free, want)
			if g == nil {
				break
			}
			if err := p.fillMIG(g, board, pats, bin, queues, pc); err != nil {
				return nil, err
			}
		}
		for _, prof := range pats.profiles {
			unplaced = append(unplaced, queues[prof.Name]...)
		}
	}
	return unplaced, nil
}

// useClasses splits units so that each class uses every profile one way: class i holds, per
// profile, the units of its i-th most used way (most replicas first; ties to the stronger
// isolation, then fewer shares). Units keep their order within a class.
func useClasses(pats *patterns, mig []*unit) [][]*unit {
	byProfile := map[string]map[migUse][]*unit{}
	for _, u := range mig {
		m := byProfile[u.c.profile.Name]
		if m == nil {
			m = map[migUse][]*unit{}
			byProfile[u.c.profile.Name] = m
		}
		m[useOf(u)] = append(m[useOf(u)], u)
	}
	var classes [][]*unit
	for _, prof := range pats.profiles {
		m := byProfile[prof.Name]
		uses := make([]migUse, 0, len(m))
		for u := range m {
			uses = append(uses, u)
		}
		slices.SortFunc(uses, func(a, b migUse) int {
			return cmp.Or(cmp.Compare(len(m[b]), len(m[a])), cmp.Compare(kindRank(a.kind), kindRank(b.kind)), cmp.Compare(a.share, b.share))
		})
		for i, u := range uses {
			for len(classes) <= i {
				classes = append(classes, nil)
			}
			classes[i] = append(classes[i], m[u]...)
		}
	}
	return classes
}

// takeCompatible takes the first free GPU of board whose node uses none of want's profiles
// another way, else the first free GPU; it records the node's uses.
func (p *planner) takeCompatible(board *gpu.Board, free map[string][]*gpuPlan, want map[string]migUse) *gpuPlan {
	gs := free[board.Name]
	if len(gs) == 0 {
		return nil
	}
	pick := 0
	for i, g := range gs {
		if p.compatible(g.fg.ref.Node, want) {
			pick = i
			break
		}
	}
	g := gs[pick]
	free[board.Name] = append(gs[:pick:pick], gs[pick+1:]...)
	nu := p.nodeUse[g.fg.ref.Node]
	if nu == nil {
		nu = map[string]migUse{}
		p.nodeUse[g.fg.ref.Node] = nu
	}
	for prof, u := range want {
		if _, set := nu[prof]; !set {
			nu[prof] = u
		}
	}
	return g
}

func (p *planner) compatible(node string, want map[string]migUse) bool {
	for prof, u := range want {
		if have, set := p.nodeUse[node][prof]; set && have != u {
			return false
		}
	}
	return true
}
