package fair

import "math"

// Whole-task floors (docs/fairness.md §3, "Whole-task floors").
//
// A tenant's base floor is its entitlement in whole tasks, ⌊e/u⌋. A tenant whose entitlement
// holds none of its tasks (a lumpy tenant: 4-GPU tasks beside 1-GPU tenants) would have a base
// floor of 0, and the other tenants' floor claims would take back any task it got: it would
// starve for good. So when some tenant's base floor is 0, floors are filled in whole tasks by
// hierarchical progressive filling of the steady pool's dominant-share budget (1):
//
//   - a tenant with a deserved part on its path, or on a sibling of a node of its path (a quota
//     is a guarantee), keeps its base floor, charged to the budget first;
//   - every other tenant that wants steady tasks, and every quota tenant whose base floor is 0,
//     is filled up to max(base, 1) tasks. From the root, the child whose floor tasks take the
//     smallest part of its entitlement (its level) is taken, down to a tenant; ties go to the
//     tenant with the larger task, then to the smaller name. The tenant gets one more floor task
//     if it fits the budget left and every group limit on its path, and otherwise leaves the
//     filling (the skip rule).
//
// A tenant with no floor task is at level 0, below every sibling holding one, so first tasks
// come before second ones among siblings, and an org's tenants are served in turn with the other
// orgs by the orgs' levels. When no tenant has a base floor of 0 the floors are the base floors.
// Floors fit the steady pool together (their dominant shares sum to at most 1, and each group's
// to at most its limit), which is what the loop-freedom argument needs, and they depend only on
// which tenants want steady tasks, the weights, quotas, limits and the capacity, so they are
// constant between events.

// ensureFloors fills every tenant's floor again when the entitlements changed since the last
// filling. When a floor changed, every surplus mark is set again before the next claim.
func (a *Allocator) ensureFloors() {
	if a.ffOK && a.ffEpoch == a.st.demEpoch && len(a.ffFloor) == len(a.tenants) {
		return
	}
	n := len(a.tenants)
	next := make([]int, n)
	tr := &a.st
	if cap(a.ffEnt) < n {
		a.ffEnt = make([]float64, n)
	}
	ent := a.ffEnt[:n] // 0: not in the filling
	clear(ent)
	zeros := false
	for i, t := range a.tenants {
		if t.removed || t.steadyWant() == 0 || t.unit == 0 || math.IsInf(t.unit, 1) {
			continue
		}
		e := tr.entitlement(t.sLeaf)
		if e <= 0 {
			continue
		}
		ent[i] = e
		base := int(e / t.unit * (1 + tieTolerance))
		next[i] = base
		if base == 0 && t.unit <= 1+tieTolerance {
			zeros = true
		}
	}
	if zeros && !a.floorsFitRaised(next, ent) {
		a.fillFloors(next, ent)
	}
	if a.ffOK && len(a.ffFloor) == n {
		for i := range next {
			if next[i] != a.ffFloor[i] {
				tr.demStale, tr.demDirty = true, tr.demDirty[:0]
				break
			}
		}
	} else {
		tr.demStale, tr.demDirty = true, tr.demDirty[:0]
	}
	a.ffFloor, a.ffEpoch, a.ffOK = next, tr.demEpoch, true
}

// floorsFitRaised raises every base floor of 0 to 1 in next when the raised floors fit the
// budget and every group limit together: then every tenant gets its whole target in any order,
// and the filling below would give the same floors.
func (a *Allocator) floorsFitRaised(next []int, ent []float64) bool {
	tr := &a.st
	sum := 0.0
	var lim map[int32]float64
	for i, t := range a.tenants {
		if ent[i] == 0 {
			continue
		}
		d := float64(max(next[i], 1)) * t.unit
		sum += d
		if tr.hasLimit {
			for m := tr.parent[t.sLeaf]; m > 0; m = tr.parent[m] {
				if tr.limit[m] > 0 {
					if lim == nil {
						lim = map[int32]float64{}
					}
					lim[m] += d
				}
			}
		}
	}
	if sum > 1+tieTolerance {
		return false
	}
	for m, u := range lim {
		if u > tr.limit[m]+tieTolerance {
			return false
		}
	}
	for i := range next {
		if ent[i] != 0 && next[i] == 0 {
			next[i] = 1
		}
	}
	return true
}

