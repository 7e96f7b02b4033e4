package plan

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

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
	// rk is key's number (rescueKeyIDs) plus one, 0 until placedOf first asks; mark is the
	// last call of placedOf that listed the unit (planner.placedMarks).
	rk   int32
	mark uint64
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

// eachUnit yields g's units in units()'s order without building the slice, for loops that
// only read them (soleGPU runs over every GPU once per redundant tenant).
func (g *gpuPlan) eachUnit(yield func(*unit) bool) {
	if g.whole != nil {
		yield(g.whole)
		return
	}
	for _, pi := range g.insts {
		if pi.u != nil && !yield(pi.u) {
			return
		}
	}
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
// tenants come in pool order, so a tenant's replicas sit together. Tenants released by
// releaseShort are left out.
func (p *planner) formUnits() []*unit {
	byKey, keys, reps := p.reuse.formIndex()
	defer func() { p.reuse.formKeys, p.reuse.formReps = keys, reps }()
	for _, tn := range p.tenants {
		if _, out := p.released[tn]; tn.choice == nil || out {
			continue
		}
		k := keyOf(tn, tn.choice)
		ts := byKey[k]
		if len(ts) == 0 { // a key of an earlier packing keeps its empty slice
			keys = append(keys, k)
		}
		byKey[k] = append(ts, tn)
	}
	slices.SortFunc(keys, compareKeys)
	// The units and their replicas are laid out in two arrays made once (a packing forms every
	// unit of the pool again, and each trial of the steps after the choice packs the pool): each
	// unit's replicas are a window of the second, its capacity the replicas it gets here, so that
	// a later append to one unit's replicas moves them rather than write over the next unit's.
	for range keys { // replicas of each key
		reps = append(reps, 0)
	}
	nu, nr := 0, 0
	for i, k := range keys {
		for _, tn := range byKey[k] {
			reps[i] += tn.choice.replicas
		}
		nu, nr = nu+unitsFor(reps[i], k.share), nr+reps[i]
	}
	us, rs := make([]unit, nu), make([]replica, nr)
	out := make([]*unit, 0, nu)
	for i, k := range keys {
		var cur *unit
		left := reps[i] // replicas of k not yet in a unit
		for _, tn := range byKey[k] {
			for range tn.choice.replicas {
				if cur == nil || len(cur.reps) == k.share {
					n := left
					if k.share > 0 {
						n = min(n, k.share)
					}
					cur, us = &us[0], us[1:]
					cur.key, cur.c, cur.reps, rs = k, tn.choice, rs[:0:n], rs[n:]
					out = append(out, cur)
				}
				cur.reps = append(cur.reps, replica{tn: tn})
				left--
			}
		}
	}
	return out
}

// unitsFor is how many units formUnits makes of n replicas of one group at share replicas a
// unit: one for all of them where share is not positive.
func unitsFor(n, share int) int {
	switch {
	case n <= 0:
		return 0
	case share <= 0:
		return 1
	}
	return (n + share - 1) / share
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
	plans := make([]gpuPlan, len(p.fleet)) // one allocation for the packing's GPUs
	for i, fg := range p.fleet {
		g := &plans[i]
		g.fg, g.role = fg, roles[i]
		p.gpus[i] = g
		if g.role == v1.RoleIdle {
			free[fg.board.Name] = append(free[fg.board.Name], g)
		}
	}
	units := p.formUnits()
	if p.packFirst != nil {
		slices.SortStableFunc(units, func(a, b *unit) int {
			return cmp.Compare(btoi(!p.packFirst[a.key]), btoi(!p.packFirst[b.key]))
		})
	}
	order, byBucket := byBoardAndEnergy(units)
	var unplaced []*unit
	pc := p.patternCache()
	p.nodeUse = map[string]map[string]migUse{}
	p.blocked = make(map[*unit]blockage, len(p.blocked)) // room for as many as the last packing's
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
	for _, tn := range p.tenants {
		if why, out := p.released[tn]; out {
			tn.infeas = append(tn.infeas, noCapacity(why))
		}
	}
	p.spreadRedundant()
	return nil
}

// unitBucket is one board and energy class: the packer packs each on its own.
type unitBucket struct {
	board  string
	energy v1.EnergyClass
}

// byBoardAndEnergy groups units by board and energy class, the buckets in order of first use.
func byBoardAndEnergy(units []*unit) (order []unitBucket, by map[unitBucket][]*unit) {
	by = map[unitBucket][]*unit{}
	for _, u := range units {
		b := unitBucket{u.key.board, u.key.energy}
		if _, ok := by[b]; !ok {
			order = append(order, b)
		}
		by[b] = append(by[b], u)
	}
	return order, by
}

// rescue gives the units the packing left without a GPU a second chance on the pool GPUs still
// idle after compaction, before their tenants are reported short. First each board and energy
// class's units are packed again as they are (compaction may have freed GPUs, or whole nodes).
// Then, tenant by tenant in pool order, a tenant still short tries its other feasible candidates,
// cheapest first, on boards with idle pool GPUs: all the candidate's replicas, on their own units,
// packed with the packer's own rules (node rules included). The first that places every replica
// becomes the tenant's choice, its old replicas are taken off their GPUs (a GPU left empty is idle
// again) and moved says why; when none does, unmoved says, per board with idle GPUs, why not.
// Last, a tenant still short whose part placement holds GPUs of its own tries its candidates on
// those GPUs and the idle ones together (rescueOnOwn), also when no pool GPU is idle. When pool
// GPUs are still idle after that, a tenant still short may have served tenants moved off its
// choice's board onto them to make room (moveServed). After all these, a tenant still short may
// take the free MIG room of pool GPUs in use (rescueUsedMIGPass). It returns the units still
// without a GPU.
func (p *planner) rescue(unplaced []*unit, pc *patternCache) ([]*unit, error) {
	if len(unplaced) == 0 {
		return nil, nil
	}
	free := p.freeGPUs()
	// with no pool GPU idle only the GPUs of the short tenants' own replicas are left to try
	ownOnly := len(free) == 0
	if ownOnly && p.noOwnRescue {
		return unplaced, nil
	}
	order, byBucket := byBoardAndEnergy(unplaced)
	var left []*unit
	for _, b := range order {
		if len(free[b.board]) == 0 {
			left = append(left, byBucket[b]...)
			continue
		}
		l, err := p.packBucket(byBucket[b], free, pc)
		if err != nil {
			return nil, err
		}
		left = append(left, l...)
	}
	var short []*tenant
	seen := map[*tenant]bool{}
	for _, u := range left {
		for _, r := range u.reps {
			if !seen[r.tn] {
				seen[r.tn] = true
				short = append(short, r.tn)
			}
		}
	}
	done := map[*tenant]bool{}
	inGroup := map[string][]int{} // the short tenants of each sharing group, by index in short
	for i, tn := range short {
		if tn.group != "" {
			inGroup[tn.group] = append(inGroup[tn.group], i)
		}
	}
	p.rescueKeys = map[*tenant]candsByKey{}
	p.pidx = p.newPlacedIndex()
	defer func() { p.rescueKeys, p.pidx = nil, nil }()
	for i, tn := range short {
		if p.stopped() {
			break
		}
		if done[tn] {
			continue
		}
		var peers []*tenant
		for _, j := range inGroup[tn.group] {
			if j > i && !done[short[j]] {
				peers = append(peers, short[j])
			}
		}
		var rescued []*tenant
		var err error
		if !ownOnly {
			if rescued, err = p.rescueGroup(tn, peers, free, pc); err != nil {
				return nil, err
			}
		}
		if rescued == nil {
			moved := false
			if !ownOnly {
				if moved, err = p.rescueTenant(tn, free, pc); err != nil {
					return nil, err
				}
			}
			if !moved && !p.noOwnRescue {
				if moved, err = p.rescueOnOwn(tn, free, pc); err != nil {
					return nil, err
				}
			}
			if moved {
				rescued = []*tenant{tn}
			}
		}
		for _, r := range rescued {
			done[r] = true
		}
		if len(rescued) == 0 {
			continue
		}
		left = dropDone(left, done)
	}
	if ownOnly || p.noMoveServed {
		return p.rescueUsedMIGPass(short, done, left), nil
	}
	// Last, once every short tenant has had the idle GPUs as they are, those still short may
	// have served tenants moved onto them (moveServed), one at a time in the order above: a move
	// made earlier would take idle GPUs a later tenant's own rescue could have used.
	still := map[*tenant]bool{}
	for _, u := range left {
		for _, r := range u.reps {
			still[r.tn] = true
		}
	}
	p.moveUsed, p.movePasses = 0, p.movePasses+1 // a budget of packings for the pass (moveBudget)
	for _, tn := range short {
		if p.stopped() || countIdle(free) == 0 {
			break
		}
		if done[tn] { // served by its own rescue above
			continue
		}
		moved, err := p.moveServed(tn, still, free, pc)
		if err != nil {
			return nil, err
		}
		if !moved {
			continue
		}
		done[tn], still[tn] = true, false
		left = dropDone(left, done)
	}
	return p.rescueUsedMIGPass(short, done, left), nil
}

// countIdle is the idle pool GPUs of free, all boards together.
func countIdle(free map[string][]*gpuPlan) int {
	n := 0
	for _, gs := range free {
		n += countFree(gs)
	}
	return n
}

// rescueGroup rescues tn together with short tenants of its sharing group that come after it
// (peers), when one common share seats them in fewer units than each on its own cheapest share
// would: one at a time, tenants that fit a fine share take their own unit at it while the
// group's heavier tenant takes another at a coarser share, where all of them would have shared
// one (two llama-3.2-1b tenants at MPS 1/10 of an A100 and a llama-3.2-3b at 1/4, where the
// three fit one GPU at 1/4). For each shared candidate of tn on a board with idle pool GPUs,
// the members are tn and the peers with a candidate of the same group key; the cost is the
// GPU-equivalents of their units at that share plus, for the peers left out, their own cheapest
// candidates', against every member's own cheapest (rescueEst). The cheapest grouping that
// saves at least a unit is packed with the packer's rules; when it places every replica its
// members are moved and returned, otherwise the trial is undone and nil returned.
func (p *planner) rescueGroup(tn *tenant, peers []*tenant, free map[string][]*gpuPlan, pc *patternCache) ([]*tenant, error) {
	if len(peers) == 0 {
		return nil, nil
	}
	all := append([]*tenant{tn}, peers...)
	// nothing is placed until the grouping is chosen: each member's own cheapest candidate on
	// a board with idle pool GPUs is looked up once for every grouping weighed
	idle := newIdleBoards(free)
	picks := p.rescuePicks(all, free, idle)
	est := p.newRescueEst(all, picks)
	alone := est.without(nil)
	var best []*tenant
	var bestC []*cand
	bestCost := alone - 1e-9
	var byKey []map[int32]*cand // each peer's first candidate of each group key (candsOfKey)
	var in []int                // the members' indices in all
	for _, c := range tn.feasible {
		if c == tn.choice || !c.shared() || c.tp > 1 || !idle.on(c.board) {
			continue
		}
		if byKey == nil {
			byKey = make([]map[int32]*cand, len(peers))
			for i, o := range peers {
				byKey[i] = p.candsOfKey(o)
			}
		}
		k := p.rescueKeyID(tn, c)
		members, cs := []*tenant{tn}, []*cand{c}
		in = append(in[:0], 0)
		reps := c.replicas
		for i, o := range peers {
			if oc := byKey[i][k]; oc != nil {
				members, cs = append(members, o), append(cs, oc)
				in = append(in, i+1)
				reps += oc.replicas
			}
		}
		if len(members) < 2 {
			continue
		}
		cost := unitsOf(reps, c.share)*c.unitFrac + est.without(in)
		if cost < bestCost-1e-9 {
			best, bestC, bestCost = members, cs, cost
		}
	}
	if best == nil || p.stopped() {
		return nil, nil
	}
	c := bestC[0]
	b := c.board.Name
	var units []*unit
	var cur *unit
	for i, m := range best {
		for range bestC[i].replicas {
			if cur == nil || len(cur.reps) == c.share {
				cur = &unit{key: keyOf(tn, c), c: c}
				units = append(units, cur)
			}
			cur.reps = append(cur.reps, replica{tn: m})
		}
	}
	if room, err := p.roomFor(c, free[b], pc); err != nil || room < len(units) {
		return nil, err
	}
	was := slices.Clone(free[b])
	left, err := p.packBucket(units, free, pc)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		delete(p.blocked, u)
	}
	if len(left) > 0 {
		p.undoTrial(was, units, free, b)
		return nil, nil
	}
	for i, m := range best {
		old := m.choice
		p.dropReplicas(m, units)
		m.choice = bestC[i]
		p.moved[m] = fmt.Sprintf("%s on %s, cheaper, found no free GPU (%s); %s on %s holds all %d replicas, beside %d other short tenant(s) of its group moved with it",
			old.label(), old.board.Name, p.shortWhy(m, old), bestC[i].label(), b, bestC[i].replicas, len(best)-1)
	}
	return best, nil
}

