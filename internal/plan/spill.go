package plan

import (
	"cmp"
	"container/heap"
	"math"
)

// spillOver moves tenants off the boards whose load is over their limit (boardCap), the tenant
// of least added cost per GPU-equivalent freed first, as one multiplier per board prices a
// board's load in the capacity bound (boardCapBound). Each leaver goes to its cheapest candidate
// on another board (the objective's change less the penalty its own board gives up, so that a
// board over its limit is not filled in turn), and tenants leave one at a time until every
// board is within its limit. The local search, left to itself, moves tenants off a full board
// in pool order, each to its best move, so the tenants that leave are the first ones listed
// rather than those whose other boards cost least more (ADR 0101). A tenant whose leaving frees
// none of the board's load (a replica of a part-filled shared unit) does not leave here; the
// local search and emptyLastUnits still move it. Tenants leave by ratio, ties in pool order, and
// a tenant's ratio is weighed again when it comes first (the others' leaving may have changed
// its best move), so the result is deterministic. chooseFrom calls it before each round of the
// board-wide search on the sum objective, one of optimise's four choices; the other three
// spill by the local search alone, and the packing keeps the best of the four.
func (p *planner) spillOver(f *fractional) {
	bc := f.cap
	if bc == nil || bc.penalty() == 0 {
		return
	}
	over := func(b int) bool { return bc.byBoard[b] > bc.limit[b]+1e-9 }
	// weigh is tn's cheapest move off its board and that move's added cost per GPU-equivalent
	// freed (+Inf: none, or the board is within its limit, or the leaving frees nothing).
	weigh := func(tn *tenant) (*cand, float64) {
		old := p.ids.of(tn, tn.choice)
		l := f.leave(old, tn.choice, -tn.choice.replicas)
		freed := -l.capA
		if freed <= 1e-12 || !over(l.capB) {
			return nil, math.Inf(1)
		}
		sc := p.searchOf(tn)
		board := tn.choice.board
		var to *cand
		bestD, bestCost := -1e-9, math.Inf(1)
		for i := range sc {
			e := &sc[i]
			k := p.kidOf(tn, e)
			if k == old || e.forbidden || e.disallowed || e.board == board {
				continue
			}
			d := f.joinDelta(&l, k, e)
			if d >= bestD {
				continue // the move would not lower the objective
			}
			if c := d - capPenalty*l.capOver; c < bestCost {
				to, bestCost = e.c, c
			}
		}
		if to == nil {
			return nil, math.Inf(1)
		}
		return to, bestCost / freed
	}
	h := &spillHeap{}
	for i, tn := range p.tenants {
		if tn.choice == nil || len(tn.feasible) < 2 {
			continue
		}
		if _, r := weigh(tn); !math.IsInf(r, 1) {
			h.items = append(h.items, spillItem{i, r})
		}
	}
	heap.Init(h)
	for budget := 4 * len(h.items); h.Len() > 0 && budget > 0 && !p.stopped(); budget-- {
		it := heap.Pop(h).(spillItem)
		tn := p.tenants[it.i]
		to, r := weigh(tn)
		if to == nil {
			continue
		}
		if h.Len() > 0 && r > h.items[0].r+1e-12 {
			heap.Push(h, spillItem{it.i, r}) // another tenant leaves more cheaply now
			continue
		}
		p.switchTo(f, tn, to)
		if bc.penalty() == 0 {
			return
		}
	}
}

// spillItem is a tenant (its index in p.tenants) and its added cost per GPU-equivalent freed.
type spillItem struct {
	i int
	r float64
}

// spillHeap orders spillItems by ratio, ties by pool order.
type spillHeap struct{ items []spillItem }

func (h *spillHeap) Len() int { return len(h.items) }
func (h *spillHeap) Less(a, b int) bool {
	if c := cmp.Compare(h.items[a].r, h.items[b].r); c != 0 {
		return c < 0
	}
	return h.items[a].i < h.items[b].i
}
func (h *spillHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *spillHeap) Push(x any)    { h.items = append(h.items, x.(spillItem)) }
func (h *spillHeap) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items = h.items[:n]
	return it
}
