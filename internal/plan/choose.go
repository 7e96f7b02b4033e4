package plan

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// groupKey identifies the replicas that may fill the same shared units: same board, energy
// class, slice kind, profile, share and sharing group.
type groupKey struct {
	board, profile string
	energy         v1.EnergyClass
	kind           v1.SliceKind
	share          int
	tp             int // tensor-parallel degree, 1 without
	group          string
}

// keyOf is c's group for tenant tn, kept on c for the next call with the same tenant (the choice's
// local search asks for it once per candidate and move).
func keyOf(tn *tenant, c *cand) groupKey {
	if c.keyFor == tn {
		return c.key
	}
	k := groupKey{board: c.board.Name, profile: profName(c.profile), energy: energyOf(tn.t), kind: c.kind, share: c.share, tp: max(c.tp, 1)}
	if c.share > 1 {
		k.group = tn.group
	}
	c.key, c.keyFor = k, tn
	return k
}

// keyIDs numbers the group keys of one planning run, so that the choice's objective keeps its
// counts in slices instead of maps keyed by strings (the local search asks for them once per
// candidate and move).
type keyIDs struct {
	id     map[groupKey]int
	keys   []groupKey
	share  []int // keys[i].share
	bucket []int // the bucket (board and energy class) of keys[i], an index of buckets
	bid    map[bucketKey]int
	// buckets are the boards and energy classes of the keys.
	buckets []bucketKey
	// uses numbers the board and MIG profile keys (useKey) of the search's candidates
	// (useOf), so that fixedUses finds a fixed profile's candidates without reading them.
	uses map[string]int32
	// ways numbers the sharing settings of MIG candidates (wayOf), so that fixedUses compares a
	// candidate's with the one fixed for its profile without reading the candidate.
	ways map[migUse]int32
}

func newKeyIDs() *keyIDs {
	return &keyIDs{id: map[groupKey]int{}, bid: map[bucketKey]int{}, uses: map[string]int32{}, ways: map[migUse]int32{}}
}

// wayOf is the number of sharing setting u.
func (ids *keyIDs) wayOf(u migUse) int32 { return numberOf(ids.ways, u) }

// useOf is the number of useKey(c) for a MIG candidate c, kept on c.
func (ids *keyIDs) useOf(c *cand) int32 {
	if c.useIn == ids {
		return c.useID
	}
	id := numberOf(ids.uses, useKey(c))
	c.useID, c.useIn = id, ids
	return id
}

// of is the number of keyOf(tn, c), kept on c like the key.
func (ids *keyIDs) of(tn *tenant, c *cand) int {
	if c.kidFor == tn && c.kidIn == ids {
		return c.kid
	}
	k := keyOf(tn, c)
	id, ok := ids.id[k]
	if !ok {
		id = len(ids.keys)
		ids.id[k] = id
		b := bucketKey{k.board, k.energy}
		bi, ok := ids.bid[b]
		if !ok {
			bi = len(ids.buckets)
			ids.bid[b] = bi
			ids.buckets = append(ids.buckets, b)
		}
		ids.keys, ids.share, ids.bucket = append(ids.keys, k), append(ids.share, k.share), append(ids.bucket, bi)
	}
	c.kid, c.kidFor, c.kidIn = id, tn, ids
	return id
}

// fractional is the objective the choice minimises: the GPU-equivalents the chosen slices
// occupy once shared units are filled, Σ over groups of ceil(replicas / share) × unit size.
// Groups are the numbers of ids.
type fractional struct {
	ids      *keyIDs
	replicas []int
	unit     []float64
	seen     []bool // groups moved into at least once
	// vec, when set, replaces the sum by the vector objective (objective.go).
	vec *vectorObjective
	// cap, when set, adds the penalty for GPUs chosen beyond a board's limit (planner.caps).
	cap *boardCap
	// node, when set, is the GPUs per node of the boards whose whole-GPU MPS groups are counted
	// in whole nodes (planner.nodeMPS): a group's GPUs are rounded up to a multiple of it.
	node map[string]int
	// pn is perNode's answer per group, 0 until first asked (the search asks once per
	// candidate and move, and the answer is a map look-up by board name).
	pn []int32
	// moves counts the calls of move: the state the local search weighs changes only by them.
	moves uint64
}

func newFractional(ids *keyIDs) *fractional { return &fractional{ids: ids} }

// fit makes room for group k (and every group ids has numbered so far).
func (f *fractional) fit(k int) {
	if k < len(f.replicas) {
		return
	}
	n := max(len(f.ids.keys), k+1) - len(f.replicas)
	f.replicas = append(f.replicas, make([]int, n)...)
	f.unit = append(f.unit, make([]float64, n)...)
	f.seen = append(f.seen, make([]bool, n)...)
	f.pn = append(f.pn, make([]int32, n)...)
}

func (f *fractional) cost(k, r int) float64 {
	if r <= 0 {
		return 0
	}
	f.fit(k)
	return f.costOf(k, r, f.units(k, r))
}

// costOf is cost for r replicas of group k that fill u units (f.units(k, r), already known).
func (f *fractional) costOf(k, r int, u float64) float64 {
	if r <= 0 {
		return 0
	}
	return u * f.unit[k]
}

// units is the units r replicas of group k fill: ceil(r / share), and for whole-GPU MPS on a
// board in f.node, that rounded up to whole nodes. On the device-plugin path a node serves
// nvidia.com/gpu one way, by one trust path, and its MPS needs migStrategy none, so the GPUs
// its MPS group leaves free on a node take nothing else (docs/planner.md, "Boards, and tenants
// short of GPUs").
func (f *fractional) units(k, r int) float64 {
	u := unitsOf(r, f.ids.share[k])
	if n := f.perNode(k); n > 1 {
		u = math.Ceil(u/float64(n)) * float64(n)
	}
	return u
}

// perNode is the units group k's units are counted in: the GPUs of a node for whole-GPU MPS on a
// board in f.node, otherwise 1.
func (f *fractional) perNode(k int) int {
	if f.node == nil {
		return 1
	}
	f.fit(k)
	if n := f.pn[k]; n > 0 {
		return int(n)
	}
	n := 1
	if key := f.ids.keys[k]; key.kind == v1.SliceMPS {
		n = max(1, f.node[key.board])
	}
	f.pn[k] = int32(n)
	return n
}

// delta is the change of the objective when r replicas of candidate c join (r > 0) or leave
// (r < 0) group k.
func (f *fractional) delta(k int, c *cand, r int) float64 { return f.deltaBy(k, c.unitFrac, r) }

