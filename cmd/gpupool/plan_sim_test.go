package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simAttainment is the part of simulate's JSON report the cross-check reads.
type simAttainment struct {
	Tenants []struct {
		Name          string  `json:"name"`
		Replicas      int     `json:"replicas"`
		Completed     int64   `json:"completed"`
		Dropped       int64   `json:"dropped"`
		Preemptions   int64   `json:"preemptions"`
		SLOAttainment float64 `json:"sloAttainment"`
	} `json:"tenants"`
}

// planThenSimulate plans pool, then simulates the plan for 10 minutes with seed 1, and returns
// the plan's exit code, its infeasible tenants and the simulation report.
func planThenSimulate(t *testing.T, pool string) (int, map[string]bool, simAttainment) {
	t.Helper()
	planOut, errOut, planCode := runCmd(t, "plan", pool, "-o", "json")
	if planCode != exitOK && planCode != 2 {
		t.Fatalf("plan: exit %d: %s", planCode, errOut)
	}
	var pl struct {
		Tenants []struct {
			Name       string `json:"name"`
			Infeasible bool   `json:"infeasible"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(planOut), &pl); err != nil {
		t.Fatal(err)
	}
	short := map[string]bool{}
	for _, tn := range pl.Tenants {
		if tn.Infeasible {
			short[tn.Name] = true
		}
	}
	planPath := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planPath, []byte(planOut), 0o644); err != nil {
		t.Fatal(err)
	}
	simOut, errOut, code := runCmd(t, "simulate", pool, "--plan", planPath, "--duration", "10m", "--seed", "1", "-o", "json")
	if code != exitOK {
		t.Fatalf("simulate: exit %d: %s", code, errOut)
	}
	var rep simAttainment
	if err := json.Unmarshal([]byte(simOut), &rep); err != nil {
		t.Fatal(err)
	}
	return planCode, short, rep
}

// checkAttainment asserts that every tenant the plan serves meets its SLO for at least 99 % of
// its requests in the simulation, and that the others are exactly the plan's infeasible ones.
func checkAttainment(t *testing.T, short map[string]bool, rep simAttainment) {
	t.Helper()
	for _, tn := range rep.Tenants {
		switch {
		case short[tn.Name]:
			if tn.Replicas != 0 {
				t.Errorf("%s: infeasible in the plan but %d replicas simulated", tn.Name, tn.Replicas)
			}
		case tn.Replicas == 0 || tn.Completed == 0:
			t.Errorf("%s: served by the plan but %d replicas completed %d requests", tn.Name, tn.Replicas, tn.Completed)
		case tn.SLOAttainment < 0.99:
			t.Errorf("%s: SLO attainment %.1f %% < 99 %% (%d preemptions): the plan promised the SLO", tn.Name, 100*tn.SLOAttainment, tn.Preemptions)
		}
	}
}

// bf16KV returns the example with the 13B tenants' KV cache back at bf16 (its default), which
// halves the KV tokens their slices hold.
func bf16KV(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "h100x8-mixed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "{name: llama-2-13b, quantization: fp8, kvCacheDtype: fp8}", "{name: llama-2-13b, quantization: fp8}")
	if text == string(data) {
		t.Fatal("the example's 13B tenants no longer set kvCacheDtype: fp8")
	}
	return text
}

// The articles' 8 × H100 node as the example writes it (13B tenants with an fp8 KV cache): every
// tenant is served on the 8 GPUs and meets its SLO in simulation, including the 13B tenants,
// whose KV cache must hold their bursts.
func TestPlanThenSimulateH100x8(t *testing.T) {
	code, short, rep := planThenSimulate(t, filepath.Join("..", "..", "examples", "h100x8-mixed.yaml"))
	if code != exitOK || len(short) != 0 {
		t.Errorf("plan: exit %d with tenants short %v, want every tenant served", code, short)
	}
	if len(rep.Tenants) != 24 {
		t.Fatalf("%d tenants simulated, want 24", len(rep.Tenants))
	}
	checkAttainment(t, short, rep)
}

// With a bf16 KV cache the 13B tenants need more room. Under today's vLLM defaults (1 ms of host
// time per step, 1024 sequences on an 80 GB H100) the one node still serves all 24 tenants on
// the DRA path, where they share MIG instances by MPS, and every tenant meets its SLO in
// simulation; under the 2023 engine constants it served 23. Its plan takes the confirmation's
// longest runs (six 13B tenants borderline, then their tail runs and, above 0.8 of what their
// replicas sustain, their long runs: about 270 s of CPU), so the race detector skips it and it
// runs without it (scripts/test.sh).
func TestPlanThenSimulateH100x8BF16KVDRA(t *testing.T) {
	if raceEnabled {
		t.Skip("the plan's confirmation runs take minutes of CPU; several times that under the race detector")
	}
	dra := strings.Replace(bf16KV(t), "\npolicy:\n", "\npolicy:\n  kubernetesDeviceAPI: dra\n", 1)
	code, short, rep := planThenSimulate(t, writeTemp(t, "pool.yaml", dra))
	if code != exitOK || len(short) != 0 {
		t.Errorf("dra: plan: exit %d with %d tenants short, want every tenant served", code, len(short))
	}
	checkAttainment(t, short, rep)
}

// The same tenants on the device-plugin path (no MPS on MIG devices): the 13B tenants' cheapest
// slice is an MPS third of a whole GPU, which the plugin serves only on a node without MIG GPUs
// (and not beside the 70B tenants' unshared whole GPUs): the planner re-chooses their slices as
// MIG, the 13B tenants that do not fit are short of capacity (exit 2), and one 70B tenant gives
// up its whole GPU to two of them (ADR 0041: more tenants served in full); every tenant served
// meets its SLO.
func TestPlanThenSimulateH100x8BF16KV(t *testing.T) {
	code, short, rep := planThenSimulate(t, writeTemp(t, "pool.yaml", bf16KV(t)))
	if code != exitPartial || len(short) == 0 {
		t.Errorf("device plugin: plan: exit %d with %d tenants short, want some 13B tenants short", code, len(short))
	}
	chat := 0
	for name := range short {
		if strings.HasPrefix(name, "chat-") {
			chat++
		} else if !strings.HasPrefix(name, "product-") {
			t.Errorf("device plugin: %s short, want only 13B tenants and a 70B tenant that gave way", name)
		}
	}
	if chat > 1 || len(short) > 2 {
		t.Errorf("device plugin: %d tenants short, %d of them 70B: want at most 2, at most one 70B", len(short), chat)
	}
	checkAttainment(t, short, rep)
}

// With a bf16 KV cache and a second node the same tenants are all served (on 9 GPUs, on the
// example's device-plugin path) and all meet their SLOs.
func TestPlanThenSimulateH100x8BF16KVPlusNode(t *testing.T) {
	data := bf16KV(t)
	const extra = "  - name: h100-node-b\n    gpus:\n    - board: H100-SXM5-80GB\n      count: 8\npolicy:\n"
	text := strings.Replace(data, "policy:\n", extra, 1)
	if text == data {
		t.Fatal("the example has no policy section to add a node before")
	}
	code, short, rep := planThenSimulate(t, writeTemp(t, "pool.yaml", text))
	if code != exitOK || len(short) != 0 {
		t.Errorf("plan: exit %d with tenants short %v, want every tenant served", code, short)
	}
	checkAttainment(t, short, rep)
}
