package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

func TestJain(t *testing.T) {
	cases := []struct {
		xs   []float64
		want float64
	}{
		{nil, 1},
		{[]float64{0.5, 0.5, 0.5}, 1},       // equal shares: (1.5)² / (3 × 0.75) = 1
		{[]float64{1, 0, 0, 0}, 0.25},       // one gets all: 1 / (4 × 1) = 1/n
		{[]float64{1, 0.5}, 0.9},            // (1.5)² / (2 × 1.25) = 2.25 / 2.5
		{[]float64{0.2, 0.4, 0.6}, 6.0 / 7}, // 1.44 / (3 × 0.56) = 0.857
	}
	for _, c := range cases {
		if got := Jain(c.xs); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// TestLengthLaws: the drawn lengths have the pool's mean (within sampling error) and respect
// maxContext.
func TestLengthLaws(t *testing.T) {
	for _, l := range []Lengths{LengthsFixed, LengthsUniform, LengthsExponential} {
		src := source{rng: rand.New(rand.NewPCG(1, 2)), meanIn: 500, meanOut: 200, maxCtx: 4096, lengths: l}
		var sumIn, sumOut float64
		const n = 20000
		for range n {
			in, out := src.draw()
			if in < 1 || out < 1 || in+out > 4096 {
				t.Fatalf("%s: drew %d + %d, outside [1, 4096]", l, in, out)
			}
			sumIn += float64(in)
			sumOut += float64(out)
		}
		// standard error of a mean of 20000 draws with sd ≤ mean: ≤ 0.7 %; allow 3 %.
		if math.Abs(sumIn/n-500) > 15 || math.Abs(sumOut/n-200) > 6 {
			t.Errorf("%s: means %.1f / %.1f, want 500 / 200", l, sumIn/n, sumOut/n)
		}
	}
}

// TestArrivalRates: each pattern delivers its mean rate (diurnal: the mean of its cycle).
func TestArrivalRates(t *testing.T) {
	hour := float64(time.Hour)
	cases := []struct {
		src  source
		want float64 // arrivals per hour
	}{
		{source{pattern: "poisson", rate: 2 / 1e9}, 7200},
		{source{pattern: "constant", rate: 2 / 1e9}, 7200},
		// on 10 s / off 30 s: 8 rps while on, a quarter of the time.
		{source{pattern: "bursty", rate: 2 / 1e9, onRate: 8 / 1e9, meanOn: 10e9, meanOff: 30e9, on: true, phaseEnd: 10e9}, 7200},
		// a full cycle of a 1 h period with trough 0.2 averages (1 + 0.2) / 2 = 0.6 of the peak.
		{source{pattern: "diurnal", rate: 2 / 1e9, period: hour, trough: 0.2}, 0.6 * 7200},
	}
	for _, c := range cases {
		src := c.src
		src.rng = rand.New(rand.NewPCG(5, 6))
		n := 0
		for {
			t1, ok := src.nextTime(hour)
			if !ok || t1 >= hour {
				break
			}
			if t1 < src.t {
				t.Fatalf("%s: time went back from %v to %v", src.pattern, src.t, t1)
			}
			src.t = t1
			n++
		}
		// bursty counts vary most: ~90 bursts of ~80 arrivals, sd ≈ √90 × 80 ≈ 760; allow 25 %.
		if math.Abs(float64(n)-c.want) > 0.25*c.want {
			t.Errorf("%s: %d arrivals in an hour, want about %.0f", src.pattern, n, c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := Config{Duration: -1, Lengths: "gaussian", MaxQueue: -2, IdlePowerFraction: 2, TimelineBuckets: -1}.Defaults()
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"duration", "lengths", "max queue", "idle power", "timeline"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %s", err, w)
		}
	}
	if err := (Config{}).Defaults().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestRunTwice(t *testing.T) {
	s, _ := small(t, time.Second, 1)
	if _, err := s.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

// TestTinyRate: a rate so low that the next arrival lies beyond int64 nanoseconds ends the
// source instead of wrapping around.
func TestTinyRate(t *testing.T) {
	src := source{rng: rand.New(rand.NewPCG(1, 1)), pattern: "poisson", rate: 1e-30, meanIn: 1, meanOut: 1, lengths: LengthsFixed}
	if src.advance(int64(time.Hour)) {
		t.Errorf("an arrival at %d ns", src.next.at)
	}
}

// Energy follows the performance model's power model and the tenants' energy classes: the same
// run with every tenant in the efficiency class (clocks locked at 70 % of boost) spends fewer
// joules per token on each tenant and on the GPU, the GPU's energy is its idle power over the
// run plus its tenants' dynamic energy, and the tenants' energies add up to at most the GPU's
// (the idle power of SMs no instance covers is the GPU's alone).
func TestEnergyClassesAndTenantEnergy(t *testing.T) {
	run := func(class v1.EnergyClass) Report {
		pool := loadPool(t, "pool-small.yaml")
		for i := range pool.Tenants {
			pool.Tenants[i].EnergyClass = class
		}
		_, res := runSim(t, Input{Pool: pool, Plan: loadPlan(t, "plan-small.yaml")}, Config{Duration: time.Minute, Seed: 7})
		return res.Report
	}
	bal, eff := run(v1.EnergyBalanced), run(v1.EnergyEfficiency)
	sum := 0.0
	for _, tr := range bal.Tenants {
		te := tenantByName(eff, tr.Name)
		t.Logf("%s: balanced %.4f J/token, efficiency %.4f J/token", tr.Name, tr.JoulesPerToken, te.JoulesPerToken)
		if !(tr.JoulesPerToken > 0) || !(te.JoulesPerToken < tr.JoulesPerToken) {
			t.Errorf("%s: efficiency class %.4f J/token, balanced %.4f: want fewer", tr.Name, te.JoulesPerToken, tr.JoulesPerToken)
		}
		sum += tr.EnergyJoules
	}
	g := bal.GPUs[0]
	if !(sum > 0 && sum <= g.EnergyJoules*(1+1e-6)) {
		t.Errorf("tenants' energy %.1f J vs the GPU's %.1f J: want positive and at most the GPU's", sum, g.EnergyJoules)
	}
	if ge := eff.GPUs[0]; !(ge.JoulesPerToken < g.JoulesPerToken) || g.AvgPowerWatts <= 0.15*700 || g.AvgPowerWatts > 700 {
		t.Errorf("GPU: balanced %.4f J/token at %.0f W, efficiency %.4f J/token", g.JoulesPerToken, g.AvgPowerWatts, ge.JoulesPerToken)
	}
}

// TestLengthsPerTenant: each tenant's source draws by its own traffic.lengths (fixed where
// unset), and Config.Lengths, when set, overrides every tenant's.
func TestLengthsPerTenant(t *testing.T) {
	pool := loadPool(t, "pool-small.yaml")
	if len(pool.Tenants) < 2 {
		t.Fatal("pool-small.yaml has fewer than two tenants")
	}
	for i := range pool.Tenants {
		pool.Tenants[i].Traffic.Lengths = ""
	}
	pool.Tenants[0].Traffic.Lengths = v1.LengthsExponential
	pool.Tenants[1].Traffic.Lengths = v1.LengthsUniform
	in := Input{Pool: pool, Plan: loadPlan(t, "plan-small.yaml")}
	laws := func(cfg Config) map[int32]Lengths {
		s, err := New(in, cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int32]Lengths{}
		for _, src := range s.sources {
			got[src.tenant] = src.lengths
		}
		return got
	}
	own := laws(Config{})
	if own[0] != LengthsExponential || own[1] != LengthsUniform {
		t.Errorf("tenants' own laws: got %v, want exponential and uniform for the first two", own)
	}
	for ti, l := range own {
		if ti > 1 && l != "" && l != LengthsFixed {
			t.Errorf("tenant %d states no lengths but draws %q", ti, l)
		}
	}
	for ti, l := range laws(Config{Lengths: LengthsFixed}) {
		if l != LengthsFixed {
			t.Errorf("with the override fixed, tenant %d draws %q", ti, l)
		}
	}
}
