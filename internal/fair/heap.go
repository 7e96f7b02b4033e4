package fair

import "math"

// Three kinds of binary heap, written out so that the hot path neither allocates nor boxes:
// nodeHeap orders tree nodes by share (min or max) and keeps every node's position for O(log n)
// fixes (the pre heaps); actHeap does the same in min order with each node's share and rank held
// in the entry (the act heaps, which every grant reorders); entryHeap is a plain min-heap of small
// values for time-ordered queues. nodeHeap and actHeap sift alike on purpose: one generic sift
// over both, with the comparison and swap as methods of a type parameter, measured about 14 %
// slower on BenchmarkRecomputeFull and 4–8 % on BenchmarkSetDemand(Jump), because Go calls a type
// parameter's methods through a dictionary and does not inline them.

// nodeOrder says how a nodeHeap compares two nodes.
type nodeOrder struct {
	share []float64
	rank  []int32 // each node's place in name order (node names compare as their ranks)
	max   bool    // true: highest share first, ties by larger name
}

// before reports whether a sorts before b: by share, where shares within the relative tie
// tolerance are equal and the name decides (the smaller name first in a min order, the larger in
// a max order). Ties are pairwise: a chain of shares each within 1e-9 of the next but spanning
// more is ordered pair by pair, which shares computed from whole tasks never produce in practice.
func (o *nodeOrder) before(a, b int32) bool {
	return o.shareBefore(o.share[a], o.rank[a], b)
}

// shareBefore is before for a node of rank ra whose share would be sa.
// It is tie written out (the gap against the larger share) so that the common case, shares
// apart, takes one comparison of the gap.
func (o *nodeOrder) shareBefore(sa float64, ra int32, b int32) bool {
	sb := o.share[b]
	if sa < sb {
		if d := sb - sa; d > tieTolerance*sb || d > math.MaxFloat64 {
			return !o.max
		}
	} else if sa > sb {
		if d := sa - sb; d > tieTolerance*sa || d > math.MaxFloat64 {
			return o.max
		}
	}
	return (ra < o.rank[b]) != o.max
}

// nodeHeap is a heap of node ids stored in h, with each node's index in pos (-1 when absent).
type nodeHeap struct {
	o   *nodeOrder
	pos []int32
}

func (nh nodeHeap) push(h *[]int32, n int32) {
	*h = append(*h, n)
	i := int32(len(*h) - 1)
	nh.pos[n] = i
	nh.up(*h, i)
}

func (nh nodeHeap) remove(h *[]int32, n int32) {
	i := nh.pos[n]
	if i < 0 {
		return
	}
	last := int32(len(*h) - 1)
	if i != last {
		nh.swap(*h, i, last)
	}
	*h = (*h)[:last]
	nh.pos[n] = -1
	if i != last {
		nh.fix(*h, i)
	}
}

func (nh nodeHeap) fix(h []int32, i int32) {
	if !nh.down(h, i) {
		nh.up(h, i)
	}
}

func (nh nodeHeap) swap(h []int32, i, j int32) {
	h[i], h[j] = h[j], h[i]
	nh.pos[h[i]] = i
	nh.pos[h[j]] = j
}

func (nh nodeHeap) up(h []int32, i int32) {
	for i > 0 {
		p := (i - 1) / 2
		if !nh.o.before(h[i], h[p]) {
			return
		}
		nh.swap(h, i, p)
		i = p
	}
}

func (nh nodeHeap) down(h []int32, i int32) bool {
	start, n := i, int32(len(h))
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && nh.o.before(h[r], h[l]) {
			c = r
		}
		if !nh.o.before(h[c], h[i]) {
			break
		}
		nh.swap(h, i, c)
		i = c
	}
	return i > start
}

// heapify orders h in place and records positions.
func (nh nodeHeap) heapify(h []int32) {
	for i, n := range h {
		nh.pos[n] = int32(i)
	}
	for i := int32(len(h))/2 - 1; i >= 0; i-- {
		nh.down(h, i)
	}
}

// entryHeap is a min-heap of T under less.
type entryHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (e *entryHeap[T]) len() int { return len(e.items) }

func (e *entryHeap[T]) top() T { return e.items[0] }

