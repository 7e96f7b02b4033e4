package plan

import (
	"fmt"
	"os"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

// migShape is a tenant of fixed prompts of in + 150 tokens on exclusive MIG instances of profile
// on one board (fleet names it in the pool, board in the plan), with a TTFT target of ttft and a
// TPOT target of 100 ms.
type migShape struct {
	model, board, fleet, profile string
	in                           int
	ttft                         time.Duration
}

func (s migShape) slo() perf.SLO { return perf.SLO{TTFT: s.ttft, TPOT: 100 * time.Millisecond} }

// simMIGShape is the worst SLO attainment, over seeds 1–3 of about 2,500 requests each, of s at
// rps req/s on n instances of one GPU as the planner renders them (max-num-batched-tokens 2,048,
// max-model-len 8,192) at --max-num-seqs seqs.
func simMIGShape(t *testing.T, s migShape, rps float64, n, seqs int) float64 {
	t.Helper()
	return simMIGShapeSeeds(t, s, rps, n, seqs, 1, 3)
}

// simMIGShapeSeeds is simMIGShape over seeds from…to.
func simMIGShapeSeeds(t *testing.T, s migShape, rps float64, n, seqs int, from, to uint64) float64 {
	t.Helper()
	pool, err := v1.LoadPool([]byte(fmt.Sprintf(`apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: few}
fleet:
  nodes:
  - name: n0
    gpus: [{board: %s, count: 1}]
tenants:
- name: t
  isolation: hard
  model: {name: %s}
  traffic: {rps: %g, inputTokens: %d, outputTokens: 150}
  slo: {ttftP99: %dms, tpotP99: 100ms}
  replicas: %d
`, s.fleet, s.model, rps, s.in, s.ttft.Milliseconds(), n)))
	if err != nil {
		t.Fatal(err)
	}
	step := 1 // placements 6, 5, 4 of 1g.10gb; 6, 4, 2 of 1g.20gb
	if s.profile == "1g.20gb" {
		step = 2
	}
	pl := migPlan(t, "few", s.board, s.profile, downFrom(n, step), 8192, seqs)
	d := time.Duration(2500/rps*1e9) + 30*time.Second
	worst := 1.0
	for seed := from; seed <= to; seed++ {
		worst = min(worst, simulate(t, pool, pl, d, seed).Report.Tenants[0].SLOAttainment)
	}
	return worst
}

var (
	llama3bOn10gb = func(in int) migShape {
		return migShape{"llama-3.2-3b", "H100-SXM5-80GB", "H100", "1g.10gb", in, 2800 * time.Millisecond}
	}
	llama8bOn20gb = func(in int) migShape {
		return migShape{"llama-3.1-8b", "A100-SXM4-80GB", "A100-SXM4-80GB", "1g.20gb", in, 4 * time.Second}
	}
)

// A capped replica of one to three slots waits, when its slots are full, for the first of them to
// free, and misses only when that wait exceeds what the TTFT target leaves (cappedWait, ADR
// 0094). Bounding the chance of finding them full instead (cappedWaitMiss, as on more slots)
// sized llama-3.2-3b on H100 1g.10gb instances at 0.42 and 0.55 of the simulator's limit for
// 4,000-token prompts (3 slots) on one and two replicas. At the model's rate every run must meet
// the SLO for 99 % of the requests, and at the rate over 0.75 (the model at least 0.75 of the
// simulator's limit) some run must not.
func TestCappedFewSlotsNearSimulator(t *testing.T) {
	s := llama3bOn10gb(4000)
	q := migModel(t, s.model, s.board, s.profile, s.in, 150, 0)
	if !q.capped || q.slots != 3 {
		t.Fatalf("%d-token prompts on %s: capped %t, %d slots; want a capped replica of 3", s.in, s.profile, q.capped, q.slots)
	}
	for n := 1; n <= 2; n++ {
		rate, _ := q.maxRateOver(s.slo(), n, 0)
		at := simMIGShape(t, s, rate, n, q.slots)
		over := simMIGShape(t, s, rate/0.75, n, q.slots)
		t.Logf("%d × %s, %d slots: model %.4f req/s (%s beyond), simulator %.2f %% there, %.2f %% at %.4f",
			n, s.profile, q.slots, rate, meets(q.state(rate*1.01, n), s.slo()), 100*at, 100*over, rate/0.75)
		if at < 0.99 {
			t.Errorf("%d replicas: %.2f %% of requests within the SLO at the model's %.4f req/s", n, 100*at, rate)
		}
		if over >= 0.99 {
			t.Errorf("%d replicas: the simulator still meets the SLO (%.2f %%) at %.4f req/s, the model's %.4f over 0.75",
				n, 100*over, rate/0.75, rate)
		}
	}
}

// Pricing the wait of one to three slots must not let the slot be held past the target: taking
// the capped rule off below four slots (the holding time alone) let llama-3.1-8b on A100 1g.20gb
// instances, whose slot is held more than twice its 4 s target, meet the SLO for only 98.5–98.9 %
// of the requests (ADR 0091). At the model's rate every run must meet it for 99 % on one to three
// replicas of 3,000-, 4,000- and 6,000-token prompts (3, 2 and 1 slots), and llama-3.2-3b on H100
// 1g.10gb of 6,000 and 8,000 tokens (2 and 1 slots) too.
func TestCappedFewSlotsMeetSLO(t *testing.T) {
	shapes := []migShape{llama8bOn20gb(3000), llama8bOn20gb(4000), llama8bOn20gb(6000), llama3bOn10gb(6000), llama3bOn10gb(8000)}
	for _, s := range shapes {
		q := migModel(t, s.model, s.board, s.profile, s.in, 150, 0)
		if !q.capped || q.slots >= cappedFewSlots {
			t.Fatalf("%s, %d-token prompts: capped %t, %d slots; want a capped replica of few slots", s.model, s.in, q.capped, q.slots)
		}
		for n := 1; n <= 3; n++ {
			rate, _ := q.maxRateOver(s.slo(), n, 0)
			at := simMIGShape(t, s, rate, n, q.slots)
			t.Logf("%s, %d-token prompts, %d × %s (%d slots): model %.4f req/s, simulator %.2f %% there",
				s.model, s.in, n, s.profile, q.slots, rate, 100*at)
			if at < 0.99 {
				t.Errorf("%s, %d-token prompts, %d replicas: %.2f %% of requests within the SLO at the model's %.4f req/s",
					s.model, s.in, n, 100*at, rate)
			}
		}
	}
}

// TestCappedWaitSweep is the calibration sweep of the capped wait (ADR 0091, ADR 0094 and its
// amendment), run only with GPUPOOL_CAPPED_SWEEP=1: for each shape of the grid on one to three
// replicas, the model's highest rate (maxRateOver), the simulator's worst attainment there over
// seeds 1–3 and 4–8, and the simulator's highest rate where each of seeds 1–3 meets the SLO for
// 99 % of the requests (bisection to 2.5 %), with the model's rate over it.
func TestCappedWaitSweep(t *testing.T) {
	if os.Getenv("GPUPOOL_CAPPED_SWEEP") != "1" {
		t.Skip("the calibration sweep runs with GPUPOOL_CAPPED_SWEEP=1")
	}
	qwen := func(in int) migShape {
		return migShape{"qwen2.5-3b", "H100-SXM5-80GB", "H100", "1g.10gb", in, 2800 * time.Millisecond}
	}
	shapes := []migShape{llama3bOn10gb(4000), llama3bOn10gb(6000), llama3bOn10gb(8000),
		llama8bOn20gb(3000), llama8bOn20gb(4000), llama8bOn20gb(6000),
		qwen(3000), qwen(4000), qwen(5000), qwen(6000), qwen(8000),
		llama3bOn10gb(3500), llama8bOn20gb(2500)} // the last two of four slots
	for _, s := range shapes {
		q := migModel(t, s.model, s.board, s.profile, s.in, 150, 0)
		if !q.capped {
			t.Fatalf("%s, %d-token prompts: not capped", s.model, s.in)
		}
		for n := 1; n <= 3; n++ {
			rate, _ := q.maxRateOver(s.slo(), n, 0)
			meets := func(r float64) bool { return simMIGShape(t, s, r, n, q.slots) >= 0.99 }
			lo, hi := rate, 0.0
			if meets(lo) {
				for hi = 1.25 * lo; meets(hi); hi *= 1.25 {
					lo = hi
				}
			} else {
				for hi, lo = lo, 0.8*lo; !meets(lo); lo *= 0.8 {
					hi = lo
				}
			}
			for hi/lo > 1.025 {
				if mid := (lo + hi) / 2; meets(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			t.Logf("%s %s, %d + 150 tokens, %d slots, %d replicas: model %.4f req/s (seeds 1–3 %.2f %%, 4–8 %.2f %%), simulator 99 %% up to %.4f, ratio %.2f",
				s.model, s.profile, s.in, q.slots, n, rate, 100*simMIGShape(t, s, rate, n, q.slots),
				100*simMIGShapeSeeds(t, s, rate, n, q.slots, 4, 8), lo, rate/lo)
		}
	}
}

// Over several capped replicas of four slots or more the least-loaded router spreads the bursts
// that fill one replica's slots, and a waiting arrival misses only where the pooled wait exceeds
// what the target leaves (cappedSpreadWait, ADR 0094's amendment). Bounding the chance of finding
// every slot full alone (cappedWaitMiss) sized two replicas of qwen2.5-3b on H100 1g.10gb
// instances at 0.84 of the simulator's limit for 3,000-token prompts (16 slots) and llama-3.2-3b
// at 0.59 for 3,500 (4 slots). At the model's rate every run must meet the SLO for 99 % of the
// requests, and at the rate over 0.9 (the model at least 0.9 of the simulator's limit, 0.75 for
// the four slots) some run must not.
func TestCappedSpreadNearSimulator(t *testing.T) {
	qwen := migShape{"qwen2.5-3b", "H100-SXM5-80GB", "H100", "1g.10gb", 3000, 2800 * time.Millisecond}
	for _, c := range []struct {
		s     migShape
		slots int
		frac  float64
	}{{qwen, 16, 0.9}, {llama3bOn10gb(3500), 4, 0.75}} {
		s := c.s
		q := migModel(t, s.model, s.board, s.profile, s.in, 150, 0)
		if !q.capped || q.slots != c.slots {
			t.Fatalf("%s, %d-token prompts: capped %t, %d slots; want a capped replica of %d", s.model, s.in, q.capped, q.slots, c.slots)
		}
		const n = 2
		rate, _ := q.maxRateOver(s.slo(), n, 0)
		at := simMIGShape(t, s, rate, n, q.slots)
		over := simMIGShape(t, s, rate/c.frac, n, q.slots)
		t.Logf("%s, %d-token prompts, %d × %s (%d slots): model %.4f req/s (%s beyond), simulator %.2f %% there, %.2f %% at %.4f",
			s.model, s.in, n, s.profile, q.slots, rate, meets(q.state(rate*1.01, n), s.slo()), 100*at, 100*over, rate/c.frac)
		if at < 0.99 {
			t.Errorf("%s, %d-token prompts: %.2f %% of requests within the SLO at the model's %.4f req/s", s.model, s.in, 100*at, rate)
		}
		if over >= 0.99 {
			t.Errorf("%s, %d-token prompts: the simulator still meets the SLO (%.2f %%) at %.4f req/s, the model's %.4f over %.2f",
				s.model, s.in, 100*over, rate/c.frac, rate, c.frac)
		}
	}
}