// candsByKey is a tenant's first feasible candidate of each group key, its choice left out, as
// candsOfKey found them for that choice.
type candsByKey struct {
	choice *cand
	first  map[int32]*cand // by rescueKeyID
}

// candsOfKey is, for each group key (by rescueKeyID), o's first feasible candidate of that key
// other than its choice: the candidate rescueGroup takes for o in a grouping of that key. A
// pass of the rescue keeps them per tenant (rescueKeys), since each short tenant weighs the
// short tenants of its group after it: looking them up by scanning every peer's candidates for
// every shared candidate of each short tenant was most of a short fleet's rescue.
func (p *planner) candsOfKey(o *tenant) map[int32]*cand {
	if got, ok := p.rescueKeys[o]; ok && got.choice == o.choice {
		return got.first
	}
	first := map[int32]*cand{}
	for _, oc := range o.feasible {
		if oc == o.choice {
			continue
		}
		if k := p.rescueKeyID(o, oc); first[k] == nil {
			first[k] = oc
		}
	}
	if p.rescueKeys != nil {
		p.rescueKeys[o] = candsByKey{choice: o.choice, first: first}
	}
	return first
}

// rescuePicks is, for each tenant of ts, its own cheapest candidate on a board with idle pool
// GPUs (rescueOrder, idle), other than its choice; nil when it has no such candidate.
func (p *planner) rescuePicks(ts []*tenant, free map[string][]*gpuPlan, idle *idleBoards) []*cand {
	picks := make([]*cand, len(ts))
	for i, t := range ts {
		picks[i] = p.firstInRescueOrder(t, free, func(c *cand) bool { return c != t.choice && idle.on(c.board) })
	}
	return picks
}

