package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// heldShape is one replica of model (bf16) on an H200 MIG instance of profile at start, for
// prompts of in and outputs of out tokens in the mean under law, with the SLO given and the
// pool's concurrency conc (0: unset).
type heldShape struct {
	model, profile string
	start, in, out int
	law            v1.Lengths
	ttft, tpot     time.Duration
	conc           int
}

func (s heldShape) String() string {
	return fmt.Sprintf("%s on %s, %d + %d %s", s.model, s.profile, s.in, s.out, s.law)
}

// qmodel is the shape's queueing model as the planner builds it.
func (s heldShape) qmodel(t *testing.T) *qmodel {
	t.Helper()
	e := migEngine(t, s.model, "H200-141GB", s.profile, 0)
	return newQModel(e, perf.Workload{InputTokens: s.in, OutputTokens: s.out}, perf.Load{}).withLengths(s.law, 0).withSeqCap(s.conc)
}

// simulate runs the shape's replica alone at rps for about requests requests with seed, at
// --max-num-seqs seqs and --max-model-len maxLen.
func (s heldShape) simulate(t *testing.T, rps float64, seqs, maxLen, requests int, seed uint64) (attain float64, preempt int64, judged int) {
	t.Helper()
	conc := ""
	if s.conc > 0 {
		conc = fmt.Sprintf("  concurrency: %d\n", s.conc)
	}
	pool, err := v1.LoadPool([]byte(fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: held}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H200, count: 1}]
tenants:
- name: t
  isolation: hard
  model: {name: %s}
  traffic: {rps: %g, inputTokens: %d, outputTokens: %d, lengths: %s}
  slo: {ttftP99: %dms, tpotP99: %dms}
  replicas: 1
%s`, s.model, rps, s.in, s.out, s.law, s.ttft.Milliseconds(), s.tpot.Milliseconds(), conc)))
	if err != nil {
		t.Fatal(err)
	}
	pl := migPlan(t, "held", "H200-141GB", s.profile, []int{s.start}, maxLen, seqs)
	d := time.Duration(float64(requests)/rps*1e9) + 30*time.Second
	tr := simulate(t, pool, pl, d, seed).Report.Tenants[0]
	return tr.SLOAttainment, tr.Preemptions, int(tr.SLOJudged)
}

// TestVariedLengthsKVHold: a request in flight is length-biased, so under exponential lengths
// the part of its output decoded so far is exponential of mean out, not out/2, and the KV cache
// it holds is about in + out, not in + out/2 (heldMoments). One replica of llama-3.1-8b on an
// H200 1g.35gb instance (105,040 KV tokens) at 100 + 800 exponential tokens (t00593 of
// genscale.py 1000 1000 1): the model counted in + U·out tokens a request and gave 6.0 req/s,
// where the simulator preempts thousands of times and meets the SLO for 28–41 % of the requests
// at 5; now the model's rate meets it for 99 % at seeds 1 and 2 (no more than a few preemptions),
// and 1.15 times it does not at one of them at least (the simulator's highest rate at 99 % over
// seeds 1–3 is 3.80, the model's 3.69).
func TestVariedLengthsKVHold(t *testing.T) {
	s := heldShape{"llama-3.1-8b", "1g.35gb", 6, 100, 800, v1.LengthsExponential, 5000 * time.Millisecond, 100 * time.Millisecond, 0}
	q := s.qmodel(t)
	if !q.kvBound || q.capped {
		t.Fatalf("setup: slots %d kvBound %t capped %t: want an uncapped KV-bound replica", q.slots, q.kvBound, q.capped)
	}
	rate, st := q.maxRate(perf.SLO{TTFT: s.ttft, TPOT: s.tpot})
	worst := func(r float64) (float64, int64) {
		w, pre := 1.0, int64(0)
		for seed := uint64(1); seed <= 2; seed++ {
			a, p, _ := s.simulate(t, r, 256, 8192, 2600, seed)
			w, pre = min(w, a), max(pre, p)
		}
		return w, pre
	}
	at, pre := worst(rate)
	over, preOver := worst(1.15 * rate)
	t.Logf("%v: model %.3f req/s (TTFT %.3f s, TPOT %.4f s, %.1f in flight); simulator %.2f %% (%d preemptions), at 1.15 times %.2f %% (%d)",
		s, rate, st.ttft, st.tpot, st.inFlight, 100*at, pre, 100*over, preOver)
	if at < 0.99 {
		t.Errorf("at the model's %.3f req/s the simulator meets the SLO for %.2f %% of the requests (%d preemptions)", rate, 100*at, pre)
	}
	if over >= 0.99 {
		t.Errorf("at 1.15 times the model's %.3f req/s the simulator still meets the SLO (%.2f %%): the model is far below it", rate, 100*over)
	}
}

// TestHeldMomentsAgainstSampling: heldMoments' mean and second moment are those of a prompt of
// the law plus the decoded part of a length-biased output, sampled as a request in flight is
// (its output drawn with chance proportional to its length, then a uniform point in it).
func TestHeldMomentsAgainstSampling(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, law := range []v1.Lengths{v1.LengthsExponential, v1.LengthsUniform} {
		q := &qmodel{in: 300, out: 700, lengths: law}
		mu, ex2 := q.heldMoments()
		draw := func(m float64) float64 {
			if law == v1.LengthsUniform {
				return m/2 + rng.Float64()*m
			}
			return rng.ExpFloat64() * m
		}
		const n = 400000
		var s1, s2 float64
		for range n {
			// length-biased output by rejection: accept L with chance L/max
			var l float64
			for {
				l = draw(q.out)
				if rng.Float64()*20*q.out < l {
					break
				}
			}
			x := draw(q.in) + rng.Float64()*l
			s1 += x
			s2 += x * x
		}
		gm, g2 := s1/n, s2/n
		if math.Abs(gm-mu) > 0.01*mu || math.Abs(g2-ex2) > 0.03*ex2 {
			t.Errorf("%s: heldMoments %.1f, %.4g; sampled %.1f, %.4g", law, mu, ex2, gm, g2)
		}
	}
}
