package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// The extreme-value property: every command, fed an extreme value in any one numeric field of
// its input (or any numeric flag), either exits 1 naming that field, or exits 0 or 2 with an
// answer that holds up (the plan validates against the pool, every feasible tenant's replicas
// carry its traffic, a simulation's counts add up); never exit 3, never an "ok" that is wrong,
// never more than 5 s or 500 MB.

const extremeTemplate = `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: x}
fleet:
  nodes:
  - name: n1
    gpus: [{board: H100-SXM5-80GB, count: $count}]
policy: {burstPoolPercent: $burst, maxUnavailable: $maxUnavailable, reconfigCooldown: $cooldown}
tenants:
- name: chat
  weight: $weight
  maxContext: $maxContext
  concurrency: $concurrency
  reservation: $reservation
  cap: $cap
  replicas: $replicas
  model: {name: qwen2.5-7b}
  traffic: {rps: $rps, inputTokens: $in, outputTokens: $out}
  slo: {ttftP99: $ttft, tpotP99: $tpot, e2eP99: $e2e}
`

// extremeFields are the Pool's numeric fields: placeholder, field path, default and kind.
var extremeFields = []struct {
	ph, path, def, kind string
}{
	{"$count", "fleet.nodes[0].gpus[0].count", "2", "int"},
	{"$burst", "policy.burstPoolPercent", "0", "int"},
	{"$maxUnavailable", "policy.maxUnavailable", "1", "int"},
	{"$cooldown", "policy.reconfigCooldown", "1h", "duration"},
	{"$weight", "tenants[0].weight", "1", "float"},
	{"$maxContext", "tenants[0].maxContext", "0", "int"},
	{"$concurrency", "tenants[0].concurrency", "0", "int"},
	{"$reservation", "tenants[0].reservation", "0", "int"},
	{"$cap", "tenants[0].cap", "4", "int"},
	{"$replicas", "tenants[0].replicas", "null", "int"},
	{"$rps", "tenants[0].traffic.rps", "1", "float"},
	{"$in", "tenants[0].traffic.inputTokens", "500", "int"},
	{"$out", "tenants[0].traffic.outputTokens", "200", "int"},
	{"$ttft", "tenants[0].slo.ttftP99", "1s", "duration"},
	{"$tpot", "tenants[0].slo.tpotP99", "50ms", "duration"},
	{"$e2e", "tenants[0].slo.e2eP99", "30s", "duration"},
}

var extremeValues = map[string][]string{
	"int": {"-9223372036854775808", "-1", "0", "1", "64", "100000", "2147483648", "9223372036854775807",
		"99999999999999999999", "1e20"},
	"float":    {"-1", "-0", "0", "5e-324", "1e-300", "1e-6", "1000000", "1e20", "1e308", ".inf", ".nan"},
	"duration": {"-1ns", "0s", "1ns", "24h", "8760h", "2562047h", "2562048h", "1e300h"},
}

func extremePool(ph, value string) string {
	s := extremeTemplate
	for _, f := range extremeFields {
		v := f.def
		if f.ph == ph {
			v = value
		}
		s = strings.ReplaceAll(s, f.ph, v)
	}
	return s
}