// rescueTenant tries tn's other feasible candidates on the idle pool GPUs in free (see rescue)
// and reports whether one placed every replica.
func (p *planner) rescueTenant(tn *tenant, free map[string][]*gpuPlan, pc *patternCache) (bool, error) {
	old := tn.choice
	tried := map[string]string{} // board → why its cheapest candidate found no room
	var boards []string
	for _, c := range p.rescueOrder(tn, free) {
		b := c.board.Name
		if c == old {
			continue
		}
		slots := p.openSlots(keyOf(tn, c))
		if slots >= c.replicas {
			joined := p.joinOpen(tn, c)
			p.dropReplicas(tn, joined)
			tn.choice = c
			p.moved[tn] = fmt.Sprintf("%s on %s, cheaper, found no free GPU (%s); %s on %s holds all %d replicas, beside other tenants of its group",
				old.label(), old.board.Name, p.shortWhy(tn, old), c.label(), b, c.replicas)
			return true, nil
		}
		if !slices.ContainsFunc(free[b], func(g *gpuPlan) bool { return g != nil }) {
			continue
		}
		if p.stopped() {
			break
		}
		units := soloUnits(tn, c)
		if room, err := p.roomFor(c, free[b], pc); err != nil {
			return false, err
		} else if room < len(units) {
			if _, ok := tried[b]; !ok {
				tried[b] = fmt.Sprintf("%s: needs %d unit(s), the board's %d idle pool GPUs hold at most %d", c.label(), len(units), countFree(free[b]), room)
				boards = append(boards, b)
			}
			continue
		}
		was := slices.Clone(free[b])
		left, err := p.packBucket(units, free, pc)
		if err != nil {
			return false, err
		}
		if len(left) == 0 {
			for _, u := range units {
				delete(p.blocked, u)
			}
			p.dropReplicas(tn, units)
			tn.choice = c
			p.moved[tn] = fmt.Sprintf("%s on %s, cheaper, found no free GPU (%s); %s on %s holds all %d replicas",
				old.label(), old.board.Name, p.shortWhy(tn, old), c.label(), b, c.replicas)
			if slices.Contains(tn.fixedFallback, c) {
				p.moved[tn] = fixedFellBack(tn, old, c, p.shortWhy(tn, old))
			}
			return true, nil
		}
		if _, ok := tried[b]; !ok {
			why := fmt.Sprintf("%d of its %d unit(s) found no room on the board's %d idle pool GPUs", len(left), len(units), countFree(was))
			if bl, ok := p.blocked[left[0]]; ok {
				why = bl.rule
			}
			tried[b] = c.label() + ": " + why
			boards = append(boards, b)
		}
		for _, u := range units {
			delete(p.blocked, u)
		}
		p.undoTrial(was, units, free, b)
	}
	var parts []string
	slices.Sort(boards)
	for _, b := range boards {
		parts = append(parts, fmt.Sprintf("on %s, %s", b, tried[b]))
	}
	if len(parts) > 0 {
		p.unmoved[tn] = strings.Join(parts, "; ")
	}
	return false, nil
}