// deltaBy is delta for a candidate whose unit is unitFrac GPU-equivalents.
func (f *fractional) deltaBy(k int, unitFrac float64, r int) float64 {
	f.fit(k)
	f.unit[k] = unitFrac
	cur := f.replicas[k]
	return f.cost(k, cur+r) - f.cost(k, cur)
}

func (f *fractional) move(k int, c *cand, r int) {
	if f.vec != nil || f.cap != nil {
		ch := f.change(k, c, r)
		if f.vec != nil {
			f.vec.add(ch)
		}
		if f.cap != nil {
			f.cap.add(ch)
		}
	}
	f.fit(k)
	f.unit[k] = c.unitFrac
	f.replicas[k] += r
	f.seen[k] = true
	f.moves++
}

// moveDelta is the change of the objective when r1 replicas of c1 leave group k1 and r2
// replicas of c2 join group k2 (k1 ≠ k2).
func (f *fractional) moveDelta(k1 int, c1 *cand, r1 int, k2 int, c2 *cand, r2 int) float64 {
	l := f.leave(k1, c1, r1)
	e := searchCand{replicas: int32(r2), tpf: unitGPUs(c2), memFrac: c2.memFrac, compFrac: c2.compFrac, unitFrac: c2.unitFrac, whole: c2.whole()}
	return f.joinDelta(&l, k2, &e)
}

// leavesNothing reports whether r replicas leaving group k leave its units as they are: then
// the leaving changes no part of the objective (the sum, the vector objective's bucket and the
// boards' loads by exactly 0), and a move's change is its joining part alone, which is never
// below 0 (units only grow as replicas join, the parts are units times shares that are not
// negative, and the value of a bucket and the penalty over a board's limit only grow with them;
// each step rounds monotonically, so the floating-point sums are not below 0 either). So no move
// of such a tenant lowers the objective, and the local search need not weigh them
// (BenchmarkBestMove).
func (f *fractional) leavesNothing(k, r int) bool {
	f.fit(k)
	cur := f.replicas[k]
	return f.units(k, cur-r) == f.units(k, cur)
}

// leaving is what one tenant's current candidate leaving its group does to the objective's
// parts, which every move of that tenant shares: the search weighs it once per tenant, not once
// per candidate it might move to.
type leaving struct {
	ch unitChange // with the vector objective or board limits
	d  float64    // the sum's change, without the vector objective
	// vecA is the vector objective's change of ch's bucket with ch alone (vectorObjective.delta
	// where the candidate joins another bucket); capA, the same of the board limits' load,
	// and capB the board of ch's bucket (boardCap.delta).
	vecA, capA float64
	capB       int
	// capOver is the change of the penalty's part of board capB when ch alone applies to its
	// load, bc.over(capB, load+capA) − bc.over(capB, load), the first term of boardCap.deltaFrom
	// where the candidate joins another board.
	capOver float64
}

// leave is r replicas of c leaving group k (r < 0).
func (f *fractional) leave(k int, c *cand, r int) leaving {
	var l leaving
	if f.vec != nil || f.cap != nil {
		l.ch = f.change(k, c, r)
	}
	if f.vec == nil {
		l.d = f.delta(k, c, r)
	} else {
		l.vecA = f.vec.alone(l.ch)
	}
	if f.cap != nil {
		f.cap.leave(&l)
	}
	return l
}

// joinDelta is moveDelta for the leaving l and e's replicas joining group k, which is not the
// group l leaves. The parts add in moveDelta's order, so the sums are the same to the bit. It
// computes group k's units before and after the joining once, for both the units' change
// (changeBy) and the sum's (deltaBy), which compute the same differences and products of them.
func (f *fractional) joinDelta(l *leaving, k int, e *searchCand) float64 {
	r := int(e.replicas)
	f.fit(k)
	cur := f.replicas[k]
	u0, u1 := f.units(k, cur), f.units(k, cur+r)
	if f.vec != nil {
		b := f.changeOf(k, u1-u0, e)
		if f.cap != nil {
			pen := f.cap.deltaFrom(l, b)
			return f.vec.deltaFrom(l, b) + pen
		}
		return f.vec.deltaFrom(l, b)
	}
	// deltaBy, from the same units.
	f.unit[k] = e.unitFrac
	d := f.costOf(k, cur+r, u1) - f.costOf(k, cur, u0)
	if f.cap != nil {
		pen := f.cap.deltaFrom(l, f.changeOf(k, u1-u0, e))
		return l.d + d + pen
	}
	return l.d + d
}

// penFloor is, per board (the first len(p) of boardCap.byBoard), the least the board limits'
// penalty can change when a leaving l applies and a candidate joins a group of that board:
// boardCap.deltaFrom with the joining's change taken as nothing. A joining only adds GPUs, shares
// and large instances (its units never fall as replicas join, and each part is units times a
// share that is not negative), the loads and the penalty's parts only grow with them, and
// rounding is monotone, so deltaFrom is never below it.
type penFloor struct {
	n int
	p [8]float64
}

// floor fills pf for the leaving l (bc.leave has set its parts). Boards past the array's
// length, or added since, have no floor (n).
func (bc *boardCap) floor(l *leaving, pf *penFloor) {
	pf.n = min(len(bc.byBoard), len(pf.p))
	la := bc.byBoard[l.capB]
	for j := range pf.n {
		if j == l.capB {
			// Same board as the leaving: deltaFrom's load is la+da+db with da at least l.capA
			// (the same bucket: a's and b's parts added in turn) and db at least 0.
			pf.p[j] = capPenalty * (bc.over(j, la+l.capA) - bc.over(j, la))
			continue
		}
		lb := bc.byBoard[j]
		pf.p[j] = capPenalty * (l.capOver + bc.over(j, lb) - bc.over(j, lb))
	}
}

