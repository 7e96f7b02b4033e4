package perf

import (
	"math"
	"testing"

	"gpupool.dev/gpupool/internal/llm"
)

// mlEnergyH100 are ML.ENERGY Leaderboard v3.0's rows for Llama-3.1-8B-Instruct (bf16) on one
// H100, task lm-arena-chat, vLLM 0.11.1: max_num_seqs, output tokens per request on average,
// average GPU power over the steady state, output throughput, and their ratio, energy per output
// token (https://ml.energy/leaderboard; the rows as published in
// https://github.com/ml-energy/leaderboard, public/data/models/
// meta-llama__Llama-3.1-8B-Instruct__lm-arena-chat.json, data dated 2026-02-16). The average
// batch each ran is the max_num_seqs to within 1 % (64: 63.9). The longitudinal post's 0.12 J per
// output token at batch 64 is the 64 row (https://ml.energy/blog/measurement/energy/
// llm-inference-energy-a-longitudinal-analysis): 610 W over 5,147 tokens/s.
//
// In-sample: MemoryPowerFraction (0.7) was chosen on the 8 and 16 rows' power, and the prompt
// length (1,024 tokens; the rows do not publish it) so that a decode step at batch 64 takes about
// the 64 row's median inter-token latency (11.5 ms). Every other figure is out of sample.
var mlEnergyH100 = []struct {
	seqs     int
	out      int
	watts    float64
	tokPerS  float64
	jPerTok  float64
	inSample bool
}{
	{8, 389, 486, 1070, 0.4548, true},
	{16, 404, 513, 1954, 0.2627, true},
	{32, 390, 560, 3391, 0.1651, false},
	{64, 396, 610, 5147, 0.1186, false},
	{96, 393, 644, 6260, 0.1029, false},
	{128, 405, 669, 7037, 0.0951, false},
	{192, 397, 688, 8223, 0.0837, false},
	{256, 404, 691, 9010, 0.0766, false},
}

// The model's steady state at ML.ENERGY's batch sizes and lengths, against its measured power,
// throughput and joules per output token: each within 25 %.
func TestJoulesPerTokenMLEnergyH100(t *testing.T) {
	a, err := llm.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, m, Slice{Board: h100(t)})
	for _, row := range mlEnergyH100 {
		r, err := e.Estimate(Workload{InputTokens: 1024, OutputTokens: row.out, Concurrency: row.seqs}, Load{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Running != row.seqs {
			t.Errorf("batch %d: the engine runs %d (%s), not the batch measured", row.seqs, r.Running, r.Limit)
		}
		t.Logf("batch %3d: %4.0f W (measured %3.0f), %5.0f tok/s (%5.0f), %.4f J/token (%.4f); in-sample %v",
			row.seqs, r.PowerWatts, row.watts, r.OutputTokensPerSec, row.tokPerS, r.JoulesPerToken, row.jPerTok, row.inSample)
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"power W", r.PowerWatts, row.watts}, {"output tok/s", r.OutputTokensPerSec, row.tokPerS}, {"J/output token", r.JoulesPerToken, row.jPerTok}} {
			if math.Abs(c.got/c.want-1) > 0.25 {
				t.Errorf("batch %d: %s %.4g, measured %.4g: off by more than 25 %%", row.seqs, c.name, c.got, c.want)
			}
		}
	}
}

// mlEnergy70BOnFour are the same leaderboard's rows for Llama-3.1-70B-Instruct (bf16) on four
// H100s, tensor-parallel 4, lm-arena-chat, vLLM 0.11.1 (public/data/models/
// meta-llama__Llama-3.1-70B-Instruct__lm-arena-chat.json): max_num_seqs, mean output tokens,
// average power of the four GPUs together, output throughput, J per output token. All out of
// sample: nothing was fitted to them.
var mlEnergy70BOnFour = []struct {
	seqs    int
	out     int
	watts   float64
	tokPerS float64
	jPerTok float64
}{
	{8, 350, 1765, 470, 3.7587},
	{16, 354, 1804, 863, 2.0910},
	{32, 351, 1794, 1487, 1.2069},
	{64, 352, 2002, 2511, 0.7972},
	{128, 359, 2184, 3876, 0.5634},
	{256, 349, 2354, 4915, 0.4790},
}

// The 70B-on-four reference check is met in the simulator (sim's TestJoulesPerTokenMLEnergy70BOnFour,
// which schedules prompts into steps as vLLM does, with 600 prompt tokens fitted to the 8B rows).
// The closed loop here, with the 1,024 prompt tokens of the 8B check above, is within 25 % at
// batch 8, 16 and 64 and 27-49 % high at 32, 128 and 256 (throughput 22-35 % low at 128-256, where
// 1,024-token prompts make the mean step compute-bound). This test logs every row and guards only
// against a regression beyond a factor of 2 of the measurement.
func TestJoulesPerTokenMLEnergy70BOnFour(t *testing.T) {
	a, err := llm.Lookup("llama-3.1-70b")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(a, llm.QuantBF16, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, m, Slice{Board: h100(t), TensorParallel: 4})
	within := 0
	for _, row := range mlEnergy70BOnFour {
		r, err := e.Estimate(Workload{InputTokens: 1024, OutputTokens: row.out, Concurrency: row.seqs}, Load{})
		if err != nil {
			t.Fatal(err)
		}
		off := r.JoulesPerToken/row.jPerTok - 1
		if math.Abs(off) <= 0.25 {
			within++
		}
		t.Logf("batch %3d: %4.0f W (measured %4.0f), %5.0f tok/s (%5.0f), %.3f J/token (%.3f): %+.0f %%",
			row.seqs, r.PowerWatts, row.watts, r.OutputTokensPerSec, row.tokPerS, r.JoulesPerToken, row.jPerTok, 100*off)
		if r.JoulesPerToken > 2*row.jPerTok || r.JoulesPerToken < row.jPerTok/2 {
			t.Errorf("batch %d: %.3f J/token, more than a factor of 2 from the measured %.3f", row.seqs, r.JoulesPerToken, row.jPerTok)
		}
	}
	t.Logf("%d of %d rows within 25 %%", within, len(mlEnergy70BOnFour))
}