// openSlots counts the free places of the placed shared units of group k: a unit shared k.share
// ways that holds fewer replicas. A tenant of the group rescued onto k's candidate takes them
// before a GPU of its own (joinOpen): two tenants of one trust path rescued one after the other
// then share one GPU, as the packer would have put them (formUnits).
func (p *planner) openSlots(k groupKey) int {
	if k.share < 2 {
		return 0
	}
	n := 0
	for _, u := range p.placedOf(k) {
		n += max(0, k.share-len(u.reps))
	}
	return n
}

// placedOf are the units of group k on pool GPUs, each once, in fleet order. A rescue asks for
// them once per candidate of every short tenant, so it reads the GPUs' units in place and keeps
// only k's (listing every placed unit each time made a short fleet's rescue quadratic in its
// size, most of it in the list's map), and only on k's board (gpuIdx), where the packer and the
// rescue put every unit of k. During a pass of the rescue it reads only the GPUs its index lists
// for k (placedIndex), in the same order.
func (p *planner) placedOf(k groupKey) []*unit {
	var out []*unit
	// keys compare by number and units are marked as listed: comparing whole keys and keeping
	// a map of the units listed was most of a short fleet's rescue
	id := p.rkeyIDs().ofKey(k) + 1
	p.placedMarks++
	mark := p.placedMarks
	add := func(u *unit) {
		if u == nil {
			return
		}
		if p.unitKeyID(u) != id || u.mark == mark {
			return
		}
		u.mark = mark
		out = append(out, u)
	}
	addOn := func(g *gpuPlan) { // a pool GPU's units
		if g.role != v1.RolePool {
			return
		}
		if g.whole != nil {
			add(g.whole)
			return
		}
		for _, pi := range g.insts {
			add(pi.u)
		}
	}
	if x := p.pidx; x != nil && sameSlice(x.of, p.gpus) {
		// during a pass of the rescue: the GPUs that have held a unit of k since it began
		for _, i := range x.by[id] {
			if g := p.gpus[i]; g.fg.board.Name == k.board {
				addOn(g)
			}
		}
		if placedOfCheck != nil {
			placedOfCheck(p, k, out)
		}
		return out
	}
	on := p.gpuIdx().byBoard[k.board]
	p.gpuReads += len(on)
	for _, g := range on {
		addOn(g)
	}
	return out
}

