package fair

import (
	"math"
	"slices"
	"time"
)

// descIter yields the children of one node that hold preemptible tasks, in victim order:
// highest weighted share first, ties (within the tolerance) to the larger name. It walks the
// node's max-heap best-first, so the first k candidates cost O(k log k), not a sort of every
// child. The heap must not change while an iterator walks it.
type descIter struct {
	t        *tree
	h        []int32
	front    []fent // positions in h, with their node's share and rank: itself a max-heap
	bound    float64
	useBound bool
	skip     int32
}

// fent is a frontier entry: a position in the walked heap, with the share and name rank of the
// node there held inline so that sifting compares adjacent entries.
type fent struct {
	share float64
	pos   int32
	rank  int32
}

// fentBefore is nodeOrder.before in max order (preOrd) on frontier entries: higher share first,
// shares within the tie tolerance by the larger name.
func fentBefore(a, b fent) bool {
	if a.share < b.share {
		if d := b.share - a.share; d > tieTolerance*b.share || d > math.MaxFloat64 {
			return false
		}
	} else if a.share > b.share {
		if d := a.share - b.share; d > tieTolerance*a.share || d > math.MaxFloat64 {
			return true
		}
	}
	return a.rank >= b.rank
}

func (it *descIter) entry(pos int32) fent {
	n := it.h[pos]
	return fent{share: it.t.share[n], pos: pos, rank: it.t.preOrd.rank[n]}
}

func (a *Allocator) iter(depth int) *descIter {
	for len(a.iters) <= depth {
		a.iters = append(a.iters, &descIter{})
	}
	return a.iters[depth]
}

// start walks the children of p, leaving out skip.
func (it *descIter) start(t *tree, p, skip int32) {
	it.t, it.h, it.skip = t, t.pre[p], skip
	it.front, it.useBound = it.front[:0], false
	if len(it.h) > 0 {
		it.front = append(it.front, it.entry(0))
	}
}

// withBound yields only children whose share exceeds b by more than the tie tolerance.
func (it *descIter) withBound(b float64) { it.bound, it.useBound = b, true }

func (it *descIter) next() int32 {
	for {
		c := it.popFront()
		if c < 0 {
			return -1
		}
		if it.useBound && !lessTol(it.bound, it.t.share[c]) {
			if it.t.share[c] <= it.bound {
				return -1 // the rest share no more than this one
			}
			continue
		}
		if c != it.skip {
			return c
		}
	}
}

// popFront takes the best heap position off the frontier and adds its heap children.
func (it *descIter) popFront() int32 {
	if len(it.front) == 0 {
		return -1
	}
	top := it.front[0].pos
	last := len(it.front) - 1
	it.front[0] = it.front[last]
	it.front = it.front[:last]
	it.siftDown(0)
	for _, c := range [2]int32{2*top + 1, 2*top + 2} {
		if int(c) < len(it.h) {
			it.front = append(it.front, it.entry(c))
			it.siftUp(len(it.front) - 1)
		}
	}
	return it.h[top]
}

// siftUp and siftDown move one entry through a hole (see actHeap.up).
func (it *descIter) siftUp(i int) {
	f, e := it.front, it.front[i]
	for i > 0 {
		p := (i - 1) / 2
		if !fentBefore(e, f[p]) {
			break
		}
		f[i] = f[p]
		i = p
	}
	f[i] = e
}

func (it *descIter) siftDown(i int) {
	f := it.front
	n := len(f)
	if n == 0 {
		return
	}
	e := f[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && fentBefore(f[r], f[l]) {
			c = r
		}
		if !fentBefore(f[c], e) {
			break
		}
		f[i] = f[c]
		i = c
	}
	f[i] = e
}

// vsMode is what a victim search looks for.
type vsMode uint8

const (
	vsClaim   vsMode = iota // one tenant whose tasks a share claim may take
	vsReserve               // tenants above their reservation, accumulated until the room is found
	vsEvict                 // a steady task on a resource that lost capacity
	vsReclaim               // a lease on a resource that is short
)

type planned struct {
	t *tenantRec
	k int
}

