package main

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"gpupool.dev/gpupool/internal/perf"
	"gpupool.dev/gpupool/internal/sim"
)

func TestPerfTable(t *testing.T) {
	out, stderr, code := runCmd(t, "perf", "--model", "qwen2.5-7b", "--board", "H100-SXM5-80GB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"qwen2.5-7b (bf16, 15.2 GB of weights, KV cache auto) on H100-SXM5-80GB, balanced clocks",
		"exclusive", "mig 1g.10gb", "mig 3g.40gb", "mig 7g.80gb", "mps 25% 1/2", "mps 75% 1/2", "timeslice 1/2", "timeslice 1/4",
		"does not fit", // 15.2 GB of BF16 weights in 9.75 GiB
		"MAX REQ/S",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "1g.10gb+me") {
		t.Error("media-extension variant should fold into 1g.10gb")
	}
}

func TestPerfJSON(t *testing.T) {
	out, stderr, code := runCmd(t, "perf", "--model", "llama-3.1-8b", "--board", "A100-SXM4-80GB", "--input-tokens", "1024",
		"--output-tokens", "128", "--concurrency", "1,64", "--ttft-p99", "2s", "--tpot-p99", "40ms", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep perfReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Model != "llama-3.1-8b" || rep.InputTokens != 1024 || rep.TTFTp99Ms != 2000 || rep.TPOTp99Ms != 40 {
		t.Errorf("header %+v", rep)
	}
	// exclusive, ×2/×4/×8 tp, 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb, 3 × MPS,
	// 2 × time-slice.
	if len(rep.Slices) != 15 {
		t.Fatalf("%d slices, want 15", len(rep.Slices))
	}
	excl := rep.Slices[0]
	if excl.Slice != "exclusive" || len(excl.Points) != 2 || excl.Points[1].OutputTokensPerSec <= excl.Points[0].OutputTokensPerSec {
		t.Errorf("exclusive %+v", excl)
	}
	if j0, j1 := excl.Points[0].JoulesPerToken, excl.Points[1].JoulesPerToken; !(j1 > 0 && j1 < j0) {
		t.Errorf("joules per token %.3f at 1 and %.3f at 64 in flight: want positive and falling with the batch", j0, j1)
	}
	if excl.MaxRate.RequestsPerSec <= 0 || excl.MaxRate.TPOTp99Ms > 40 || excl.MaxRate.TTFTp99Ms > 2000 {
		t.Errorf("exclusive max rate %+v", excl.MaxRate)
	}
	// A time-sliced replica with 3 active neighbours does worse than the whole GPU.
	last := rep.Slices[len(rep.Slices)-1]
	if last.Slice != "timeslice 1/4" || last.ActiveNeighbours != 3 || last.MaxRate.RequestsPerSec >= excl.MaxRate.RequestsPerSec {
		t.Errorf("timeslice ×4 %+v vs exclusive %.2f req/s", last, excl.MaxRate.RequestsPerSec)
	}
}

func TestPerfYAMLAndQuantization(t *testing.T) {
	out, stderr, code := runCmd(t, "perf", "--model", "qwen2.5-7b", "--board", "H100", "--quantization", "awq", "--concurrency", "8", "-o", "yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep perfReport
	if err := yaml.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// AWQ int4 weights (≈ 5.6 GB) fit a 1g.10gb instance, where BF16 (15.2 GB) and even FP8
	// (8.1 GiB + 1.3 GiB of workspace in an 8.8 GiB budget) do not.
	var mig *perfSlice
	for i := range rep.Slices {
		if rep.Slices[i].Slice == "mig 1g.10gb" {
			mig = &rep.Slices[i]
		}
	}
	if rep.Quantization != "int4-awq" || mig == nil || !mig.Fits {
		t.Errorf("int4-awq on 1g.10gb: %+v", mig)
	}
	// 28 attention heads: tensor parallel over 2 and 4 GPUs, not 8.
	var tps []int
	for _, sl := range rep.Slices {
		if sl.TensorParallel > 1 {
			tps = append(tps, sl.TensorParallel)
		}
	}
	if len(tps) != 2 || tps[0] != 2 || tps[1] != 4 {
		t.Errorf("tensor-parallel rows %v, want [2 4] (28 heads)", tps)
	}
}

func TestPerfBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--board", "H100"}, "model"},
		{[]string{"--model", "qwen2.5-7b"}, "board"},
		{[]string{"--model", "no-such-model", "--board", "H100"}, "flag --model"},
		{[]string{"--model", "qwen2.5-7b", "--board", "no-such-board"}, "flag --board"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "--quantization", "int3"}, "flag --quantization"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "--input-tokens", "0"}, "--input-tokens"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "--context", "100"}, "--context"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "--tpot-p99", "fast"}, "invalid argument"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "--ttft-p99", "-1s"}, "flag --ttft-p99: must be between 0s and 24h (got -1s)"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "--concurrency", "0"}, "--concurrency"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "-o", "xml"}, "unknown output format"},
		{[]string{"--model", "qwen2.5-7b", "--board", "H100", "extra"}, "unknown command"},
	} {
		out, stderr, code := runCmd(t, append([]string{"perf"}, c.args...)...)
		if code == exitOK {
			t.Errorf("%v: no error", c.args)
			continue
		}
		if code != exitInvalid {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, exitInvalid, stderr)
		}
		if !strings.Contains(stderr, c.want) {
			t.Errorf("%v: error %q lacks %q", c.args, stderr, c.want)
		}
		if out != "" {
			t.Errorf("%v: wrote output on error:\n%s", c.args, out)
		}
	}
	// Every problem is reported at once.
	_, stderr, code := runCmd(t, "perf", "--model", "nope", "--board", "nope", "--quantization", "nope")
	if code == exitOK || !strings.Contains(stderr, "--model") || !strings.Contains(stderr, "--board") || !strings.Contains(stderr, "--quantization") {
		t.Errorf("want all three flag errors, got %q", stderr)
	}
}

