package plan

import (
	"cmp"
	"fmt"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// replica is one tenant replica before it is numbered.
type replica struct{ tn *tenant }

// unit is what occupies a whole GPU (exclusive, MPS, time-slice) or one MIG instance, with the
// replicas that share it (at most share of them, all of one group).
type unit struct {
	key  groupKey
	c    *cand // the candidate of the unit's first replica: board, kind, profile, share
	reps []replica
	// tp is the GPU group of a tensor-parallel unit once placed; each of its GPUs holds the unit.
	tp v1.TensorParallel
}

// gpuPlan is the plan of one fleet GPU while it is built.
type gpuPlan struct {
	fg    fleetGPU
	role  v1.Role
	mode  v1.Mode
	whole *unit // exclusive, mps, timeslice
	insts []placedInst
}

type placedInst struct {
	in gpu.Instance
	u  *unit
}

func (g *gpuPlan) units() []*unit {
	if g.whole != nil {
		return []*unit{g.whole}
	}
	out := make([]*unit, 0, len(g.insts))
	for _, pi := range g.insts {
		if pi.u != nil {
			out = append(out, pi.u)
		}
	}
	return out
}

// formUnits groups the chosen replicas into units, group by group in key order; within a group
// tenants come in pool order, so a tenant's replicas sit together.
func (p *planner) formUnits() []*unit {
	byKey := map[groupKey][]*tenant{}
	var keys []groupKey
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		k := keyOf(tn, tn.choice)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], tn)
	}
	slices.SortFunc(keys, compareKeys)
	var out []*unit
	for _, k := range keys {
		var cur *unit
		for _, tn := range byKey[k] {
			for range tn.choice.replicas {
				if cur == nil || len(cur.reps) == k.share {
					cur = &unit{key: k, c: tn.choice}
					out = append(out, cur)
				}
				cur.reps = append(cur.reps, replica{tn: tn})
			}
		}
	}
	return out
}

var energyOrder = []v1.EnergyClass{v1.EnergyPerformance, v1.EnergyBalanced, v1.EnergyEfficiency}

func energyRank(e v1.EnergyClass) int {
	if i := slices.Index(energyOrder, e); i >= 0 {
		return i
	}
	return len(energyOrder)
}

func compareKeys(a, b groupKey) int {
	return cmp.Or(cmp.Compare(a.board, b.board), cmp.Compare(energyRank(a.energy), energyRank(b.energy)),
		cmp.Compare(kindRank(a.kind), kindRank(b.kind)), cmp.Compare(a.profile, b.profile),
		cmp.Compare(a.share, b.share), cmp.Compare(a.tp, b.tp), cmp.Compare(a.group, b.group))
}

// pack places every unit on a GPU: whole-GPU units one per GPU, MIG instances by cutting stock
// over the board's maximal layouts, one board and energy class at a time. GPUs come in fleet
// order; the last burst GPUs of the pool are held back.
func (p *planner) pack() error {
	p.gpus = make([]*gpuPlan, len(p.fleet))
	free := map[string][]*gpuPlan{}
	roles := p.fleetRoles()
	for i, fg := range p.fleet {
		g := &gpuPlan{fg: fg, role: roles[i]}
		p.gpus[i] = g
		if g.role == v1.RoleIdle {
			free[fg.board.Name] = append(free[fg.board.Name], g)
		}
	}
	units := p.formUnits()
	type bucket struct {
		board  string
		energy v1.EnergyClass
	}
	var order []bucket
	byBucket := map[bucket][]*unit{}
	for _, u := range units {
		b := bucket{u.key.board, u.key.energy}
		if _, ok := byBucket[b]; !ok {
			order = append(order, b)
		}
		byBucket[b] = append(byBucket[b], u)
	}
	var unplaced []*unit
	pc := newPatternCache()
	p.nodeUse = map[string]map[string]migUse{}
	p.blocked = map[*unit]blockage{}
	for _, b := range order {
		if err := p.ctx.Err(); err != nil {
			return fmt.Errorf("pack: %w", err)
		}
		left, err := p.packBucket(byBucket[b], free, pc)
		if err != nil {
			return err
		}
		unplaced = append(unplaced, left...)
	}
	if err := p.compact(pc); err != nil {
		return err
	}
	p.unplaced = unplaced
	p.markUnplaced(unplaced)
	p.spreadRedundant()
	return nil
}

// fleetRoles is each fleet GPU's role before packing: canary, burst (the last burst GPUs of the
// pool in fleet order) or idle (free for the packer).
func (p *planner) fleetRoles() []v1.Role {
	roles := make([]v1.Role, len(p.fleet))
	poolSeen, poolTotal := 0, len(p.fleet)-p.canaries()
	for i, fg := range p.fleet {
		switch {
		case fg.canary:
			roles[i] = v1.RoleCanary
		case poolSeen >= poolTotal-p.burst:
			roles[i] = v1.RoleBurst
			poolSeen++
		default:
			roles[i] = v1.RoleIdle
			poolSeen++
		}
	}
	return roles
}

