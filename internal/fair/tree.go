package fair

import (
	"math"
	"sort"
)

// tree is the tenant hierarchy with, per node below the root, its usage vector and weighted
// dominant share (the root's are never compared, so they are not kept).
// Node 0 is the root; leaves are tenants. Every interior node keeps two heaps of its children:
// act, a min-heap of the children that still want tasks (it drives progressive filling), and pre,
// a max-heap of the children that hold preemptible tasks (it drives victim search).
type tree struct {
	dims   []int   // dimensions that enter shares
	capT   []int64 // share denominators: the whole pool
	parent []int32
	name   []string // tie-break name among siblings
	full   []string // full path of interior nodes
	weight []float64
	kids   [][]int32
	tenant []int32 // node → tenant index, -1 for interior nodes
	usage  []int64 // node-major, one per share dimension (dims) per node
	delta  []int64 // add's scratch: one amount per share dimension
	// hist is the part of usage that is usage history (history.go), same layout; nil without.
	hist  []int64
	share []float64
	inv   []float64 // 1/capT per share dimension
	invW  []float64 // 1/weight per node

	actOrd, preOrd nodeOrder
	act            [][]hent
	pre            [][]int32
	actPos, prePos []int32
	preCnt         []int32 // preemptible leaves in the subtree
	leafPre        []bool
	// minElig is, in Unix nanoseconds, the earliest time some preemptible task in the subtree may
	// be preempted (exact at leaves: the oldest task's; noElig when there is none). Victim
	// searches skip subtrees whose tasks are all still inside their minimum runtime.
	minElig []int64
	// preEager keeps pre heaps ordered on every change; when false (bulk filling) they are marked
	// stale and rebuilt once by ensurePre.
	preEager, preStale bool

	// state is each leaf's place in filling; class its task class (tenants with identical task
	// vectors share one); blockedIn counts, per interior node and class, the blocked leaves below.
	state     []leafState
	class     []int32
	blockedIn classCounts
	ci        classIndex

	// demLeaves counts the leaves below a node that want a steady task (demand and cap above
	// zero); demW sums the weights of a node's children whose demLeaves is positive. They give each
	// tenant its demand-aware entitlement: the product over its path of weight / demW(parent).
	demLeaves []int32
	demW      []float64
	leafDem   []bool
	// deserved is each node's guaranteed part (a dominant share); demD sums it over a node's
	// children whose demLeaves is positive.
	deserved []float64
	demD     []float64
	// limit is a group's cap on its steady use as a dominant share of the pool (0: none); limIn
	// counts the leaves below parked at a limit.
	limit    []float64
	limIn    []int32
	hasLimit bool
	// surCnt counts the leaves below a node holding more steady tasks than they keep from a floor
	// claim (reservation and floor), so that floor claims skip groups with nothing to give.
	// demStale says an entitlement changed since the marks were set: they are set again, all at
	// once, before the next floor claim.
	surCnt []int32
	// surIn counts the same per class, so that a claim skips groups where no tenant above what
	// it keeps runs a task of a kind that would make room.
	surIn    classCounts
	leafSur  []bool
	demStale bool
	// demDirty lists the nodes whose demW changed since the marks were last set: the marks of
	// the leaves below them are set again. demEpoch counts those changes (it keys cached floors).
	demDirty []int32
	demEpoch uint64
}

func (t *tree) reset(dims []int, capT []int64, nodes int) {
	inv := make([]float64, len(dims))
	for i, j := range dims {
		inv[i] = 1 / float64(capT[j]) // +Inf for a zero capacity: any use of it is an infinite share
	}
	*t = tree{dims: dims, capT: capT, inv: inv, preEager: true, delta: make([]int64, len(dims)),
		parent: make([]int32, 0, nodes), name: make([]string, 0, nodes), full: make([]string, 0, nodes),
		weight: make([]float64, 0, nodes), kids: make([][]int32, 0, nodes), tenant: make([]int32, 0, nodes),
		class: make([]int32, 0, nodes)}
	t.addNode(-1, "", "", 1, -1)
}

