package main

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestPerfTable(t *testing.T) {
	out, stderr, code := runCmd(t, "perf", "--model", "qwen2.5-7b", "--board", "H100-SXM5-80GB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"qwen2.5-7b (bf16, 15.2 GB of weights) on H100-SXM5-80GB",
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
	// exclusive, 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb, 3 × MPS, 2 × time-slice.
	if len(rep.Slices) != 12 {
		t.Fatalf("%d slices, want 12", len(rep.Slices))
	}
	excl := rep.Slices[0]
	if excl.Slice != "exclusive" || len(excl.Points) != 2 || excl.Points[1].OutputTokensPerSec <= excl.Points[0].OutputTokensPerSec {
		t.Errorf("exclusive %+v", excl)
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
	if rep.Quantization != "int4-awq" || !rep.Slices[1].Fits || rep.Slices[1].Slice != "mig 1g.10gb" {
		t.Errorf("int4-awq on 1g.10gb: %+v", rep.Slices[1])
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