// poolGPUs is the number of GPUs of each board the packer may use (neither canary nor burst).
func (p *planner) poolGPUs() map[string]int {
	n := map[string]int{}
	for i, r := range p.fleetRoles() {
		if r == v1.RoleIdle {
			n[p.fleet[i].board.Name]++
		}
	}
	return n
}

// packBucket places the units of one board and energy class on free GPUs of that board and
// returns the units that found no GPU.
func (p *planner) packBucket(units []*unit, free map[string][]*gpuPlan, pc *patternCache) ([]*unit, error) {
	board := units[0].c.board
	var unplaced []*unit
	var mig []*unit
	for _, u := range units {
		if !u.c.whole() {
			mig = append(mig, u)
			continue
		}
		if u.c.tp > 1 {
			gs := p.takeGroup(board, free, wholeWant(u), u.c.tp)
			if gs == nil {
				unplaced = append(unplaced, u)
				continue
			}
			u.tp = tpGroup(gs)
			for _, g := range gs {
				g.role, g.whole, g.mode = v1.RolePool, u, v1.ModeExclusive
			}
			continue
		}
		g := p.takeCompatible(board, free, wholeWant(u))
		if g == nil {
			p.noteBlocked([]*unit{u}, board, free, wholeWant(u))
			unplaced = append(unplaced, u)
			continue
		}
		g.role, g.whole = v1.RolePool, u
		g.mode = map[v1.SliceKind]v1.Mode{v1.SliceExclusive: v1.ModeExclusive, v1.SliceMPS: v1.ModeMPS, v1.SliceTimeSlice: v1.ModeTimeSlice}[u.c.kind]
	}
	if len(mig) == 0 {
		return unplaced, nil
	}
	left, err := p.packMIG(board, mig, free, pc)
	return append(unplaced, left...), err
}

// fillMIG lays out one MIG GPU with the multiset bin (gpu.Place picks the legal starts) and puts
// the next units of each profile on its instances.
func (p *planner) fillMIG(g *gpuPlan, b *gpu.Board, pats *patterns, bin []int, queues map[string][]*unit, pc *patternCache) error {
	layout, err := pc.place(b, pats, bin)
	if err != nil {
		return fmt.Errorf("build plan: lay out %s on %s: %w", pats.describe(bin), g.fg.ref, err)
	}
	g.role, g.mode = v1.RolePool, v1.ModeMIG
	for _, in := range layout {
		q := queues[in.Profile]
		pi := placedInst{in: in}
		if len(q) > 0 {
			pi.u, queues[in.Profile] = q[0], q[1:]
		}
		g.insts = append(g.insts, pi)
	}
	return nil
}

// markUnplaced marks the tenants of units that found no GPU: the pool ran out of capacity.
func (p *planner) markUnplaced(units []*unit) {
	short := map[*tenant]int{}
	var order []*tenant
	for _, u := range units {
		for _, r := range u.reps {
			if short[r.tn] == 0 {
				order = append(order, r.tn)
			}
			short[r.tn]++
		}
	}
	why := map[*tenant]string{}
	for _, u := range units {
		if b, ok := p.blocked[u]; ok {
			for _, r := range u.reps {
				why[r.tn] = b.rule
			}
		}
	}
	for _, tn := range order {
		msg := fmt.Sprintf("%d of %d replicas (%s on %s) found no free GPU: the pool has %d GPUs of which %d are canaries and %d held for the burst pool",
			short[tn], tn.choice.replicas, tn.choice.label(), tn.choice.board.Name, len(p.fleet), p.canaries(), p.burst)
		if w := why[tn]; w != "" {
			msg += "; free GPUs of the board were left, but " + w
		}
		msg += p.forbiddenWhy(tn)
		tn.infeas = append(tn.infeas, v1.NewReason(v1.ReasonNoCapacity, "%s", msg))
	}
}

// forbiddenWhy says, for a tenant left short, which of its cheaper slice kinds a node rule kept
// off the fleet (for it or for another tenant; see optimise), "" when none.
func (p *planner) forbiddenWhy(tn *tenant) string {
	rules := map[forbidKey]string{}
	for _, m := range p.forbid {
		for k, r := range m {
			if _, ok := rules[k]; !ok || r < rules[k] {
				rules[k] = r
			}
		}
	}
	var keys []forbidKey
	for _, c := range tn.feasible {
		k := forbidKey{c.board.Name, c.kind}
		if _, ok := rules[k]; ok && c.cost < tn.choice.cost-1e-9 && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b forbidKey) int { return cmp.Or(cmp.Compare(a.board, b.board), cmp.Compare(a.kind, b.kind)) })
	msg := ""
	for _, k := range keys {
		msg += fmt.Sprintf("; %s on %s, cheaper, was not used: %s", k.kind, k.board, rules[k])
	}
	return msg
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}