// joinOpen puts tn's replicas of c into the open slots of c's group (openSlots, which must hold
// them all), fullest unit first, and returns the units it joined.
func (p *planner) joinOpen(tn *tenant, c *cand) []*unit {
	k := keyOf(tn, c)
	var open []*unit
	for _, u := range p.placedOf(k) {
		if len(u.reps) < k.share {
			open = append(open, u)
		}
	}
	slices.SortStableFunc(open, func(a, b *unit) int { return cmp.Compare(len(b.reps), len(a.reps)) })
	var joined []*unit
	left := c.replicas
	for _, u := range open {
		if left == 0 {
			break
		}
		n := min(left, k.share-len(u.reps))
		for range n {
			u.reps = append(u.reps, replica{tn: tn})
		}
		left -= n
		joined = append(joined, u)
	}
	return joined
}

// rescueOrder is the order in which rescueTenant tries tn's feasible candidates: cheapest first,
// but on the device-plugin path a whole-GPU MPS candidate that no node of its board with idle
// GPUs already serves its way (share and trust path) comes after the others. Such a candidate
// takes a node of its own: MPS fixes the node's nvidia.com/gpu to one share and trust path and
// its migStrategy to none, so the node's other idle GPUs could then take no MIG instance,
// exclusive replica or other group's share of the tenants rescued after it.
func (p *planner) rescueOrder(tn *tenant, free map[string][]*gpuPlan) []*cand {
	return slices.Collect(p.rescueSeq(tn, free, func(*cand) bool { return true }))
}

// firstInRescueOrder is the first candidate of tn in rescueOrder for which ok holds, nil when
// none does. It asks servedOnIdle only of the whole-GPU MPS candidates ok keeps, where
// rescueOrder asks it of every one: the rescue looks up one candidate of each member of a
// short tenant's group (rescuePicks) and of each tenant served on a board (searchMoves) this
// way, and scanning the idle GPUs for every MPS candidate of each was most of a short fleet's
// rescue.
func (p *planner) firstInRescueOrder(tn *tenant, free map[string][]*gpuPlan, ok func(*cand) bool) *cand {
	for c := range p.rescueSeq(tn, free, ok) {
		return c
	}
	return nil
}

