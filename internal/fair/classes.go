package fair

import "slices"

// Blocked tenants and how they wake up.
//
// Tenants whose task vectors are identical form a class. When a tenant's next task does not fit,
// its leaf is blocked: out of the act heaps, counted in its class. A class with blocked leaves is
// parked under the first resource it lacks, in a per-resource min-heap keyed by the amount its
// task needs there. When room grows, only classes that now fit are looked at, and for each such
// class only its first blocked leaf in pick order is woken (found by descending through the
// nodes that hold a blocked leaf of that class). That is enough for exact progressive filling:
// at every node the pick goes to the lowest child holding any candidate, and if that child holds
// a blocked leaf of class c, it is also the lowest child holding one of class c. So a release
// costs a descent per class that fits, not a pass over every tenant waiting for that kind of slice.

type classIndex struct {
	d       [][]int64 // task vector of each class
	mask    []uint64  // resources each class uses (when there are at most 64)
	masks   []uint64  // the distinct masks, and the classes with each
	byMask  [][]int32
	blocked []int32  // blocked leaves per class
	state   []uint8  // classNone, classParked or classFitting
	gen     []uint32 // invalidates parked entries
	park    []entryHeap[parkEntry]
	fitting []int32
	seen    []uint32 // round stamp per class, to skip duplicate fitting entries
	round   uint32
}

const (
	classNone uint8 = iota
	classParked
	classFitting
)

type parkEntry struct {
	need  int64
	class int32
	gen   uint32
}

func parkLess(a, b parkEntry) bool {
	if a.need != b.need {
		return a.need < b.need
	}
	return a.class < b.class
}

func (ci *classIndex) reset(d [][]int64, m int) {
	n := len(d)
	*ci = classIndex{d: d, blocked: make([]int32, n), state: make([]uint8, n), gen: make([]uint32, n),
		park: make([]entryHeap[parkEntry], m), fitting: ci.fitting[:0], seen: make([]uint32, n)}
	for j := range ci.park {
		ci.park[j].less = parkLess
	}
	if m > 64 {
		return
	}
	ci.mask = make([]uint64, n)
	for c, v := range d {
		for j, x := range v {
			if x > 0 {
				ci.mask[c] |= 1 << j
			}
		}
		i := slices.Index(ci.masks, ci.mask[c])
		if i < 0 {
			i = len(ci.masks)
			ci.masks, ci.byMask = append(ci.masks, ci.mask[c]), append(ci.byMask, nil)
		}
		ci.byMask[i] = append(ci.byMask[i], int32(c))
	}
}

// helpful lists the classes that use every resource in short (nil when it cannot tell, or when
// so many qualify that pruning by class would not pay).
func (ci *classIndex) helpful(short uint64, buf []int32) []int32 {
	if ci.mask == nil {
		return nil
	}
	buf = buf[:0]
	for i, m := range ci.masks {
		if m&short == short {
			buf = append(buf, ci.byMask[i]...)
			if len(buf) > 16 {
				return nil
			}
		}
	}
	return buf
}

// helpfulAny lists the classes that use some resource in short (nil when it cannot tell, or
// when so many qualify that pruning by class would not pay).
func (ci *classIndex) helpfulAny(short uint64, buf []int32) []int32 {
	if ci.mask == nil || short == 0 {
		return nil
	}
	buf = buf[:0]
	for i, m := range ci.masks {
		if m&short != 0 {
			buf = append(buf, ci.byMask[i]...)
			if len(buf) > 16 {
				return nil
			}
		}
	}
	return buf
}

// park files class c under the first resource where used + d > c.
func (ci *classIndex) parkClass(c int32, used, capv []int64) {
	j := firstShort(used, capv, ci.d[c])
	if j < 0 {
		ci.state[c] = classFitting
		ci.fitting = append(ci.fitting, c)
		return
	}
	ci.gen[c]++
	ci.state[c] = classParked
	ci.park[j].push(parkEntry{need: ci.d[c][j], class: c, gen: ci.gen[c]})
}

// block takes a waiting leaf out of the act heaps and counts it blocked.
func (t *tree) block(leaf int32, used, capv []int64) {
	t.deactivate(leaf)
	t.state[leaf] = blocked
	t.markBlocked(leaf, true)
	c := t.class[leaf]
	ci := &t.ci
	ci.blocked[c]++
	if ci.state[c] != classParked {
		ci.state[c] = classNone // a fitting entry, if any, is dropped when the list is next read
		ci.parkClass(c, used, capv)
	}
}

// unblockLeaf forgets a blocked leaf (it was woken, or wants nothing more).
func (t *tree) unblockLeaf(leaf int32) {
	t.markBlocked(leaf, false)
	c := t.class[leaf]
	if t.ci.blocked[c]--; t.ci.blocked[c] == 0 {
		t.ci.state[c] = classNone
		t.ci.gen[c]++
	}
}

// unpark moves parked classes whose parked resource now has room onto the fitting list.
func (t *tree) unpark(used, capv []int64) {
	ci := &t.ci
	for j := range ci.park {
		h := &ci.park[j]
		for h.len() > 0 && h.top().need <= capv[j]-used[j] {
			e := h.pop()
			if ci.state[e.class] == classParked && ci.gen[e.class] == e.gen {
				ci.state[e.class] = classNone
				ci.parkClass(e.class, used, capv)
			}
		}
	}
}

