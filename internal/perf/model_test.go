package perf

import (
	"math"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g (±%.1f%%)", what, got, want, 100*tol)
	}
}

func TestClockFactor(t *testing.T) {
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: a100Literal()})
	for _, c := range []struct {
		busy, want float64
	}{
		{1, 0.9163},   // cbrt(1/1.3)
		{0.9, 0.9490}, // cbrt(1/(1.3 × 0.9)) = cbrt(0.855)
		{0.75, 1},     // 1.3 × 0.75 = 0.975 ≤ 1: boost clock
		{0, 1},        // idle board
		{3, 0.9163},   // clamped to the whole board
	} {
		near(t, "clock", e.clockFactor(c.busy), c.want, 1e-3)
	}
}

func TestBandwidthSaturation(t *testing.T) {
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: a100Literal()})
	for _, c := range []struct {
		r, want float64
	}{
		{1, 1},                  // 1 − 0^2.6
		{0.3, 0.6044},           // 1 − 0.7^2.6 = 1 − 0.3956
		{0.5, 0.8351},           // 1 − 0.5^2.6 = 1 − 0.1649
		{0.7, 0.9562},           // 1 − 0.3^2.6 = 1 − 0.0438: saturated well before every SM pulls
		{14.0 / 108 / 0.125, 1}, // A100 1g: SMs share 0.130 ≥ bandwidth share 0.125 → capped at 1
		{0, 0},                  // no SMs, no bandwidth
	} {
		near(t, "g", e.bwSaturation(c.r), c.want, 1e-3)
	}
}

func TestResolve(t *testing.T) {
	b := a100Literal()
	for _, c := range []struct {
		name           string
		s              Slice
		instSM, sm, bw float64
		memMiB         float64
	}{
		{"exclusive", Slice{Board: b}, 1, 1, 1, 81920},
		// 3g.40gb: 42 of 108 SMs = 0.3889, 4 of 8 memory slices, 40192 MiB from the profile.
		{"mig 3g", Slice{Board: b, Profile: &b.Profiles[3]}, 42.0 / 108, 42.0 / 108, 0.5, 40192},
		// MPS 30 % inside 3g.40gb: 0.3889 × 0.3 = 0.1167 of the board's SMs.
		{"mig 3g + mps 30", Slice{Board: b, Profile: &b.Profiles[3], Mode: MPS, SMPercent: 30}, 42.0 / 108, 42.0 / 108 * 0.3, 0.5, 40192},
		// An MPS memory limit below the GPU's caps the engine's memory.
		{"mps 50 with 20 GiB", Slice{Board: b, Mode: MPS, SMPercent: 50, MemoryMiB: 20480}, 1, 0.5, 1, 20480},
	} {
		r := c.s.resolve(312)
		near(t, c.name+" instSM", r.instSM, c.instSM, 1e-9)
		near(t, c.name+" sm", r.sm, c.sm, 1e-9)
		near(t, c.name+" bw", r.bw, c.bw, 1e-9)
		near(t, c.name+" mem", r.memBytes/mib, c.memMiB, 1e-9)
	}
}

