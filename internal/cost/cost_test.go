package cost

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	v1 "gpupool.dev/gpupool/api/v1"
)

func fp(v float64) *float64 { return &v }

// fullPrices are round numbers so the arithmetic in the comments is easy to follow.
func fullPrices(idle v1.IdlePolicy) Prices {
	return Prices{Currency: "USD", Hourly: map[string]float64{"H100-SXM5-80GB": 2}, EnergyPerKWh: fp(0.1),
		PUE: fp(1.5), CarbonLocation: fp(400), CarbonMarket: fp(100), IdlePolicy: idle}
}

// TestMIGExample: one H100 for one hour, 3,600,000 J (1 kWh) in all, idle 100 W (360,000 J).
// Instances: a 3g (3/7 of the board) busy 100 % for tenant a, a 2g (2/7) busy 50 % for b, a
// 1g (1/7) unused, 1/7 of the board unallocated.
//
//	active energy 3,240,000 J split 3/7·1 : 2/7·0.5 = 3 : 1 → a 2,430,000 J, b 810,000 J
//	chargeback (price 2/h): a 2·3/7 = 0.857143, b 2·2/7 = 0.571429; the 1g and the free slice
//	  (2/7) go to the idle line: 0.571429
//	showback: a 2·3/7·1 = 0.857143, b 2·2/7·0.5 = 0.285714, idle 2·(1−4/7) = 0.857143
//	energy cost (PUE 1.5, 0.1/kWh): a 0.675·1.5·0.1 = 0.10125
func TestMIGExample(t *testing.T) {
	d := Device{GPU: "n/0", Board: "H100-SXM5-80GB", Basis: Measured, Seconds: 3600, EnergyJ: 3.6e6, IdleWatts: 100,
		Slices: []Slice{
			{Tenant: "a", Reserved: 3.0 / 7, Active: 3.0 / 7 * 3600, OutputTokens: 1e6},
			{Tenant: "b", Reserved: 2.0 / 7, Active: 2.0 / 7 * 0.5 * 3600},
			{Tenant: "c", Reserved: 1.0 / 7},
		}}
	r, err := Compute([]Device{d}, fullPrices(v1.IdleNone))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := r.Tenants[0], r.Tenants[1], r.Tenants[2]
	near(t, "a active J", a.ActiveJ, 2.43e6)
	near(t, "b active J", b.ActiveJ, 0.81e6)
	near(t, "c active J", c.ActiveJ, 0)
	near(t, "idle J", r.Idle.IdleJ, 3.6e5)
	near(t, "a chargeback", a.Chargeback, 2*3.0/7)
	near(t, "c chargeback", c.Chargeback, 2*1.0/7)
	near(t, "idle chargeback", r.Idle.Chargeback, 2*1.0/7)
	near(t, "b showback", b.Showback, 2*2.0/7*0.5)
	near(t, "idle showback", r.Idle.Showback, 2*(1-4.0/7))
	near(t, "a energy cost/h", *a.EnergyCostPerHour, 0.675*1.5*0.1)
	near(t, "a J/output token", a.JPerOutputToken, 2.43)
	near(t, "a gCO2e location", *a.GCO2eLocation, 0.675*1.5*400)
	// The idle policy "reservation" spreads the idle line by reserved GPU-seconds 3:2:1.
	r, err = Compute([]Device{d}, fullPrices(v1.IdleReservation))
	if err != nil {
		t.Fatal(err)
	}
	near(t, "a idle share J", r.Tenants[0].IdleShare.IdleJ, 3.6e5*3/6)
	near(t, "c chargeback with spread", r.Tenants[2].Chargeback, 2.0/7+2.0/7*1/6)
	near(t, "idle line left", r.Idle.Chargeback+r.Idle.IdleJ, 0)
	near(t, "unallocated GPU-seconds stay", r.Idle.ReservedGPUSeconds, 3600.0/7)
	near(t, "idle before policy", r.IdleBeforePolicy.Chargeback, 2.0/7)
}

// TestMissingPricesSaySo: without prices a bill has energy but no money, and says why.
func TestMissingPricesSaySo(t *testing.T) {
	d := Device{GPU: "n/0", Board: "A100-SXM4-80GB", Basis: Planned, Seconds: 3600, EnergyJ: 1e6, IdleWatts: 60,
		Slices: []Slice{{Tenant: "a", Reserved: 1, Active: 1800}}}
	r, err := Compute([]Device{d}, fullPrices(v1.IdleNone))
	if err != nil {
		t.Fatal(err)
	}
	if r.Tenants[0].ChargebackPerHour != nil || r.Total.ShowbackPerHour != nil {
		t.Errorf("a board without a price was billed: %+v", r.Tenants[0])
	}
	if len(r.Notes) == 0 || r.Notes[0] != "no price for board(s) A100-SXM4-80GB in policy.cost.boards: no cost figures" {
		t.Errorf("notes = %q", r.Notes)
	}
	r, _ = Compute([]Device{d}, PricesFrom(nil))
	if len(r.Notes) != 4 || r.Tenants[0].GCO2eLocation != nil || r.Tenants[0].ITEnergyKWh == 0 {
		t.Errorf("no policy: notes %q, line %+v", r.Notes, r.Tenants[0])
	}
}

