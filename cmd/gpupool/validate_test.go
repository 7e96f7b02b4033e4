package main

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const (
	defaultMigParted = "../../internal/migparted/testdata/config-default.yaml"
	validPool        = "../../api/v1/testdata/pool-valid.yaml"
	invalidPool      = "../../api/v1/testdata/pool-invalid.yaml"
	validPlan        = "../../api/v1/testdata/plan-valid.yaml"
)

func TestValidateDetectsKindsAndAcceptsValidFiles(t *testing.T) {
	out, errs, code := runCmd(t, "validate", defaultMigParted, validPool)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	for _, want := range []string{
		"config-default.yaml: mig-parted: ok",
		"81 configs",
		"pool-valid.yaml: Pool: ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateReportsEveryPoolErrorWithPathAndExits1(t *testing.T) {
	out, _, code := runCmd(t, "validate", "-o", "json", invalidPool)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d", code, exitInvalid)
	}
	var res validateOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if res.Valid || len(res.Files) != 1 || res.Files[0].Kind != fileKindPool {
		t.Fatalf("unexpected result: %+v", res)
	}
	errs := res.Files[0].Errors
	if len(errs) < 10 {
		t.Errorf("got %d errors, want all of them (the fixture has dozens)", len(errs))
	}
	if !strings.HasPrefix(errs[0], "fleet.nodes[0].gpus[0].board: unknown board \"H100X\"") {
		t.Errorf("first error %q lacks its field path", errs[0])
	}
}

// A Pool with an unknown field is still checked without it: validate lists the meaning problems
// (a negative weight, an unknown board, a negative SLO) beside the decoding ones, as plan does.
func TestValidateListsPoolProblemsBesideUnknownFields(t *testing.T) {
	pool := writeTemp(t, "pool.yaml", `apiVersion: gpupool.dev/v1
kind: Pool
metadata: {name: several-problems}
fleet:
  nodes:
  - name: n0
    gpus: [{board: H100, count: 4}, {board: H300-NOPE, count: 2}]
policy:
  maxUnavalable: 2
tenants:
- name: alpha
  weight: -3
  model: {name: llama-3.1-8b}
  slo: {ttftP99: -200ms}
`)
	out, _, code := runCmd(t, "validate", "-o", "json", pool)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d", code, exitInvalid)
	}
	var res validateOutput
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(res.Files) != 1 {
		t.Fatalf("unexpected result: %+v", res)
	}
	got := strings.Join(res.Files[0].Errors, "\n")
	for _, want := range []string{
		"policy.maxUnavalable: unknown field",
		`fleet.nodes[0].gpus[1].board: unknown board "H300-NOPE"`,
		"tenants[0].weight: must be between",
		"tenants[0].slo.ttftP99: must be > 0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors lack %q:\n%s", want, got)
		}
	}
}

func TestValidateMigPartedOnOneBoard(t *testing.T) {
	bad := writeTemp(t, "mig.yaml", `version: v1
mig-configs:
  seed-layout:
    - devices: all
      mig-enabled: true
      mig-devices:
        "4g.20gb": 1
        "3g.40gb": 1
`)
	out, _, code := runCmd(t, "validate", "--board", "H100-SXM5-80GB", bad)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1; output:\n%s", code, out)
	}
	if !strings.Contains(out, `profile "4g.20gb" does not exist on H100-SXM5-80GB (valid: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`) {
		t.Errorf("output does not name the missing profile and the valid ones:\n%s", out)
	}
	if _, _, code := runCmd(t, "validate", "--board", "H100X", bad); code != exitInvalid {
		t.Errorf("unknown --board: exit %d, want 1", code)
	}
}

func TestValidatePlanAgainstPool(t *testing.T) {
	out, _, code := runCmd(t, "validate", validPlan)
	if code != exitOK || !strings.Contains(out, "Plan") || !strings.Contains(out, "--pool") {
		t.Errorf("plan alone: exit %d, output:\n%s", code, out)
	}
	if _, _, code := runCmd(t, "validate", "--pool", invalidPool, validPlan); code != exitInvalid {
		t.Errorf("an invalid --pool: exit %d, want 1", code)
	}
}

func TestValidateRejectsUnknownAndUnreadableFiles(t *testing.T) {
	cases := map[string]string{
		"neither kind":     writeTemp(t, "x.yaml", "foo: 1\n"),
		"not yaml":         writeTemp(t, "y.yaml", "a: [1, 2\n"),
		"missing file":     "/nonexistent/pool.yaml",
		"wrong apiVersion": writeTemp(t, "z.yaml", "apiVersion: gpupool.dev/v9\nkind: Pool\n"),
	}
	for name, path := range cases {
		out, _, code := runCmd(t, "validate", path)
		if code != exitInvalid {
			t.Errorf("%s: exit %d, want 1", name, code)
		}
		if !strings.Contains(out, "INVALID") {
			t.Errorf("%s: output does not say INVALID:\n%s", name, out)
		}
	}
	if _, _, code := runCmd(t, "validate"); code != exitInvalid {
		t.Errorf("no arguments: exit %d, want 1", code)
	}
}

// The quick scan of unindented lines tells a document's kind as a full parse of its top level
// would, whenever both say something.
func FuzzDetectKind(f *testing.F) {
	f.Add([]byte(planPool))
	f.Add([]byte("version: v1\nmig-configs:\n  all-disabled: []\n"))
	f.Add([]byte("apiVersion: gpupool.dev/v1\nkind: Plan\n"))
	f.Add([]byte("kind: 'Plan'\nmig-configs: {}\n"))
	f.Add([]byte("{\"kind\": \"Plan\"}"))
	f.Add([]byte("kind: Plan # the plan in force\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		scanned := scanTopKeys(data)
		var top map[string]json.RawMessage
		if scanned == "" || yaml.Unmarshal(data, &top) != nil || top == nil {
			return
		}
		var kind string
		_ = json.Unmarshal(top["kind"], &kind)
		_, api := top["apiVersion"]
		_, mig := top["mig-configs"]
		var full string
		switch {
		case kind == fileKindPlan:
			full = fileKindPlan
		case api || top["kind"] != nil:
			full = fileKindPool
		case mig:
			full = fileKindMigParted
		}
		if full != "" && full != scanned {
			t.Fatalf("scan says %s, the parse %s:\n%s", scanned, full, data)
		}
	})
}