// TestDecodeStepArithmetic checks one step by hand: LLaMA-7B, one decode sequence with no KV,
// the whole A100-80GB, defaults.
func TestDecodeStepArithmetic(t *testing.T) {
	m := mustModel(t, llama7B)
	e := mustEngine(t, m, Slice{Board: a100Literal()})
	// Weights streamed: 6.738e9 params × 2 B = 13.476 GB less the input embedding (32000 × 4096
	// × 2 B = 0.262 GB, a lookup) = 13.215 GB, plus the token's GEMM inputs and outputs
	// (2 B × 32 × (4·4096 + 3·4096 + 4096 + 3·11008) = 4.2 MB), at 2039 GB/s × 0.90 × g(1) =
	// 1835.1 GB/s → 7.203 ms. GEMM FLOPs 2 × 6.476e9 + 2 × 32000 × 4096 = 13.2 GFLOP at 312 T ×
	// 0.75 × 0.916 = 214 TFLOP/s → 0.06 ms: memory-bound. KV write + element-wise kernels:
	// 524288 + 2·(14·4096 + 3·11008)·32 B = 6.3 MB → 0.003 ms. Layer latency 32 × 33 µs =
	// 1.056 ms. Overhead 1 ms. Total ≈ 9.263 ms.
	got := e.StepTime(Batch{DecodeSeqs: 1}, Load{})
	near(t, "decode b1 ms", float64(got.Microseconds())/1000, 9.263, 0.001)
	bd := e.Breakdown(Batch{DecodeSeqs: 1}, Load{})
	if bd.Compute != 0 || bd.Overhead != time.Millisecond || bd.Latency != 1056*time.Microsecond || bd.Total != got {
		t.Errorf("breakdown %+v: want memory-bound, 1.056 ms latency, 1 ms overhead, total %v", bd, got)
	}
	near(t, "weight bytes", float64(m.WeightBytes()), 13.476e9, 0.001)
	near(t, "streamed weight bytes", m.weightBytesRead(1), 13.215e9, 0.001)
	if m.KVBytesPerToken() != 524288 { // 2 × 32 layers × 4096 × 2 B
		t.Errorf("KV bytes per token %d, want 524288", m.KVBytesPerToken())
	}
}

// TestPrefillStepArithmetic: LLaMA-7B, a 512-token prompt, whole A100.
func TestPrefillStepArithmetic(t *testing.T) {
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: a100Literal()})
	// GEMMs: 2 × 6.4762e9 × 512 + 2 × 32000 × 4096 = 6.6319e12 FLOP at 214.4 TFLOP/s → 30.93 ms;
	// their bytes (13.2 GB + 512 × 4.2 MB) take 8.4 ms, hidden under the compute.
	// Attention: 512·513/2 = 131328 pairs × 2·32·(128+128)·32 = 524288 FLOP/pair = 68.9 GFLOP
	// → 0.32 ms. KV write + element-wise kernels: 512 × 6.31 MB = 3.23 GB at 1835 GB/s → 1.76 ms.
	// Layer latency 1.056 ms, overhead 1 ms. Total ≈ 35.07 ms.
	got := e.StepTime(Batch{PrefillTokens: 512, PrefillSeqs: 1}, Load{})
	near(t, "prefill 512 ms", float64(got.Microseconds())/1000, 35.07, 0.002)
}

func TestKVCapacity(t *testing.T) {
	m := mustModel(t, llama7B)
	b := a100Literal()
	e := mustEngine(t, m, Slice{Board: b})
	// Single-GPU engines take llm's vLLM memory accounting, so perf and the memory estimate agree;
	// vLLM's batch defaults on an A100 are 256 sequences and 2048 tokens (its A100 exception).
	fit, err := llm.FitSlice(llm.FromArch(llama7B), llm.Options{Quantization: llm.QuantBF16, MaxNumSeqs: 256, MaxNumBatchedTokens: 2048},
		llm.Slice{Board: b.Name, Kind: llm.SliceGPU, Name: "gpu", MemoryBytes: 81920 * mib, GPUBytes: 81920 * mib, SMs: 108})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.KVCapacityTokens(); got != fit.MaxTokens || got < 110000 {
		t.Errorf("KV capacity %d, llm says %d (about 62 GB / 512 KiB ≈ 118k tokens)", got, fit.MaxTokens)
	}
	// Tensor-parallel engines use the rough formula: 81920 MiB × 0.9 = 77,309,411,328 B, minus
	// half the weights and 1536 MiB (1,610,612,736 B), over 524288/2 = 262,144 B per token.
	tp := mustEngine(t, m, Slice{Board: b, TensorParallel: 2})
	want := (77309411328 - float64(m.WeightBytes())/2 - 1610612736) / 262144
	near(t, "tp2 kv tokens", float64(tp.KVCapacityTokens()), want, 1e-5)
	small := mustEngine(t, m, Slice{Board: b, Profile: &b.Profiles[0]})
	if small.FitsWeights() { // 9984 MiB < 13.5 GB of weights
		t.Error("LLaMA-7B BF16 should not fit a 1g.10gb instance")
	}
	// Four time-sliced replicas without a memory cap split the GPU's memory four ways.
	ts := mustEngine(t, m, Slice{Board: b, Mode: TimeSlice, Replicas: 4})
	if !(ts.KVCapacityTokens() > 0 && ts.KVCapacityTokens() < e.KVCapacityTokens()/4) {
		t.Errorf("a quarter of the GPU holds %d KV tokens, the whole %d", ts.KVCapacityTokens(), e.KVCapacityTokens())
	}
	if got := e.WithKVCapacity(1000).KVCapacityTokens(); got != 1000 {
		t.Errorf("WithKVCapacity: %d", got)
	}
}