// wakeRound wakes, for every class on the fitting list that still fits, its first blocked leaf
// in pick order; classes that no longer fit are parked again. It reports whether it woke any.
func (t *tree) wakeRound(used, capv []int64) bool {
	ci := &t.ci
	woke := false
	ci.round++
	kept := ci.fitting[:0]
	for _, c := range ci.fitting {
		if ci.state[c] != classFitting || ci.blocked[c] == 0 || ci.seen[c] == ci.round {
			continue
		}
		ci.seen[c] = ci.round
		if !fits(used, capv, ci.d[c]) {
			ci.state[c] = classNone
			ci.parkClass(c, used, capv)
			continue
		}
		leaf := t.firstBlocked(c)
		t.unblockLeaf(leaf)
		t.state[leaf] = waiting
		t.activate(leaf)
		woke = true
		if ci.blocked[c] > 0 {
			kept = append(kept, c)
		}
	}
	ci.fitting = kept
	return woke
}

// firstBlocked descends from the root through the children that hold a blocked leaf of class c,
// taking at each level the one that sorts first.
func (t *tree) firstBlocked(c int32) int32 {
	n := int32(0)
	for !t.isLeaf(n) {
		best := int32(-1)
		for _, k := range t.kids[n] {
			has := false
			if t.isLeaf(k) {
				has = t.class[k] == c && t.state[k] == blocked
			} else {
				has = t.blockedIn.get(k, c) > 0
			}
			if has && (best < 0 || t.actOrd.before(k, best)) {
				best = k
			}
		}
		n = best
	}
	return n
}

// runLength is how many tasks in a row (1..limit) the leaf at the top of every heap on its path
// gets before, at some level, a sibling would sort before its subtree.
func (t *tree) runLength(leaf int32, d []int64, limit int64) int64 {
	n := int64(1)
	for ; n < limit; n++ {
		for x := leaf; x != 0; x = t.parent[x] {
			h := t.act[t.parent[x]]
			if len(h) < 2 {
				continue
			}
			r := h[1]
			if len(h) > 2 && entBefore(h[2], r) {
				r = h[2]
			}
			if !entBefore(hent{share: t.shareDelta(x, d, n, nil, 0), rank: t.actOrd.rank[x]}, r) {
				return n
			}
		}
	}
	return max(n, 1)
}

// fitCount is how many tasks d fit in c − used (a large number when d is all zero).
func fitCount(used, c, d []int64) int64 {
	k := int64(1 << 62)
	for j, x := range d {
		if x > 0 {
			k = min(k, (c[j]-used[j])/x)
		}
	}
	return k
}

// fill is progressive filling with the skip rule over one tree: serve the leaf the recursive pick
// chooses if its next task fits, otherwise block it and go on. grant gives the leaf tasks; when
// batch is set it may give several in a row, as many as the pick would give it one by one.
func (a *Allocator) fill(t *tree, used, capv []int64, batch bool, grant func(*tenantRec, int64)) {
	t.unpark(used, capv)
	waking := t.wakeRound(used, capv)
	prev := int32(-1) // the leaf granted last
	for t.rootActive() {
		leaf := t.pick()
		tr := a.tenants[t.tenant[leaf]]
		// The class's vector equals the tenant's and is shared by every tenant of the class, so
		// it is likely in cache where the tenant's own copy is not.
		d := t.ci.d[t.class[leaf]]
		if !fits(used, capv, d) {
			t.block(leaf, used, capv)
			continue
		}
		room := int64(1 << 62)
		if t == &a.st && t.hasLimit {
			if room = a.limitRoom(tr); room < 1 {
				t.limitLeaf(leaf)
				// The room it was woken for is still free: wake the next leaf of its class.
				if waking || len(t.ci.fitting) > 0 {
					waking = t.wakeRound(used, capv)
				}
				continue
			}
		}
		n := int64(1)
		// A run is only safe while no blocked class is waiting to be woken between grants. A run
		// gives what the picks would give one by one, so when to look for one is free: at the
		// first pick (an event often leaves one tenant to fill) and when the leaf granted last is
		// picked again (with many tenants of similar shares a leaf almost never is, and looking
		// costs a share computation per grant).
		if batch && (leaf == prev || prev < 0) && !waking && len(t.ci.fitting) == 0 && len(tr.leases) == 0 && len(tr.steady) >= tr.resTarget() {
			// runLength(min(a, b)) = min(runLength(a), b) for b ≥ 1, and a run is mostly one task:
			// the room is counted only when the shares allow more.
			if n = t.runLength(leaf, d, min(int64(tr.steadyWant()-len(tr.steady)), room)); n > 1 {
				n = max(1, min(n, fitCount(used, capv, d), fitCount(a.tUsed, a.capT, d)))
			}
		}
		grant(tr, n)
		prev = leaf
		if waking || len(t.ci.fitting) > 0 {
			waking = t.wakeRound(used, capv)
		}
	}
}