// TestHourlyPrice: 31,250 over 4 years with 10 % maintenance = 31,250·(0.25+0.1)/8,760 = 1.2486/h.
func TestHourlyPrice(t *testing.T) {
	near(t, "capex", HourlyPrice(v1.BoardCost{Capex: fp(31250), AmortizationYears: fp(4), MaintenancePercent: fp(10)}), 31250*0.35/8760)
	near(t, "hourly", HourlyPrice(v1.BoardCost{HourlyPrice: fp(2.5)}), 2.5)
}

// TestConservation: for random devices, prices and idle policies, every additive figure of the
// tenants plus the idle line equals the devices' total to 1e-9 relative.
func TestConservation(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		basis := rapid.SampledFrom([]Basis{Measured, Simulated, Planned}).Draw(t, "basis")
		secs := rapid.Float64Range(1, 1e6).Draw(t, "seconds")
		devs := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Device {
			return randomDevice(t, basis, secs)
		}), 1, 12).Draw(t, "devices")
		p := fullPrices(rapid.SampledFrom([]v1.IdlePolicy{v1.IdleNone, v1.IdleReservation, v1.IdleUse}).Draw(t, "idle"))
		r, err := Compute(devs, p)
		if err != nil {
			t.Fatal(err)
		}
		checkConservation(t, r)
	})
}

func randomDevice(t *rapid.T, basis Basis, secs float64) Device {
	tdp := rapid.Float64Range(300, 1200).Draw(t, "tdp")
	idle := tdp * rapid.Float64Range(0, 0.3).Draw(t, "idleFrac")
	d := Device{GPU: "g", Board: "H100-SXM5-80GB", Basis: basis, Seconds: secs, IdleWatts: idle,
		EnergyJ: rapid.Float64Range(0, tdp*secs).Draw(t, "energy")}
	n := rapid.IntRange(0, 8).Draw(t, "slices")
	for range n {
		d.Slices = append(d.Slices, Slice{
			Tenant:       rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "tenant"),
			Reserved:     rapid.Float64Range(0, 0.6).Draw(t, "reserved"),
			Active:       rapid.Float64Range(0, 0.6).Draw(t, "active") * secs,
			OutputTokens: rapid.Float64Range(0, 1e7).Draw(t, "out"),
		})
	}
	return d
}

type fatalf interface {
	Fatalf(string, ...any)
	Helper()
}

func checkConservation(t fatalf, r *Report) {
	t.Helper()
	var sum Figures
	var cb, sb, ec, co2 float64
	for _, l := range append(append([]Line{}, r.Tenants...), r.Idle) {
		sum.add(l.Figures)
		if l.ChargebackPerHour != nil {
			cb += *l.ChargebackPerHour
			sb += *l.ShowbackPerHour
			ec += *l.EnergyCostPerHour
		}
		if l.GCO2eLocation != nil {
			co2 += *l.GCO2eLocation
		}
	}
	tot := r.Total
	check := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9*math.Max(math.Abs(want), 1e-300) && math.Abs(got-want) > 1e-12 {
			t.Fatalf("%s: tenants + idle = %.15g, devices = %.15g", name, got, want)
		}
	}
	check("IT energy", sum.ActiveJ+sum.IdleJ, tot.ActiveJ+tot.IdleJ)
	check("reserved GPU-seconds", sum.ReservedGPUSeconds, tot.ReservedGPUSeconds)
	check("active GPU-seconds", sum.ActiveGPUSeconds, tot.ActiveGPUSeconds)
	check("chargeback", sum.Chargeback, tot.Chargeback)
	check("showback", sum.Showback, tot.Showback)
	if tot.ChargebackPerHour != nil {
		check("chargeback incl. energy", cb, *tot.ChargebackPerHour)
		check("showback incl. energy", sb, *tot.ShowbackPerHour)
		check("energy cost", ec, *tot.EnergyCostPerHour)
	}
	if tot.GCO2eLocation != nil {
		check("carbon", co2, *tot.GCO2eLocation)
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.12g, want %.12g", what, got, want)
	}
}