func TestTimeSliceWait(t *testing.T) {
	o := DefaultOptions()
	m, _ := New(llama7B, llm.QuantBF16, o)
	e := mustEngine(t, m, Slice{Board: a100Literal(), Mode: TimeSlice})
	b := Batch{DecodeSeqs: 1}
	alone := e.Breakdown(b, Load{})
	g := (alone.Total - alone.Overhead).Seconds() // 8.26 ms of GPU work
	for _, n := range []int{1, 2, 3} {
		// Neighbours always busy (duty 1): every quantum of ours waits for n quanta, each after a
		// switch, and one more switch back: wait = (g/q) × (n × (q + switch) + switch), g/q =
		// 4.13 rounds of 2 ms, switch 150 µs.
		want := (g / 0.002) * (float64(n)*(0.002+0.00015) + 0.00015)
		got := e.Breakdown(b, Load{Active: n, Duty: 1}).Wait.Seconds()
		near(t, "wait", got, want, 1e-6)
	}
	// Idle neighbours cost nothing: time-slicing is about active contexts.
	if got := e.StepTime(b, Load{Active: 0}); got != alone.Total {
		t.Errorf("no active neighbour: %v, want %v", got, alone.Total)
	}
}

func TestMPSContention(t *testing.T) {
	m := mustModel(t, llama7B)
	e := mustEngine(t, m, Slice{Board: a100Literal(), Mode: MPS, SMPercent: 50})
	dec := Batch{DecodeSeqs: 32, KVTokens: 32 * 512}
	alone, busy := e.StepTime(dec, Load{}), e.StepTime(dec, Load{Active: 1, Duty: 1})
	// Two 50 % clients both streaming: pull 2 × g(0.5) = 1.67 > 1, so each gets half of the
	// bandwidth; each keeps its own layer latency, during which the other streams: slower than
	// alone, but better than twice as slow.
	if !(busy > alone && busy < 2*alone) {
		t.Errorf("MPS decode alone %v, with a busy neighbour %v: want alone < busy < 2×alone", alone, busy)
	}
	// Caps summing to ≤ 100 % keep prefill compute unshared: only bandwidth contends.
	pre := Batch{PrefillTokens: 4096, PrefillSeqs: 8}
	pa, pb := e.StepTime(pre, Load{}), e.StepTime(pre, Load{Active: 1, Duty: 1})
	if float64(pb) > 1.15*float64(pa) {
		t.Errorf("MPS prefill at 50 %% with a 50 %% neighbour: %v vs alone %v, want within 15 %%", pb, pa)
	}
	// Uncapped clients over-subscribe the SMs: prefill slows down much more.
	u := mustEngine(t, m, Slice{Board: a100Literal(), Mode: MPS})
	ua, ub := u.StepTime(pre, Load{}), u.StepTime(pre, Load{Active: 1, Duty: 1})
	if float64(ub) < 1.3*float64(ua) {
		t.Errorf("uncapped MPS prefill with a busy neighbour %v vs alone %v: want ≥ 1.3×", ub, ua)
	}
}

func TestMIGIsolation(t *testing.T) {
	b := a100Literal()
	e := mustEngine(t, mustModel(t, llama7B), Slice{Board: b, Profile: &b.Profiles[3]})
	dec := Batch{DecodeSeqs: 8, KVTokens: 8 * 512}
	// Neighbours inside other instances do not touch SMs or bandwidth; Load.Active is ignored
	// for an exclusive instance. Only the board's power limit is shared (BoardBusy).
	if a, n := e.StepTime(dec, Load{}), e.StepTime(dec, Load{Active: 6}); a != n {
		t.Errorf("MIG exclusive with neighbours %v != alone %v", n, a)
	}
	pre := Batch{PrefillTokens: 2048, PrefillSeqs: 4}
	if a, busy := e.StepTime(pre, Load{}), e.StepTime(pre, Load{BoardBusy: 0.6}); !(busy > a) {
		t.Errorf("a busy board should lower the clock for compute-bound prefill: %v vs %v", busy, a)
	}
}