// rescueSeq yields the candidates of tn for which ok holds, in rescueOrder, asking servedOnIdle
// only of those (and only as far as they are read).
func (p *planner) rescueSeq(tn *tenant, free map[string][]*gpuPlan, ok func(*cand) bool) iter.Seq[*cand] {
	return func(yield func(*cand) bool) {
		var later []*cand
		for _, c := range tn.feasible {
			if !ok(c) {
				continue
			}
			// the first of soloUnits(tn, c), as far as servedOnIdle reads it (useOf)
			if !p.perClaim && c.kind == v1.SliceMPS && !p.servedOnIdle(&unit{c: c, reps: []replica{{tn: tn}}}, free[c.board.Name]) {
				later = append(later, c)
				continue
			}
			if !yield(c) {
				return
			}
		}
		for _, c := range later {
			if !yield(c) {
				return
			}
		}
		// A fixed count falls back to the kinds fixedSlices set aside, best first, rather than
		// go unplaced.
		for _, c := range tn.fixedFallback {
			if ok(c) && !yield(c) {
				return
			}
		}
	}
}

// idleCounts is countFree of each board's GPUs in free, for lookups while free is unchanged.
func idleCounts(free map[string][]*gpuPlan) map[string]int {
	n := make(map[string]int, len(free))
	for b, gs := range free {
		n[b] = countFree(gs)
	}
	return n
}

// servedOnIdle reports whether a node of one of the idle GPUs gs already serves nvidia.com/gpu
// the way the whole-GPU unit u asks.
func (p *planner) servedOnIdle(u *unit, gs []*gpuPlan) bool {
	use := useOf(u)
	for _, g := range gs {
		if g == nil {
			continue
		}
		if have, ok := p.nodeUse[g.fg.ref.Node][wholeResource]; ok && have == use {
			return true
		}
	}
	return false
}

// shortWhy is why tn's choice c was left short: the node rule that blocked it, or its board full.
func (p *planner) shortWhy(tn *tenant, c *cand) string {
	rule := ""
	for u, b := range p.blocked { // the least rule, so that map order does not show
		if u.c == c && slices.ContainsFunc(u.reps, func(r replica) bool { return r.tn == tn }) && (rule == "" || b.rule < rule) {
			rule = b.rule
		}
	}
	if rule != "" {
		return rule
	}
	return "its board's pool GPUs were taken"
}

// roomFor is the most units of c the GPUs gs (nil: taken) could hold, node rules aside: one per
// GPU, one per tp GPUs of a node for tensor parallelism, and for MIG the most instances of c's
// profile one GPU's layouts hold.
func (p *planner) roomFor(c *cand, gs []*gpuPlan, pc *patternCache) (int, error) {
	n := countFree(gs)
	switch {
	case c.whole() && c.tp > 1:
		per := map[string]int{}
		for _, g := range gs {
			if g != nil {
				per[g.fg.ref.Node]++
			}
		}
		room := 0
		for _, k := range per {
			room += k / c.tp
		}
		return room, nil
	case c.whole():
		return n, nil
	}
	pats, err := pc.get(c.board)
	if err != nil {
		return 0, err
	}
	i, most := pats.index(c.profile.Name), 0
	for _, a := range pats.a {
		most = max(most, a[i])
	}
	return n * most, nil
}

// soloUnits are the units of c's replicas for tn alone. The units and their replicas are laid
// out in two arrays, as formUnits lays them out (the rescue's and the served tenants' moves ask
// for them once per candidate and board tried): each unit's replicas are a window of the second
// with the capacity of the replicas it gets, so that a later append moves them.
func soloUnits(tn *tenant, c *cand) []*unit {
	n := c.replicas
	if n <= 0 {
		return nil
	}
	per := n // replicas a unit
	if c.share > 0 {
		per = min(n, c.share)
	}
	nu := (n + per - 1) / per
	us, rs := make([]unit, nu), make([]replica, n)
	for i := range rs {
		rs[i] = replica{tn: tn}
	}
	out := make([]*unit, nu)
	k := keyOf(tn, c)
	for i := range us {
		m := min(per, len(rs))
		u := &us[i]
		u.key, u.c, u.reps, rs = k, c, rs[:m:m], rs[m:]
		out[i] = u
	}
	return out
}

// undoTrial puts the GPUs a failed trial placement of units took on board back: idle, in free as
// they were (was), and their nodes' uses as their other GPUs ask.
func (p *planner) undoTrial(was []*gpuPlan, units []*unit, free map[string][]*gpuPlan, board string) {
	nodes := map[string]bool{}
	for _, g := range was {
		if g == nil || g.role == v1.RoleIdle {
			continue
		}
		g.role, g.mode, g.whole, g.insts = v1.RoleIdle, "", nil, nil
		nodes[g.fg.ref.Node] = true
	}
	for _, u := range units {
		u.tp = v1.TensorParallel{}
	}
	free[board] = was
	p.resetNodeUses(nodes)
}

