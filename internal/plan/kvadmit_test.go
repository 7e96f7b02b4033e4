package plan

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// tokenAdmissionWeights is the law of a KV-bound replica's capacity if the engine's admission
// by cache room were modelled instead of perf's slots: with n requests running (each holding
// in + U·out tokens, U uniform, as in kvhold.go) an arrival waits with probability
// b(n) = P(n·in + out·Sₙ > cap − chunk), always at max-num-seqs; P(C = n) = b(n) − b(n−1) from
// lo on. An alternative to the slots' rule, kept here as the experiment
// TestTokenAdmissionSlotWait measures; nil when the replica is not KV-bound.
func tokenAdmissionWeights(q *qmodel) (lo int, w []float64) {
	maxSeqs := q.e.MaxSeqs()
	if !q.kvBound || maxSeqs <= q.slots || math.IsInf(q.kvSeqs, 1) || q.out <= 0 {
		return 0, nil
	}
	room := q.kvSeqs*(q.in+q.out) - float64(q.chunk)
	b := func(n int) float64 {
		if n >= maxSeqs {
			return 1
		}
		return irwinHallTail(n, (room-float64(n)*q.in)/q.out)
	}
	lo = 1
	for lo < maxSeqs && b(lo) <= 0 {
		lo++
	}
	prev := 0.0
	for n := lo; prev < 1; n++ {
		bn := math.Max(b(n), prev)
		w = append(w, bn-prev)
		prev = bn
	}
	return lo, w
}

// tokenAdmissionTTFT is q's TTFT p99 for one replica at lam req/s with the slot wait taken over
// tokenAdmissionWeights' capacities: the mixture of slotWaitP99's tail at each capacity c,
// P(W > x) = max(C_c·(1 − x/svc)^c, the M/M/N term), in place of the wait at the slots.
func tokenAdmissionTTFT(q *qmodel, lam float64) float64 {
	s := q.state(lam, 1)
	o1 := q.out - 1
	t, _ := q.meanStep(lam)
	d99 := math.Min(float64(q.slots), 1+poissonP99(lam*o1*t))
	svc := (q.k + o1) * q.step(d99, lam*q.k*t)
	safety := slotWaitSafety
	if q.slots == 1 {
		safety = slotWaitSafetyOne
	}
	if lam*svc > busySlotsSteady*float64(q.slots) {
		safety *= busySlotsSpread
	}
	base := s.ttft - safety*slotWaitP99(lam, svc, q.slots, q.slots)
	lo, w := tokenAdmissionWeights(q)
	a := lam * svc
	tail := func(x float64) float64 {
		p := 0.0
		for i, wi := range w {
			c := float64(lo + i)
			if a >= c {
				p += wi
				continue
			}
			ec := erlangC(lo+i, a)
			res := 0.0
			if x < svc {
				res = ec * math.Pow(1-x/svc, c)
			}
			p += wi * math.Max(res, ec*math.Exp(-(c-a)*x/(allenCunneen*(1+1/c)*svc)))
		}
		return p
	}
	lw, hi := 0.0, svc
	for tail(hi) > 0.01 && hi < 1e6*svc {
		hi *= 2
	}
	if tail(0) <= 0.01 {
		hi = 0
	}
	for range 60 {
		if mid := (lw + hi) / 2; tail(mid) > 0.01 {
			lw = mid
		} else {
			hi = mid
		}
	}
	return base + safety*hi
}

// kvCalPool is one synthetic tenant (template, from synthPool(100)) alone on three nodes of
// board, at rps with in + out tokens.
func kvCalPool(template, board string, rps float64, in, out int) *v1.Pool {
	base := synthPool(100)
	i := slices.IndexFunc(base.Tenants, func(t v1.Tenant) bool { return t.Name == template })
	tn := base.Tenants[i]
	tn.Replicas, tn.MinReplicas, tn.MaxReplicas = nil, nil, nil
	tn.Traffic.RPS, tn.Traffic.InputTokens, tn.Traffic.OutputTokens = rps, in, out
	pool := &v1.Pool{Metadata: v1.Metadata{Name: "kvcal"}, Policy: base.Policy, Tenants: []v1.Tenant{tn}}
	for _, n := range []string{"n0", "n1", "n2"} {
		pool.Fleet.Nodes = append(pool.Fleet.Nodes, v1.Node{Name: n, GPUs: []v1.GPUGroup{{Board: board, Count: 8}}})
	}
	v1.Default(pool)
	return pool
}