// addNode appends a node; parents must be added before their children.
func (t *tree) addNode(parent int32, name, full string, w float64, tenant int32) int32 {
	id := int32(len(t.parent))
	t.parent = append(t.parent, parent)
	t.name = append(t.name, name)
	t.full = append(t.full, full)
	t.weight = append(t.weight, w)
	t.kids = append(t.kids, nil)
	t.tenant = append(t.tenant, tenant)
	t.class = append(t.class, -1)
	if parent >= 0 {
		t.kids[parent] = append(t.kids[parent], id)
	}
	return id
}

// finish sizes the per-node arrays once all nodes exist.
func (t *tree) finish() {
	n := len(t.parent)
	t.usage = make([]int64, n*len(t.dims))
	t.share = make([]float64, n)
	t.invW = make([]float64, n)
	for i, w := range t.weight {
		t.invW[i] = 1 / w
	}
	t.act = make([][]hent, n)
	t.pre = make([][]int32, n)
	// Every heap holds at most its node's children: cut them all from two blocks.
	actBuf, preBuf := make([]hent, n), make([]int32, n)
	for p, ks := range t.kids {
		k := len(ks)
		t.act[p], actBuf = actBuf[:0:k], actBuf[k:]
		t.pre[p], preBuf = preBuf[:0:k], preBuf[k:]
	}
	t.actPos = make([]int32, n)
	t.prePos = make([]int32, n)
	t.preCnt = make([]int32, n)
	t.leafPre = make([]bool, n)
	t.minElig = make([]int64, n)
	t.state = make([]leafState, n)
	t.demLeaves = make([]int32, n)
	t.demW = make([]float64, n)
	t.leafDem = make([]bool, n)
	t.deserved = make([]float64, n)
	t.demD = make([]float64, n)
	t.limit = make([]float64, n)
	t.limIn = make([]int32, n)
	t.surCnt = make([]int32, n)
	t.leafSur = make([]bool, n)
	t.demStale = true
	for i := range t.actPos {
		t.minElig[i] = noElig
		t.actPos[i], t.prePos[i] = -1, -1
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(i, j int) bool { return t.name[order[i]] < t.name[order[j]] })
	rank := make([]int32, n)
	for r, node := range order {
		rank[node] = int32(r)
	}
	t.actOrd = nodeOrder{share: t.share, rank: rank}
	t.preOrd = nodeOrder{share: t.share, rank: rank, max: true}
}

func (t *tree) u(n int32) []int64 {
	k := len(t.dims)
	return t.usage[int(n)*k : int(n+1)*k]
}
func (t *tree) isLeaf(n int32) bool { return t.tenant[n] >= 0 }
func (t *tree) actH() actHeap       { return actHeap{pos: t.actPos} }
func (t *tree) preH() nodeHeap      { return nodeHeap{o: &t.preOrd, pos: t.prePos} }
func (t *tree) rootActive() bool    { return len(t.act[0]) > 0 }

func (t *tree) recalc(n int32) {
	t.share[n] = dominantInv(t.u(n), t.inv) * t.invW[n]
}

// shareDelta is node n's weighted share if its usage changed by k1·d1 + k2·d2.
func (t *tree) shareDelta(n int32, d1 []int64, k1 int64, d2 []int64, k2 int64) float64 {
	return dominantDelta(t.u(n), t.inv, t.dims, d1, k1, d2, k2) * t.invW[n]
}

// addUse adds k·d (a full vector) to node n's usage and recomputes its share, in one pass.
func (t *tree) addUse(n int32, d []int64, k int64) {
	u := t.u(n)
	var s float64
	for i, j := range t.dims {
		x := u[i] + k*d[j]
		u[i] = x
		if x == 0 {
			continue
		}
		if f := float64(x) * t.inv[i]; f > s {
			s = f
		}
	}
	t.share[n] = s * t.invW[n]
}

// addDelta adds delta (one amount per share dimension) to node n's usage and recomputes its
// share, as addUse does.
func (t *tree) addDelta(n int32, delta []int64) {
	k := len(t.dims)
	u := t.usage[int(n)*k : int(n+1)*k]
	inv := t.inv[:len(u)]
	delta = delta[:len(u)]
	var s float64
	for i, x := range u {
		x += delta[i]
		u[i] = x
		if x == 0 {
			continue
		}
		if f := float64(x) * inv[i]; f > s {
			s = f
		}
	}
	t.share[n] = s * t.invW[n]
}

