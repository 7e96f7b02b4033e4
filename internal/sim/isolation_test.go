package sim

import (
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// twoTenants is one H100 with a quiet chat tenant and a neighbour at noisyRPS, both qwen2.5-1.5b.
func twoTenants(noisyRPS float64) *v1.Pool {
	p := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: "noise"},
		Fleet: v1.Fleet{Nodes: []v1.Node{{Name: "n", GPUs: []v1.GPUGroup{{Board: "H100-SXM5-80GB", Count: 1}}}}}}
	for _, tt := range []struct {
		name string
		rps  float64
		in   int
	}{{"quiet", 2, 256}, {"noisy", noisyRPS, 2048}} {
		p.Tenants = append(p.Tenants, v1.Tenant{Name: tt.name, Path: "org/team", Isolation: v1.IsolationShared,
			Model: v1.Model{Name: "qwen2.5-1.5b"}, MaxContext: 8192,
			Traffic: v1.Traffic{RPS: tt.rps, InputTokens: tt.in, OutputTokens: 128}})
	}
	v1.Default(p)
	return p
}

// TestNoisyNeighbour: a neighbour going from idle to heavy load slows the quiet tenant's decode
// under MPS and time-slicing (busy neighbours contend), and leaves it almost alone under MIG
// (only the board's shared power budget couples instances).
func TestNoisyNeighbour(t *testing.T) {
	tpot := func(mode v1.Mode, noisy float64) float64 {
		pool := twoTenants(noisy)
		plan, err := UniformPlan(pool, mode)
		if err != nil {
			t.Fatal(err)
		}
		_, res := runSim(t, Input{Pool: pool, Plan: plan}, Config{Duration: time.Minute, Seed: 3})
		return tenantByName(res.Report, "quiet").TPOT.P50
	}
	for _, c := range []struct {
		mode     v1.Mode
		minRatio float64 // slowdown at least
		maxRatio float64 // slowdown at most
	}{
		{v1.ModeMIG, 0.97, 1.03},
		{v1.ModeMPS, 1.08, 100},
		{v1.ModeTimeSlice, 1.25, 100},
	} {
		idle, busy := tpot(c.mode, 0.01), tpot(c.mode, 30)
		ratio := busy / idle
		t.Logf("%-9s quiet TPOT p50: neighbour idle %.2f ms, neighbour busy %.2f ms (×%.2f)", c.mode, idle, busy, ratio)
		if ratio < c.minRatio || ratio > c.maxRatio {
			t.Errorf("%s: slowdown ×%.2f outside [%.2f, %.2f]", c.mode, ratio, c.minRatio, c.maxRatio)
		}
	}
}