// joinBelow is joinDelta for l and e joining group k where that can be below bound: false when
// the objective's change, computed but for the board limits' penalty, plus the penalty's floor
// on k's board (pf) is not below bound, so that joinDelta is not either; otherwise joinDelta's
// value, to the bit (the parts add as there). The local search asks only whether a move beats
// the best so far, and most do not by their groups' units alone, so it skips the penalty's
// loads for them.
func (f *fractional) joinBelow(l *leaving, k int, e *searchCand, bound float64, pf *penFloor) (float64, bool) {
	if f.cap == nil {
		return f.joinDelta(l, k, e), true
	}
	r := int(e.replicas)
	f.fit(k)
	cur := f.replicas[k]
	var u0, u1 float64
	if f.node == nil { // units as unitsOf counts them, without the call
		sh := float64(f.ids.share[k])
		if cur > 0 {
			u0 = math.Ceil(float64(cur) / sh)
		}
		if cur+r > 0 {
			u1 = math.Ceil(float64(cur+r) / sh)
		}
	} else {
		u0, u1 = f.units(k, cur), f.units(k, cur+r)
	}
	b := f.changeOf(k, u1-u0, e)
	var part float64
	if f.vec != nil {
		part = f.vec.deltaFrom(l, b)
	} else {
		f.unit[k] = e.unitFrac
		part = l.d + (f.costOf(k, cur+r, u1) - f.costOf(k, cur, u0))
	}
	if ib := f.cap.boardOf(b.b); ib < pf.n && part+pf.p[ib] >= bound {
		return 0, false
	}
	return part + f.cap.deltaFrom(l, b), true
}

// searchCand is one feasible candidate of a tenant as the choice's local search reads it: the
// fields of cand a move needs, kept in one slice per tenant (tenant.sc, in the order of
// tenant.feasible) so that weighing a tenant's moves reads consecutive memory rather than one
// cand apiece. searchCands fills it before each search.
type searchCand struct {
	c *cand
	// board is c's board (leaveTo compares it without reading c).
	board *gpu.Board
	// kid is the number of c's group (keyIDs.of), -1 until the search first asks for it: numbers
	// are handed out in the order asked, and the order of groups elsewhere follows them.
	kid      int32
	replicas int32
	// use is the number of a MIG candidate's useKey (keyIDs.useOf), -1 for the others; way, the
	// number of a MIG candidate's sharing setting, migUse{kind, share} (keyIDs.wayOf).
	use, way int32
	// tpf is the GPUs of one unit of a whole-GPU candidate (its tensor-parallel degree, at least
	// 1); memFrac, compFrac and unitFrac are c's.
	tpf, memFrac, compFrac, unitFrac float64
	whole                            bool // c.whole()
	mig                              bool // c.profile != nil: a MIG candidate, which a fixed sharing setting may rule out
	// forbidden is p.forbidden(tn, c), which holds for a whole search: an earlier packing's
	// forbidden kinds change only between choices. disallowed is !p.allowed(c), set again
	// whenever the search fixes a sharing setting (consistent).
	forbidden, disallowed bool
	// dom is up to two earlier entries of the same list (their indexes plus 1; 0 for none) whose
	// moves never change the objective by more than this entry's does (dominates): weighMoves
	// passes over the entry where one of them is weighed.
	dom [2]int16
}

// dominates reports whether moving to search candidate o never changes the choice's objective by
// more than moving to a does, and changes its sum by less, whatever the groups' counts: both are
// unshared (exclusive GPUs, tensor-parallel ones included, or unshared MIG instances: share 1,
// so r replicas always add r units, whatever their groups hold) on the same board, so their
// units land in the same bucket and board load; a's r units cost more than o's by more than
// rounding can hide (the sum: r × unitFrac); and the parts the vector objective and the board
// limits add up are no smaller for a: with both exclusive, a's GPUs (r × tp); with both MIG, a's
// memory and compute shares and large instances (r × each, the same products changeOf
// computes); with a exclusive and o MIG, a's GPUs above the most o's instances can add to any
// bucket's value (r × the largest of the two shares, and 1 where an instance is large). The
// bucket's value, the load and the penalty over a board's limit only grow with each part and
// each step rounds monotonically, so a's change is never below o's, and o, listed before a (its
// cost is lower), wins every tie. Shared candidates are never dominated: their units' cost
// depends on what their groups hold.
func dominates(o, a *searchCand) bool {
	if o.board != a.board || !unsharedSearch(o) || !unsharedSearch(a) {
		return false
	}
	ro, ra := float64(o.replicas), float64(a.replicas)
	if ra*a.unitFrac <= ro*o.unitFrac+1e-6 {
		return false
	}
	lo, la := largeOf(o), largeOf(a)
	switch {
	case o.whole && a.whole:
		return ra*a.tpf >= ro*o.tpf
	case !o.whole && !a.whole:
		return ra*a.memFrac >= ro*o.memFrac && ra*a.compFrac >= ro*o.compFrac && ra*la >= ro*lo
	case a.whole:
		return ra*a.tpf > ro*max(o.memFrac, o.compFrac, lo)+1e-6
	}
	return false
}

// unsharedSearch reports whether e is an exclusive or unshared MIG candidate (share 1).
func unsharedSearch(e *searchCand) bool {
	return e.c.share == 1 && (e.c.kind == v1.SliceExclusive || e.c.kind == v1.SliceMIG)
}

// largeOf is 1 for a large MIG instance (isLarge), 0 otherwise.
func largeOf(e *searchCand) float64 {
	if !e.whole && isLarge(e.memFrac, e.compFrac) {
		return 1
	}
	return 0
}

// markDominated sets every entry's dom: the first two earlier entries that dominate it (none
// with off). A dominating entry costs less, so it is listed earlier (the feasible candidates
// are sorted by cost).
func markDominated(sc []searchCand, off bool) {
	for i := range sc {
		sc[i].dom = [2]int16{}
	}
	if off || len(sc) >= math.MaxInt16 {
		return
	}
	for i := range sc {
		a := &sc[i]
		if !unsharedSearch(a) {
			continue
		}
		n := 0
		for j := 0; j < i && n < 2; j++ {
			if dominates(&sc[j], a) {
				a.dom[n] = int16(j + 1)
				n++
			}
		}
	}
}

// weighable reports whether entry j of sc (already numbered) passes weighMoves' own tests for
// tn, whose choice's group is old: not the choice or its group, not forbidden, not ruled out by a
// sharing setting. Such an entry is weighed, or passed over for an earlier weighable one that
// dominates it, and so on down to one that is weighed, whose change is no larger.
func weighable(tn *tenant, sc []searchCand, j, old int) bool {
	e := &sc[j]
	return e.c != tn.choice && int(e.kid) != old && !e.forbidden && !e.disallowed
}

// unitGPUs is the GPUs one unit of a whole-GPU candidate takes: its tensor-parallel degree, at least 1.
func unitGPUs(c *cand) float64 { return float64(max(c.tp, 1)) }