// add changes a leaf's usage by k·d and updates every ancestor below the root (whose share is
// never compared) and its heap positions.
func (t *tree) add(leaf int32, d []int64, k int64) {
	// The change is the same at every level: k·d on the share dimensions, computed once.
	delta := t.delta[:len(t.dims)]
	for i, j := range t.dims {
		delta[i] = k * d[j]
	}
	for n := leaf; n != 0; n = t.parent[n] {
		t.addDelta(n, delta)
		p := t.parent[n]
		// Task vectors are never negative: k > 0 can only raise the share (down in the min-heap,
		// up in the max-heap), k < 0 only lower it.
		if i := t.actPos[n]; i >= 0 {
			t.act[p][i].share = t.share[n]
			if k > 0 && n == leaf {
				t.actH().sink(t.act[p], i)
			} else if k > 0 {
				t.actH().down(t.act[p], i)
			} else {
				t.actH().up(t.act[p], i)
			}
		}
		if !t.preEager {
			t.preStale = true
		} else if i := t.prePos[n]; i >= 0 {
			if k > 0 {
				t.preH().up(t.pre[p], i)
			} else {
				t.preH().down(t.pre[p], i)
			}
		}
	}
}

// activate puts a leaf (and any ancestor that had no active child) into the act heaps.
func (t *tree) activate(leaf int32) {
	if t.actPos[leaf] >= 0 {
		return
	}
	for n := leaf; n != 0; {
		p := t.parent[n]
		wasEmpty := len(t.act[p]) == 0
		t.actH().push(&t.act[p], hent{share: t.share[n], rank: t.actOrd.rank[n], node: n})
		if !wasEmpty || p == 0 {
			return
		}
		n = p
	}
}

// deactivate takes a leaf (and any ancestor left without an active child) out of the act heaps.
func (t *tree) deactivate(leaf int32) {
	if t.actPos[leaf] < 0 {
		return
	}
	for n := leaf; n != 0; {
		p := t.parent[n]
		t.actH().remove(&t.act[p], n)
		if len(t.act[p]) > 0 || p == 0 {
			return
		}
		n = p
	}
}

// setPre marks a leaf as holding (or not) tasks that a preemption may take.
func (t *tree) setPre(leaf int32, on bool) {
	if t.leafPre[leaf] == on {
		return
	}
	t.leafPre[leaf] = on
	delta := int32(-1)
	if on {
		delta = 1
	}
	for n := leaf; n >= 0; n = t.parent[n] {
		old := t.preCnt[n]
		t.preCnt[n] += delta
		if n == 0 {
			break
		}
		if !t.preEager {
			t.preStale = true
			continue
		}
		p := t.parent[n]
		switch {
		case old == 0 && t.preCnt[n] > 0:
			t.preH().push(&t.pre[p], n)
		case old > 0 && t.preCnt[n] == 0:
			t.preH().remove(&t.pre[p], n)
		}
	}
}

const noElig = math.MaxInt64

// setElig sets a leaf's earliest preemption time and fixes its ancestors: a smaller value
// propagates in O(depth); a larger one rescans the children of the ancestors whose minimum it was.
func (t *tree) setElig(leaf int32, v int64) {
	oldV := t.minElig[leaf]
	if oldV == v {
		return
	}
	t.minElig[leaf] = v
	newV := v
	for n := t.parent[leaf]; n >= 0; n = t.parent[n] {
		cur := t.minElig[n]
		var nv int64
		switch {
		case newV < cur:
			nv = newV
		case oldV == cur && newV > oldV:
			nv = noElig
			for _, c := range t.kids[n] {
				nv = min(nv, t.minElig[c])
			}
		default:
			return
		}
		if nv == cur {
			return
		}
		t.minElig[n] = nv
		oldV, newV = cur, nv
	}
}

// recalcElig recomputes every interior node's minElig from its children (children have larger
// ids than their parents).
func (t *tree) recalcElig() {
	for n := len(t.parent) - 1; n >= 0; n-- {
		if t.isLeaf(int32(n)) {
			continue
		}
		v := int64(noElig)
		for _, c := range t.kids[n] {
			v = min(v, t.minElig[c])
		}
		t.minElig[n] = v
	}
}

