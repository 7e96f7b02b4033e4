package fair

// Two kinds of binary heap, written out so that the hot path neither allocates nor boxes:
// nodeHeap orders tree nodes by share (min or max) and keeps every node's position for O(log n)
// fixes; entryHeap is a plain min-heap of small values for time-ordered queues.

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
func (o *nodeOrder) shareBefore(sa float64, ra int32, b int32) bool {
	if sb := o.share[b]; sa != sb && !tie(sa, sb) {
		return (sa < sb) != o.max
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