// victimSearch carries one search's parameters, so that the descent needs no closures.
type victimSearch struct {
	mode   vsMode
	claim  *tenantRec
	path   []int32 // the claimant's path from the root
	level  int     // index in path of the lowest common ancestor being tried
	top    int32   // the child of that ancestor on the victim side
	bound  float64 // claimant side's share after the move
	before float64 // claimant side's share before the move
	floor  bool    // vsReserve: a floor claim (victims keep their floor too)
	after  float64 // victim side's share after the move
	k      int64
	// retry is the earliest time a move found here passes every check but minimum runtime.
	retry time.Time
	// pruned is the earliest time a group skipped because all its tasks were inside their
	// minimum runtime may hold a victim (not checked further: a retry is scheduled then).
	pruned time.Time
	need   []int64 // reclaim: the task that needs room (nil: just fit the capacity)
	strict bool    // evict and reclaim: first look only for tasks that help on every short resource
	short  []int64 // reservation: remaining shortfall per resource
	// helpful are the classes whose tasks would make room for the claimant (nil: any may).
	helpful []int32
	hbuf    []int32
	plan    []planned
}

// holdsSurplus reports whether some leaf under n holds tasks above what it keeps, of a class
// that uses a resource the floor claim is short of.
func (a *Allocator) holdsSurplus(tr *tree, n int32) bool {
	if tr.isLeaf(n) {
		return tr.leafSur[n] && slices.Contains(a.vs.helpful, tr.class[n])
	}
	for _, c := range a.vs.helpful {
		if tr.surIn.get(n, c) > 0 {
			return true
		}
	}
	return false
}

func (vs *victimSearch) noteRetry(at time.Time) {
	if vs.retry.IsZero() || at.Before(vs.retry) {
		vs.retry = at
	}
}

// descend visits the leaves under n in victim order until one is accepted.
func (a *Allocator) descend(tr *tree, n int32, depth int) int32 {
	if (a.vs.mode == vsClaim || a.vs.mode == vsReserve && a.vs.floor) &&
		(tr.surCnt[n] == 0 || a.vs.helpful != nil && !a.holdsSurplus(tr, n)) {
		return -1 // nobody below holds more than it keeps, of a kind that would help
	}
	if tr.isLeaf(n) {
		if a.visit(tr, n) {
			return n
		}
		return -1
	}
	if a.vs.mode <= vsReserve {
		if e := tr.minElig[n]; e > a.now.UnixNano() {
			if e != noElig && (a.vs.pruned.IsZero() || e < a.vs.pruned.UnixNano()) {
				a.vs.pruned = time.Unix(0, e).UTC()
			}
			return -1 // every task below is inside its minimum runtime
		}
	}
	it := a.iter(depth)
	it.start(tr, n, -1)
	for c := it.next(); c >= 0; c = it.next() {
		if r := a.descend(tr, c, depth+1); r >= 0 {
			return r
		}
	}
	return -1
}

func (a *Allocator) visit(tr *tree, leaf int32) bool {
	t := a.tenants[tr.tenant[leaf]]
	switch a.vs.mode {
	case vsClaim:
		return a.visitClaim(t)
	case vsReserve:
		return a.visitReserve(t)
	case vsEvict:
		return helps(a.sUsed, a.capS, nil, t.d, a.vs.strict)
	default:
		return len(t.leases) > 0 && helps(a.tUsed, a.capT, a.vs.need, t.d, a.vs.strict)
	}
}

// helps reports whether d has a positive amount on some resource where used + need > c, or,
// when all is set, on every such resource. Searches try all first: on slices, taking a task of
// another kind frees SMs and memory but not the kind that is short.
func helps(used, c, need, d []int64, all bool) bool {
	any := false
	for j, x := range d {
		n := int64(0)
		if need != nil {
			n = need[j]
		}
		if used[j]+n > c[j] {
			if x > 0 {
				any = true
			} else if all {
				return false
			}
		}
	}
	return any
}

// visitClaim checks the share rule for taking tasks of v for the claimant: the fewest of v's
// tasks that make room; v keeps its reservation; the victim side's share after the move stays
// above the claimant side's (beyond the tie tolerance); no common ancestor's share falls; and the
// tasks are past their minimum runtime (otherwise the earliest time they will be is kept).
func (a *Allocator) visitClaim(v *tenantRec) bool {
	vs, c := &a.vs, a.vs.claim
	if v == c {
		return false
	}
	k := tasksToCover(a.sUsed, a.capS, c.d, v.d)
	if k <= 0 || k > int64(len(v.steady)-a.keep(v)) {
		return false
	}
	after := a.st.shareDelta(vs.top, v.d, -k, nil, 0)
	if !shareRule(vs.before, vs.bound, after, a.st.share[vs.top]) {
		return false
	}
	for j := 1; j <= vs.level; j++ {
		n := vs.path[j]
		if a.st.shareDelta(n, c.d, 1, v.d, -k) < a.st.share[n] {
			return false
		}
	}
	if e := eligible(v, a.now); int64(e) < k {
		vs.noteRetry(eligibleAt(v, v.steady[k-1]))
		return false
	}
	vs.k, vs.after = k, after
	return true
}

