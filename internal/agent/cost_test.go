package agent

import (
	"math"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

func f64(v float64) *float64 { return &v }

// TestCostCounters: the H100 of TestEnergyIdleLine (two 3g.40gb instances, tenants a and b,
// 4,000 J over 10 s, 1,050 J of it idle) priced at 3.50 EUR per GPU-hour, 0.20 EUR per kWh, PUE
// 1.5, 400 and 100 gCO2e/kWh. Each instance reserves 3 of 7 compute slices: 3.50 × 10/3600 × 3/7
// of hardware plus 1,475 J × 1.5 of energy; the seventh slice and the idle energy are the idle
// line. Showback bills each tenant's activity, its 1,475 J over the dynamic range 700 − 105 W
// (2.48 GPU-seconds of the 10), the rest of the hardware going to the idle line. Tenants plus the
// idle line add up to the GPU's hardware and energy cost on both bases.
func TestCostCounters(t *testing.T) {
	layout, _ := gpu.ParseLayout("3g.40gb@0 3g.40gb@4")
	r := newMIGRig(t, nvml.FakeOptions{Model: "h100", GPUs: 1}, layout, &v1.CostPolicy{
		Currency:        "EUR",
		Boards:          []v1.BoardCost{{Board: "H100-SXM5-80GB", HourlyPrice: f64(3.5), Source: "test"}},
		EnergyPrice:     &v1.SourcedValue{Value: 0.2, Source: "test"},
		PUE:             &v1.SourcedValue{Value: 1.5, Source: "test"},
		CarbonIntensity: &v1.CarbonIntensity{LocationBased: &v1.SourcedValue{Value: 400, Source: "test"}, MarketBased: &v1.SourcedValue{Value: 100, Source: "test"}},
	})
	r.poll(t, 10*time.Second)
	r.poll(t, 10*time.Second)
	s := r.a.Snapshot() // two polls: one 10 s interval billed
	c := s.Cost
	if c == nil || !c.Money || !c.Location || !c.Market || c.Currency != "EUR" || len(c.Tenants) != 2 || c.Tenants[0].Tenant != "a" {
		t.Fatalf("cost snapshot %+v", c)
	}
	hw := 3.5 * 10 / 3600
	kwh := func(j float64) float64 { return j * 1.5 / 3.6e6 }
	wantA := hw*3/7 + kwh(1475)*0.2
	act := 1475.0 / 595 / 10 // each tenant's share of the interval at full dynamic power
	wantShowA := hw*act + kwh(1475)*0.2
	wantIdle := hw/7 + kwh(1050)*0.2
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: %.9g, want %.9g", name, got, want)
		}
	}
	for _, tc := range c.Tenants {
		near(tc.Tenant+" chargeback", tc.Chargeback, wantA)
		near(tc.Tenant+" showback", tc.Showback, wantShowA)
		near(tc.Tenant+" gCO2e location", tc.CarbonLocation, kwh(1475)*400)
		near(tc.Tenant+" gCO2e market", tc.CarbonMarket, kwh(1475)*100)
	}
	near("idle chargeback", c.Idle.Chargeback, wantIdle)
	near("idle showback", c.Idle.Showback, hw*(1-2*act)+kwh(1050)*0.2)
	near("idle gCO2e location", c.Idle.CarbonLocation, kwh(1050)*400)
	near("conservation", c.Tenants[0].Chargeback+c.Tenants[1].Chargeback+c.Idle.Chargeback, hw+kwh(4000)*0.2)
	near("conservation, showback", c.Tenants[0].Showback+c.Tenants[1].Showback+c.Idle.Showback, hw+kwh(4000)*0.2)
}

// Reserved fractions follow the slices; activity is each tenant's energy over the dynamic range
// (700 − 105 W on an H100), split over its slices on the GPU.
func TestCostDevice(t *testing.T) {
	d := costDevice("GPU-0", "h100", 10, 5000, []costSlice{
		{tenant: "a", kind: "mps", share: 0.5},
		{tenant: "b", kind: "mps", share: 0.25},
		{tenant: "b", kind: "mps", share: 0.25},
	}, map[string]float64{"a": 1190, "b": 2380})
	if d.Board != "H100-SXM5-80GB" || len(d.Slices) != 3 || d.Slices[0].Reserved != 0.5 || d.Slices[1].Reserved != 0.25 ||
		d.Slices[0].Active != 2 || d.Slices[1].Active != 2 || d.Slices[2].Active != 2 {
		t.Errorf("device %+v", d)
	}
	ts := costDevice("GPU-0", "h100", 10, 5000, []costSlice{{tenant: "a", kind: "timeslice"}, {tenant: "b", kind: "timeslice"}, {tenant: "c", kind: "mps"}}, nil)
	if ts.Slices[0].Reserved != 0.5 || ts.Slices[2].Reserved != 1 || ts.Slices[0].Active != 0 {
		t.Errorf("time-sliced device %+v", ts)
	}
	mig := costDevice("GPU-0", "h100", 10, 5000, []costSlice{{tenant: "a", kind: "mig", inst: "3g.40gb@0", size: 3.0 / 7}, {tenant: "b", kind: "mig", inst: "3g.40gb@0", size: 3.0 / 7}}, nil)
	if mig.Slices[0].Reserved != 1.5/7 {
		t.Errorf("two replicas on one instance: %+v", mig)
	}
}

// A cost policy in the agent's config is checked like the pool's, under "cost".
func TestConfigCostValidated(t *testing.T) {
	cfg := Config{StateDir: "x", Cost: &v1.CostPolicy{Currency: "eur", EnergyPrice: &v1.SourcedValue{Value: -1, Source: ""}}}
	_, err := cfg.Validate()
	if err == nil {
		t.Fatal("bad cost policy accepted")
	}
	for _, want := range []string{"cost.currency", "cost.energyPricePerKWh.value", "cost.energyPricePerKWh.source"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