// ensurePre rebuilds stale pre heaps and makes them eager again.
func (t *tree) ensurePre() {
	t.preEager = true
	if !t.preStale {
		return
	}
	t.preStale = false
	for i := range t.prePos {
		t.prePos[i] = -1
	}
	for p := range t.kids {
		h := t.pre[p][:0]
		for _, c := range t.kids[p] {
			if t.preCnt[c] > 0 {
				h = append(h, c)
			}
		}
		t.pre[p] = h
		t.preH().heapify(h)
	}
}

// pick descends from the root to the leaf that progressive filling serves next.
func (t *tree) pick() int32 {
	n := int32(0)
	for !t.isLeaf(n) {
		n = t.pickChild(n)
	}
	return n
}

// pickChild returns the active child of p that sorts first: the lowest weighted share, ties
// (within the relative tolerance) to the lexicographically smaller name.
func (t *tree) pickChild(p int32) int32 { return t.act[p][0].node }

func classKey(n, c int32) uint64 { return uint64(uint32(n))<<32 | uint64(uint32(c)) }

// markBlocked counts a leaf in (or out of) the blocked leaves of its class along its path.
func (t *tree) markBlocked(leaf int32, on bool) {
	d := int32(1)
	if !on {
		d = -1
	}
	t.blockedIn.bump(t.class[leaf], t.parent, leaf, d)
}

// classCounts is a count per (node, class): a dense table when it is small, a map otherwise.
type classCounts struct {
	k     int
	dense []int32
	m     map[uint64]int32
}

func (cc *classCounts) init(nodes, k int) {
	*cc = classCounts{k: k}
	if nodes*k <= 1<<22 {
		cc.dense = make([]int32, nodes*k)
	} else {
		cc.m = map[uint64]int32{}
	}
}

func (cc *classCounts) get(n, c int32) int32 {
	if cc.dense != nil {
		return cc.dense[int(n)*cc.k+int(c)]
	}
	return cc.m[classKey(n, c)]
}

// bump adds d to the count of class c at every ancestor of leaf.
func (cc *classCounts) bump(c int32, parent []int32, leaf, d int32) {
	if c < 0 {
		return
	}
	for n := parent[leaf]; n >= 0; n = parent[n] {
		if cc.dense != nil {
			cc.dense[int(n)*cc.k+int(c)] += d
			continue
		}
		k := classKey(n, c)
		if v := cc.m[k] + d; v == 0 {
			delete(cc.m, k)
		} else {
			cc.m[k] = v
		}
	}
}

// limitLeaf parks a waiting leaf at a group's limit.
func (t *tree) limitLeaf(leaf int32) {
	t.deactivate(leaf)
	t.state[leaf] = limited
	for n := t.parent[leaf]; n >= 0; n = t.parent[n] {
		t.limIn[n]++
	}
}

// unlimit takes a leaf off the limit (it becomes idle; refreshSteady decides again).
func (t *tree) unlimit(leaf int32) {
	t.state[leaf] = idle
	for n := t.parent[leaf]; n >= 0; n = t.parent[n] {
		t.limIn[n]--
	}
}

// setWant moves a leaf between idle and waiting; a blocked leaf that stops wanting is forgotten.
func (t *tree) setWant(leaf int32, want bool) {
	switch st := t.state[leaf]; {
	case !want && st == limited:
		t.unlimit(leaf)
	case !want && st == waiting:
		t.deactivate(leaf)
		t.state[leaf] = idle
	case !want && st == blocked:
		t.unblockLeaf(leaf)
		t.state[leaf] = idle
	case want && st == idle:
		t.activate(leaf)
		t.state[leaf] = waiting
	}
}

// path writes the nodes from the root down to n into buf.
func (t *tree) path(n int32, buf []int32) []int32 {
	buf = buf[:0]
	for ; n >= 0; n = t.parent[n] {
		buf = append(buf, n)
	}
	for i, j := 0, len(buf)-1; i < j; i, j = i+1, j-1 {
		buf[i], buf[j] = buf[j], buf[i]
	}
	return buf
}

