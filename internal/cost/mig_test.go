package cost

import (
	"math"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/nvml"
)

// TestMIGNoOverCount reads a MIG GPU through the NVML fake: three processes on three GPU
// instances (NVML's per-process GpuInstanceId), one energy counter for the board. Exporters that
// repeat the parent's energy on every instance sum to 3× the board; the rule here attributes
// the counter's delta once: tenants plus the idle line equal it.
func TestMIGNoOverCount(t *testing.T) {
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	uuid := fake.UUIDs()[0]
	board, _ := gpu.Lookup("H100-SXM5-80GB")
	// GPU instance id → profile and tenant; the SM utilisation each process shows.
	inst := map[uint32]struct{ profile, tenant string }{1: {"3g.40gb", "a"}, 2: {"2g.20gb", "b"}, 3: {"1g.10gb", "c"}}
	now := time.Unix(1_800_000_000, 0)
	fake.SetProcesses(uuid, []nvml.Process{{PID: 11, GPUInstance: 1}, {PID: 12, GPUInstance: 2}, {PID: 13, GPUInstance: 3}},
		[]uint32{90, 40, 0}, now)
	fake.SetPower(uuid, 450)
	e0, err := lib.EnergyMilliJoules(uuid)
	if err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Hour)
	e1, _ := lib.EnergyMilliJoules(uuid)
	procs, err := lib.Processes(uuid)
	if err != nil {
		t.Fatal(err)
	}
	utils, err := lib.ProcessUtilization(uuid, 0)
	if err != nil {
		t.Fatal(err)
	}
	sm := map[uint32]float64{}
	for _, u := range utils {
		sm[u.PID] = float64(u.SMPercent) / 100
	}
	delta := float64(e1-e0) / 1000 // 450 W × 3,600 s = 1,620,000 J
	if delta != 1.62e6 {
		t.Fatalf("counter delta %g J, want 1,620,000", delta)
	}
	d := Device{GPU: uuid, Board: board.Name, Basis: Measured, Seconds: 3600, EnergyJ: delta, IdleWatts: 0.15 * board.TDPWatts}
	for _, p := range procs {
		in := inst[p.GPUInstance]
		prof, err := board.Profile(in.profile)
		if err != nil {
			t.Fatal(err)
		}
		size := float64(prof.ComputeSlices) / float64(board.ComputeSlices)
		d.Slices = append(d.Slices, Slice{Tenant: in.tenant, Reserved: size, Active: sm[p.PID] * size * 3600})
	}
	r := billOnce(t, d, delta)
	// Active energy 1,620,000 − 105 W·3,600 s = 1,242,000 J, split 3/7·0.9 : 2/7·0.4 : 0 = 2.7 : 0.8 : 0.
	near(t, "a", r.Tenants[0].ActiveJ, 1.242e6*2.7/3.5)
	near(t, "c", r.Tenants[2].ActiveJ, 0)
}

// TestMIGNoOverCountGPM is the same check with the activity NVML really has for MIG instances:
// GPM's per-instance SM utilisation (nvmlGpmMigSampleGet), read through the NVML fake over the
// same hour as the energy counter. 3g.40gb (a) 90 % busy, 2g.20gb (b) 40 %, 1g.10gb (c) idle:
// active energy split 3×0.9 : 2×0.4 : 0, tenants plus idle equal to the one counter's delta.
func TestMIGNoOverCountGPM(t *testing.T) {
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1, GPM: true})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	uuid := fake.UUIDs()[0]
	board, _ := gpu.Lookup("H100-SXM5-80GB")
	tenants := map[gpu.Instance]string{}
	for in, c := range map[string]struct {
		tenant string
		busy   float64
	}{"3g.40gb@0": {"a", 0.9}, "2g.20gb@4": {"b", 0.4}, "1g.10gb@6": {"c", 0}} {
		i, err := gpu.ParseInstance(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := lib.Create(uuid, board.Name, i); err != nil {
			t.Fatal(err)
		}
		fake.SetInstanceActivity(uuid, i, c.busy)
		tenants[i] = c.tenant
	}
	fake.SetPower(uuid, 450)
	if _, err := lib.InstanceActivity(uuid, board.Name); err != nil { // the first samples
		t.Fatal(err)
	}
	e0, _ := lib.EnergyMilliJoules(uuid)
	fake.Advance(time.Hour)
	e1, _ := lib.EnergyMilliJoules(uuid)
	act, err := lib.InstanceActivity(uuid, board.Name)
	if err != nil {
		t.Fatal(err)
	}
	delta := float64(e1-e0) / 1000
	d := Device{GPU: uuid, Board: board.Name, Basis: Measured, Seconds: 3600, EnergyJ: delta, IdleWatts: 0.15 * board.TDPWatts,
		Split: "mig-activity-x-size"}
	for in, tenant := range tenants {
		prof, _ := board.Profile(in.Profile)
		size := float64(prof.ComputeSlices) / float64(board.ComputeSlices)
		a, ok := act[in]
		if !ok {
			t.Fatalf("no GPM activity for %s", in)
		}
		d.Slices = append(d.Slices, Slice{Tenant: tenant, Reserved: size, Active: a * size * 3600})
	}
	r := billOnce(t, d, delta)
	near(t, "a", r.Tenants[0].ActiveJ, 1.242e6*2.7/3.5)
	near(t, "b", r.Tenants[1].ActiveJ, 1.242e6*0.8/3.5)
	near(t, "c", r.Tenants[2].ActiveJ, 0)
	if got := r.Attribution["activeSplit"]; got != "mig-activity-x-size on 1 GPU(s)" {
		t.Errorf("attribution activeSplit %q", got)
	}
}

// billOnce bills one MIG device and checks that its tenants plus the idle line add up to the
// board's one counter delta, not to a multiple of it (an exporter repeating the parent's energy
// on each of its instances would give as many times the counter as there are instances).
func billOnce(t *testing.T, d Device, delta float64) *Report {
	t.Helper()
	r, err := Compute([]Device{d}, fullPrices(v1.IdleNone))
	if err != nil {
		t.Fatal(err)
	}
	sum := r.Idle.ActiveJ + r.Idle.IdleJ
	for _, l := range r.Tenants {
		sum += l.ActiveJ + l.IdleJ
	}
	if math.Abs(sum-delta) > 1e-9*delta {
		t.Fatalf("tenants + idle = %.3f J, the board's counter %.3f J (repeated per instance: %.0f)", sum, delta, float64(len(d.Slices))*delta)
	}
	return r
}
