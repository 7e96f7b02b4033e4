package plan

import (
	"fmt"
	"strings"
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
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: gpupool.dev/v1\nkind: Plan\nmetadata: {name: few}\npool: few\ngpus:\n- {board: %s, index: 0, node: n0, mode: mig, role: pool, instances: [", s.board)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{profile: %s, start: %d, replicas: [{index: %d, tenant: t, vllmArgs: [--gpu-memory-utilization, "0.9", --max-model-len, "8192", --max-num-seqs, "%d", --max-num-batched-tokens, "2048"]}]}`,
			s.profile, 6-step*i, i, seqs)
	}
	b.WriteString("]}\nsummary: {gpusTotal: 1, gpusUsed: 1}\ntenants:\n- name: t\n  replicas:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {gpu: n0/0, index: %d, instance: %s@%d, slice: mig}\n", i, s.profile, 6-step*i)
	}
	pl, err := v1.DecodePlan([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	d := time.Duration(2500/rps*1e9) + 30*time.Second
	worst := 1.0
	for seed := uint64(1); seed <= 3; seed++ {
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