func TestNewErrors(t *testing.T) {
	bad := DefaultOptions()
	bad.MFU = 0
	bad.MaxSeqs = -1
	_, err := New(llama7B, llm.QuantBF16, bad)
	if err == nil || !strings.Contains(err.Error(), "mfu") || !strings.Contains(err.Error(), "maxSeqs") {
		t.Errorf("want both option errors, got %v", err)
	}
	if _, err := New(llm.Arch{Name: "empty"}, llm.QuantBF16, DefaultOptions()); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty arch: got %v", err)
	}
}

func TestPlaceErrors(t *testing.T) {
	m := mustModel(t, llama7B)
	b := a100Literal()
	for _, c := range []struct {
		s    Slice
		want []string
	}{
		{Slice{}, []string{"no board"}},
		{Slice{Board: b, Mode: TimeSlice, SMPercent: 30}, []string{"not mps"}},
		{Slice{Board: b, Mode: MPS, SMPercent: 130, TensorParallel: -1}, []string{"SM percent 130", "tensor parallel -1"}},
		{Slice{Board: h100Literal(), Profile: &b.Profiles[0], Mode: Mode(9)}, []string{"unknown mode 9"}},
	} {
		_, err := m.Place(c.s)
		if err == nil {
			t.Errorf("%+v: no error", c.s)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", c.s, err, w)
			}
		}
	}
}