// bounded runs the CLI and fails the test when it took more than 5 s or allocated more than
// 500 MB (the total allocated bounds the peak from above).
func bounded(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	// The bar is 5 s; the race detector slows a run about ten times over. The time is wall time
	// on a machine that may be busy with other work, so a slow run is tried again, twice at
	// most: a command that is always slow still fails.
	bar := 5 * time.Second
	if raceEnabled {
		bar = 50 * time.Second
	}
	var before, after runtime.MemStats
	var out, errOut string
	var code int
	for attempt := 1; ; attempt++ {
		runtime.ReadMemStats(&before)
		start := time.Now()
		out, errOut, code = runCmd(t, args...)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if took <= bar {
			break
		}
		if attempt == 3 {
			t.Errorf("%v took %v, more than %v, three times", args[0], took, bar)
			break
		}
		t.Logf("attempt %d of %v took %v, more than %v: trying again", attempt, args[0], took, bar)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 500<<20 {
		t.Errorf("%v allocated %d MB, more than 500 MB", args[0], alloc>>20)
	}
	return out, errOut, code
}

func TestExtremePoolValues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command on every extreme value")
	}
	for _, f := range extremeFields {
		for _, val := range extremeValues[f.kind] {
			t.Run(f.path+"="+val, func(t *testing.T) {
				file := writeTemp(t, "pool.yaml", extremePool(f.ph, val))
				pool, loadErr := readPool(t.Context(), file)
				for _, cmd := range [][]string{{"validate", file}, {"plan", file, "-o", "json"},
					{"simulate", file, "--strategy", "mps", "--duration", "2s", "-o", "json"}} {
					out, errOut, code := bounded(t, cmd...)
					switch {
					case code == exitInvalid:
						// The field's path, or, for a rule across fields, the field's name
						// beside the other's path.
						leaf := f.path[strings.LastIndex(f.path, ".")+1:]
						if !strings.Contains(out+errOut, f.path) && !strings.Contains(out+errOut, leaf) {
							t.Errorf("%s: exit 1 without naming %s:\n%s%s", cmd[0], f.path, out, errOut)
						}
						if loadErr == nil && cmd[0] != "simulate" {
							t.Errorf("%s: exit 1 for a pool that loads:\n%s", cmd[0], errOut)
						}
					case code == exitOK || code == exitPartial:
						if loadErr != nil {
							t.Errorf("%s: exit %d for an invalid pool (%v)", cmd[0], code, loadErr)
							continue
						}
						checkExtremeAnswer(t, cmd[0], pool, out, code)
					default:
						t.Errorf("%s: exit %d:\n%s", cmd[0], code, errOut)
					}
				}
			})
		}
	}
}

