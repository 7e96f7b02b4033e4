package fair

import (
	"container/heap"
	"math"
)

// Whole-task floors (docs/fairness.md §3, "Whole-task floors").
//
// A tenant's base floor is its entitlement in whole tasks, ⌊e/u⌋. A tenant whose entitlement
// holds none of its tasks (a lumpy tenant: 4-GPU tasks beside 1-GPU tenants) would have a base
// floor of 0, and the other tenants' floor claims would take back any task it got: it would
// starve for good. So floors are filled, in whole tasks, by progressive filling over the steady
// pool's dominant-share budget (1):
//
//   - tenants with a deserved part on their path, or a sibling's on it (a quota is a
//     guarantee), keep their base floor, charged to the budget first;
//   - every other tenant that wants steady tasks, and every quota tenant whose base floor is 0,
//     is filled up to max(base, 1) tasks, lowest level first, where a tenant's level is the part
//     of its entitlement its floor tasks take (k·u/e); ties go to the larger task, then the
//     smaller name; a task that does not fit the budget left (or a group limit's) ends that
//     tenant's filling (the skip rule).
//
// Every tenant at level 0 (no floor task yet) comes before every tenant holding one, so the
// first tasks are handed out before any second one: when the first tasks of the filled tenants
// fit the budget the quota floors leave, every tenant that wants a task and whose task fits the
// steady pool has a floor of at least one task. When no tenant has a base floor of 0, the filled
// floors are the base floors (their sum fits the budget). Floors still fit the steady pool
// together (their dominant shares sum to at most 1), which is what the loop-freedom argument
// needs, and they depend only on which tenants want steady tasks, the weights, quotas, limits
// and the capacity, so they are constant between events.

// floorEnt is one tenant in the floor filling.
type floorEnt struct {
	idx    int32
	level  float64 // k·u/e after its current floor tasks
	unit   float64
	e      float64
	target int
	name   string
}

type floorHeap []floorEnt

func (h floorHeap) Len() int { return len(h) }
func (h floorHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	if !sharesEqual(a.level, b.level) {
		return a.level < b.level
	}
	if a.unit != b.unit {
		return a.unit > b.unit // the larger task first: first-fit decreasing among ties
	}
	return a.name < b.name
}
func (h floorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *floorHeap) Push(x any)   { *h = append(*h, x.(floorEnt)) }
func (h *floorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sharesEqual compares two levels within the tie tolerance.
func sharesEqual(x, y float64) bool {
	return math.Abs(x-y) <= tieTolerance*math.Max(math.Abs(x), math.Abs(y))
}

// ensureFloors fills every tenant's floor again when the entitlements changed since the last
// filling. When a floor changed, every surplus mark is set again before the next claim.
func (a *Allocator) ensureFloors() {
	if a.ffOK && a.ffEpoch == a.st.demEpoch && len(a.ffFloor) == len(a.tenants) {
		return
	}
	n := len(a.tenants)
	next := make([]int, n)
	tr := &a.st
	budget := 1.0
	var limUsed map[int32]float64
	if tr.hasLimit {
		limUsed = map[int32]float64{}
	}
	var fill floorHeap
	zeros := false
	ent := make([]float64, n) // 0: not in the filling
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
	if zeros {
		// Quota tenants keep their base floors, charged first.
		for i, t := range a.tenants {
			e := ent[i]
			if e == 0 {
				continue
			}
			base := next[i]
			if a.quotaPath(t) {
				budget -= float64(base) * t.unit
				a.chargeLimits(limUsed, t, float64(base)*t.unit)
				if base > 0 {
					continue
				}
			}
			next[i] = 0
			fill = append(fill, floorEnt{idx: int32(i), unit: t.unit, e: e, target: max(base, 1), name: t.cfg.Name})
		}
		heap.Init(&fill)
		for len(fill) > 0 {
			f := &fill[0]
			t := a.tenants[f.idx]
			if f.unit > budget+tieTolerance || !a.limitsFit(limUsed, t, f.unit) {
				heap.Pop(&fill) // the skip rule: this tenant's filling ends
				continue
			}
			budget -= f.unit
			a.chargeLimits(limUsed, t, f.unit)
			next[f.idx]++
			if next[f.idx] >= f.target {
				heap.Pop(&fill)
				continue
			}
			f.level = float64(next[f.idx]) * f.unit / f.e
			heap.Fix(&fill, 0)
		}
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

// chargeLimits adds d (a dominant share of the steady pool) to every limited group on t's path.
func (a *Allocator) chargeLimits(used map[int32]float64, t *tenantRec, d float64) {
	if used == nil {
		return
	}
	tr := &a.st
	for n := tr.parent[t.sLeaf]; n > 0; n = tr.parent[n] {
		if tr.limit[n] > 0 {
			used[n] += d
		}
	}
}

// limitsFit says whether d more fits every limit on t's path (a floor never asks for more than a
// limit allows).
func (a *Allocator) limitsFit(used map[int32]float64, t *tenantRec, d float64) bool {
	if used == nil {
		return true
	}
	tr := &a.st
	for n := tr.parent[t.sLeaf]; n > 0; n = tr.parent[n] {
		if l := tr.limit[n]; l > 0 && used[n]+d > l+tieTolerance {
			return false
		}
	}
	return true
}