// setDem marks a leaf as wanting (or not) a steady task and keeps demLeaves and demW along its
// path. A parent's demW is summed again from its children when one of them changes, so that an
// incremental update gives the same value as a rebuild (no drift from adding and subtracting).
func (t *tree) setDem(leaf int32, on bool) {
	if t.leafDem[leaf] == on {
		return
	}
	t.leafDem[leaf] = on
	d := int32(-1)
	if on {
		d = 1
	}
	for n := leaf; n > 0; n = t.parent[n] {
		old := t.demLeaves[n]
		t.demLeaves[n] += d
		if (old == 0) != (t.demLeaves[n] == 0) {
			t.sumDemW(t.parent[n])
			t.demEpoch++
			switch {
			case t.demStale:
			case len(t.demDirty) >= maxDemDirty:
				// Many changes at once (a batch of demands): one pass over every leaf is
				// cheaper than many subtree walks, and the list stays bounded.
				t.demStale, t.demDirty = true, t.demDirty[:0]
			default:
				t.demDirty = append(t.demDirty, t.parent[n])
			}
		}
	}
	t.demLeaves[0] += d
}

// maxDemDirty bounds the list of changed entitlement nodes kept between two claims.
const maxDemDirty = 32

// leavesUnder appends the leaves of n's subtree to buf.
func (t *tree) leavesUnder(n int32, buf []int32) []int32 {
	if t.isLeaf(n) {
		return append(buf, n)
	}
	for _, c := range t.kids[n] {
		buf = t.leavesUnder(c, buf)
	}
	return buf
}

// initDem sets every leaf's mark at once (all marks must be off) and sums the counts and weights
// bottom-up (children have larger ids than their parents).
func (t *tree) initDem(on func(leaf int32) bool) {
	for n := len(t.parent) - 1; n > 0; n-- {
		if t.isLeaf(int32(n)) && on(int32(n)) {
			t.leafDem[n] = true
			t.demLeaves[n]++
		}
		t.demLeaves[t.parent[n]] += t.demLeaves[n]
	}
	for p := range t.kids {
		t.sumDemW(int32(p))
	}
}

// sumDemW recomputes demW and demD of p from its children, in child order.
func (t *tree) sumDemW(p int32) {
	var s, d float64
	for _, c := range t.kids[p] {
		if t.demLeaves[c] > 0 {
			s += t.weight[c]
			d += t.deserved[c]
		}
	}
	t.demW[p], t.demD[p] = s, d
}

// entitlement is the part of the pool a leaf is entitled to when every tenant that wants a task
// gets its part at every level, from the root down: a node's part is its deserved part plus its
// weight's share of what its parent's part leaves after the deserved parts of the siblings that
// want tasks; when those deserved parts reach the parent's, each gets its proportion of the
// parent's part. With no deserved parts this is the product over the path of weight / demW.
// It is 0 for a leaf that wants nothing.
func (t *tree) entitlement(leaf int32) float64 {
	if !t.leafDem[leaf] {
		return 0
	}
	var buf [16]int32
	path := buf[:0]
	for n := leaf; n != 0; n = t.parent[n] {
		path = append(path, n)
	}
	e := 1.0
	for i := len(path) - 1; i >= 0; i-- {
		n := path[i]
		p := t.parent[n]
		if ds := t.demD[p]; ds > 0 && ds >= e {
			e *= t.deserved[n] / ds
		} else {
			e = t.deserved[n] + (e-ds)*t.weight[n]/t.demW[p]
		}
		if l := t.limit[n]; l > 0 && e > l {
			e = l // a floor never asks for more than a limit allows
		}
	}
	return e
}

// setSur marks a leaf as holding (or not) tasks above what a floor claim leaves it.
func (t *tree) setSur(leaf int32, on bool) {
	if t.leafSur[leaf] == on {
		return
	}
	t.leafSur[leaf] = on
	d := int32(-1)
	if on {
		d = 1
	}
	for n := leaf; n >= 0; n = t.parent[n] {
		t.surCnt[n] += d
	}
	t.surIn.bump(t.class[leaf], t.parent, leaf, d)
}