// dropReplicas takes tn's replicas off their units and GPUs, but those of keep; a GPU left with no
// unit is idle again (and free for the rescue of others).
func (p *planner) dropReplicas(tn *tenant, keep []*unit) {
	p.dropMatching(func(t *tenant) bool { return t == tn }, keep)
}

// dropAll takes the replicas of every tenant of ts off their units and GPUs, as dropReplicas
// with no unit kept does for each in turn, in one pass over the GPUs: the move of served
// tenants takes every tenant served on a board off it.
func (p *planner) dropAll(ts []*tenant) {
	if len(ts) == 1 {
		p.dropReplicas(ts[0], nil)
		return
	}
	in := make(map[*tenant]bool, len(ts))
	for _, t := range ts {
		in[t] = true
	}
	p.dropMatching(func(t *tenant) bool { return in[t] }, nil)
}

// dropMatching takes the replicas of the tenants drop matches off their units and GPUs, but
// those of keep; a GPU left with no unit is idle again. The nodes it touched get their uses
// again from their GPUs (resetNodeUses).
func (p *planner) dropMatching(drop func(*tenant) bool, keep []*unit) {
	of := func(r replica) bool { return drop(r.tn) }
	nodes := map[string]bool{}
	for _, g := range p.gpus {
		if g.role != v1.RolePool {
			continue
		}
		touched := false
		for _, u := range g.units() {
			if !slices.Contains(keep, u) && slices.ContainsFunc(u.reps, of) {
				u.reps = slices.DeleteFunc(u.reps, of)
				touched = true
			}
		}
		if !touched {
			continue
		}
		if g.whole != nil && len(g.whole.reps) == 0 {
			g.whole = nil
		}
		empty := g.whole == nil
		for i := range g.insts {
			if g.insts[i].u != nil && len(g.insts[i].u.reps) == 0 {
				g.insts[i].u = nil
			}
			if g.insts[i].u != nil {
				empty = false
			}
		}
		if empty {
			g.role, g.mode, g.insts = v1.RoleIdle, "", nil
		}
		nodes[g.fg.ref.Node] = true
	}
	p.resetNodeUses(nodes)
}

// resetNodeUses sets the uses of nodes to what their GPUs' units ask (as compaction does).
func (p *planner) resetNodeUses(nodes map[string]bool) {
	if len(nodes) == 0 {
		return
	}
	// each node's uses come from its own GPUs alone, read in fleet order (gpuIdx)
	byNode := p.gpuIdx().byNode
	for n := range nodes {
		use := map[string]migUse{}
		p.nodeUse[n] = use
		p.gpuReads += len(byNode[n])
		for _, g := range byNode[n] {
			if g.whole != nil {
				addWholeWant(use, g.whole)
			}
			for _, pi := range g.insts {
				if pi.u != nil {
					addInstWant(use, pi.in.Profile, useOf(pi.u))
				}
			}
		}
	}
}

// freeGPUs is the pool GPUs still idle, by board, in fleet order.
func (p *planner) freeGPUs() map[string][]*gpuPlan {
	free := map[string][]*gpuPlan{}
	for _, g := range p.gpus {
		if g.role == v1.RoleIdle {
			free[g.fg.board.Name] = append(free[g.fg.board.Name], g)
		}
	}
	return free
}

func countFree(gs []*gpuPlan) int {
	n := 0
	for _, g := range gs {
		if g != nil {
			n++
		}
	}
	return n
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
				p.noteBlockedGroup(u, board, free)
				unplaced = append(unplaced, u)
				continue
			}
			u.tp = tpGroup(gs)
			for _, g := range gs {
				g.role, g.whole, g.mode = v1.RolePool, u, v1.ModeExclusive
				p.notePlaced(g)
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
		p.notePlaced(g)
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
	p.notePlaced(g)
	return nil
}

