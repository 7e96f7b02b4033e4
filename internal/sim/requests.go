package sim

// request is one request in flight. Token accounting (see doc.go):
//
//	kv      tokens of this request in its replica's KV cache
//	target  tokens that must be cached before it decodes: in, or in + gen after a preemption
//	gen     output tokens produced so far (kept across preemptions: recompute re-caches, it does
//	        not regenerate)
//
// While kv < target the request is in prefill; the step that makes kv reach target produces a
// token. After that each decode step caches one token and produces one.
type request struct {
	arrival, first int64 // first: when the first token came out, -1 before
	tenant         int32
	in, out        int32
	gen, kv        int32
	target         int32
}

// requests is an arena of requests with a free list, so that memory follows the number of
// requests in flight, not the number simulated.
type requests struct {
	all  []request
	free []int32
}

func (rs *requests) alloc(p pending, now int64) int32 {
	r := request{arrival: now, first: -1, tenant: p.tenant, in: p.in, out: p.out, target: p.in}
	if n := len(rs.free); n > 0 {
		id := rs.free[n-1]
		rs.free = rs.free[:n-1]
		rs.all[id] = r
		return id
	}
	rs.all = append(rs.all, r)
	return int32(len(rs.all) - 1)
}

func (rs *requests) at(id int32) *request { return &rs.all[id] }

func (rs *requests) release(id int32) { rs.free = append(rs.free, id) }

// inFlight is the number of requests allocated and not released.
func (rs *requests) inFlight() int { return len(rs.all) - len(rs.free) }

// deque is a ring buffer of request ids: arrivals join the back, preempted requests the front.
type deque struct {
	buf        []int32
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) grow() {
	n := max(8, 2*len(d.buf))
	b := make([]int32, n)
	for i := 0; i < d.size; i++ {
		b[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = b, 0
}

func (d *deque) pushBack(id int32) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.size)%len(d.buf)] = id
	d.size++
}

func (d *deque) pushFront(id int32) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = id
	d.size++
}

func (d *deque) front() int32 { return d.buf[d.head] }

func (d *deque) popFront() int32 {
	id := d.buf[d.head]
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return id
}

// at returns the k-th id from the front.
func (d *deque) at(k int) int32 { return d.buf[(d.head+k)%len(d.buf)] }
