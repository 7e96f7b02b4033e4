package sim

import (
	"context"
	"fmt"
	"time"

	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Event kinds.
const (
	evArrival  uint8 = iota // the source id has a request arriving now
	evStepDone              // replica id finished a step
)

// event is one entry of the event queue. Ties in time are broken by seq, the order of
// scheduling, so that the run is deterministic.
type event struct {
	at   int64
	seq  uint64
	id   int32
	kind uint8
}

// eventQueue is a binary min-heap of events by (at, seq). It holds at most one arrival per
// source and one step completion per replica, so its size is bounded by the topology.
type eventQueue []event

func (q eventQueue) less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}

func (q *eventQueue) push(e event) {
	*q = append(*q, e)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// Sim is one simulation: a topology built from a plan, traffic sources, a virtual clock and an
// event queue. It is single-threaded and deterministic; a Sim runs once.
type Sim struct {
	cfg       Config
	tenants   []*tenantState
	tenantIdx map[string]int32
	replicas  []*replica
	domains   []*domain
	gpus      []*gpuState
	measured  map[string]*perf.Measured // measured tables by tenant (Input.Profiles)
	served    map[string]llm.Model      // the model each vLLM tenant's replicas are fitted with (planCache)
	sources   []source
	reqs      requests
	queue     eventQueue
	seq       uint64
	now, end  int64
	events    int64
	ran       bool
	notes     []string
}

// New checks the input and config and builds a simulation. A plan that does not match its pool,
// or a replica on a slice too small for its model, is rejected here with every reason.
func New(in Input, cfg Config) (*Sim, error) {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new simulation: %w", err)
	}
	s := &Sim{cfg: cfg, end: int64(cfg.Duration)}
	if err := s.build(in); err != nil {
		return nil, fmt.Errorf("new simulation: %w", err)
	}
	for _, g := range s.gpus {
		g.dynCap = s.gpuDynCap(g)
	}
	if err := s.buildSources(in.Trace); err != nil {
		return nil, fmt.Errorf("new simulation: %w", err)
	}
	return s, nil
}

// Run simulates the whole duration and returns the result. Calling it twice is an error. It
// checks ctx every 4,096 events and returns ctx's error, and no result, once it is cancelled.
func (s *Sim) Run(ctx context.Context) (*Result, error) {
	if s.ran {
		return nil, fmt.Errorf("run simulation: already ran")
	}
	s.ran = true
	for i := range s.sources {
		s.scheduleArrival(int32(i))
	}
	for len(s.queue) > 0 {
		e := s.queue[0]
		if e.at >= s.end {
			break
		}
		s.queue.pop()
		if e.at < s.now {
			return nil, fmt.Errorf("run simulation: internal error: event at %d before now %d", e.at, s.now)
		}
		s.now = e.at
		s.events++
		if s.events&0xfff == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("run simulation: %w", ctx.Err())
		}
		switch e.kind {
		case evArrival:
			s.arrive(e.id)
		case evStepDone:
			s.stepDone(e.id)
		}
		if s.cfg.Progress != nil && s.events&0xffff == 0 {
			s.cfg.Progress(time.Duration(s.now), time.Duration(s.end))
		}
	}
	s.now = s.end
	s.finish()
	if s.cfg.Progress != nil {
		s.cfg.Progress(time.Duration(s.end), time.Duration(s.end))
	}
	return s.result(), nil
}

func (s *Sim) schedule(at int64, kind uint8, id int32) {
	s.seq++
	s.queue.push(event{at: at, seq: s.seq, id: id, kind: kind})
}

// scheduleArrival queues the next arrival of source i, if it has one before the end.
func (s *Sim) scheduleArrival(i int32) {
	src := &s.sources[i]
	if !src.advance(s.end) {
		return
	}
	s.schedule(src.next.at, evArrival, i)
}

// arrive routes the pending request of source i and schedules the source's next arrival.
func (s *Sim) arrive(i int32) {
	src := &s.sources[i]
	p := src.next
	s.scheduleArrival(i) // overwrites src.next, so p was copied first
	t := s.tenants[p.tenant]
	st := &t.stats
	st.arrived++
	st.offeredTokens += int64(p.out)
	rep, ok := s.route(t)
	if !ok {
		st.dropped[dropNoReplica]++
		return
	}
	r := s.replicas[rep]
	if r.maxLen > 0 && int64(p.in)+int64(p.out) > r.maxLen {
		st.dropped[dropOverContext]++ // vLLM answers such a request with an error
		return
	}
	if int64(p.in)+int64(p.out)-1 > r.kvCap {
		st.dropped[dropTooLong]++
		return
	}
	if r.waiting.len() >= s.cfg.MaxQueue {
		st.dropped[dropQueueFull]++
		return
	}
	id := s.reqs.alloc(p, s.now)
	r.waiting.pushBack(id)
	if !r.inStep {
		s.startStep(rep)
	}
}

// route picks the tenant's least-loaded replica (fewest requests running and waiting; ties to
// the first listed), or false when the tenant has none.
func (s *Sim) route(t *tenantState) (int32, bool) {
	best, bestLoad := int32(-1), 0
	for _, ri := range t.replicas {
		r := s.replicas[ri]
		load := len(r.running) + r.waiting.len()
		if best < 0 || load < bestLoad {
			best, bestLoad = ri, load
		}
	}
	return best, best >= 0
}

// finish closes the busy intervals still open at the end and counts unfinished requests.
func (s *Sim) finish() {
	s.finishPower()
	for di, d := range s.domains {
		if d.inStep > 0 {
			s.addBusy(int32(di), d.since, s.end)
			d.since = s.end
		}
	}
	for _, r := range s.replicas {
		st := &s.tenants[r.tenant].stats
		for _, id := range r.running {
			st.unfinished++
			st.unfinishedTokens += int64(s.reqs.at(id).gen)
		}
		for k := 0; k < r.waiting.len(); k++ {
			st.unfinished++
			st.unfinishedTokens += int64(s.reqs.at(r.waiting.at(k)).gen)
		}
	}
}