// fillFloors replaces the base floors in next by the whole-task filling: hierarchical
// progressive filling of the steady pool's dominant-share budget, where a node's level is the
// part of its entitlement its floor tasks take. From the root, the child with the lowest level
// among those holding a tenant still filled is taken (ties: a leaf with the larger task first,
// then the smaller name), down to a tenant, which gets its next floor task if it fits the budget
// and every limit on its path, and otherwise leaves the filling (the skip rule).
func (a *Allocator) fillFloors(next []int, ent []float64) {
	tr := &a.st
	nodes := len(tr.parent)
	used := make([]float64, nodes) // floor tasks' dominant share below each node
	e := make([]float64, nodes)    // entitlement of each node: its wanting leaves' sum
	live := make([]int32, nodes)   // leaves below each node still filled
	target := make([]int, len(next))
	budget := 1.0
	charge := func(leaf int32, d float64) {
		for m := leaf; m >= 0; m = tr.parent[m] {
			used[m] += d
		}
	}
	limitsFit := func(leaf int32, d float64) bool {
		for m := tr.parent[leaf]; m > 0; m = tr.parent[m] {
			if l := tr.limit[m]; l > 0 && used[m]+d > l+tieTolerance {
				return false
			}
		}
		return true
	}
	for i, t := range a.tenants {
		if ent[i] == 0 {
			continue
		}
		base := next[i]
		for m := t.sLeaf; m >= 0; m = tr.parent[m] {
			e[m] += ent[i]
		}
		if a.quotaPath(t) {
			// A quota tenant keeps its base floor, charged first.
			budget -= float64(base) * t.unit
			charge(t.sLeaf, float64(base)*t.unit)
			if base > 0 {
				continue
			}
		}
		next[i], target[i] = 0, max(base, 1)
		for m := t.sLeaf; m >= 0; m = tr.parent[m] {
			live[m]++
		}
	}
	level := func(m int32) float64 { return used[m] / e[m] }
	for live[0] > 0 {
		m := int32(0)
		for !tr.isLeaf(m) {
			best := int32(-1)
			for _, c := range tr.kids[m] {
				if live[c] == 0 {
					continue
				}
				if best < 0 || a.floorBefore(c, best, level(c), level(best)) {
					best = c
				}
			}
			m = best
		}
		i := tr.tenant[m]
		t := a.tenants[i]
		done := true
		if t.unit <= budget+tieTolerance && limitsFit(m, t.unit) {
			budget -= t.unit
			charge(m, t.unit)
			next[i]++
			done = next[i] >= target[i]
		}
		if done {
			for k := m; k >= 0; k = tr.parent[k] {
				live[k]--
			}
		}
	}
}

// floorBefore orders two siblings in the floor filling: the lower level first; among equal
// levels a tenant with the larger task first (first-fit decreasing: small tasks fill what a large
// one leaves, not the reverse), then the smaller name.
func (a *Allocator) floorBefore(x, y int32, lx, ly float64) bool {
	tr := &a.st
	if !sharesEqual(lx, ly) {
		return lx < ly
	}
	if tr.isLeaf(x) && tr.isLeaf(y) {
		ux, uy := a.tenants[tr.tenant[x]].unit, a.tenants[tr.tenant[y]].unit
		if ux != uy {
			return ux > uy
		}
	}
	return tr.name[x] < tr.name[y]
}

// quotaPath says whether a deserved part lies on t's path: on a node of it or on a sibling of one
// that wants tasks. Such a tenant keeps its base floor (docs/fairness.md §3).
func (a *Allocator) quotaPath(t *tenantRec) bool {
	tr := &a.st
	for n := t.sLeaf; n > 0; n = tr.parent[n] {
		if tr.deserved[n] > 0 || tr.demD[tr.parent[n]] > 0 {
			return true
		}
	}
	return false
}

// sharesEqual compares two levels within the tie tolerance.
func sharesEqual(x, y float64) bool {
	return math.Abs(x-y) <= tieTolerance*math.Max(math.Abs(x), math.Abs(y))
}