// searchCands fills every tenant's searchCands from its feasible candidates and forbidden kinds
// as they are now (the confirmation raises a candidate's replicas between choices, the coarse
// ladders' retry swaps the feasible candidates, and the packings' retries forbid kinds).
//
// An entry filled before for the same candidate at the same place, with the same replicas, is
// kept but for its flags: the other fields are the candidate's, which do not change once it is
// made, and a group's number, once handed out, stays that group's. A tenant whose entries are
// all kept so and whose flags are all false, with no forbidden kinds and no sharing setting that
// could rule out its entries, keeps them without reading its candidates (kept).
func (p *planner) searchCands() {
	p.scGen++
	set := p.replicasSet.Load()
	for _, tn := range p.tenants {
		if !p.kept(tn, set) {
			p.fillSearch(tn, set)
		}
	}
}

// kept reports whether tn's search candidates are what fillSearch would fill them with, and
// makes them so where that is only their flags falling to false: its feasible candidates are the
// ones they were filled from, at the same places; no candidate's replicas have changed since
// (set); it has no forbidden kinds; and no sharing setting is fixed or it has no MIG entry. Then
// every flag is false, as fillSearch would set it, and the rest is kept as fillSearch keeps it.
func (p *planner) kept(tn *tenant, set uint64) bool {
	if tn.scSet != set || len(tn.sc) != len(tn.feasible) || len(p.forbid[tn]) > 0 || (tn.scUses != 0 && len(p.keep) > 0) {
		return false
	}
	sc := tn.sc
	for i, c := range tn.feasible {
		if sc[i].c != c {
			return false
		}
	}
	if tn.scForbid || tn.scRuled {
		for i := range sc {
			sc[i].forbidden, sc[i].disallowed = false, false
		}
	}
	if !tn.scNumbered { // numbered stays so: a group's number, once handed out, is kept
		numbered := true
		for i := range sc {
			numbered = numbered && sc[i].kid >= 0
		}
		tn.scNumbered = numbered
	}
	tn.scFrom, tn.scForbid, tn.scRuled = tn.feasible, false, false
	return true
}

// useBit is the bit of use number u in tenant.scUses: bit u, the last one for all from 63 on.
func useBit(u int32) uint64 { return 1 << min(u, 63) }

// fillSearch fills tn's search candidates (searchCands) from its candidates; set is
// p.replicasSet now.
func (p *planner) fillSearch(tn *tenant, set uint64) {
	old := tn.sc
	sc, fb := tn.sc[:0], p.forbid[tn]
	if cap(sc) < len(tn.feasible) {
		sc = make([]searchCand, 0, len(tn.feasible)) // old's entries are copied over
	}
	numbered, forbid, ruled, uses := true, false, false, uint64(0)
	for i, c := range tn.feasible {
		var e searchCand
		if i < len(old) && old[i].c == c && old[i].replicas == int32(c.replicas) {
			e = old[i] // sc[i] itself where sc has i entries and shares old's array
			e.forbidden, e.disallowed = fb != nil && forbiddenIn(fb, c), !p.allowed(c)
		} else {
			e = searchCand{c: c, board: c.board, kid: -1, replicas: int32(c.replicas), tpf: unitGPUs(c), memFrac: c.memFrac, compFrac: c.compFrac,
				unitFrac: c.unitFrac, whole: c.whole(), mig: c.profile != nil, forbidden: fb != nil && forbiddenIn(fb, c), disallowed: !p.allowed(c)}
			if c.kidFor == tn && c.kidIn == p.ids {
				e.kid = int32(c.kid)
			}
			e.use = -1
			if e.mig {
				e.use, e.way = p.ids.useOf(c), p.ids.wayOf(migUse{kind: c.kind, share: c.share})
			}
		}
		sc = append(sc, e)
		numbered = numbered && e.kid >= 0
		forbid, ruled = forbid || e.forbidden, ruled || e.disallowed
		if e.mig {
			uses |= useBit(e.use)
		}
	}
	markDominated(sc, p.o.noDominance)
	tn.sc, tn.scFrom, tn.scNumbered = sc, tn.feasible, numbered
	tn.scSet, tn.scForbid, tn.scRuled, tn.scUses = set, forbid, ruled, uses
}

// kidOf is the number of e's group for tn, kept on e.
func (p *planner) kidOf(tn *tenant, e *searchCand) int {
	if e.kid < 0 {
		e.kid = int32(p.ids.of(tn, e.c))
	}
	return int(e.kid)
}

// searchOf is tn's searchCands, filled again should its feasible candidates have changed since:
// should they be another slice than the one they were filled from (another array or length;
// the tenant holds that one, so its array is not reused for another slice meanwhile).
func (p *planner) searchOf(tn *tenant) []searchCand {
	if len(tn.feasible) != len(tn.scFrom) || (len(tn.feasible) > 0 && &tn.feasible[0] != &tn.scFrom[0]) {
		p.searchCands()
	}
	return tn.sc
}

// numberAll numbers every search candidate's group (kidOf), as weighing tn's moves would.
func (p *planner) numberAll(tn *tenant, sc []searchCand) {
	if tn.scNumbered {
		return
	}
	for i := range sc {
		p.kidOf(tn, &sc[i])
	}
	tn.scNumbered = true
}

// fixedUses sets the search's candidates' disallowed again after the sharing settings of the
// MIG profiles fixed (useKey) were added to p.keep. Settings are only ever added to the map the
// search holds (consistent), never changed, so only the candidates of those profiles can change
// (the others keep what allowed said when their flags were last set).
//
// allowed's answer for an entry of a fixed profile is whether its sharing setting is the one
// fixed, which the entries and the settings carry as numbers (way), so the candidates are not
// read; a tenant none of whose MIG entries has a profile fixed (tenant.scUses) is passed over.
func (p *planner) fixedUses(fixed []string) {
	p.scGen++
	ids := make([]int32, 0, len(fixed))
	ways := make([]int32, 0, len(fixed))
	var bits uint64
	for _, k := range fixed {
		if id, ok := p.ids.uses[k]; ok {
			ids, ways = append(ids, id), append(ways, p.ids.wayOf(p.keep[k]))
			bits |= useBit(id)
		} // a key no search candidate has: none of them changes
	}
	for _, tn := range p.tenants {
		if tn.scUses&bits == 0 {
			continue
		}
		for i := range tn.sc {
			e := &tn.sc[i]
			if !e.mig {
				continue
			}
			if j := slices.Index(ids, e.use); j >= 0 {
				e.disallowed = e.way != ways[j]
				tn.scRuled = tn.scRuled || e.disallowed
			}
		}
	}
}

