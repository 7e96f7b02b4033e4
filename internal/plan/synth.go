package plan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// SyntheticOptions shape a generated fleet.
type SyntheticOptions struct {
	Tenants int     // number of tenants, ≥ 1
	GPUs    int     // H100 SXM5 GPUs, eight per node; 0: as many as tenants
	Alpha   float64 // popularity exponent: tenant i gets a rate ∝ (i+1)^−Alpha; 0: 0.9
	// MeanRPS is the mean request rate per tenant; 0: 0.5.
	MeanRPS float64
	// Varied also varies each tenant's request lengths (×½, ×1 or ×2), SLO targets (×0.75, ×1 or
	// ×1.5) and, for a third of the tenants, concurrency (log-uniform on 1–64; the others leave
	// it to the engine's 256). Off, the pool is the same as before the option existed.
	Varied bool
	// Laws, with Varied, also varies how each tenant's lengths vary: traffic.lengths fixed,
	// uniform and exponential in turn by the tenant's index (a third each), the maxContext
	// raised to what the law needs (lengthsNeed) up to the model's maximum. It takes no random
	// draw, so the pool is Varied's with those two fields changed. Off for the scale bars'
	// pools: such tenants still cost more to plan than fixed ones (docs/planner.md, "Not done").
	Laws bool
	// DeviceAPI is the pool's policy.kubernetesDeviceAPI; "" leaves it unset (the device plugin),
	// on which no MIG instance is shared by MPS. DRA pools may share MIG instances by MPS.
	DeviceAPI v1.KubernetesDeviceAPI
}

// synthModel is one model the generator draws from, with its request shape and SLO class.
type synthModel struct {
	name       string
	quant      llm.Quantization
	ctx        int
	in, out    int
	ttft, tpot time.Duration
}

var synthModels = []synthModel{
	{"llama-3.1-8b", llm.QuantBF16, 8192, 800, 200, time.Second, 60 * time.Millisecond},
	{"qwen2.5-7b", llm.QuantBF16, 8192, 500, 200, 800 * time.Millisecond, 50 * time.Millisecond},
	{"qwen2.5-1.5b", llm.QuantBF16, 4096, 300, 100, 500 * time.Millisecond, 40 * time.Millisecond},
	{"llama-2-13b", llm.QuantFP8, 4096, 800, 200, 1500 * time.Millisecond, 70 * time.Millisecond},
	{"qwen2.5-14b", llm.QuantFP8, 8192, 1000, 250, 2 * time.Second, 80 * time.Millisecond},
	{"llama-3.2-3b", llm.QuantBF16, 8192, 400, 150, 600 * time.Millisecond, 40 * time.Millisecond},
}

// Synthetic returns a defaulted pool of LLM tenants whose request rates follow a popularity power
// law like MuxServe's workloads: rate_i = N × MeanRPS × (i+1)^−α / Σ_j (j+1)^−α. Models, request
// shapes and SLOs come from a small catalogue; about 20% of tenants are hard-isolated, 50% soft
// (ten trust groups), 30% shared, of which a third are low-frequency. The same seed gives the
// same pool.
func Synthetic(o SyntheticOptions, rng *rand.Rand) *v1.Pool {
	n := max(o.Tenants, 1)
	gpus := o.GPUs
	if gpus <= 0 {
		gpus = n
	}
	alpha, mean := o.Alpha, o.MeanRPS
	if alpha == 0 {
		alpha = 0.9
	}
	if mean == 0 {
		mean = 0.5
	}
	pool := &v1.Pool{Metadata: v1.Metadata{Name: fmt.Sprintf("synthetic-%d", n)}}
	zero := 0
	pool.Policy.BurstPoolPercent = &zero
	pool.Policy.KubernetesDeviceAPI = o.DeviceAPI
	for i := 0; gpus > 0; i++ {
		c := min(gpus, 8)
		pool.Fleet.Nodes = append(pool.Fleet.Nodes, v1.Node{Name: fmt.Sprintf("node-%d", i),
			GPUs: []v1.GPUGroup{{Board: "H100-SXM5-80GB", Count: c}}})
		gpus -= c
	}
	h := 0.0
	for i := range n {
		h += math.Pow(float64(i+1), -alpha)
	}
	for i := range n {
		m := synthModels[rng.IntN(len(synthModels))]
		rps := float64(n) * mean * math.Pow(float64(i+1), -alpha) / h
		t := v1.Tenant{Name: fmt.Sprintf("t-%05d", i), Model: v1.Model{Name: m.name, Quantization: m.quant},
			MaxContext: m.ctx, Traffic: v1.Traffic{RPS: math.Round(rps*1000) / 1000, InputTokens: m.in, OutputTokens: m.out}}
		ttft, tpot := v1.Duration(m.ttft), v1.Duration(m.tpot)
		if o.Varied {
			vary(&t, &ttft, &tpot, rng)
			if o.Laws {
				varyLaw(&t, i)
			}
		}
		t.SLO = v1.SLO{TTFTP99: &ttft, TPOTP99: &tpot}
		switch r := rng.IntN(10); {
		case r < 2:
			t.Isolation = v1.IsolationHard
		case r < 7:
			t.Isolation, t.Path = v1.IsolationSoft, fmt.Sprintf("org/team-%d", rng.IntN(10))
		default:
			t.Isolation, t.LowFrequency = v1.IsolationShared, r == 9
		}
		pool.Tenants = append(pool.Tenants, t)
	}
	v1.Default(pool)
	return pool
}

// vary scales a synthetic tenant's lengths and SLO targets and may set its concurrency.
func vary(t *v1.Tenant, ttft, tpot *v1.Duration, rng *rand.Rand) {
	lf := []float64{0.5, 1, 2}[rng.IntN(3)]
	t.Traffic.InputTokens = max(1, int(float64(t.Traffic.InputTokens)*lf))
	t.Traffic.OutputTokens = max(2, int(float64(t.Traffic.OutputTokens)*lf))
	t.MaxContext = max(t.MaxContext, t.Traffic.InputTokens+t.Traffic.OutputTokens)
	sf := []float64{0.75, 1, 1.5}[rng.IntN(3)]
	*ttft = v1.Duration(float64(*ttft) * sf)
	*tpot = v1.Duration(float64(*tpot) * sf)
	if rng.IntN(3) == 0 {
		t.Concurrency = max(1, int(math.Round(math.Exp(rng.Float64()*math.Log(64)))))
	}
}

// varyLaw gives the i-th synthetic tenant its length law, fixed, uniform or exponential in turn,
// and a maxContext that admits what the law needs (up to the model's maximum).
func varyLaw(t *v1.Tenant, i int) {
	t.Traffic.Lengths = []v1.Lengths{v1.LengthsFixed, v1.LengthsUniform, v1.LengthsExponential}[i%3]
	need := lengthsNeed(t.Traffic)
	if a, err := llm.Lookup(t.Model.Name); err == nil && a.MaxPositions > 0 {
		need = min(need, a.MaxPositions)
	}
	t.MaxContext = max(t.MaxContext, need)
}
