package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// costPool is planPool with prices: 2 USD per GPU-hour, 0.1 USD/kWh, PUE 1.5, 400 g/kWh.
var costPool = strings.Replace(planPool, "policy: {burstPoolPercent: 0}", `policy:
  burstPoolPercent: 0
  cost:
    currency: USD
    boards: [{board: H100, hourlyPrice: 2, source: "test price"}]
    energyPricePerKWh: {value: 0.1, source: "test tariff"}
    pue: {value: 1.5, source: "test facility"}
    carbonIntensity: {locationBased: {value: 400, source: "test grid"}}`, 1)

func planFile(t *testing.T, pool string) (poolFile, planPath string) {
	t.Helper()
	poolFile = writeTemp(t, "pool.yaml", pool)
	out, errOut, code := runCmd(t, "plan", poolFile, "-o", "yaml")
	if code != exitOK {
		t.Fatalf("plan: exit %d: %s", code, errOut)
	}
	return poolFile, writeTemp(t, "plan.yaml", out)
}

// The JSON bill of a 2-GPU plan: hardware is 2 GPUs × 2 USD/h whatever the split, and the
// tenants plus the idle line add up to the total.
func TestCostJSONAddsUp(t *testing.T) {
	poolFile, planPath := planFile(t, costPool)
	out, errOut, code := runCmd(t, "cost", planPath, "--pool", poolFile, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var o costOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	r := o.Report
	if r.Basis != "planned" || r.Total.Chargeback != 4 || len(r.Tenants) != 1 {
		t.Fatalf("basis %s, hardware %g/h (want 4), %d tenants", r.Basis, r.Total.Chargeback, len(r.Tenants))
	}
	sum := *r.Tenants[0].ChargebackPerHour + *r.Idle.ChargebackPerHour
	if math.Abs(sum-*r.Total.ChargebackPerHour) > 1e-9 {
		t.Errorf("chat %g + idle %g != total %g", *r.Tenants[0].ChargebackPerHour, *r.Idle.ChargebackPerHour, *r.Total.ChargebackPerHour)
	}
	// chat reserves one of the two GPUs (exclusive or smaller); the month has 730 h.
	if m := o.Monthly[len(o.Monthly)-1]; m.Name != "(total)" || math.Abs(*m.Chargeback-*r.Total.ChargebackPerHour*730) > 1e-6 {
		t.Errorf("monthly total row %+v", m)
	}
}

func TestCostCSVAndTable(t *testing.T) {
	poolFile, planPath := planFile(t, costPool)
	out, errOut, code := runCmd(t, "cost", planPath, "--pool", poolFile, "--csv")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0][0] != "TENANT" || recs[1][0] != "chat" || recs[3][0] != "(total)" || recs[1][len(recs[1])-1] != "planned" {
		t.Errorf("csv:\n%s", out)
	}
	out, _, code = runCmd(t, "cost", planPath, "--pool", poolFile)
	if code != exitOK || !strings.Contains(out, "CHARGEBACK/MO") || !strings.Contains(out, "basis planned, idle policy none") {
		t.Errorf("table (exit %d):\n%s", code, out)
	}
	out, _, code = runCmd(t, "plan", poolFile)
	if code != exitOK || !strings.Contains(out, "cost (planned, USD/h): 1 GPUs used 2.00 hardware") {
		t.Errorf("plan table lacks its cost (exit %d):\n%s", code, out)
	}
}

// Without policy.cost the bill has energy but no money, and says so.
func TestCostWithoutPrices(t *testing.T) {
	poolFile, planPath := planFile(t, planPool)
	out, errOut, code := runCmd(t, "cost", planPath, "--pool", poolFile)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "note: no price for board(s) H100-SXM5-80GB in policy.cost.boards: no cost figures") {
		t.Errorf("output:\n%s", out)
	}
}

