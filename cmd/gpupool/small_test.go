package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pool whose one tenant asks for far more than the fleet holds.
var overloadPool = strings.Replace(planPool, "rps: 1,", "rps: 1000000,", 1)

// With an infeasible tenant the plan prints no gap to the lower bound (the GPUs used serve only
// the feasible tenants), and says why the tenant is infeasible: the fleet is too small.
func TestPlanInfeasibleNoGap(t *testing.T) {
	out, errOut, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", overloadPool))
	if code != exitPartial {
		t.Fatalf("exit %d, want 2: %s", code, errOut)
	}
	if !strings.Contains(out, "(no gap: 1 tenant infeasible)") || strings.Contains(out, "gap 0") || !strings.Contains(out, "INFEASIBLE: NoCapacity") {
		t.Errorf("output:\n%s", out)
	}
}

// A tenant that completed no request shows no SLO attainment, not 100% or 0%.
func TestSimulateNoCompletionsNoSLO(t *testing.T) {
	out, errOut, code := runCmd(t, "simulate", writeTemp(t, "pool.yaml", overloadPool), "--strategy", "mps", "--duration", "100ms")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "chat" {
			if f[2] != "0" || f[8] != "-" {
				t.Errorf("row %q: want 0 done and SLO MET -", line)
			}
			return
		}
	}
	t.Fatalf("no row for chat:\n%s", out)
}

// In JSON the same tenant says how many requests its attainment is over: none.
func TestSimulateNoCompletionsJSON(t *testing.T) {
	out, errOut, code := runCmd(t, "simulate", writeTemp(t, "pool.yaml", overloadPool), "--strategy", "mps", "--duration", "100ms", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep simulateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Tenants {
		if tr.Name == "chat" {
			if tr.Completed != 0 || tr.SLOJudged != 0 {
				t.Errorf("chat: %d completed, sloJudged %d, want 0 and 0", tr.Completed, tr.SLOJudged)
			}
			return
		}
	}
	t.Fatalf("no tenant chat in %s", out)
}

// Re-planning with no change writes "steps: []", not "steps: null".
func TestMigrationNoSteps(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", planPool)
	cur, errOut, code := runCmd(t, "plan", pool, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, errOut, code := runCmd(t, "plan", pool, "--current", writeTemp(t, "cur.yaml", cur), "--out", dir); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "migration.yaml"))
	if err != nil || strings.TrimSpace(string(b)) != "steps: []" {
		t.Errorf("migration.yaml = %q, %v", b, err)
	}
}

func TestValidateOneProblem(t *testing.T) {
	out, _, code := runCmd(t, "validate", writeTemp(t, "pool.yaml", strings.Replace(planPool, "rps: 1,", "rps: -1,", 1)))
	if code != exitInvalid || !strings.Contains(out, "INVALID (1 problem)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