// visitReserve adds v's newest eligible tasks above its reservation to the plan, as many as the
// shortfall needs; it accepts once nothing is short.
func (a *Allocator) visitReserve(v *tenantRec) bool {
	vs := &a.vs
	keep := v.cfg.Reservation
	if vs.floor {
		keep = a.keep(v)
	}
	avail := len(v.steady) - keep
	if v == vs.claim || avail <= 0 {
		return false
	}
	var need int64
	for j, s := range vs.short {
		if s > 0 && v.d[j] > 0 {
			need = max(need, (s+v.d[j]-1)/v.d[j])
		}
	}
	if need == 0 {
		return false
	}
	want := min(int64(avail), need)
	take := min(int64(eligible(v, a.now)), want)
	if take < want {
		vs.noteRetry(eligibleAt(v, v.steady[take]))
	}
	if take == 0 {
		return false
	}
	vs.plan = append(vs.plan, planned{t: v, k: int(take)})
	covered := true
	for j := range vs.short {
		vs.short[j] -= take * v.d[j]
		if vs.short[j] > 0 {
			covered = false
		}
	}
	return covered
}

// preemptNewestEligible stops v's k newest tasks among those past their minimum runtime.
func (a *Allocator) preemptNewestEligible(v *tenantRec, k int, it Item) {
	e := eligible(v, a.now)
	if v.stoppedStamp != a.stamp {
		v.stoppedStamp, v.stopped = a.stamp, v.stopped[:0]
	}
	if v.classN == nil {
		for i := e - 1; i >= e-k; i-- {
			it.Task = v.steady[i].seq
			v.stopped = append(v.stopped, stoppedRec{rec: v.steady[i], out: len(a.out)})
			a.emit(v, it)
		}
		v.steady = append(v.steady[:e-k], v.steady[e:]...)
	} else {
		// The least important of the eligible tasks go first.
		for range k {
			i := v.leastImportant(e)
			r := v.steady[i]
			it.Task, it.Class = r.seq, v.className(r.class)
			v.stopped = append(v.stopped, stoppedRec{rec: r, out: len(a.out)})
			a.emit(v, it)
			v.steady = slices.Delete(v.steady, i, i+1)
			v.dropClass(r)
			e--
		}
	}
	a.moves++
	a.steadyDelta(v, -int64(k))
	a.totalDelta(v, -int64(k))
	a.refreshSteady(v)
	a.refreshLease(v)
}

// shareRule is the share claim's test at the level where the paths part: x and y are the
// claimant side's and the victim side's shares before the move, x1 and y1 after it (x < x1 and
// y1 < y always). The move is allowed when the claimant side does not end above the victim side
// (x1 ≤ y1 within the tolerance) and both new shares lie strictly inside (x, y) beyond the
// tolerance: the pair moves strictly closer, which is what makes the sorted share vector rise
// (docs/fairness.md §5) and keeps tiny differences from churning.
func shareRule(x, x1, y1, y float64) bool {
	return !lessTol(y1, x1) && lessTol(x, y1) && lessTol(x1, y)
}

// trimPlan drops from a covered plan (every shortfall ≤ 0) the tasks it does not need, the
// victims with the lowest share first: no victim loses a task that the claimant then leaves
// free, so no victim can be granted its task back in the same step.
func (a *Allocator) trimPlan() {
	vs := &a.vs
	for i := len(vs.plan) - 1; i >= 0; i-- {
		p := &vs.plan[i]
		for p.k > 0 && spare(vs.short, p.t.d) {
			p.k--
			addScaled(vs.short, p.t.d, 1)
		}
	}
}

// spare reports whether short + d stays ≤ 0 everywhere.
func spare(short, d []int64) bool {
	for j, x := range d {
		if short[j]+x > 0 {
			return false
		}
	}
	return true
}
