package plan

import (
	"slices"

	"gpupool.dev/gpupool/internal/gpu"
)

// The rescue's look-ups by group key and board. The rescue of a short fleet weighs, for each
// short tenant, every candidate of every short tenant of its sharing group after it
// (rescueGroup): hashing group keys, four strings each, for maps built again per candidate was
// most of that work. Here keys are numbered once per planning run and the sums kept in slices.

// rescueKeyIDs numbers group keys for the rescue: the number of a key never changes within a
// planning run, so it stands for the key in maps and slices.
type rescueKeyIDs struct {
	id map[groupKey]int32
}

// ofKey is k's number.
func (x *rescueKeyIDs) ofKey(k groupKey) int32 { return numberOf(x.id, k) }

// of is the number of keyOf(tn, c), kept on c like the key.
func (x *rescueKeyIDs) of(tn *tenant, c *cand) int32 {
	if c.rkidFor == tn && c.rkidIn == x {
		return c.rkid
	}
	id := x.ofKey(keyOf(tn, c))
	c.rkid, c.rkidFor, c.rkidIn = id, tn, x
	return id
}

// rescueKeyID is keyOf(tn, c) numbered (rescueKeyIDs), the same number for the same key
// throughout the planning run.
func (p *planner) rescueKeyID(tn *tenant, c *cand) int32 {
	return p.rkeyIDs().of(tn, c)
}

// rkeyIDs is the planning run's rescueKeyIDs, made on first use.
func (p *planner) rkeyIDs() *rescueKeyIDs {
	if p.rkeys == nil {
		p.rkeys = &rescueKeyIDs{id: map[groupKey]int32{}}
	}
	return p.rkeys
}

// rescueEst is the estimate rescueGroup weighs groupings by, for one set of tenants and their
// picks (rescuePicks): the replicas of each group key among the picks, so that the estimate
// without some of the tenants is the keys' units less theirs, read off in slices.
type rescueEst struct {
	picks []*cand
	key   []int32 // per tenant, the index of its pick's key in reps, -1 without a pick
	reps  []int   // per key, the replicas of all the picks of that key
	share []int
	frac  []float64 // per key, the unit size of its last pick
	less  []int     // per key, the replicas of the tenants left out (scratch of without)
}

// newRescueEst sums the picks of ts (picks[i] is ts[i]'s, nil when none) by group key.
func (p *planner) newRescueEst(ts []*tenant, picks []*cand) *rescueEst {
	e := &rescueEst{picks: picks, key: make([]int32, len(ts))}
	pos := map[int32]int32{}
	for i, t := range ts {
		c := picks[i]
		if c == nil {
			e.key[i] = -1
			continue
		}
		id := p.rescueKeyID(t, c)
		j, ok := pos[id]
		if !ok {
			j = int32(len(e.reps))
			pos[id] = j
			e.reps, e.share, e.frac = append(e.reps, 0), append(e.share, c.share), append(e.frac, 0)
		}
		e.key[i] = j
		e.reps[j] += c.replicas
		e.frac[j] = c.unitFrac
	}
	e.less = make([]int, len(e.reps))
	return e
}

// without is the estimate of the tenants but those at the indices skip: the GPU-equivalents
// they would take, each rescued onto its pick, those of one group key sharing units. A key's
// unit size is that of its candidates (board, kind, profile and tensor-parallel degree are
// part of the key), whichever of them is read.
func (e *rescueEst) without(skip []int) float64 {
	for _, i := range skip {
		if j := e.key[i]; j >= 0 {
			e.less[j] += e.picks[i].replicas
		}
	}
	sum := 0.0
	for j, r := range e.reps {
		if r -= e.less[j]; r > 0 {
			sum += unitsOf(r, e.share[j]) * e.frac[j]
		}
		e.less[j] = 0
	}
	return sum
}

// idleBoards answers whether a board has idle pool GPUs (idleCounts) by the board's pointer,
// looked up by name once per pointer: the rescue asks it of every candidate of every member of
// a short tenant's group.
type idleBoards struct {
	n   map[string]int
	ptr []*gpu.Board
	has []bool
}

// maxIdleBoardPtrs bounds the pointers idleBoards remembers; past it, it looks names up.
const maxIdleBoardPtrs = 32

func newIdleBoards(free map[string][]*gpuPlan) *idleBoards {
	return &idleBoards{n: idleCounts(free)}
}

// on reports whether board b has idle pool GPUs.
func (x *idleBoards) on(b *gpu.Board) bool {
	for i, q := range x.ptr {
		if q == b {
			return x.has[i]
		}
	}
	h := x.n[b.Name] > 0
	if len(x.ptr) < maxIdleBoardPtrs {
		x.ptr, x.has = append(x.ptr, b), append(x.has, h)
	}
	return h
}

// unitKeyID is u's key numbered (rescueKeyIDs), kept on u: a unit's key never changes.
func (p *planner) unitKeyID(u *unit) int32 {
	if u.rk == 0 {
		u.rk = p.rkeyIDs().ofKey(u.key) + 1
	}
	return u.rk
}

// placedIndex lists, for a pass of the rescue, by group key (unitKeyID), the GPUs that have held
// a unit of that key since the pass began, by position in the packing's GPUs, ascending. A pass
// asks for the placed units of a key (placedOf) once per shared candidate of every short
// tenant; reading every GPU of the key's board for them made the rescue of a short fleet
// quadratic in its size. The lists only grow: a GPU that no longer holds a unit of the key stays
// listed and placedOf reads what it holds now. A GPU takes a unit during the pass only where
// packBucket places whole units, fillMIG lays out MIG instances and restoreHeld puts saved GPUs
// back, and each of those notes the GPU (notePlaced).
type placedIndex struct {
	of  []*gpuPlan // planner.gpus when the pass began
	pos map[*gpuPlan]int32
	by  map[int32][]int32
}

// placedOfCheck, when set (tests), is called with each answer placedOf reads off the index.
var placedOfCheck func(p *planner, k groupKey, got []*unit)

// newPlacedIndex lists the GPUs of each key's units as the packing's GPUs hold them now.
func (p *planner) newPlacedIndex() *placedIndex {
	x := &placedIndex{of: p.gpus, pos: make(map[*gpuPlan]int32, len(p.gpus)), by: map[int32][]int32{}}
	for i, g := range p.gpus {
		x.pos[g] = int32(i)
		x.note(p, g, int32(i))
	}
	return x
}

// note lists the GPU at position i under the keys of its units.
func (x *placedIndex) note(p *planner, g *gpuPlan, i int32) {
	for u := range g.eachUnit {
		id := p.unitKeyID(u)
		l := x.by[id]
		if j, found := slices.BinarySearch(l, i); !found {
			x.by[id] = slices.Insert(l, j, i)
		}
	}
}

// notePlaced lists g under the keys of the units it now holds, during a pass of the rescue. A
// GPU the index does not know (another slice of GPUs) ends the index's use for the pass.
func (p *planner) notePlaced(g *gpuPlan) {
	x := p.pidx
	if x == nil {
		return
	}
	i, ok := x.pos[g]
	if !ok || !sameSlice(x.of, p.gpus) {
		p.pidx = nil
		return
	}
	x.note(p, g, i)
}
