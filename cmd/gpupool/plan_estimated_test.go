package main

import (
	"os"
	"strings"
	"testing"
)

// The plan table ends with one warning line when a tenant's predictions rest on a board's
// estimated compute figures (review 13's n1: t1 on two RTX PRO 5000s), and with none when the
// pool's boards have table figures (the same pool on H100s).
func TestPlanTableWarnsOfEstimatedFigures(t *testing.T) {
	const path = "../../testdata/review13/n1-rtx-pro-5000-unknown-compute.yaml"
	out, _, _ := runCmd(t, "plan", path, "--sim-requests", "-1")
	want := "warning: the predictions for 1 tenant (t1) rest on estimated compute figures of RTX-PRO-5000-Blackwell-48GB, not NVIDIA table values (reason EstimatedFigures)\n"
	if !strings.HasSuffix(out, want) || strings.Count(out, "warning:") != 1 {
		t.Errorf("plan table:\n%s\nwant it to end with:\n%s", out, want)
	}

	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h100 := writeTemp(t, "pool.yaml", strings.ReplaceAll(string(doc), "RTX-PRO-5000-Blackwell-48GB", "H100-SXM5-80GB"))
	out, _, _ = runCmd(t, "plan", h100, "--sim-requests", "-1")
	if strings.Contains(out, "warning:") || strings.Contains(out, "EstimatedFigures") {
		t.Errorf("plan table on H100s warns:\n%s", out)
	}
}