// boardCap holds the choice to each board's GPUs: the objective gains capPenalty for every
// GPU-equivalent the chosen slices take on a board beyond its limit. A board's load is counted
// as the vector objective counts a bucket (whole GPUs + the largest of the MIG instances' memory
// shares, compute shares and large instances, each group's units rounded up), summed over the
// board's energy classes:
// a lower bound on the GPUs its packing takes.
type boardCap struct {
	ids   *keyIDs
	caps  map[string]float64 // board name → limit; a board not in it has none
	load  vectorObjective    // per bucket
	board []int              // bucket → index into byBoard and limit
	names map[string]int
	// byBoard is the load of each board, limit its limit (+Inf: none).
	byBoard, limit []float64
}

// capPenalty is what one GPU-equivalent beyond a board's limit adds to the choice's objective:
// large enough that any move which brings a board back within its limit pays for itself unless
// it costs more than capPenalty times what it frees.
const capPenalty = 100

func newBoardCap(ids *keyIDs, caps map[string]float64) *boardCap {
	return &boardCap{ids: ids, caps: caps, names: map[string]int{}}
}

// boardOf is the index of bucket b's board.
func (bc *boardCap) boardOf(b int) int {
	for len(bc.board) <= b {
		name := bc.ids.buckets[len(bc.board)].board
		i, ok := bc.names[name]
		if !ok {
			i = len(bc.byBoard)
			bc.names[name] = i
			lim, set := bc.caps[name]
			if !set {
				lim = math.Inf(1)
			}
			bc.byBoard, bc.limit = append(bc.byBoard, 0), append(bc.limit, lim)
		}
		bc.board = append(bc.board, i)
	}
	return bc.board[b]
}

func (bc *boardCap) over(i int, load float64) float64 { return max(0, load-bc.limit[i]) }

// add applies a change to the loads.
func (bc *boardCap) add(ch unitChange) {
	i := bc.boardOf(ch.b)
	before := bc.load.value(bc.load.get(ch.b))
	bc.load.add(ch)
	bc.byBoard[i] += bc.load.value(bc.load.get(ch.b)) - before
}

// delta is the change of the penalty when both changes apply.
func (bc *boardCap) delta(a, b unitChange) float64 {
	l := leaving{ch: a}
	bc.leave(&l)
	return bc.deltaFrom(&l, b)
}

// leave sets l's parts for the board limits from l.ch.
func (bc *boardCap) leave(l *leaving) {
	l.capB, l.capA = bc.boardOf(l.ch.b), bc.load.alone(l.ch)
	la := bc.byBoard[l.capB]
	l.capOver = bc.over(l.capB, la+l.capA) - bc.over(l.capB, la)
}

// deltaFrom is delta for l.ch and b.
func (bc *boardCap) deltaFrom(l *leaving, b unitChange) float64 {
	a := l.ch
	ia, ib := l.capB, bc.boardOf(b.b)
	if math.IsInf(bc.limit[ia], 1) && math.IsInf(bc.limit[ib], 1) {
		return 0
	}
	var da, db float64
	if a.b == b.b {
		ta := bc.load.get(a.b)
		va := bc.load.value(ta)
		a.apply(&ta)
		b.apply(&ta)
		da = bc.load.value(ta) - va
	} else {
		da = l.capA
		tb := bc.load.get(b.b)
		vb := bc.load.value(tb)
		b.apply(&tb)
		db = bc.load.value(tb) - vb
	}
	la, lb := bc.byBoard[ia], bc.byBoard[ib]
	if ia == ib {
		return capPenalty * (bc.over(ia, la+da+db) - bc.over(ia, la))
	}
	// Here a.b ≠ b.b, so da is l.capA and the first two terms are l.capOver.
	return capPenalty * (l.capOver + bc.over(ib, lb+db) - bc.over(ib, lb))
}

// penalty is the penalty of the current loads.
func (bc *boardCap) penalty() float64 {
	s := 0.0
	for i, l := range bc.byBoard {
		s += bc.over(i, l)
	}
	return capPenalty * s
}

// newFractional is the choice's objective for this run: the vector one with vector, with the
// boards' limits when the planner has them.
func (p *planner) newFractional(vector bool) *fractional {
	f := newFractional(p.ids)
	if vector {
		f.vec = newVectorObjective()
	}
	if p.caps != nil {
		f.cap = newBoardCap(p.ids, p.caps)
	}
	f.node = p.nodeMPS
	return f
}

// choose picks a candidate per tenant: first each tenant's cheapest on its own, then local search
// moves one tenant at a time to the candidate that lowers the fractional objective most (a
// tenant joining a half-filled MPS GPU of its trust group costs nothing), until no move helps.
// With boardWide, each MIG profile of a board is then held to one sharing setting (see
// consistent) and the search runs again under that restriction.
//
// With vector, the objective is the vector one instead (objective.go): per board and energy
// class, whole GPUs plus the larger of the MIG instances' memory and compute shares.
//
// Where a tenant's cheapest candidate shares finer than the coarse ladders, the board-wide sum
// objective's search (boardWide, not vector: one of optimise's four choices, so that the extra
// start costs a quarter of what it would in all four) runs again from each tenant's cheapest on
// them (coarseSeed); on small pools the search runs once more from the
// sharing-group bound's choice (groupSeed); the start that ends with the lowest objective is
// kept (ties: the earlier). One tenant at a time cannot fill a shared unit that pays off only
// once all its sharers have moved (four small models leaving unshared 1g.10gb instances for one
// 1g.20gb shared by MPS); the group search moves them together.
func (p *planner) choose(boardWide, vector bool) { p.chooseWarm(boardWide, vector, nil) }

// chooseWarm is choose with its first start from warm (a candidate per tenant, as chooseFrom
// takes it; nil: each tenant's cheapest): optimise's withholding rounds start from the plan they
// improve (warmSeed).
func (p *planner) chooseWarm(boardWide, vector bool, warm []*cand) {
	p.chooseFrom(boardWide, vector, warm)
	var coarse []*cand
	if boardWide && !vector {
		coarse = p.coarseSeed()
	}
	for _, seed := range [][]*cand{coarse, p.groupSeed()} {
		if seed == nil {
			continue
		}
		first, v := p.choices(), p.chosenValue(vector)
		p.chooseFrom(boardWide, vector, seed)
		if p.chosenValue(vector) >= v-1e-9 {
			for i, tn := range p.tenants {
				tn.choice = first.choice[i]
			}
			p.keep = first.keep
		}
	}
}

