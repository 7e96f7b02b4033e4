package sim

import (
	"slices"
	"time"

	"gpupool.dev/gpupool/internal/perf"
)

// step runs one engine step at now and returns its length in ns: the running requests first
// (decodes, then the rest of their prompts in chunks), then waiting requests in arrival order,
// each admitted with its first chunk while the token budget, the sequence limit, the KV cache and
// the distinct-adapter limit allow.
func (s *loraState) step(now int64) int64 {
	e := s.cfg.Engine
	var b perf.Batch
	active := map[int]bool{}
	for _, q := range s.running {
		if !active[q.adapter] {
			active[q.adapter] = true
			s.slots.touch(q.adapter) // in use: never the one evicted
		}
		if q.first > 0 {
			b.DecodeSeqs++
			b.KVTokens += int64(q.in + q.decoded)
		}
	}
	budget := e.MaxBatchedTokens() - b.DecodeSeqs
	for _, q := range s.running {
		if q.first == 0 && budget > 0 {
			budget -= s.chunk(q, budget, &b)
		}
	}
	var load time.Duration
	kept := s.waiting[:0]
	for _, q := range s.waiting {
		need := int64(q.in + q.out)
		if budget <= 0 || len(s.running) >= e.MaxSeqs() || s.kvUsed+need > s.kvCap ||
			(!active[q.adapter] && len(active) >= s.cfg.MaxLoRAs) {
			kept = append(kept, q)
			continue
		}
		if !active[q.adapter] {
			load += s.activate(q.adapter)
			active[q.adapter] = true
		}
		s.kvUsed += need
		s.running = append(s.running, q)
		budget -= s.chunk(q, budget, &b)
	}
	s.waiting = kept
	tokens := b.PrefillTokens + b.DecodeSeqs
	st, dynJ := e.StepTimeEnergy(b, perf.Load{})
	dt := st + s.cfg.Cost.StepOverhead(tokens, len(active), s.cfg.MaxRank) + load
	s.res.DynamicJoules += dynJ
	dt = max(dt, time.Microsecond) // time always moves
	s.res.Steps++
	s.res.Busy += dt
	s.res.ActiveMax = max(s.res.ActiveMax, len(active))
	s.activeSum += float64(len(active)) * dt.Seconds()
	s.inFlightSum += float64(len(s.running)+len(s.waiting)) * dt.Seconds()
	s.advance(now + int64(dt))
	return int64(dt)
}

// chunk adds q's next prompt chunk of at most budget tokens to b and returns its size.
func (s *loraState) chunk(q *loraReq, budget int, b *perf.Batch) int {
	c := min(q.in-q.prefilled, budget)
	b.PrefillTokens += c
	b.PrefillSeqs++
	b.PrefillPairs += perf.ChunkPairs(c, q.prefilled)
	q.prefilled += c
	return c
}

// activate brings adapter a into a GPU slot for this step and returns the load time; a resident
// adapter costs nothing.
func (s *loraState) activate(a int) time.Duration {
	if s.slots.touch(a) {
		return 0
	}
	s.slots.add(a)
	fromDisk := !s.host.touch(a)
	if fromDisk {
		s.host.add(a)
		s.res.DiskLoads++
	}
	t := s.cfg.Cost.LoadTime(s.cfg.Adapters[a].Bytes, fromDisk)
	s.res.Loads++
	s.res.LoadTime += t
	return t
}

// advance books the step that ends at end: first tokens, decoded tokens, completions.
func (s *loraState) advance(end int64) {
	kept := s.running[:0]
	for _, q := range s.running {
		st := &s.stats[q.adapter]
		switch {
		case q.first > 0: // decoded a token
			q.decoded++
			st.out++
		case q.prefilled == q.in: // its last chunk ran: the first token
			q.decoded, q.first = 1, end
			st.in += int64(q.in)
			st.out++
		}
		if q.first > 0 && q.decoded >= q.out {
			s.complete(q, end)
			continue
		}
		kept = append(kept, q)
	}
	s.running = kept
}

// complete records a finished request and lets the adapter's next gateway request in.
func (s *loraState) complete(q *loraReq, end int64) {
	a := s.cfg.Adapters[q.adapter]
	st := &s.stats[q.adapter]
	st.completed++
	s.kvUsed -= int64(q.in + q.out)
	ttft := q.first - q.arrival
	recordNs(st.ttft, ttft)
	recordNs(s.ttft, ttft)
	var tpot int64
	if q.out > 1 {
		tpot = (end - q.first) / int64(q.out-1)
		recordNs(st.tpot, tpot)
		recordNs(s.tpot, tpot)
	}
	if (a.TTFT == 0 || ttft <= int64(a.TTFT)) && (a.TPOT == 0 || q.out <= 1 || tpot <= int64(a.TPOT)) {
		st.met++
	}
	s.inEngine[q.adapter]--
	if g := s.gateway[q.adapter]; len(g) > 0 {
		s.gateway[q.adapter] = g[1:]
		s.inEngine[q.adapter]++
		s.waiting = append(s.waiting, g[0])
	}
}

// finish turns the counters into the result.
func (s *loraState) finish() {
	if b := s.res.Busy.Seconds(); b > 0 {
		s.res.ActiveMean, s.res.InFlightMean = s.activeSum/b, s.inFlightSum/b
	}
	s.res.TTFTP99 = time.Duration(s.ttft.ValueAtQuantile(99)) * time.Microsecond
	s.res.TPOTP99 = time.Duration(s.tpot.ValueAtQuantile(99)) * time.Microsecond
	for i, a := range s.cfg.Adapters {
		st := s.stats[i]
		r := LoRAAdapterResult{Name: a.Name, Arrived: st.arrived, Completed: st.completed, Met: st.met,
			InputTokens: st.in, OutputTokens: st.out,
			TTFTP99: time.Duration(st.ttft.ValueAtQuantile(99)) * time.Microsecond,
			TPOTP99: time.Duration(st.tpot.ValueAtQuantile(99)) * time.Microsecond}
		if st.arrived > 0 {
			r.Attainment = float64(st.met) / float64(st.arrived)
		} else {
			r.Attainment = 1
		}
		r.MeetsSLO = st.completed == st.arrived && (a.TTFT == 0 || r.TTFTP99 <= a.TTFT) && (a.TPOT == 0 || r.TPOTP99 <= a.TPOT)
		s.res.Adapters = append(s.res.Adapters, r)
	}
}

// lru is a small least-recently-used set of adapter indices.
type lru struct {
	cap   int
	order []int // least recent first
}

func newLRU(n int) lru { return lru{cap: n} }

// touch marks a as used and says whether it was present.
func (l *lru) touch(a int) bool {
	i := slices.Index(l.order, a)
	if i < 0 {
		return false
	}
	l.order = append(append(l.order[:i:i], l.order[i+1:]...), a)
	return true
}

// add inserts a, evicting the least recently used when full.
func (l *lru) add(a int) {
	if len(l.order) >= l.cap {
		l.order = l.order[1:]
	}
	l.order = append(l.order, a)
}