// checkExtremeAnswer holds an accepted answer to the property.
func checkExtremeAnswer(t *testing.T, cmd string, pool *v1.Pool, out string, code int) {
	t.Helper()
	switch cmd {
	case "plan":
		pl, err := v1.DecodePlan([]byte(out))
		if err != nil {
			t.Fatalf("plan output: %v", err)
		}
		if err := v1.ValidatePlan(pl, pool); err != nil {
			t.Errorf("plan does not validate against its pool: %v", err)
		}
		for i, pt := range pl.Tenants {
			spec := pool.Tenants[i]
			n := len(pt.Replicas)
			switch {
			case pt.Infeasible && code != exitPartial:
				t.Errorf("tenant %s infeasible, exit %d, want 2", pt.Name, code)
			case pt.Infeasible:
			case spec.Replicas != nil && n != *spec.Replicas+boolInt(spec.Redundancy):
				t.Errorf("tenant %s: %d replicas, fixed at %d", pt.Name, n, *spec.Replicas)
			case spec.Replicas == nil && pt.Predicted.MaxRPS < spec.Traffic.RPS*(1-1e-9):
				t.Errorf("tenant %s: %d replicas carry %.4g req/s within the SLO, less than the %.4g req/s offered", pt.Name, n, pt.Predicted.MaxRPS, spec.Traffic.RPS)
			case n < spec.Reservation || (spec.Cap != nil && n > *spec.Cap):
				t.Errorf("tenant %s: %d replicas outside reservation %d and cap %v", pt.Name, n, spec.Reservation, spec.Cap)
			}
		}
	case "simulate":
		var rep sim.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("simulate output: %v", err)
		}
		for _, tr := range rep.Tenants {
			dropped := tr.Dropped
			if tr.Arrived != tr.Completed+dropped+tr.Unfinished || tr.SLOAttainment < 0 || tr.SLOAttainment > 1 {
				t.Errorf("tenant %s: arrived %d ≠ completed %d + dropped %d + unfinished %d, or SLO attainment %v outside [0, 1]",
					tr.Name, tr.Arrived, tr.Completed, dropped, tr.Unfinished, tr.SLOAttainment)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Every numeric flag, at its extremes: exit 1 naming the flag, or an answer (exit 0).
func TestExtremeFlagValues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command on every extreme flag value")
	}
	pool := writeTemp(t, "pool.yaml", planPool)
	ints := []string{"-9223372036854775808", "-1", "0", "1", "2000000000", "9223372036854775807", "99999999999999999999"}
	durs := []string{"-1ns", "0s", "1ns", "24h", "25h", "2562047h", "2562048h"}
	base := map[string][]string{
		"perf":     {"perf", "--model", "qwen2.5-7b", "--board", "H100"},
		"fit":      {"fit", "--model", "qwen2.5-7b", "--board", "H100"},
		"simulate": {"simulate", pool, "--strategy", "mps", "--duration", "10s"},
	}
	flags := []struct {
		cmd, flag string
		values    []string
	}{
		{"perf", "--input-tokens", ints}, {"perf", "--output-tokens", ints}, {"perf", "--context", ints},
		{"perf", "--concurrency", ints}, {"perf", "--ttft-p99", durs}, {"perf", "--tpot-p99", durs},
		{"fit", "--context", ints}, {"fit", "--concurrency", ints}, {"fit", "--token-budget", ints},
		{"fit", "--max-num-batched-tokens", ints}, {"fit", "--max-num-seqs", ints},
		{"fit", "--gpu-memory-utilization", []string{"-1", "0", "1e-300", "1", "1.5", "NaN", "Inf"}},
		{"fit", "--shared-cap", []string{"-1", "0", "1", "1e300", "9223372036854775807", "1Pi", "99999Ti"}},
		{"simulate", "--duration", durs}, {"simulate", "--seed", []string{"0", "18446744073709551615", "-1", "18446744073709551616"}},
	}
	for _, f := range flags {
		for _, v := range f.values {
			args := append(append([]string{}, base[f.cmd]...), f.flag+"="+v)
			t.Run(f.cmd+f.flag+"="+v, func(t *testing.T) {
				out, errOut, code := bounded(t, args...)
				switch code {
				case exitOK:
					if strings.TrimSpace(out) == "" {
						t.Errorf("exit 0 with no output")
					}
				case exitInvalid:
					if !strings.Contains(errOut, f.flag) {
						t.Errorf("exit 1 without naming %s:\n%s", f.flag, errOut)
					}
				default:
					t.Errorf("exit %d:\n%s", code, errOut)
				}
			})
		}
	}
}

// setPath sets the value at a dotted path with [i] indices in a generic YAML tree.
func setPath(t *testing.T, tree any, path string, v any) {
	t.Helper()
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == '[' || r == ']' })
	cur := tree
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = v
				return
			}
			if c[p] == nil {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			var n int
			if _, err := fmt.Sscan(p, &n); err != nil || n >= len(c) {
				t.Fatalf("path %s: no element %s", path, p)
			}
			if last {
				c[n] = v
				return
			}
			cur = c[n]
		default:
			t.Fatalf("path %s: %s is not a container", path, p)
		}
	}
}

