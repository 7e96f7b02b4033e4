package plan

import (
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/perf"
)

func TestDemandReplicas(t *testing.T) {
	two, three := 2, 3
	for _, c := range []struct {
		name string
		t    v1.Tenant
		rate float64
		want int
	}{
		{"ceil of rps over rate", v1.Tenant{Traffic: v1.Traffic{RPS: 10}}, 3, 4},                 // ceil(10/3) = 4
		{"exact multiple", v1.Tenant{Traffic: v1.Traffic{RPS: 9}}, 3, 3},                         // 9/3 = 3
		{"no traffic still one", v1.Tenant{}, 0, 1},                                              // rps 0 → 1
		{"redundancy adds one", v1.Tenant{Traffic: v1.Traffic{RPS: 10}, Redundancy: true}, 3, 5}, // 4 + 1
		{"fixed count", v1.Tenant{Traffic: v1.Traffic{RPS: 10}, Replicas: &two}, 3, 2},           // fixed 2
		{"fixed plus redundancy", v1.Tenant{Replicas: &two, Redundancy: true}, 3, 3},             // 2 + 1
		{"reservation floor", v1.Tenant{Traffic: v1.Traffic{RPS: 1}, Reservation: 3}, 3, 3},      // max(1, 3)
		{"cannot carry", v1.Tenant{Traffic: v1.Traffic{RPS: 1}}, 0, 0},                           // rate 0
		{"fixed ignores rate", v1.Tenant{Replicas: &three}, 0, 3},
	} {
		if got := demandReplicas(c.t, c.rate); got != c.want {
			t.Errorf("%s: %d replicas, want %d", c.name, got, c.want)
		}
	}
}

func TestSLOTargets(t *testing.T) {
	d := func(s string) *v1.Duration {
		x, err := v1.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &x
	}
	for _, c := range []struct {
		name string
		slo  v1.SLO
		out  int
		want perf.SLO
	}{
		{"as given", v1.SLO{TTFTP99: d("500ms"), TPOTP99: d("50ms")}, 100, perf.SLO{TTFT: 500 * time.Millisecond, TPOT: 50 * time.Millisecond}},
		// E2E 20s, no TTFT: TTFT ≤ 20s/4 = 5s, TPOT ≤ (20s − 5s)/(101 − 1) = 150ms.
		{"e2e only", v1.SLO{E2EP99: d("20s")}, 101, perf.SLO{TTFT: 5 * time.Second, TPOT: 150 * time.Millisecond}},
		// E2E 10s with TTFT 2s: TPOT ≤ (10s − 2s)/(201 − 1) = 40ms, tighter than the 50ms given.
		{"e2e tightens tpot", v1.SLO{TTFTP99: d("2s"), TPOTP99: d("50ms"), E2EP99: d("10s")}, 201, perf.SLO{TTFT: 2 * time.Second, TPOT: 40 * time.Millisecond}},
		// E2E 10s with TTFT 2s and TPOT 20ms: (10s − 2s)/200 = 40ms is looser, 20ms stays.
		{"tpot already tighter", v1.SLO{TTFTP99: d("2s"), TPOTP99: d("20ms"), E2EP99: d("10s")}, 201, perf.SLO{TTFT: 2 * time.Second, TPOT: 20 * time.Millisecond}},
	} {
		if got := sloTargets(c.slo, c.out, "", 0); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// burstGPUs rounds up: 10% of 7 pool GPUs is 0.7, so 1 GPU; 20% of 10 is exactly 2.
func TestBurstGPUs(t *testing.T) {
	for _, c := range []struct{ pct, pool, want int }{{10, 7, 1}, {20, 10, 2}, {0, 10, 0}, {50, 3, 2}, {10, 0, 0}} {
		p := &v1.Pool{Policy: v1.Policy{BurstPoolPercent: &c.pct}}
		if got := burstGPUs(p, c.pool); got != c.want {
			t.Errorf("%d%% of %d: %d, want %d", c.pct, c.pool, got, c.want)
		}
	}
}