func TestSliceNames(t *testing.T) {
	b := a100Literal()
	for _, c := range []struct {
		s    Slice
		want string
	}{
		{Slice{Board: b}, "exclusive"},
		{Slice{Board: b, Profile: &b.Profiles[3]}, "mig 3g.40gb"},
		{Slice{Board: b, Mode: MPS, SMPercent: 37.5}, "mps 37.5%"},
		{Slice{Board: b, Profile: &b.Profiles[3], Mode: TimeSlice}, "mig 3g.40gb + timeslice"},
		{Slice{Board: b, Mode: MPS, TensorParallel: 2}, "mps 100% ×2 tp"},
	} {
		if got := c.s.Name(); got != c.want {
			t.Errorf("Name() = %q, want %q", got, c.want)
		}
	}
	for _, s := range []string{"exclusive", "mps", "timeslice", "time-slicing"} {
		if _, err := ParseMode(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseMode("vgpu"); err == nil {
		t.Error("ParseMode(vgpu): no error")
	}
}

func TestQuantizationPeaks(t *testing.T) {
	h := h100Literal()
	pre := Batch{PrefillTokens: 8192, PrefillSeqs: 4}
	step := func(q llm.Quantization) time.Duration {
		m, err := New(llama7B, q, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return mustEngine(t, m, Slice{Board: h}).StepTime(pre, Load{})
	}
	// FP8 GEMMs run at twice the BF16 peak on Hopper: compute-bound prefill gets much faster;
	// weight-only int4 keeps BF16 GEMMs, so prefill stays about as slow as BF16.
	bf, fp8, awq := step(llm.QuantBF16), step(llm.QuantFP8), step(llm.QuantInt4AWQ)
	if !(float64(fp8) < 0.7*float64(bf)) {
		t.Errorf("fp8 prefill %v vs bf16 %v: want < 0.7×", fp8, bf)
	}
	if math.Abs(float64(awq-bf)) > 0.1*float64(bf) {
		t.Errorf("int4-awq prefill %v vs bf16 %v: want within 10 %%", awq, bf)
	}
}

func TestMoEReadsTouchedExperts(t *testing.T) {
	mix := llm.Arch{Name: "mixtral-8x7b", Family: "mixtral", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8,
		Intermediate: 14336, Vocab: 32000, MaxPositions: 32768, Experts: 8, ExpertsPerToken: 2}
	m := mustModel(t, mix)
	// One token touches 2 of 8 experts: 1 − (1 − 2/8)^1 = 25 % of the expert bytes;
	// 64 tokens touch 1 − 0.75^64 ≈ 100 %.
	one, many := m.weightBytesRead(1), m.weightBytesRead(64)
	// Every step reads all weights but the input embedding, which is a lookup.
	if all := m.weightBytes - m.embedBytes; !(one < 0.5*many) || math.Abs(many-all) > 1e-6*all {
		t.Errorf("MoE weight reads: 1 token %.3g B, 64 tokens %.3g B, all but the embedding %.3g B", one, many, all)
	}
}

// TestStreamedBytes checks what a step reads besides compute: the weights minus an untied input
// embedding, and the GEMMs' inputs and outputs per token.
func TestStreamedBytes(t *testing.T) {
	for _, c := range []struct {
		slug     string
		embed    float64 // bytes not streamed
		gemmIO   float64 // bytes per token
		describe string
	}{
		// 32 × 2 B × (4·4096 + (4096 + 2·4096) + 4096 + 3·11008) = 64 × 65792 = 4,210,688.
		{"llama-2-7b", 32000 * 4096 * 2, 4210688, "MHA, untied"},
		// 32 × 2 B × (4·4096 + (4096 + 2·1024) + 4096 + 3·14336) = 64 × 69632 = 4,456,448;
		// the 128256 × 4096 embedding is 1.05 GB, 6.5 % of the weights.
		{"llama-3.1-8b", 128256 * 4096 * 2, 4456448, "GQA, untied"},
		// Tied: the embedding is the output head, streamed every step. 16 layers, hidden 2048,
		// 32 heads of 64, 8 KV heads: 16 × 2 B × (4·2048 + (2048 + 2·512) + 2048 + 3·8192) = 1,212,416.
		{"llama-3.2-1b", 0, 1212416, "GQA, tied"},
	} {
		a, err := llm.Lookup(c.slug)
		if err != nil {
			t.Fatal(err)
		}
		m := mustModel(t, a)
		near(t, c.slug+" ("+c.describe+") streamed weights", m.weightBytesRead(1), m.weightBytes-c.embed, 1e-9)
		near(t, c.slug+" ("+c.describe+") GEMM in/out bytes per token", m.gemmIOBytes, c.gemmIO, 1e-9)
	}
}

// The engine keeps g(r) of its own SMs (gOwn) instead of computing the power function every
// step: for every slice kind of both boards, exclusive, MIG, MPS and time-sliced, and for the
// copies an engine makes of itself, the kept value is exactly the one computed from its
// resources (a field of them changed after Place, or a constructor that does not set it, fails
// here).
func TestEngineKeepsOwnBandwidthSaturation(t *testing.T) {
	m := mustModel(t, llama7B)
	for _, b := range []*gpu.Board{a100Literal(), h100Literal()} {
		var slices []Slice
		for _, mode := range []Mode{Exclusive, MPS, TimeSlice} {
			slices = append(slices, Slice{Board: b, Mode: mode})
			for i := range b.Profiles {
				slices = append(slices, Slice{Board: b, Profile: &b.Profiles[i], Mode: mode})
			}
		}
		slices = append(slices, Slice{Board: b, Mode: MPS, SMPercent: 30})
		for _, s := range slices {
			e, err := m.Place(s)
			if err != nil {
				continue // a profile too small for the weights
			}
			engines := []*Engine{e, e.WithKVCapacity(1000), e.WithMaxSeqs(3)}
			if s.Profile != nil {
				me, err := NewMeasuredEngine(readParva(t, "resnet50"), s, DefaultOptions())
				if err != nil {
					t.Fatal(err)
				}
				engines = append(engines, me)
			}
			for _, c := range engines {
				if want := c.bwSaturation(c.r.sm / c.r.bw); c.gOwn != want || want <= 0 {
					t.Errorf("%s: kept g %v, computed %v", s.Name(), c.gOwn, want)
				}
			}
		}
	}
}