// The same property over the numbers of a Plan, for every command that reads one.
func TestExtremePlanValues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every plan-reading command on every extreme value")
	}
	poolFile := filepath.Join("..", "..", "examples", "h100-7b-sharing.yaml")
	planYAML, errOut, code := runCmd(t, "plan", poolFile, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	pool, err := readPool(t.Context(), poolFile)
	if err != nil {
		t.Fatal(err)
	}
	fields := []struct{ path, kind string }{
		{"gpus[0].index", "int"}, {"gpus[0].instances[0].start", "int"}, {"gpus[0].instances[0].replicas[0].index", "int"},
		{"gpus[0].instances[0].replicas[0].limits.smPercent", "int"},
		{"gpus[0].instances[0].replicas[0].limits.timeSliceReplicas", "int"},
		{"gpus[0].instances[0].replicas[0].limits.memory", "int"},
		{"tenants[0].predicted.maxRps", "float"}, {"tenants[0].predicted.tokensPerSecond", "float"},
		{"tenants[0].predicted.ttftP99", "duration"}, {"tenants[0].predicted.e2eP99", "duration"},
		{"tenants[0].replicas[0].index", "int"},
		{"summary.gpusUsed", "int"}, {"summary.gpusTotal", "int"}, {"summary.lowerBound", "int"},
		{"summary.baselines[0].gpus", "int"}, {"summary.objective", "float"},
	}
	for _, f := range fields {
		for _, val := range extremeValues[f.kind] {
			t.Run(f.path+"="+val, func(t *testing.T) {
				var tree any
				if err := yaml.Unmarshal([]byte(planYAML), &tree); err != nil {
					t.Fatal(err)
				}
				var v any = val
				if f.kind != "duration" && !strings.HasPrefix(val, ".") {
					v = json.Number(val)
				}
				setPath(t, tree, f.path, v)
				b, err := yaml.Marshal(tree)
				if err != nil {
					t.Fatal(err)
				}
				text := string(b)
				if s, ok := v.(string); ok && strings.HasPrefix(s, ".") { // YAML's .inf and .nan, unquoted
					text = strings.Replace(text, "'"+s+"'", s, 1)
				}
				planFile := writeTemp(t, "plan.yaml", text)
				pl, decErr := v1.DecodePlan([]byte(text))
				valid := decErr == nil && v1.ValidatePlan(pl, pool) == nil
				// A number that breaks a cross-reference is named by its element (its path
				// without the last part) beside the other end.
				leaf, parent := f.path[strings.LastIndex(f.path, ".")+1:], f.path[:strings.LastIndex(f.path, ".")]
				for _, cmd := range [][]string{{"validate", planFile, "--pool", poolFile}, {"render", planFile, "--pool", poolFile, "--dry-run"},
					{"simulate", poolFile, "--plan", planFile, "--duration", "2s", "-o", "json"}} {
					out, errOut, code := bounded(t, cmd...)
					switch {
					case code == exitInvalid:
						if !strings.Contains(out+errOut, parent) && !strings.Contains(out+errOut, leaf) {
							t.Errorf("%s: exit 1 without naming %s:\n%s%s", cmd[0], f.path, out, errOut)
						}
						// A document that validates may still be refused by a command that checks more
						// (simulate places the model in the replica's memory limit), but then the
						// command must name the very field.
						if valid && !strings.Contains(out+errOut, f.path) {
							t.Errorf("%s: exit 1 for a valid plan:\n%s%s", cmd[0], out, errOut)
						}
					case code == exitOK || code == exitPartial:
						if !valid {
							t.Errorf("%s: exit %d for a plan that does not validate against its pool", cmd[0], code)
							continue
						}
						checkExtremeAnswer(t, cmd[0], pool, out, code)
					default:
						t.Errorf("%s: exit %d:\n%s", cmd[0], code, errOut)
					}
				}
			})
		}
	}
}

// The same property over the numbers of a model directory's config.json, through fit.
func TestExtremeModelConfigValues(t *testing.T) {
	if testing.Short() {
		t.Skip("runs fit on every extreme config value")
	}
	base, err := os.ReadFile(filepath.Join(tinyLlamaDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	weights, err := os.ReadFile(filepath.Join(tinyLlamaDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"hidden_size", "intermediate_size", "max_position_embeddings", "num_attention_heads",
		"num_hidden_layers", "num_key_value_heads", "vocab_size"} {
		for _, val := range extremeValues["int"] {
			t.Run(field+"="+val, func(t *testing.T) {
				var cfg map[string]any
				if err := json.Unmarshal(base, &cfg); err != nil {
					t.Fatal(err)
				}
				cfg[field] = json.Number(val)
				b, err := json.Marshal(cfg)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "config.json"), string(b))
				writeFile(t, filepath.Join(dir, "model.safetensors"), string(weights))
				out, errOut, code := bounded(t, "fit", "--model-dir", dir, "--board", "H100", "-o", "json")
				switch code {
				case exitInvalid:
					if !strings.Contains(errOut, field) && !strings.Contains(errOut, "head_dim") {
						t.Errorf("exit 1 without naming %s:\n%s", field, errOut)
					}
				case exitOK:
					var rep struct {
						Fits []json.RawMessage `json:"fits"`
					}
					if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Fits) == 0 {
						t.Errorf("exit 0 without fits: %v\n%s", err, out)
					}
				default:
					t.Errorf("exit %d:\n%s", code, errOut)
				}
			})
		}
	}
}
