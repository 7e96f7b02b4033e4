package plan

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/perf"
)

var parvaModels = []string{"bert", "densenet121", "densenet169", "densenet201", "inceptionv3", "mobilenetv2",
	"resnet101", "resnet152", "resnet50", "vgg16", "vgg19"}

// parvaDeployed are the GPUs ParvaGPU's own deployments used per scenario (its artifact).
var parvaDeployed = []int{2, 3, 5, 7, 13, 16}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// parvaTable reads model name's measured table from testdata/parvagpu.
func parvaTable(t *testing.T, name string) *perf.Measured {
	t.Helper()
	f, err := os.Open("testdata/parvagpu/" + name + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := perf.ParseParvaGPU(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// parvaLoad is one model's request rate and latency SLO in a ParvaGPU scenario.
type parvaLoad struct {
	model string
	rate  float64
	slo   time.Duration
}

// parvaScenarios reads ParvaGPU's scenarios: for each, the models it serves (rate not N/A) in
// parvaModels order, with their request rate and latency SLO.
func parvaScenarios(t *testing.T) [][]parvaLoad {
	t.Helper()
	rates, slos := readCSV(t, "testdata/parvagpu/SLO_req_rate.csv"), readCSV(t, "testdata/parvagpu/SLO_latency.csv")
	out := make([][]parvaLoad, len(rates))
	for k := range rates {
		for j, name := range parvaModels {
			if rates[k][j] == "N/A" {
				continue
			}
			rate, err1 := strconv.ParseFloat(rates[k][j], 64)
			ms, err2 := strconv.ParseFloat(slos[k][j], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("scenario %d %s: %v %v", k+1, name, err1, err2)
			}
			out[k] = append(out[k], parvaLoad{name, rate, time.Duration(ms * float64(time.Millisecond))})
		}
	}
	return out
}

// parvaInstances sizes one model of a scenario under ParvaGPU's latency rule (a batch's latency
// ≤ 0.45 × SLO): every MIG size with 1–3 MPS processes gives an instance throughput; the model
// takes n instances of one size and covers the remainder with the cheapest single instance that
// carries it, whichever combination weighs least. It returns instances per profile index.
func parvaInstances(t *testing.T, m *perf.Measured, ps *patterns, rate float64, slo time.Duration) []int {
	t.Helper()
	type size struct {
		idx int
		tp  float64
	}
	var sizes []size
	for _, g := range []int{1, 2, 3, 4, 7} {
		best := 0.0
		for procs := 1; procs <= 3; procs++ {
			if p, err := m.Best(g, procs, slo*45/100); err == nil {
				best = max(best, float64(procs)*p.Throughput)
			}
		}
		if best > 0 {
			sizes = append(sizes, size{idx: profileWithGPCs(ps, g), tp: best})
		}
	}
	if len(sizes) == 0 {
		t.Fatalf("%s: no size meets the SLO", m.Name())
	}
	bestCost, out := math.Inf(1), []int(nil)
	for _, main := range sizes {
		n := int(math.Floor(rate / main.tp))
		rem := rate - float64(n)*main.tp
		for _, tail := range sizes {
			if rem > 1e-9 && tail.tp < rem {
				continue
			}
			v := make([]int, len(ps.profiles))
			v[main.idx] += n
			if rem > 1e-9 {
				v[tail.idx]++
			}
			cost := 0.0
			for i, k := range v {
				cost += float64(k) * ps.weight[i]
			}
			if cost < bestCost-1e-12 {
				bestCost, out = cost, v
			}
		}
	}
	return out
}

func profileWithGPCs(ps *patterns, g int) int {
	best := -1
	for i, p := range ps.profiles {
		if p.ComputeSlices == g && (best < 0 || p.MemoryMiB < ps.profiles[best].MemoryMiB) {
			best = i
		}
	}
	return best
}

// ParvaGPU's six scenarios (A100 80GB, measured profiles, request rate and latency SLO per model)
// sized as above and packed by the planner's MIG packer (branch and bound when small, greedy
// otherwise). ParvaGPU deployed 2, 3, 5, 7, 13 and 16 GPUs; the planner must not need more.
func TestParvaGPUScenarios(t *testing.T) {
	b, err := gpu.Lookup("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := newPatternCache().get(b)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]*perf.Measured{}
	for _, name := range parvaModels {
		tables[name] = parvaTable(t, name)
	}
	for k, loads := range parvaScenarios(t) {
		dem := make([]int, len(ps.profiles))
		for _, l := range loads {
			for i, n := range parvaInstances(t, tables[l.model], ps, l.rate, l.slo) {
				dem[i] += n
			}
		}
		bins := greedyPack(ps, dem)
		if len(bins) > volumeBound(ps, dem) {
			if e, ok := exactPack(ps, dem, len(bins)-1, 200000); ok {
				bins = e
			}
		}
		t.Logf("scenario %d: %s → %d GPUs (volume bound %d; ParvaGPU %d)", k+1, ps.describe(dem), len(bins), volumeBound(ps, dem), parvaDeployed[k])
		if len(bins) > parvaDeployed[k] {
			t.Errorf("scenario %d: %d GPUs, ParvaGPU needed %d", k+1, len(bins), parvaDeployed[k])
		}
	}
}