// coarseSeed is a starting choice for the local search: each tenant's cheapest allowed candidate
// on the coarse ladders (fineShare), where the tenants' cheapest are finer. The shares finer than
// 1/8 are cheaper per replica for the small models, so the search from each tenant's cheapest
// starts with a sharing group's light tenants spread over shares their heavier peers cannot
// take, and one tenant at a time does not always bring them back together (the 300 standard
// synthetic tenants: 67.04 GPU-equivalents where the start on the coarse ladders ends at 66.93).
// Nil when no tenant's first allowed candidate is finer than the coarse ladders.
func (p *planner) coarseSeed() []*cand {
	seed := make([]*cand, len(p.tenants))
	fine := false
	for i, tn := range p.tenants {
		if len(tn.feasible) == 0 {
			continue
		}
		first := p.firstAllowed(tn)
		if !fineShare(first) {
			continue
		}
		fine = true
		for _, c := range tn.feasible {
			if !fineShare(c) && !p.forbidden(tn, c) {
				seed[i] = c
				break
			}
		}
	}
	if !fine {
		return nil
	}
	return seed
}

// chosen is a choice of every tenant and the sharing settings fixed with it.
type chosen struct {
	choice []*cand
	keep   map[string]migUse
}

func (p *planner) choices() chosen {
	c := chosen{keep: p.keep}
	for _, tn := range p.tenants {
		c.choice = append(c.choice, tn.choice)
	}
	return c
}

// chooseFrom runs the local search from seed (a candidate per tenant, nil: each tenant's cheapest).
func (p *planner) chooseFrom(boardWide, vector bool, seed []*cand) {
	f := p.newFractional(vector)
	p.keep = map[string]migUse{}
	p.searchCands()
	for i, tn := range p.tenants {
		tn.choice, tn.infeas = nil, nil
		if len(tn.feasible) == 0 {
			continue
		}
		tn.choice = p.firstAllowed(tn)
		if seed != nil && seed[i] != nil && !p.forbidden(tn, seed[i]) && slices.Contains(tn.feasible, seed[i]) {
			tn.choice = seed[i]
		}
		f.move(p.ids.of(tn, tn.choice), tn.choice, tn.choice.replicas)
	}
	failed := map[int]int{}
	for round := 0; round < 10; round++ {
		if boardWide && !vector {
			// A board over its limit gives up its tenants of least added cost per
			// GPU-equivalent freed first (ADR 0101).
			p.spillOver(f)
		}
		p.localSearch(f)
		for pass := 0; pass < maxEmptyPasses && p.emptyLastUnits(f, failed); pass++ {
			p.localSearch(f)
		}
		if !boardWide || !p.consistent(f) {
			break
		}
	}
}

// emptyLastUnits tries, for each shared group (share > 1) whose last unit is part-filled, to
// empty that unit: its tenants leave together, cheapest per replica first, each to the allowed
// candidate of the same board that raises the objective least (leaveTo), and the moves are kept
// when together they lower the objective (otherwise undone); it reports whether any group gave
// up a unit so. One tenant at a time never does this: a tenant leaving a unit frees nothing
// until all of that unit's tenants have left. Two replicas of a trust path on their own MPS GPU
// (share 8) hold a whole GPU; on two 1g.10gb instances beside other MIG instances they take a
// quarter of one (the vector objective), and the device plugin's node rules still hold (the
// instances join the profile's unshared way).
//
// Leavers stay on their board: the step repairs the rounding of one board's units, and the
// objective prices another board's slices by volume only (a 1g.20gb on an H100 and a 1g.35gb
// on an H200 cost the same there, though a KV-bound replica runs much closer to its limit on
// the first); tenants still change boards by the one-tenant moves. The last unit holds
// replicas mod share replicas; a tenant with more replicas than that does not leave. A group
// tried without success is tried again only once its count has changed. Groups go in key
// order, leavers by their own change of the objective per replica (ties: pool order), so the
// result is deterministic.
func (p *planner) emptyLastUnits(f *fractional, failed map[int]int) bool {
	// members are the tenants of each group by its number (p.lastMembers, emptied after).
	members := p.lastMembers
	var groups []int
	for _, tn := range p.tenants {
		if tn.choice == nil || tn.choice.share < 2 {
			continue
		}
		k := p.ids.of(tn, tn.choice)
		if k >= len(members) {
			members = append(members, make([][]*tenant, k+1-len(members))...)
		}
		if len(members[k]) == 0 {
			groups = append(groups, k)
		}
		members[k] = append(members[k], tn)
	}
	defer func() {
		for _, k := range groups {
			clear(members[k])
			members[k] = members[k][:0]
		}
		p.lastMembers = members
	}()
	slices.Sort(groups)
	emptied := false
	type leave struct {
		tn *tenant
		to *cand   // leaveTo as the leavers were listed
		d  float64 // objective change per replica when it leaves alone
		// all is the objective's change when it leaves alone (leaveTo's, moveDelta's to the bit)
		all float64
	}
	type undo struct {
		tn  *tenant
		was *cand
	}
	for _, k := range groups {
		if p.stopped() {
			return emptied
		}
		rest := f.replicas[k] % (p.ids.share[k] * f.perNode(k)) // replicas on the last unit (node, where counted so)
		if rest == 0 {
			continue
		}
		if n, ok := failed[k]; ok && n == f.replicas[k] {
			continue // tried at this count already
		}
		var ls []leave
		for _, tn := range members[k] {
			if tn.choice.replicas > rest {
				continue // it would leave a unit part-filled again
			}
			if to, d := p.leaveTo(f, tn); to != tn.choice {
				ls = append(ls, leave{tn, to, d / float64(tn.choice.replicas), d})
			}
		}
		slices.SortStableFunc(ls, func(a, b leave) int { return cmp.Compare(a.d, b.d) })
		var done []undo
		total := 0.0
		listed := f.moves
		for _, l := range ls {
			if rest <= 0 {
				break
			}
			tn := l.tn
			to, d := l.to, l.all
			if f.moves != listed {
				to, d = p.leaveTo(f, tn) // again: those gone before may have changed its best
			}
			if to == tn.choice {
				continue
			}
			total += d
			done = append(done, undo{tn, tn.choice})
			rest -= tn.choice.replicas
			p.switchTo(f, tn, to)
		}
		if rest <= 0 && total < -1e-9 {
			emptied = true
			delete(failed, k)
			continue
		}
		failed[k] = f.replicas[k]
		for i := len(done) - 1; i >= 0; i-- {
			p.switchTo(f, done[i].tn, done[i].was)
		}
	}
	return emptied
}