// markUnplaced marks the tenants of units that found no GPU: the pool ran out of capacity. It
// runs after every packing, also each trial packing of the steps after the choice, with
// thousands of tenants short on an over-subscribed pool: the message's part that is the same for
// every tenant is formatted once, and each message is written into one allocation of its size.
func (p *planner) markUnplaced(units []*unit) {
	short, why, order := p.reuse.shortIndex()
	defer func() { p.reuse.shortOrder = order }()
	for _, u := range units {
		for _, r := range u.reps {
			if short[r.tn] == 0 {
				order = append(order, r.tn)
			}
			short[r.tn]++
		}
	}
	if len(order) == 0 {
		return
	}
	for _, u := range units {
		if b, ok := p.blocked[u]; ok {
			for _, r := range u.reps {
				why[r.tn] = b.rule
			}
		}
	}
	rules := p.forbidRules()
	canaries := p.canaries() // read once: it walks the fleet
	tail := fmt.Sprintf(") found no free GPU: the pool has %d GPUs of which %d are canaries and %d held for the burst pool",
		len(p.fleet), canaries, p.burst)
	var b strings.Builder
	var keys []forbidKey
	for _, tn := range order {
		head, replicas, label, board, w := strconv.Itoa(short[tn]), strconv.Itoa(tn.choice.replicas), tn.choice.label(), tn.choice.board.Name, why[tn]
		keys = forbiddenKeys(keys[:0], tn, rules)
		// the message's length, so that it is written into one allocation of its size
		n := len(head) + len(" of ") + len(replicas) + len(" replicas (") + len(label) + len(" on ") + len(board) + len(tail)
		if w != "" {
			n += len(wasLeft) + len(w)
		}
		for _, k := range keys {
			n += len("; ") + len(k.kind) + len(" on ") + len(k.board) + len(notUsed) + len(rules[k])
		}
		b.Reset()
		b.Grow(n)
		b.WriteString(head)
		b.WriteString(" of ")
		b.WriteString(replicas)
		b.WriteString(" replicas (")
		b.WriteString(label)
		b.WriteString(" on ")
		b.WriteString(board)
		b.WriteString(tail)
		if w != "" {
			b.WriteString(wasLeft)
			b.WriteString(w)
		}
		for _, k := range keys {
			b.WriteString("; ")
			b.WriteString(string(k.kind))
			b.WriteString(" on ")
			b.WriteString(k.board)
			b.WriteString(notUsed)
			b.WriteString(rules[k])
		}
		tn.infeas = append(tn.infeas, noCapacity(b.String()))
	}
}

// The fixed parts of markUnplaced's message.
const (
	wasLeft = "; free GPUs of the board were left, but "
	notUsed = ", cheaper, was not used: "
)

// noCapacity is v1.NewReason(v1.ReasonNoCapacity, "%s", msg) without formatting msg again.
func noCapacity(msg string) v1.Reason {
	return v1.Reason{Code: v1.ReasonNoCapacity, Message: msg, Retryable: v1.ReasonNoCapacity.Retryable()}
}

// idleBoards lists the boards with idle pool GPUs and how many, "" when none.
func (p *planner) idleBoards() string {
	n := map[string]int{}
	for _, g := range p.gpus {
		if g.role == v1.RoleIdle {
			n[g.fg.board.Name]++
		}
	}
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d of %s", n[b], b))
	}
	return strings.Join(parts, ", ")
}

// forbiddenKeys appends to keys, for a tenant left short, its cheaper slice kinds that a node
// rule kept off the fleet (for it or for another tenant; see optimise), by rules (forbidRules),
// in board and kind order: what its message names, each with its rule.
func forbiddenKeys(keys []forbidKey, tn *tenant, rules map[forbidKey]string) []forbidKey {
	if len(rules) == 0 {
		return keys
	}
	for _, c := range tn.feasible {
		if c.cost >= tn.choice.cost-1e-9 {
			continue
		}
		k := forbidKey{c.board.Name, c.kind}
		if _, ok := rules[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b forbidKey) int { return cmp.Or(cmp.Compare(a.board, b.board), cmp.Compare(a.kind, b.kind)) })
	return keys
}

// forbidRules is, for every slice kind on a board that optimise ruled out for some tenant or a
// node rule keeps off the fleet, the first of its reasons in byte order: what forbiddenKeys
// names. Built once for all the tenants a packing leaves short (it reads every tenant's rules).
func (p *planner) forbidRules() map[forbidKey]string {
	rules := map[forbidKey]string{}
	for _, all := range [2]map[*tenant]map[forbidKey]string{p.forbid, p.nodeRule} {
		for _, m := range all {
			for k, r := range m {
				if old, ok := rules[k]; !ok || r < old {
					rules[k] = r
				}
			}
		}
	}
	return rules
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// dropDone takes the replicas of the tenants in done off the units left, and the units left
// empty, in place.
func dropDone(left []*unit, done map[*tenant]bool) []*unit {
	kept := left[:0]
	for _, u := range left {
		u.reps = slices.DeleteFunc(u.reps, func(r replica) bool { return done[r.tn] })
		if len(u.reps) > 0 {
			kept = append(kept, u)
		}
	}
	return kept
}
