package sim

import (
	"pgregory.net/rapid"

	"testing"
	"time"
)

// quietSim is the small pool with no traffic: a stage on which requests are placed by hand on
// replica 0 (chat) with a chosen budget and KV capacity.
func quietSim(t *testing.T, budget int, kvCap int64) (*Sim, *replica, int32) {
	t.Helper()
	pool := loadPool(t, "pool-small.yaml")
	for i := range pool.Tenants {
		pool.Tenants[i].Traffic.RPS = 0
	}
	s, err := New(Input{Pool: pool, Plan: loadPlan(t, "plan-small.yaml")}, Config{Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range s.replicas {
		if r.name == "chat/0" {
			r.budget, r.kvCap = budget, kvCap
			return s, r, int32(i)
		}
	}
	t.Fatal("no replica chat/0")
	return nil, nil, 0
}

func (s *Sim) enqueue(r *replica, in, out int32) int32 {
	id := s.reqs.alloc(pending{tenant: r.tenant, in: in, out: out}, s.now)
	r.waiting.pushBack(id)
	return id
}

// step runs replica r's next step to its end.
func (s *Sim) step(t *testing.T, r *replica) {
	t.Helper()
	e := s.queue.pop()
	if e.kind != evStepDone || s.replicas[e.id] != r {
		t.Fatalf("next event %+v is not the replica's step", e)
	}
	s.now = e.at
	s.stepDone(e.id)
}

// TestChunkedPrefill: with a 100-token budget a 250-token prompt takes chunks of 100, 100 and 50;
// the third step produces the first token, then one token per step.
func TestChunkedPrefill(t *testing.T) {
	s, r, ri := quietSim(t, 100, 10000)
	id := s.enqueue(r, 250, 3)
	s.startStep(ri)
	wantPrefill := []int{100, 100, 50}
	for k, w := range wantPrefill {
		if len(r.sched) != 1 || !r.sched[0].prefill || int(r.sched[0].tokens) != w {
			t.Fatalf("step %d: scheduled %+v, want a prefill chunk of %d", k+1, r.sched, w)
		}
		s.step(t, r)
	}
	q := s.reqs.at(id)
	// the next step, a decode, is formed as soon as the prompt's ends: 250 + 1 cached.
	if q.gen != 1 || q.first < 0 || q.kv != 251 {
		t.Fatalf("after the prompt: gen %d, first %d, kv %d; want 1, set, 251", q.gen, q.first, q.kv)
	}
	// two decodes: gen 1 → 3 = out: done, cache freed.
	s.step(t, r)
	s.step(t, r)
	st := s.tenants[r.tenant].stats
	if st.completed != 1 || st.tokens != 3 || r.kvUsed != 0 || len(r.running) != 0 || r.inStep {
		t.Errorf("completed %d, tokens %d, kv %d, running %d, in step %v; want 1, 3, 0, 0, false",
			st.completed, st.tokens, r.kvUsed, len(r.running), r.inStep)
	}
}

// TestPreemptionByRecompute: KV capacity 300. A (200 + 100) and B (90 + 100) are admitted
// together (200 + 90 = 290 ≤ 300) and each gets its first token. Every decode step caches one
// token each: 292, 294, … 300 for the fifth decode. Forming the sixth, A's token would make 301: B, the newest,
// is preempted (its 90 + 5 = 95 tokens freed, 300 − 95 = 205, then A's token: 206) and waits at
// the front of the queue to recompute 90 + 6 = 96 tokens (it has 6 tokens: first + 5 decodes).
func TestPreemptionByRecompute(t *testing.T) {
	s, r, ri := quietSim(t, 512, 300)
	a := s.enqueue(r, 200, 100)
	b := s.enqueue(r, 90, 100)
	s.startStep(ri)
	if r.kvUsed != 290 || len(r.running) != 2 {
		t.Fatalf("after admission: kv %d, running %d; want 290, 2", r.kvUsed, len(r.running))
	}
	for range 6 { // the prefill step and five decode steps
		s.step(t, r)
	}
	qa, qb := s.reqs.at(a), s.reqs.at(b)
	if r.preemptions != 1 || len(r.running) != 1 || r.running[0] != a || r.waiting.len() != 1 || r.waiting.front() != b {
		t.Fatalf("preemptions %d, running %v, waiting %d; want 1, [A], [B]", r.preemptions, r.running, r.waiting.len())
	}
	if qb.kv != 0 || qb.target != 96 || qb.gen != 6 || r.kvUsed != 206 || qa.kv != 206 {
		t.Errorf("B kv %d target %d gen %d, used %d, A kv %d; want 0, 96, 6, 206, 206", qb.kv, qb.target, qb.gen, r.kvUsed, qa.kv)
	}
	// Run to the end: both finish, B after recomputing; tokens are not generated twice.
	for r.inStep {
		s.step(t, r)
	}
	st := s.tenants[r.tenant].stats
	if st.completed != 2 || st.tokens != 200 || r.kvUsed != 0 {
		t.Errorf("completed %d, tokens %d, kv %d; want 2, 200 (100 + 100), 0", st.completed, st.tokens, r.kvUsed)
	}
}

// TestMaxSeqs: max_num_seqs 2 admits two of three requests; the third waits.
func TestMaxSeqs(t *testing.T) {
	s, r, ri := quietSim(t, 8192, 100000)
	r.maxSeqs = 2
	for range 3 {
		s.enqueue(r, 10, 5)
	}
	s.startStep(ri)
	if len(r.running) != 2 || r.waiting.len() != 1 {
		t.Errorf("running %d, waiting %d; want 2, 1", len(r.running), r.waiting.len())
	}
}

// TestStartedRequestsBounded checks the scheduler fact the planner's TTFT floor rests on where
// the KV cache may preempt (plan's lbfloor.go): a replica never has more requests started and not
// finished, running or preempted and waiting to recompute, than max_num_seqs or ⌈KV capacity /
// prompt⌉, for requests of one prompt length. A fresh request is admitted only when every
// preempted one runs again (they wait at the front of the queue) and, the step's budget not
// spent, every running request holds its whole prompt; so the ones before it hold at least a
// prompt each, and its own first chunk must fit beside them. Random budgets (chunks shorter than
// a prompt included), capacities, max_num_seqs and arrivals.
func TestStartedRequestsBounded(t *testing.T) {
	preempting, atLimit := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		in := int32(rapid.IntRange(1, 400).Draw(rt, "in"))
		out := int32(rapid.IntRange(1, 200).Draw(rt, "out"))
		kvCap := int64(in+out) + rapid.Int64Range(0, 12*int64(in+out)).Draw(rt, "spare")
		s, r, ri := quietSim(t, rapid.IntRange(1, 1200).Draw(rt, "budget"), kvCap)
		r.maxSeqs = rapid.IntRange(1, 40).Draw(rt, "maxSeqs")
		limit := min(int64(r.maxSeqs), (kvCap+int64(in)-1)/int64(in))
		started := map[int32]bool{}
		for range rapid.IntRange(1, 400).Draw(rt, "steps") {
			for range rapid.IntRange(0, 3).Draw(rt, "arrivals") {
				started[s.enqueue(r, in, out)] = false
			}
			if !r.inStep {
				s.startStep(ri)
			}
			for _, id := range r.running {
				started[id] = true
			}
			n := int64(0)
			for _, id := range r.running {
				if started[id] {
					n++
				}
			}
			for i := range r.waiting.len() {
				if started[r.waiting.at(i)] {
					n++
				}
			}
			if n == limit && r.preemptions > 0 {
				atLimit++
			}
			if n > limit {
				rt.Fatalf("%d requests started and not finished, more than min(max_num_seqs %d, ⌈%d / %d⌉) = %d",
					n, r.maxSeqs, kvCap, in, limit)
			}
			if r.inStep {
				s.step(t, r)
			}
		}
		if r.preemptions > 0 {
			preempting++
		}
	})
	if preempting == 0 || atLimit == 0 {
		t.Errorf("%d runs preempted, %d steps reached the limit in them: the test checks little", preempting, atLimit)
	}
}
