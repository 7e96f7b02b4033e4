package sim

import (
	"gpupool.dev/gpupool/internal/perf"
)

// startStep forms the next batch of replica ri (vLLM's scheduler, see doc.go), asks the
// performance model how long it takes given the neighbours busy now, and schedules its end.
// A replica with nothing to do stays idle.
func (s *Sim) startStep(ri int32) {
	r := s.replicas[ri]
	b := s.formBatch(r)
	if len(r.sched) == 0 {
		return
	}
	load := s.loadFor(r)
	stepT, joules := r.eng.StepTimeEnergy(b, load)
	dt := int64(stepT)
	s.gpus[r.gpu].dynJ += joules
	r.dynJ += joules
	s.tenants[r.tenant].stats.joules += joules
	if dt < 1 {
		dt = 1 // time always moves forward: a step takes at least a nanosecond
	}
	s.accountPower(r.gpu, s.now)
	s.gpus[r.gpu].stepping++
	r.stepW, r.stepEnd = joules/(float64(dt)/1e9), s.now+dt
	r.inStep, r.stepStart = true, s.now
	r.steps++
	d := s.domains[r.domain]
	if d.inStep == 0 {
		d.since = s.now
		s.gpus[d.gpu].busySM += d.smFrac
	}
	d.inStep++
	s.schedule(s.now+dt, evStepDone, ri)
}

// formBatch schedules running requests first (oldest first; a decode takes one token of the
// budget, a prefill the rest of its prompt up to the budget), preempting the newest running
// request by recompute whenever the KV cache is full, then admits waiting requests in order
// while the budget, max_num_seqs and the KV cache allow their first chunk.
func (s *Sim) formBatch(r *replica) perf.Batch {
	var b perf.Batch
	r.sched = r.sched[:0]
	budget := int32(r.budget)
	preempted := false
	for i := 0; i < len(r.running) && budget > 0; i++ {
		id := r.running[i]
		q := s.reqs.at(id)
		prefill := q.kv < q.target
		c := int32(1)
		if prefill {
			c = min(q.target-q.kv, budget)
		}
		self := false
		for r.kvUsed+int64(c) > r.kvCap {
			v := r.running[len(r.running)-1]
			r.running = r.running[:len(r.running)-1]
			s.preempt(r, v)
			preempted = true
			if v == id {
				self = true
				break
			}
		}
		if self {
			break
		}
		s.addToBatch(r, &b, id, q, c, prefill)
		budget -= c
	}
	for (!preempted || len(r.sched) == 0) && budget > 0 && len(r.running) < r.maxSeqs && r.waiting.len() > 0 {
		id := r.waiting.front()
		q := s.reqs.at(id)
		c := min(q.target-q.kv, budget)
		if r.kvUsed+int64(c) > r.kvCap {
			break
		}
		r.waiting.popFront()
		r.running = append(r.running, id)
		s.addToBatch(r, &b, id, q, c, true)
		budget -= c
	}
	return b
}

func (s *Sim) addToBatch(r *replica, b *perf.Batch, id int32, q *request, c int32, prefill bool) {
	if prefill {
		b.PrefillTokens += int(c)
		b.PrefillSeqs++
		b.PrefillPairs += perf.ChunkPairs(int(c), int(q.kv))
	} else {
		b.DecodeSeqs++
		b.KVTokens += int64(q.kv)
	}
	q.kv += c
	r.kvUsed += int64(c)
	r.sched = append(r.sched, schedItem{req: id, tokens: c, prefill: prefill})
}

// preempt evicts request id from r's KV cache; it goes back to the front of the queue and will
// recompute its prompt and the tokens it generated (vLLM's recompute preemption).
func (s *Sim) preempt(r *replica, id int32) {
	q := s.reqs.at(id)
	r.kvUsed -= int64(q.kv)
	q.kv = 0
	q.target = q.in + q.gen
	r.waiting.pushFront(id)
	r.preemptions++
	s.tenants[r.tenant].stats.preemptions++
}

// loadFor describes r's neighbours at this moment: the other replicas of its domain in a step
// (with their MPS caps) and, for a MIG instance, the share of the board other instances keep busy.
func (s *Sim) loadFor(r *replica) perf.Load {
	d := s.domains[r.domain]
	var l perf.Load
	if len(d.replicas) > 1 {
		capSum := 0.0
		for _, o := range d.replicas {
			n := s.replicas[o]
			if n == r || !n.inStep {
				continue
			}
			l.Active++
			capSum += n.smPct
		}
		if l.Active > 0 {
			l.Duty = 1
			if capSum > 0 {
				l.SMPercent = capSum / float64(l.Active)
			}
		}
	}
	if g := s.gpus[d.gpu]; len(g.domains) > 1 {
		own := 0.0
		if d.inStep > 0 {
			own = d.smFrac
		}
		l.BoardBusy = min(1, max(0, g.busySM-own))
	}
	return l
}

// stepDone applies replica ri's finished step: prefill chunks that complete a prompt and every
// decode produce a token; finished requests leave. Then the next step starts at once.
func (s *Sim) stepDone(ri int32) {
	r := s.replicas[ri]
	g := s.gpus[r.gpu]
	st := &s.tenants[r.tenant].stats
	done := false
	for _, it := range r.sched {
		q := s.reqs.at(it.req)
		if it.prefill {
			r.inTokens += int64(it.tokens)
		}
		if it.prefill && q.kv < q.target {
			continue // a chunk of a longer prompt
		}
		q.gen++
		r.outTokens++
		g.tokens++
		st.tokens++
		if q.first < 0 {
			q.first = s.now
		}
		if q.gen >= q.out {
			done = true
		}
	}
	if done {
		s.complete(r, st)
	}
	s.accountPower(r.gpu, s.now)
	g.stepping--
	r.inStep = false
	d := s.domains[r.domain]
	d.inStep--
	if d.inStep == 0 {
		s.addBusy(r.domain, d.since, s.now)
		g.busySM -= d.smFrac
	}
	s.startStep(ri)
}

// complete removes finished requests from r's running list, keeping the order, and records them.
func (s *Sim) complete(r *replica, st *tenantStats) {
	k := 0
	for _, id := range r.running {
		q := s.reqs.at(id)
		if q.gen < q.out {
			r.running[k] = id
			k++
			continue
		}
		r.kvUsed -= int64(q.kv)
		st.record(q, s.now)
		s.reqs.release(id)
	}
	r.running = r.running[:k]
}
