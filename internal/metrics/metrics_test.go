package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

type fixed Snapshot

func (f fixed) Snapshot() Snapshot { return Snapshot(f) }

var sample = fixed{
	GPUs:   []GPU{{UUID: "GPU-0", Board: "H100-SXM5-80GB", EnergyJoules: 1234.5}},
	Slices: []Slice{{GPU: "GPU-0", Slice: "3g.40gb@4", Tenant: "chat", MemoryUsed: 30e9, MemoryPlanned: 38e9, SMShare: 60.0 / 132}},
	Tenants: []Tenant{{Name: "chat", Tokens: 15000, OutputTokens: 5000, EnergyJoules: 900, JoulesPerTok: 0.06, SLOAttainment: 0.99,
		TTFT: &Histogram{Count: 100, Sum: 21.5, Buckets: map[float64]uint64{0.1: 40, 0.5: 90}}}},
	MPS:  []MPSDaemon{{UUID: "MIG-1", Restarts: 2, Healthy: true}},
	Gate: Gate{Phase: "apply", Cordoned: true, Changes: map[string]int{"GateDone": 3}},
	XIDs: []XID{{GPU: "GPU-0", Code: "79", Count: 1}},
}

func TestPromlintClean(t *testing.T) {
	problems, err := testutil.CollectAndLint(NewCollector(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

func TestCollectValues(t *testing.T) {
	c := NewCollector(sample)
	want := `
# HELP gpupool_gate_phase 1 for the gate's current phase, 0 for the others.
# TYPE gpupool_gate_phase gauge
gpupool_gate_phase{phase="apply"} 1
gpupool_gate_phase{phase="cordon"} 0
gpupool_gate_phase{phase="drain"} 0
gpupool_gate_phase{phase="failed"} 0
gpupool_gate_phase{phase="idle"} 0
gpupool_gate_phase{phase="observe"} 0
gpupool_gate_phase{phase="smoke"} 0
gpupool_gate_phase{phase="uncordon"} 0
gpupool_gate_phase{phase="verify"} 0
# HELP gpupool_mps_daemon_restarts_total Restarts of the MPS control daemon by the supervisor.
# TYPE gpupool_mps_daemon_restarts_total counter
gpupool_mps_daemon_restarts_total{uuid="MIG-1"} 2
# HELP gpupool_tenant_joules_per_token Joules per token of the tenant over the last polling interval.
# TYPE gpupool_tenant_joules_per_token gauge
gpupool_tenant_joules_per_token{tenant="chat"} 0.06
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), NameGatePhase, NameMPSRestarts, NameTenantJPerToken); err != nil {
		t.Fatal(err)
	}
	// GPU: energy + idle energy + info = 3 (no tenant-per-GPU energy given); slice: used, planned, SM share = 3; tenant: tokens, output
	// tokens, energy, J/token, SLO, TTFT (no TPOT given) = 6; MPS: restarts + healthy = 2; gate: 9 phases + cordoned + one
	// outcome = 11; one XID = 1; poll duration = 1. Total 27.
	if n := testutil.CollectAndCount(c); n != 3+3+6+2+11+1+1 {
		t.Fatalf("collected %d metrics", n)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("pedantic registry: %v", err)
	}
}

func TestAttribute(t *testing.T) {
	cases := []struct {
		name   string
		joules float64
		shares []Share
		want   map[string]float64
	}{
		// MIG: a 3g and a 4g instance on a 7-slice GPU, 700 J: 3/7 × 700 = 300, 4/7 × 700 = 400.
		{"mig by slices", 700, []Share{{"a", 3}, {"b", 4}}, map[string]float64{"a": 300, "b": 400}},
		// MPS: SM utilisation 60 % and 20 %: 600 J × 60/80 = 450, × 20/80 = 150.
		{"mps by utilisation", 600, []Share{{"a", 60}, {"b", 20}}, map[string]float64{"a": 450, "b": 150}},
		// Idle processes: evenly, 90 / 3 = 30 each; tenant b has two shares = 60.
		{"even when idle", 90, []Share{{"a", 0}, {"b", 0}, {"b", 0}}, map[string]float64{"a": 30, "b": 60}},
		{"none", 100, nil, map[string]float64{}},
	}
	for _, c := range cases {
		got := Attribute(c.joules, c.shares)
		if len(got) != len(c.want) {
			t.Fatalf("%s: %v, want %v", c.name, got, c.want)
		}
		for k, v := range c.want {
			if math.Abs(got[k]-v) > 1e-9 {
				t.Errorf("%s: %s = %v, want %v", c.name, k, got[k], v)
			}
		}
	}
	// 450 J over 15000 tokens = 0.03 J/token.
	if got := JoulesPerToken(450, 15000); got != 0.03 {
		t.Errorf("J/token = %v", got)
	}
	if CounterDelta(100, 40) != 40 || CounterDelta(40, 100) != 60 {
		t.Error("counter delta with a reset")
	}
}

func TestParseVLLM(t *testing.T) {
	f, err := os.Open("testdata/vllm.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e, err := ParseVLLM(f)
	if err != nil {
		t.Fatal(err)
	}
	// 12000 prompt + 3000 generated; TTFT 100 requests; TPOT from inter-token latency (2900).
	if e.Tokens() != 15000 || e.TTFT.Count != 100 || e.TTFT.Buckets[0.5] != 90 || e.TPOT == nil || e.TPOT.Count != 2900 {
		t.Fatalf("parsed %+v ttft %+v tpot %+v", e, e.TTFT, e.TPOT)
	}
}

func FuzzParseVLLM(f *testing.F) {
	b, _ := os.ReadFile("testdata/vllm.txt")
	f.Add(string(b))
	f.Add("vllm:generation_tokens_total 5\n")
	f.Add("# TYPE x histogram\nx_bucket{le=\"1\"} 1\n")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseVLLM(strings.NewReader(s))
		if err == nil && (e.Tokens() < 0 || math.IsNaN(e.Tokens())) {
			t.Fatalf("accepted tokens %v", e.Tokens())
		}
	})
}

// TestDashboard: the Grafana dashboard parses and queries only metrics this package exposes.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana/gpupool-agent.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range []string{NameSliceMemoryUsed, NameSliceMemoryPlanned, NameSliceSMShare, NameTenantTokens, NameTenantOutputTokens, NameTenantEnergy,
		NameTenantJPerToken, NameTenantTTFT, NameTenantTPOT, NameTenantSLO, NameGPUEnergy, NameGPUInfo, NameGPUEnergySplit, NameMPSRestarts,
		NameMPSHealthy, NameGatePhase, NameGateCordoned, NameGateChanges, NamePollDuration, NameGPUXID,
		NameTenantChargeback, NameTenantShowback, NameTenantCarbonLocation, NameTenantCarbonMarket, NameIdleChargeback,
		NameIdleShowback, NameIdleCarbonLocation, NameIdleCarbonMarket} {
		known[n] = true
		known[n+"_bucket"], known[n+"_sum"], known[n+"_count"] = true, true, true
	}
	re := regexp.MustCompile(`gpupool_[a-z_]+`)
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs++
			for _, m := range re.FindAllString(tg.Expr, -1) {
				if !known[m] {
					t.Errorf("panel %q queries unknown metric %s", p.Title, m)
				}
			}
		}
	}
	if exprs < 8 {
		t.Fatalf("dashboard has %d queries", exprs)
	}
}

// TestSplitIdle: 4,000 J over 10 s on a GPU idling at 105 W: 1,050 J idle, 2,950 J to tenants;
// with no tenant all 4,000 J are idle; below idle power everything is idle.
func TestSplitIdle(t *testing.T) {
	for _, tc := range []struct {
		j, w, s      float64
		tenants      bool
		active, idle float64
	}{
		{4000, 105, 10, true, 2950, 1050},
		{4000, 105, 10, false, 0, 4000},
		{500, 105, 10, true, 0, 500},
		{0, 105, 10, true, 0, 0},
	} {
		a, i := SplitIdle(tc.j, tc.w, tc.s, tc.tenants)
		if a != tc.active || i != tc.idle || a+i != max(tc.j, 0) {
			t.Errorf("SplitIdle(%g, %g, %g, %v) = %g, %g; want %g, %g", tc.j, tc.w, tc.s, tc.tenants, a, i, tc.active, tc.idle)
		}
	}
}

// An agent's exposition read back: the collector's own output parses to the snapshot's values.
func TestParseAgentRoundTrip(t *testing.T) {
	snap := Snapshot(sample)
	snap.GPUs = []GPU{{UUID: "GPU-0", Board: "H100-SXM5-80GB", Node: "n1", Index: 3, EnergyJoules: 1234.5, IdleEnergyJoules: 100, Split: "mig-activity-x-size"}}
	snap.TenantGPUs = []TenantGPU{{GPU: "GPU-0", Tenant: "chat", EnergyJoules: 900}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fixed(snap)))
	var buf bytes.Buffer
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	s, err := ParseAgent(&buf)
	if err != nil {
		t.Fatal(err)
	}
	g := s.GPUs["GPU-0"]
	if g.Node != "n1" || g.Index != 3 || g.EnergyJoules != 1234.5 || g.IdleJ != 100 || s.TenantGPU["GPU-0"]["chat"] != 900 || s.TenantTokens["chat"] != 15000 ||
		s.TenantOutputTokens["chat"] != 5000 || g.Split != "mig-activity-x-size" {
		t.Errorf("parsed %+v", s)
	}
}

func FuzzParseAgent(f *testing.F) {
	f.Add([]byte("gpupool_gpu_info{gpu=\"G\",board=\"H100\",node=\"n\",index=\"0\"} 1\ngpupool_gpu_energy_joules_total{gpu=\"G\"} 5\n"))
	f.Add([]byte("gpupool_gpu_energy_joules_total{gpu=\"G\"} 5\n"))
	f.Add([]byte("gpupool_gpu_energy_split_info{gpu=\"G\",split=\"mig-size\"} 1\ngpupool_tenant_output_tokens_total{tenant=\"t\"} 7\n"))
	f.Add([]byte("gpupool_tenant_gpu_energy_joules_total{gpu=\"G\",tenant=\"t\"} NaN\n"))
	f.Add([]byte("gpupool_gpu_info{gpu=\"G\",index=\"x\"} 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseAgent(bytes.NewReader(data))
		if err != nil {
			return
		}
		for u, g := range s.GPUs {
			if !(g.EnergyJoules >= 0) || !(g.IdleJ >= 0) || (g.hasCounters && !g.hasInfo) {
				t.Fatalf("accepted gpu %q: %+v", u, g)
			}
		}
	})
}

// Several GPUs with energy counters but no info series: the error names the same GPU on every
// read (the first by UUID); the walk over the map used to name whichever its order met first.
func TestParseAgentNamesTheSameGPU(t *testing.T) {
	in := "gpupool_gpu_energy_joules_total{gpu=\"GPU-c\"} 1\ngpupool_gpu_energy_joules_total{gpu=\"GPU-b\"} 2\n" +
		"gpupool_gpu_energy_joules_total{gpu=\"GPU-a\"} 3\n"
	want := `parse agent metrics: gpu "GPU-a" has an energy counter but no gpupool_gpu_info series`
	for i := 0; i < 100; i++ {
		_, err := ParseAgent(strings.NewReader(in))
		if err == nil || err.Error() != want {
			t.Fatalf("read %d: %v\nwant %s", i+1, err, want)
		}
	}
}