func (e *entryHeap[T]) push(x T) {
	e.items = append(e.items, x)
	i := len(e.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(e.items[i], e.items[p]) {
			break
		}
		e.items[i], e.items[p] = e.items[p], e.items[i]
		i = p
	}
}

func (e *entryHeap[T]) pop() T {
	x := e.items[0]
	last := len(e.items) - 1
	e.items[0] = e.items[last]
	e.items = e.items[:last]
	i, n := 0, last
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && e.less(e.items[r], e.items[l]) {
			c = r
		}
		if !e.less(e.items[c], e.items[i]) {
			break
		}
		e.items[i], e.items[c] = e.items[c], e.items[i]
		i = c
	}
	return x
}

func (e *entryHeap[T]) reset() { e.items = e.items[:0] }

// hent is one entry of an act heap: the node with its share and name rank inline, so that a
// comparison reads two adjacent entries instead of three arrays through the node ids. The share
// is refreshed from the tree whenever the node's position is fixed (tree.add) or pushed.
type hent struct {
	share float64
	rank  int32
	node  int32
}

// entBefore is nodeOrder.shareBefore for a min order on entries: lower share first, shares
// within the tie tolerance by the smaller name.
func entBefore(a, b hent) bool {
	if a.share < b.share {
		if d := b.share - a.share; d > tieTolerance*b.share || d > math.MaxFloat64 {
			return true
		}
	} else if a.share > b.share {
		if d := a.share - b.share; d > tieTolerance*a.share || d > math.MaxFloat64 {
			return false
		}
	}
	return a.rank < b.rank
}

// actHeap is nodeHeap for entries in min order: what progressive filling descends.
type actHeap struct{ pos []int32 }

func (ah actHeap) push(h *[]hent, e hent) {
	*h = append(*h, e)
	i := int32(len(*h) - 1)
	ah.pos[e.node] = i
	ah.up(*h, i)
}

func (ah actHeap) remove(h *[]hent, n int32) {
	i := ah.pos[n]
	if i < 0 {
		return
	}
	last := int32(len(*h) - 1)
	if i != last {
		ah.swap(*h, i, last)
	}
	*h = (*h)[:last]
	ah.pos[n] = -1
	if i != last && !ah.down(*h, i) {
		ah.up(*h, i)
	}
}

func (ah actHeap) swap(h []hent, i, j int32) {
	h[i], h[j] = h[j], h[i]
	ah.pos[h[i].node] = i
	ah.pos[h[j].node] = j
}

// up and down move the entry at i through a hole: the entries it passes move one step each and
// it is written once, where a chain of swaps would write it at every step.
func (ah actHeap) up(h []hent, i int32) {
	start, e := i, h[i]
	for i > 0 {
		p := (i - 1) / 2
		if !entBefore(e, h[p]) {
			break
		}
		h[i] = h[p]
		ah.pos[h[i].node] = i
		i = p
	}
	if i != start {
		h[i] = e
		ah.pos[e.node] = i
	}
}

// sink moves the entry at i down as down does, for an entry expected to go near the bottom (a
// leaf that was just granted a task rises past most of its siblings): it first moves the hole
// along the path of lower children to the bottom, one comparison per level, then moves the entry
// back up to its place. The place is the same as down's: along that path the entries are in heap
// order, so those before the entry form a prefix.
func (ah actHeap) sink(h []hent, i int32) {
	start, n, e := i, int32(len(h)), h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && entBefore(h[r], h[l]) {
			c = r
		}
		h[i] = h[c]
		ah.pos[h[i].node] = i
		i = c
	}
	for i > start {
		p := (i - 1) / 2
		if entBefore(h[p], e) {
			break
		}
		h[i] = h[p]
		ah.pos[h[i].node] = i
		i = p
	}
	h[i] = e
	ah.pos[e.node] = i
}

func (ah actHeap) down(h []hent, i int32) bool {
	start, n, e := i, int32(len(h)), h[i]
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && entBefore(h[r], h[l]) {
			c = r
		}
		if !entBefore(h[c], e) {
			break
		}
		h[i] = h[c]
		ah.pos[h[i].node] = i
		i = c
	}
	if i != start {
		h[i] = e
		ah.pos[e.node] = i
	}
	return i > start
}