// TestTokenAdmissionSlotWait is why the slot wait of a KV-bound replica still counts perf's
// slots (the cache over a request's mean hold, rounded down) rather than the engine's admission
// by cache room, although the slots are what keeps three llama-2-13b tenants of the synthetic
// 100-tenant pool at two MIG instances (docs/planner.md, "What the bound lacks"). vLLM and the
// simulator admit a request whenever its prompt fits the cache, so a replica of 5 slots runs a
// sixth request when the five hold little, and preempts when they grow. One replica, each alone
// on an instance of its own (the rest of the board idle), three runs of about 2,500 requests:
//
//   - llama-2-13b, 800 + 200 tokens at 0.33 req/s on an H100 1g.20gb instance (t-00032's shape):
//     every run meets the SLO for 99 % of the requests or more, where the slots' model has a TTFT
//     p99 at least 1.4× the simulator's worst, above 95 % of the 1.5 s target; the token-admission
//     model is within 0.9–1.2× the simulator's worst p99.
//   - llama-2-13b, 400 + 400 tokens at 0.36 req/s on an H100 2g.20gb instance: a run misses the
//     SLO (98.7 % when measured), and the token-admission model would accept the one replica
//     (its p99 within 95 % of the target) where the slots' model does not. The longer the output
//     against the prompt, the more the requests admitted early grow and are preempted, which that
//     model does not count: it was 0.25–0.74× the simulator's p99 on such points.
func TestTokenAdmissionSlotWait(t *testing.T) {
	type point struct {
		board, label string
		rps          float64
		in, out      int
		conservative bool // the slots' model refuses one replica the simulator accepts
	}
	points := []point{
		{"H100-SXM5-80GB", "mig 1g.20gb", 0.33, 800, 200, true},
		{"H100-SXM5-80GB", "mig 2g.20gb", 0.36, 400, 400, false},
	}
	const seeds = 3 // about a second in all: the checks are over the three runs
	for _, pt := range points {
		pool := kvCalPool("t-00032", pt.board, pt.rps, pt.in, pt.out)
		p, err := newPlanner(pool, Options{})
		if err != nil {
			t.Fatal(err)
		}
		p.ctx = context.Background()
		p.evaluate()
		tn := p.tenants[0]
		i := slices.IndexFunc(tn.feasible, func(c *cand) bool { return c.label() == pt.label })
		if i < 0 {
			t.Fatalf("%s: no candidate %s", pt.board, pt.label)
		}
		q := tn.feasible[i].ev.q.bestCase() // idle neighbours, as in the runs
		if !q.kvBound {
			t.Fatalf("%s %s: the KV cache does not set the slots", pt.board, pt.label)
		}
		target := ttftMargin * tn.slo.TTFT.Seconds()
		slots := q.state(pt.rps, 1)
		tokens := tokenAdmissionTTFT(q, pt.rps)
		pl := bestCasePlan(t, pool, pt.label, 1)
		if pl == nil {
			t.Fatalf("%s: no plan of one replica", pt.label)
		}
		worst, att := 0.0, 1.0
		for seed := uint64(1); seed <= seeds; seed++ {
			r := simulate(t, pool, pl, time.Duration(2500/pt.rps*1e9)+30*time.Second, seed).Report.Tenants[0]
			if r.Completed < 2000 {
				t.Fatalf("%s: %d requests completed", pt.label, r.Completed)
			}
			worst, att = max(worst, r.TTFT.P99/1000), min(att, r.SLOAttainment)
		}
		lo, w := tokenAdmissionWeights(q)
		t.Logf("%s %s, %d + %d tokens at %.2f req/s: %d slots (capacity from %d: %.2f); TTFT p99 by the slots %.3f s (%v), by token admission %.3f s; simulated worst p99 %.3f s, attainment %.2f %%",
			pt.board, pt.label, pt.in, pt.out, pt.rps, q.slots, lo, w, slots.ttft, meets(slots, tn.slo), tokens, worst, 100*att)
		if pt.conservative {
			if meets(slots, tn.slo) == perf.LimitNone || slots.ttft < 1.4*worst || att < 0.99 {
				t.Errorf("%s: the slots' model is no longer conservative here (p99 %.3f s against the simulator's %.3f s, %.2f %%)", pt.label, slots.ttft, worst, 100*att)
			}
			if r := tokens / worst; r < 0.9 || r > 1.2 {
				t.Errorf("%s: token admission's p99 %.3f s is %.2f× the simulator's", pt.label, tokens, r)
			}
			continue
		}
		if att >= 0.99 || tokens > target || meets(slots, tn.slo) == perf.LimitNone {
			t.Errorf("%s: token admission is no longer shown optimistic here (its p99 %.3f s, target %.3f s; the slots' %.3f s; simulated %.2f %%)", pt.label, tokens, target, slots.ttft, 100*att)
		}
	}
}