// --from bills a simulated run of the plan; a report of another plan is refused by name.
func TestCostFromSimulation(t *testing.T) {
	poolFile, planPath := planFile(t, costPool)
	rep, errOut, code := runCmd(t, "simulate", poolFile, "--plan", planPath, "--duration", "5s", "-o", "json")
	if code != exitOK {
		t.Fatalf("simulate: exit %d: %s", code, errOut)
	}
	repFile := writeTemp(t, "report.json", rep)
	out, errOut, code := runCmd(t, "cost", planPath, "--pool", poolFile, "--from", repFile, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var o costOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	if o.Report.Basis != "simulated" || o.Report.Seconds != 5 || o.Report.Tenants[0].OutputTokens == 0 {
		t.Errorf("report: basis %s over %g s, %g output tokens", o.Report.Basis, o.Report.Seconds, o.Report.Tenants[0].OutputTokens)
	}
	bad := writeTemp(t, "bad.json", strings.ReplaceAll(rep, `"chat/0"`, `"other/0"`))
	_, errOut, code = runCmd(t, "cost", planPath, "--pool", poolFile, "--from", bad)
	if code != exitInvalid || !strings.Contains(errOut, `replicas[0].name: "other/0" is not a replica of plan`) {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func FuzzParseSimUse(f *testing.F) {
	f.Add([]byte(`{"durationSeconds": 10, "replicas": [{"name": "chat/0", "dynamicJoules": 5, "outputTokens": 3, "promptTokens": 4}]}`))
	f.Add([]byte(`{"durationSeconds": -1}`))
	f.Add([]byte(`{"durationSeconds": 1, "replicas": [{"name": "chat/0", "dynamicJoules": -5}]}`))
	f.Add([]byte(`[]`))
	pl := &v1.Plan{Metadata: v1.Metadata{Name: "p"}, Tenants: []v1.PlanTenant{{Name: "chat", Replicas: []v1.ReplicaRef{{Index: 0}}}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		ro, err := parseSimUse(data, pl)
		if err != nil {
			return
		}
		if !(ro.Seconds > 0) {
			t.Fatalf("accepted a period of %g s", ro.Seconds)
		}
		for name, u := range ro.Replicas {
			if name != "chat/0" || !(u.DynamicJ >= 0) || u.Tokens < u.OutputTokens || u.OutputTokens < 0 {
				t.Fatalf("accepted %s: %+v", name, u)
			}
		}
	})
}

// simulate reports the run's cost per tenant, in its JSON and under its table.
func TestSimulateReportsCost(t *testing.T) {
	poolFile, planPath := planFile(t, costPool)
	out, errOut, code := runCmd(t, "simulate", poolFile, "--plan", planPath, "--duration", "5s")
	if code != exitOK || !strings.Contains(out, "cost (simulated, idle policy none, USD):") || !strings.Contains(out, "CHARGEBACK/H") {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	out, _, _ = runCmd(t, "simulate", poolFile, "--plan", planPath, "--duration", "5s", "-o", "json")
	var rep simulateReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	// The bill's energy is the simulator's energy of the GPUs it ran (rounded there to 0.1 J),
	// plus idle power (15 % of 700 W) over the run for the fleet's GPUs it left out.
	var gpuJ float64
	for _, g := range rep.GPUs {
		gpuJ += g.EnergyJoules
	}
	gpuJ += float64(2-len(rep.GPUs)) * 0.15 * 700 * 5
	c := rep.Cost
	if c == nil || math.Abs(c.Total.ActiveJ+c.Total.IdleJ-gpuJ) > 0.1*float64(len(rep.GPUs)) {
		t.Fatalf("bill %g J, simulator's GPU energy and idle GPUs %g J", c.Total.ActiveJ+c.Total.IdleJ, gpuJ)
	}
}

// With a board price but no energy price, plan still prints the hardware; with no board price
// it says why there is no cost.
func TestPlanCostLinePartialPrices(t *testing.T) {
	hwOnly := strings.Replace(costPool, "    energyPricePerKWh: {value: 0.1, source: \"test tariff\"}\n", "", 1)
	out, _, code := runCmd(t, "plan", writeTemp(t, "pool.yaml", hwOnly))
	if code != exitOK || !strings.Contains(out, "cost (planned, USD/h): 1 GPUs used 2.00 hardware; exclusive 2.00 hardware") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	other := strings.Replace(costPool, "board: H100,", "board: A100,", 1)
	out, _, code = runCmd(t, "plan", writeTemp(t, "pool.yaml", other))
	if code != exitOK || !strings.Contains(out, "cost: not computed (no price for board(s) H100-SXM5-80GB in policy.cost.boards: no cost figures)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// Two reads of an agent's metrics an hour apart bill the measured increase: n1/0 drew 1.8 MJ
// (378 kJ idle, the rest chat's), n1/1 only idle power; tenants plus idle add up to the 2.178 MJ.
func TestCostFromAgentMetrics(t *testing.T) {
	poolFile, planPath := planFile(t, costPool)
	pl, err := readPlan(t.Context(), planPath, "plan")
	if err != nil {
		t.Fatal(err)
	}
	ref := pl.Tenants[0].Replicas[0].GPU.String()
	other := map[string]string{"n1/0": "n1/1", "n1/1": "n1/0"}[ref]
	read := func(e0, i0, c, e1, i1, tok, out float64) string {
		return fmt.Sprintf(`gpupool_gpu_info{gpu="GPU-A",board="H100-SXM5-80GB",node="n1",index="%s"} 1
gpupool_gpu_info{gpu="GPU-B",board="H100-SXM5-80GB",node="n1",index="%s"} 1
gpupool_gpu_energy_joules_total{gpu="GPU-A"} %g
gpupool_gpu_idle_energy_joules_total{gpu="GPU-A"} %g
gpupool_tenant_gpu_energy_joules_total{gpu="GPU-A",tenant="chat"} %g
gpupool_gpu_energy_joules_total{gpu="GPU-B"} %g
gpupool_gpu_idle_energy_joules_total{gpu="GPU-B"} %g
gpupool_tenant_tokens_total{tenant="chat"} %g
gpupool_tenant_output_tokens_total{tenant="chat"} %g
`, ref[3:], other[3:], e0, i0, c, e1, i1, tok, out)
	}
	start := writeTemp(t, "start.prom", read(1e6, 1e5, 9e5, 5e5, 5e5, 1e6, 2e5))
	end := writeTemp(t, "end.prom", read(2.8e6, 4.78e5, 2.322e6, 8.78e5, 8.78e5, 2e6, 4e5))
	out, errOut, code := runCmd(t, "cost", planPath, "--pool", poolFile, "--from", start, "--from", end, "--period", "1h", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var o costOutput
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatal(err)
	}
	r := o.Report
	chat := r.Tenants[0]
	if r.Basis != "measured" || math.Abs(chat.ActiveJ-1.422e6) > 1e-3 || math.Abs(r.Total.ActiveJ+r.Total.IdleJ-2.178e6) > 1e-3 ||
		math.Abs(chat.ActiveJ+chat.IdleJ+r.Idle.ActiveJ+r.Idle.IdleJ-2.178e6) > 1e-3 || chat.Tokens != 1e6 || chat.OutputTokens != 2e5 {
		t.Errorf("basis %s, chat %g J (want 1,422,000), %g tokens (1,000,000) and %g output (200,000), total %g J (want 2,178,000), idle line %g J",
			r.Basis, chat.ActiveJ, chat.Tokens, chat.OutputTokens, r.Total.ActiveJ+r.Total.IdleJ, r.Idle.ActiveJ+r.Idle.IdleJ)
	}
	// J per output token: the tenant's IT energy over its 200,000 output tokens.
	if want := (chat.ActiveJ + chat.IdleJ) / 2e5; math.Abs(chat.JPerOutputToken-want) > 1e-9*want || chat.JPerOutputToken == 0 {
		t.Errorf("chat: %g J/output token, want %g", chat.JPerOutputToken, want)
	}
	_, errOut, code = runCmd(t, "cost", planPath, "--pool", poolFile, "--from", start, "--from", end)
	if code != exitInvalid || !strings.Contains(errOut, "flag --period: required") {
		t.Errorf("without --period: exit %d: %s", code, errOut)
	}
}

// The plan's YAML carries its cost per hour (summary.cost) and it agrees with the bill: 2 GPUs
// at 2 USD/h are 4 USD/h of fleet hardware, chat's one GPU 2 USD/h, the exclusive baseline's GPUs
// at 2 USD/h each; energy is IT kWh × PUE 1.5 × 0.1 USD and carbon IT kWh × 1.5 × 400 g; the
// total is hardware plus energy. Without policy.cost there is no summary.cost.
func TestPlanCarriesCost(t *testing.T) {
	_, planPath := planFile(t, costPool)
	pl, err := readPlan(t.Context(), planPath, "plan")
	if err != nil {
		t.Fatal(err)
	}
	c := pl.Summary.Cost
	if c == nil || c.Basis != "planned" || c.Currency != "USD" || c.FleetHardwarePerHour == nil || c.UsedHardwarePerHour == nil ||
		c.EnergyPerHour == nil || c.TotalPerHour == nil || c.GCO2ePerHourLocationBased == nil || c.GCO2ePerHourMarketBased != nil {
		t.Fatalf("summary.cost %+v", c)
	}
	if *c.FleetHardwarePerHour != 4 || *c.UsedHardwarePerHour != 2*float64(pl.Summary.GPUsUsed) {
		t.Errorf("hardware: fleet %g (want 4), used %g (want 2 × %d)", *c.FleetHardwarePerHour, *c.UsedHardwarePerHour, pl.Summary.GPUsUsed)
	}
	kwh := c.ITEnergyKWhPerHour
	if !(kwh > 2*0.105) || math.Abs(*c.EnergyPerHour-kwh*1.5*0.1) > 1e-9 || math.Abs(*c.GCO2ePerHourLocationBased-kwh*1.5*400) > 1e-6 ||
		math.Abs(*c.TotalPerHour-4-*c.EnergyPerHour) > 1e-9 {
		t.Errorf("energy %g kWh (more than two GPUs' idle 0.21), %g USD, %g g, total %g", kwh, *c.EnergyPerHour, *c.GCO2ePerHourLocationBased, *c.TotalPerHour)
	}
	if len(c.Baselines) != len(pl.Summary.Baselines) {
		t.Fatalf("baselines %+v for %+v", c.Baselines, pl.Summary.Baselines)
	}
	for i, b := range pl.Summary.Baselines {
		if c.Baselines[i].Name != b.Name || c.Baselines[i].HardwarePerHour != 2*float64(b.GPUs) {
			t.Errorf("baseline %s: %+v, want %d GPUs × 2", b.Name, c.Baselines[i], b.GPUs)
		}
	}
	_, planPath = planFile(t, planPool)
	if pl, err = readPlan(t.Context(), planPath, "plan"); err != nil || pl.Summary.Cost != nil {
		t.Errorf("without policy.cost: summary.cost %+v, %v", pl.Summary.Cost, err)
	}
}