// --context sizes the engines: Llama-3.1-8B bf16 on H100 1g.20gb holds 11,952 KV tokens, so an
// 8,192-token context fits and a 32,768-token one does not (vLLM would refuse to start); the JSON
// reports the context used, min(8192, 131072) when the flag is unset.
func TestPerfContextSizesTheEngines(t *testing.T) {
	slice := func(ctx string) (int, map[string]any) {
		t.Helper()
		args := []string{"perf", "--model", "llama-3.1-8b", "--board", "H100-SXM5-80GB", "-o", "json"}
		if ctx != "" {
			args = append(args, "--context", ctx)
		}
		out, errs, code := runCmd(t, args...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var rep struct {
			Context int              `json:"context"`
			Slices  []map[string]any `json:"slices"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, s := range rep.Slices {
			if s["slice"] == "mig 1g.20gb" {
				return rep.Context, s
			}
		}
		t.Fatal("no mig 1g.20gb row")
		return 0, nil
	}
	if c, s := slice(""); c != 8192 || s["fits"] != true || s["kvCapacityTokens"] != 11952.0 {
		t.Errorf("default: context %d, 1g.20gb %v", c, s)
	}
	if c, s := slice("32768"); c != 32768 || s["fits"] != false {
		t.Errorf("--context 32768: context %d, 1g.20gb %v", c, s)
	}
}

// --kv-cache-dtype fp8 halves the KV bytes per token, so the same slice holds about twice the
// tokens; a concurrency beyond what the cache holds runs as many as fit, and the rest queue: the
// point is reported (not skipped), with its running count, its limit, and a TTFT that includes
// the wait.
func TestPerfKVCacheDtypeAndQueue(t *testing.T) {
	get := func(kv string) perfSlice {
		out, stderr, code := runCmd(t, "perf", "--model", "llama-3.1-8b", "--board", "H100-SXM5-80GB", "--kv-cache-dtype", kv,
			"--concurrency", "1,4096", "-o", "json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var rep perfReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if rep.KVCacheDType != kv {
			t.Errorf("report kvCacheDtype %q, want %q", rep.KVCacheDType, kv)
		}
		for _, s := range rep.Slices {
			if s.Slice == "mig 1g.20gb" {
				return s
			}
		}
		t.Fatal("no mig 1g.20gb slice")
		return perfSlice{}
	}
	auto, fp8 := get("auto"), get("fp8")
	if r := float64(fp8.KVCapacityTokens) / float64(auto.KVCapacityTokens); r < 1.9 || r > 2.1 {
		t.Errorf("fp8 KV holds %d tokens vs %d with auto: ratio %.2f, want about 2", fp8.KVCapacityTokens, auto.KVCapacityTokens, r)
	}
	p := fp8.Points[1]
	if p.Skipped != "" || p.Running <= 0 || p.Running >= 4096 || p.Limit != "kv-capacity" {
		t.Fatalf("4096 requests on 1g.20gb: %+v, want a kv-capacity-limited point that runs some and queues the rest", p)
	}
	// 1g.20gb has 20 GiB < 70 GiB: vLLM's small defaults, 256 sequences and 2048 tokens.
	if fp8.MaxSeqs != 256 || fp8.MaxBatchedTokens != 2048 || auto.MaxSeqs != 256 {
		t.Errorf("1g.20gb batch limits %d/%d, want vLLM's 256/2048", fp8.MaxSeqs, fp8.MaxBatchedTokens)
	}
	if one := fp8.Points[0]; p.TTFTMs < 10*one.TTFTMs {
		t.Errorf("queued TTFT %.1f ms should include the wait for a slot (one request: %.1f ms)", p.TTFTMs, one.TTFTMs)
	}
}

// What the user runs is what was validated: the perf command's engine constants are
// perf.DefaultOptions() (the constants internal/perf's TestPublishedFidelity and
// TestDefaultsAgainstH200 hold to the published and measured rows) with only the engine's
// context and KV-cache type taken from the flags, and the simulator's default is the same.
func TestPerfUsesValidatedDefaults(t *testing.T) {
	f := &perfFlags{model: "llama-3.1-8b", board: "H100-SXM5-80GB", quant: "fp8", kvDType: "fp8", input: 512, outputTok: 256,
		concurrency: []int{1}}
	m, _, err := perfInputs(f)
	if err != nil {
		t.Fatal(err)
	}
	want := perf.DefaultOptions()
	want.Context, want.KVElemBytes = 8192, 1
	if got := m.Options(); got != want {
		t.Errorf("perf command's options %+v, want the validated defaults %+v", got, want)
	}
	if got := (sim.Config{}).Defaults().Perf; got != perf.DefaultOptions() {
		t.Errorf("simulate's default options %+v, want perf.DefaultOptions()", got)
	}
}

// Tensor-parallel rows: Llama-3.1-70B at bf16 (141 GB of weights) fits no single H100; a replica
// over 2 just does (70.6 GB of weights per GPU leave room for about 12k KV tokens at 0.9 of
// 80 GiB), over 4 and 8 with much more, and spreading it wider makes each token faster.
func TestPerfTensorParallelRows(t *testing.T) {
	out, stderr, code := runCmd(t, "perf", "--model", "llama-3.1-70b", "--board", "H100-SXM5-80GB", "--concurrency", "1", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep perfReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	tp := map[int]perfSlice{}
	for _, s := range rep.Slices {
		if s.Mode == "exclusive" && s.Profile == "" {
			tp[max(s.TensorParallel, 1)] = s
		}
	}
	if len(tp) != 4 || tp[1].Fits || !tp[2].Fits || !tp[4].Fits || !tp[8].Fits {
		t.Fatalf("tensor-parallel rows %+v: want 1 GPU not to fit, 2, 4 and 8 to fit", tp)
	}
	for _, pair := range [][2]int{{2, 4}, {4, 8}} {
		a, b := tp[pair[0]], tp[pair[1]]
		if b.KVCapacityTokens <= a.KVCapacityTokens || b.Points[0].TPOTMs >= a.Points[0].TPOTMs {
			t.Errorf("×%d: %d KV tokens, TPOT %.1f ms; ×%d: %d, %.1f ms: want more cache and faster tokens on more GPUs",
				pair[0], a.KVCapacityTokens, a.Points[0].TPOTMs, pair[1], b.KVCapacityTokens, b.Points[0].TPOTMs)
		}
	}
	if tp[4].Slice != "exclusive ×4 tp" {
		t.Errorf("slice name %q", tp[4].Slice)
	}
}

// --energy-class efficiency locks the clocks at 70 % of boost: compute-bound prefill slows
// (TTFT of 4,096-token prompts), memory-bound decode barely does, and each token costs fewer
// joules. An unknown class is refused.
func TestPerfEnergyClass(t *testing.T) {
	get := func(class string) perfPoint {
		out, stderr, code := runCmd(t, "perf", "--model", "llama-3.1-8b", "--board", "H100-SXM5-80GB", "--energy-class", class,
			"--input-tokens", "4096", "--output-tokens", "64", "--concurrency", "1", "-o", "json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var rep perfReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.EnergyClass != class {
			t.Errorf("energy class %q, want %q", rep.EnergyClass, class)
		}
		return rep.Slices[0].Points[0]
	}
	bal, eff := get("balanced"), get("efficiency")
	if eff.TTFTMs <= 1.1*bal.TTFTMs || eff.TPOTMs > 1.15*bal.TPOTMs || eff.JoulesPerToken >= bal.JoulesPerToken {
		t.Errorf("efficiency: TTFT %.1f ms, TPOT %.2f ms, %.3f J/token; balanced %.1f ms, %.2f ms, %.3f J/token",
			eff.TTFTMs, eff.TPOTMs, eff.JoulesPerToken, bal.TTFTMs, bal.TPOTMs, bal.JoulesPerToken)
	}
	if _, stderr, code := runCmd(t, "perf", "--model", "llama-3.1-8b", "--board", "H100", "--energy-class", "turbo"); code == exitOK ||
		!strings.Contains(stderr, "flag --energy-class") {
		t.Errorf("unknown energy class: exit %d, %s", code, stderr)
	}
}
