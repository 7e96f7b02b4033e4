package fair

import (
	"math"
	"time"
)

// Usage history (Config.HistoryHalfLife, docs/fairness.md §2 "Usage history").
//
// Each tenant keeps h, its decayed task count: the exponentially weighted mean of how many tasks
// (steady and leased) it held, with weight 2^(−age/halfLife). h is brought forward from its last
// update at t0 at the first step t1 at least historyTick after it, counting the n tasks the tenant
// held just before t1 as held since t0:
//
//	h(t1) = h(t0)·δ + n·(1 − δ),  δ = 2^(−(t1 − t0)/halfLife),
//
// the integral ∫ n(τ)·(ln 2/halfLife)·2^(−(t1−τ)/halfLife) dτ over the past when n did not change
// since t0 (exact then): a tenant that held n tasks for ever has h = n, and h moves half way to n
// every half-life. Updating at most every halfLife/64 keeps incremental decisions incremental (an
// update derives every index again); a change of tasks counts from the last update on, an error
// of at most 1/64 of a half-life's weight.
//
// In every share comparison (filling, claims, victim order, lease filling) a node's usage is its
// tasks' use plus its tenants' history h·task; floors, reservations, caps, limits and capacity
// use only the tasks.

// historyTick is how long after its last update the history is brought forward: a 64th of the
// half-life (at least 1 ns).
func historyTick(halfLife time.Duration) int64 { return max(int64(halfLife)/64, 1) }

// decayFactor is δ = 2^(−elapsed/halfLife) for elapsed and halfLife in nanoseconds.
func decayFactor(elapsed, halfLife int64) float64 {
	return math.Exp2(-float64(elapsed) / float64(halfLife))
}

// decay is h·δ + n·(1 − δ). The explicit conversions keep the two products rounded on their own
// (no fused multiply-add), so every platform computes the same value.
func decay(h float64, n int, d float64) float64 {
	return float64(h*d) + float64(float64(n)*(1-d))
}

// advanceHistory decays every tenant's history to ns (Unix nanoseconds) with the tasks it held
// since the last step. Shares change with it, so the indexes are derived again before deciding.
func (a *Allocator) advanceHistory(ns int64) {
	if a.histHL <= 0 {
		return
	}
	if !a.started {
		a.histAt = ns
		return
	}
	if ns-a.histAt < historyTick(a.histHL) {
		return
	}
	d := decayFactor(ns-a.histAt, int64(a.histHL))
	for _, t := range a.tenants {
		if !t.removed {
			t.hist = decay(t.hist, t.total(), d)
		}
	}
	a.histAt = ns
	a.needRebuild = true
}

// histVec sets off to t's history as usage, h·task rounded to millionths, for the resources the
// pool has (a resource of zero capacity gets none: history must not make a share infinite).
func (a *Allocator) histVec(off []int64, t *tenantRec) {
	for j, x := range t.d {
		off[j] = 0
		if x > 0 && a.capT[j] > 0 {
			off[j] = int64(math.Round(t.hist * float64(x)))
		}
	}
}

// addHistory adds every tenant's history to the usage of its leaf and ancestors in both trees.
func (a *Allocator) addHistory() {
	if a.histHL <= 0 {
		return
	}
	off := make([]int64, len(a.res.names))
	for _, t := range a.tenants {
		if t.hist == 0 {
			continue
		}
		a.histVec(off, t)
		for n := t.sLeaf; n > 0; n = a.st.parent[n] {
			a.st.addHist(n, off)
		}
		for n := t.lLeaf; n > 0; n = a.lt.parent[n] {
			a.lt.addHist(n, off)
		}
	}
}

// addHist adds a history vector (a full vector) to node n's usage, and records it so that the
// tasks' own use can be told apart (limits).
func (t *tree) addHist(n int32, off []int64) {
	if t.hist == nil {
		t.hist = make([]int64, len(t.usage))
	}
	k := len(t.dims)
	u, h := t.u(n), t.hist[int(n)*k:int(n+1)*k]
	for i, j := range t.dims {
		u[i] += off[j]
		h[i] += off[j]
	}
}

// histOf is node n's history part of its usage (nil when no history is kept).
func (t *tree) histOf(n int32) []int64 {
	if t.hist == nil {
		return nil
	}
	k := len(t.dims)
	return t.hist[int(n)*k : int(n+1)*k]
}