// maxEmptyPasses bounds the rounds of emptyLastUnits and the local search after it; each round
// that empties a unit lowers the objective, so the bound only caps the work.
const maxEmptyPasses = 8

// localSearch moves tenants to allowed candidates while that lowers the objective.
func (p *planner) localSearch(f *fractional) {
	for pass := 0; pass < 8 && !p.stopped(); pass++ {
		moved := false
		for _, tn := range p.tenants {
			if tn.choice == nil || len(tn.feasible) < 2 {
				continue
			}
			if best := p.bestMove(f, tn, false); best != tn.choice {
				p.switchTo(f, tn, best)
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

// bestMove is the allowed candidate that lowers the objective most from tn's current choice
// (the current choice when none does); with force, the best allowed one even if it costs more.
//
// Without force, it does not weigh the candidates where it knows the answer is tn's choice: when
// tn's leaving frees nothing (leavesNothing), or when nothing the weighing reads has changed since
// it last found no move for tn (stayed). The answer is the same as weighMoves' either way
// (TestBestMoveSkips).
func (p *planner) bestMove(f *fractional, tn *tenant, force bool) *cand {
	if !force {
		sc := p.searchOf(tn)
		if tn.stay == (stayed{f, f.moves, p.scGen}) || f.leavesNothing(p.choiceKid(tn)) {
			p.numberAll(tn, sc) // the groups numbered as weighing them would number them
			return tn.choice
		}
	}
	best := p.weighMoves(f, tn, force)
	if !force && best == tn.choice {
		tn.stay = stayed{f, f.moves, p.scGen}
	}
	return best
}

// choiceKid is the number of tn's choice's group (keyIDs.of) and the choice's replicas, kept on
// tn while its choice, the numbering and the candidates' replicas (replicasSet) are as they were:
// the local search asks for both for every tenant it weighs on every pass, and the tenant's
// fields are at hand where the candidate is read from memory of its own.
func (p *planner) choiceKid(tn *tenant) (k, r int) {
	set := p.replicasSet.Load()
	if tn.chFor == tn.choice && tn.chIn == p.ids && tn.chSet == set {
		return int(tn.chKid), int(tn.chReps)
	}
	k, r = p.ids.of(tn, tn.choice), tn.choice.replicas
	tn.chFor, tn.chIn, tn.chSet, tn.chKid, tn.chReps = tn.choice, p.ids, set, int32(k), int32(r)
	return k, r
}

// weighMoves is bestMove weighing every candidate.
func (p *planner) weighMoves(f *fractional, tn *tenant, force bool) *cand {
	old := p.ids.of(tn, tn.choice)
	best, bestD := tn.choice, -1e-9
	if force {
		best, bestD = tn.choice, 1e300
	}
	sc := p.searchOf(tn)
	l := f.leave(old, tn.choice, -tn.choice.replicas)
	var pf penFloor
	if f.cap != nil {
		f.cap.floor(&l, &pf)
	}
	for i := range sc {
		e := &sc[i]
		k := p.kidOf(tn, e)
		if e.c == tn.choice || k == old || e.forbidden || e.disallowed {
			continue
		}
		if d := e.dom; d[0] > 0 && (weighable(tn, sc, int(d[0])-1, old) || d[1] > 0 && weighable(tn, sc, int(d[1])-1, old)) {
			continue // a dominating entry, earlier, is weighed (dominates)
		}
		if d, ok := f.joinBelow(&l, k, e, bestD, &pf); ok && d < bestD {
			best, bestD = e.c, d
		}
	}
	tn.scNumbered = true
	return best
}

// stayed is when the local search last found no move for a tenant: the objective it weighed
// in, that objective's count of moves then (fractional.moves) and the search candidates'
// generation (planner.scGen). While all three are the same, the weighing reads the same
// replicas, loads, flags and choice, and would find no move again.
type stayed struct {
	f          *fractional
	moves, gen uint64
}

// leaveTo is the allowed candidate on tn's board, other than its current one, that raises the
// objective least (tn's choice when there is none), and the objective's change when tn moves to
// it: joinBelow's value, which is joinDelta's and so moveDelta's to the bit (+Inf when none).
func (p *planner) leaveTo(f *fractional, tn *tenant) (*cand, float64) {
	old := p.ids.of(tn, tn.choice)
	best, bestD := tn.choice, math.Inf(1)
	sc := p.searchOf(tn)
	l := f.leave(old, tn.choice, -tn.choice.replicas)
	var pf penFloor
	if f.cap != nil {
		f.cap.floor(&l, &pf)
	}
	board := tn.choice.board
	for i := range sc {
		e := &sc[i]
		k := p.kidOf(tn, e)
		if k == old || e.forbidden || e.disallowed || e.board != board {
			continue
		}
		if d, ok := f.joinBelow(&l, k, e, bestD, &pf); ok && d < bestD {
			best, bestD = e.c, d
		}
	}
	return best, bestD
}

func (p *planner) switchTo(f *fractional, tn *tenant, c *cand) {
	f.move(p.ids.of(tn, tn.choice), tn.choice, -tn.choice.replicas)
	tn.choice = c
	f.move(p.ids.of(tn, c), c, c.replicas)
}

// forbidden reports whether c's slice kind on its board was ruled out for tn by an earlier
// packing that could not place it (see retryBlocked).
func (p *planner) forbidden(tn *tenant, c *cand) bool { return forbiddenIn(p.forbid[tn], c) }

// forbiddenIn is forbidden with tn's forbidden kinds fb (p.forbid[tn]) looked up once.
func forbiddenIn(fb map[forbidKey]string, c *cand) bool {
	_, ok := fb[forbidKey{c.board.Name, c.kind}]
	return ok
}

// spilledWhy says why tn does not run on a cheaper candidate of another board: the packing's
// rescue moved it off its choice (rescue), or the choice held that board to its limit (boardCap)
// and tn was chosen elsewhere; "" when neither.
func (p *planner) spilledWhy(tn *tenant) string {
	if w := p.moved[tn]; w != "" {
		return "; " + w
	}
	if w := p.withheldWhy(tn); w != "" {
		return w
	}
	c := tn.choice
	if b, ok := p.filled[tn]; ok && c != nil {
		first := p.firstAllowed(tn)
		if first.board.Name != b && first.board != c.board && first.cost < c.cost-1e-9 {
			return fmt.Sprintf("; %s on %s, cheaper (%d replica(s) = %.3f), was not used: the choice kept that board's tenants within %.0f %% of its %d pool GPUs, the tenants whose other boards add least per GPU-equivalent they free leaving for them, and kept each tenant to its board",
				first.label(), first.board.Name, first.replicas, first.cost, 100*p.fillShare, p.poolGPUs()[first.board.Name])
		}
	}
	if p.caps == nil || c == nil {
		return ""
	}
	first := p.firstAllowed(tn)
	b := first.board.Name
	lim, capped := p.caps[b]
	if !capped || first.board == c.board || first.cost >= c.cost-1e-9 || p.capLoad[b]+first.cost <= lim {
		return ""
	}
	return fmt.Sprintf("; %s on %s, cheaper (%d replica(s) = %.3f), was not used: that board had no room for it (the choice holds it to %.1f GPU-equivalents, what its %d pool GPUs were found to hold after an earlier packing left tenants short there, and other tenants take %.1f)",
		first.label(), b, first.replicas, first.cost, lim, p.poolGPUs()[b], p.capLoad[b])
}

// withheldWhy says, for a tenant whose choice is not whole-GPU MPS on a board where
// withholdNodeMPS withheld it from the tenant, why; "" otherwise.
func (p *planner) withheldWhy(tn *tenant) string {
	m := p.withheld[tn]
	if len(m) == 0 || tn.choice == nil {
		return ""
	}
	msg := ""
	for _, k := range slices.SortedFunc(maps.Keys(m), func(a, b forbidKey) int { return cmp.Compare(a.board, b.board) }) {
		if tn.choice.board.Name != k.board || tn.choice.kind != k.kind {
			msg += "; " + m[k]
		}
	}
	return msg
}

// firstAllowed is tn's cheapest candidate that is not forbidden; its cheapest when all are.
func (p *planner) firstAllowed(tn *tenant) *cand {
	for _, c := range tn.feasible {
		if !p.forbidden(tn, c) {
			return c
		}
	}
	return tn.feasible[0]
}

// migUse is how the instances of one MIG profile are shared. group is the sharing group of a
// shared instance's tenants: Kubernetes hands out the references of any shared device of a
// resource on a node, so the packer keeps one group per profile and node; the board-wide choice
// (consistent) leaves it empty.
type migUse struct {
	kind  v1.SliceKind
	share int
	group string
	// board is the board of the devices a unit uses (useOf): on a node with GPUs of two boards
	// the device plugin advertises both under one resource, so a resource is used by one board
	// per node (mixedboard.go).
	board string
}

// useKey is the board and MIG profile of c, "H100/1g.10gb", kept on c (the search asks for it
// for every MIG candidate whenever it fixes a sharing setting).
func useKey(c *cand) string {
	if c.use == "" {
		c.use = c.board.Name + "/" + c.profile.Name
	}
	return c.use
}

// allowed reports whether c agrees with the sharing setting fixed for its MIG profile.
func (p *planner) allowed(c *cand) bool {
	if c.profile == nil || len(p.keep) == 0 {
		return true
	}
	u, fixed := p.keep[useKey(c)]
	return !fixed || u == (migUse{kind: c.kind, share: c.share})
}

// consistent holds every MIG profile of a board to one sharing setting (unshared, or MPS or
// time-slicing k ways): the Kubernetes device plugin applies one sharing setting to all devices
// of a resource (nvidia.com/mig-1g.20gb) on a node, so mixing them would leave pods pending. Where
// a profile is used in several ways, the way with the most replicas is kept and the other
// tenants move to their best allowed candidate. It reports whether anything moved.
func (p *planner) consistent(f *fractional) bool {
	uses := map[string]map[migUse]int{}
	var keys []string
	for _, tn := range p.tenants {
		c := tn.choice
		if c == nil || c.profile == nil {
			continue
		}
		k := useKey(c)
		if uses[k] == nil {
			uses[k] = map[migUse]int{}
			keys = append(keys, k)
		}
		uses[k][migUse{kind: c.kind, share: c.share}] += c.replicas
	}
	moved := false
	var fixed []string
	for _, k := range keys {
		if len(uses[k]) < 2 {
			continue
		}
		if _, ok := p.keep[k]; !ok {
			p.keep[k] = majority(uses[k])
			fixed = append(fixed, k)
		}
	}
	if len(fixed) > 0 {
		p.fixedUses(fixed)
	}
	for _, tn := range p.tenants {
		if tn.choice == nil || (p.allowed(tn.choice) && !p.forbidden(tn, tn.choice)) {
			continue
		}
		if best := p.bestMove(f, tn, true); best != tn.choice {
			p.switchTo(f, tn, best)
			moved = true
		}
	}
	return moved
}

// majority is the use with the most replicas; ties go to the stronger isolation, then fewer shares.
func majority(m map[migUse]int) migUse {
	var best migUse
	n := -1
	for u, r := range m {
		better := r > n || (r == n && (kindRank(u.kind) < kindRank(best.kind) || (u.kind == best.kind && u.share < best.share)))
		if better {
			best, n = u, r
		}
	}
	return best
}

// objective is the fractional objective of the current choice.
func (p *planner) objective() float64 {
	f := newFractional(p.ids)
	keys := p.fillChosen(f)
	return math.Round(f.sumCost(keys)*1e4) / 1e4
}

// fillChosen moves every tenant's current choice into f and returns the groups it touched, each
// once, in the order tenants first reached them (so that sums over them add in a fixed order).
func (p *planner) fillChosen(f *fractional) []int {
	var keys []int
	for _, tn := range p.tenants {
		if tn.choice == nil {
			continue
		}
		k := p.ids.of(tn, tn.choice)
		if f.fit(k); !f.seen[k] {
			keys = append(keys, k)
		}
		f.move(k, tn.choice, tn.choice.replicas)
	}
	return keys
}

// sumCost is the sum of rounded unit sizes over groups keys, added in their order.
func (f *fractional) sumCost(keys []int) float64 {
	sum := 0.0
	for _, k := range keys {
		sum += f.cost(k, f.replicas[k])
	}
	return sum
}

var sortFunc = slices.SortStableFunc[[]*cand, *cand]
