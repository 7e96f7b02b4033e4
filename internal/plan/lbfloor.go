package plan

import (
	"math"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// The TTFT floor of the lower bound (docs/planner.md, "The lower bound"): a replica count below
// which no schedule, whatever its router and engine order, starts 99 % of a Poisson tenant's
// requests in time, every request being of the pool's stated lengths (the shape the sizing and
// the simulator's default use). It rests on four facts, none of them the sizing's
// approximations:
//
//   - a replica has at most s requests started and not finished, its places: s is max-num-seqs
//     when its KV cache holds that many requests at their full length (it never preempts), and
//     min(max-num-seqs, ⌈KV capacity / prompt⌉) when it may. A request holds its place from its
//     first admission to its last token, preempted or not: the engine (vLLM's first-come
//     scheduler, and internal/sim's) puts a preempted request back at the front of its queue and
//     admits no new request while one waits there, and admits a new one only when its first
//     chunk fits beside the running ones, each of which then holds at least its prompt (were
//     one still short of it, the step's budget would be spent and nothing admitted); so at most
//     ⌈capacity / prompt⌉ − 1 run when one is admitted (internal/sim's
//     TestStartedRequestsBounded). Prompts that share a cached prefix are not counted: the
//     sizing assumes none either;
//   - the steps that prefill a request's prompt take together at least pf, the step time of the
//     whole prompt alone, and each of its O − 1 decode steps at least dec, the step time of one
//     decode over the prompt's cache alone: perf's step time is non-decreasing in every field of
//     the batch and in the neighbours' load, and subadditive over the chunks of one prompt
//     (TestStepTimeFloorProperties);
//   - a request that meets its TTFT target S was first admitted by its arrival a + S − pf (its
//     prompt still had pf to run) and leaves no earlier than a + pf + (O − 1)·dec (a preempted
//     request recomputes, it does not skip steps), so it holds a place
//     over the whole interval [a + S − pf, a + pf + (O − 1)·dec], of fixed length
//     L = 2·pf + (O − 1)·dec − S, which depends on its arrival only;
//   - equal-length intervals fixed in time can be given to N places for at most as many requests
//     as greedy in arrival order gives (interval scheduling on N machines, earliest end first),
//     and greedy is the M/G/N/N loss system of holding time L: with Poisson arrivals it turns away
//     a share B(N, λL) (Erlang B) in the long run.
//
// So with n replicas of s places no plan makes more than 1 − B(n·s, λL) of the requests meet
// their TTFT, and n is at least the fewest with B(n·s, λL) ≤ 1 %. The places of all replicas
// are pooled, which only helps the schedule, so the count holds for any router.

// ttftFloorLoss is the share of requests the floor lets miss their TTFT: the SLO's 1 %.
const ttftFloorLoss = 0.01

// ttftFloorMaxLoad bounds the Erlang recursion (one term per place): at a larger offered load
// the floor is not computed (0), and the saturation count stands alone.
const ttftFloorMaxLoad = 1 << 16

// floorTimes are pf and dec of the TTFT floor: the step time of the request's whole prompt alone
// and of one decode over the prompt's cache alone, with idle neighbours. Memoised on q.
func (q *qmodel) floorTimes() (pf, dec float64) {
	if q.floorPF == 0 {
		in := int(q.in)
		q.floorPF = q.e.StepTime(perf.Batch{PrefillTokens: in, PrefillSeqs: 1, PrefillPairs: perf.ChunkPairs(in, 0)}, perf.Load{}).Seconds()
		q.floorDec = q.e.StepTime(perf.Batch{DecodeSeqs: 1, KVTokens: int64(in)}, perf.Load{}).Seconds()
	}
	return q.floorPF, q.floorDec
}

// ttftFloor is the TTFT floor on the replica count for lam req/s of Poisson arrivals within
// slo; 0 when it does not apply (no TTFT target, other arrivals, a holding interval of no
// length) or the load is too large to compute it.
func (q *qmodel) ttftFloor(lam float64, slo perf.SLO) int {
	seqs := q.e.MaxSeqs()
	kv := q.e.KVCapacityTokens()
	if lam <= 0 || slo.TTFT <= 0 || q.out < 2 || seqs < 1 || kv <= 0 || q.in < 1 {
		return 0
	}
	// Places: where the cache holds max-num-seqs requests at full length, ⌈kv / in⌉ is at
	// least max-num-seqs and the minimum is max-num-seqs, as without preemption.
	seqs = min(seqs, int((kv+int64(q.in)-1)/int64(q.in)))
	pf, dec := q.floorTimes()
	hold := 2*pf + (q.out-1)*dec - slo.TTFT.Seconds()
	if !(hold > 0) {
		return 0
	}
	a := lam * hold
	if a > ttftFloorMaxLoad {
		return 0
	}
	places := erlangBFewest(a, ttftFloorLoss)
	return (places + seqs - 1) / seqs
}

// erlangBFewest is the fewest servers N with Erlang B(N, a) ≤ loss, by the recursion
// B(N) = a·B(N−1) / (N + a·B(N−1)), B(0) = 1 (B falls with N).
func erlangBFewest(a, loss float64) int {
	b := 1.0
	n := 0
	for b > loss {
		n++
		b = a * b / (float64(n) + a*b)
	}
	return n
}

// erlangB is Erlang B(N, a), the loss share of the M/G/N/N system.
func erlangB(servers int, a float64) float64 {
	b := 1.0
	for k := 1; k <= servers; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return b
}

// floorRate is the Poisson rate the TTFT floor applies to, 0 for other arrivals: bursty,
// constant, diurnal and traced traffic are not Poisson at the rate the pool states, and evenly
// spaced arrivals can do better than the loss system's share. Traffic of varying lengths
// (traffic.lengths uniform or exponential) gets none either: the floor's holding time is the
// mean request's, and short requests hold a slot for less.
func floorRate(t v1.Traffic) float64 {
	if (t.Pattern != v1.PatternPoisson && t.Pattern != "") || lengthLaw(t) != "" || !(t.RPS > 0) || math.IsInf(t.RPS, 0) {
		return 0
	}
	return t.RPS
}
