package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/metrics"
	"gpupool.dev/gpupool/internal/nvml"
)

// fakeTel adapts nvml.Lib to Telemetry for tests (the command has its own adapter).
type fakeTel struct{ l *nvml.Lib }

func (f fakeTel) Inventory() ([]GPUInfo, error) {
	devs, err := f.l.Inventory()
	out := make([]GPUInfo, len(devs))
	for i, d := range devs {
		out[i] = GPUInfo{Index: d.Index, UUID: d.UUID, Board: d.Board, MIG: d.MIG, Instances: d.Instances}
	}
	return out, err
}
func (f fakeTel) EnergyMilliJoules(u string) (uint64, error) { return f.l.EnergyMilliJoules(u) }
func (f fakeTel) InstanceActivity(u, board string) (map[gpu.Instance]float64, error) {
	return f.l.InstanceActivity(u, board)
}
func (f fakeTel) Processes(u string) ([]Proc, error) {
	ps, err := f.l.Processes(u)
	out := make([]Proc, len(ps))
	for i, p := range ps {
		out[i] = Proc{PID: p.PID, UsedBytes: p.UsedBytes}
	}
	return out, err
}

type countScraper struct{ n map[string]float64 }

func (c *countScraper) Scrape(_ context.Context, url string) (metrics.Engine, error) {
	c.n[url] += 100
	return metrics.Engine{GenerationTokens: c.n[url]}, nil
}

// BenchmarkPoll is one steady-state poll of an 8-GPU node (every GPU at its layout, 16 engines):
// inventory with MIG layouts, energy, processes, engine scrapes, attribution, gate tick. At 1 Hz
// the agent's CPU share is ns/op ÷ 1e9 of one core (see docs/agent.md for the measured numbers).
func BenchmarkPoll(b *testing.B) {
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 8})
	if err != nil {
		b.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	layout, _ := gpu.ParseLayout("3g.40gb@0 3g.40gb@4")
	cfg := Config{StateDir: b.TempDir()}
	set := Settings{Poll: time.Second, Layouts: map[int]gpu.Layout{}}
	for i, u := range fake.UUIDs() {
		for _, in := range layout {
			if err := lib.Create(u, fake.Board().Name, in); err != nil {
				b.Fatal(err)
			}
		}
		fake.SetPower(u, 400)
		fake.SetProcesses(u, []nvml.Process{{PID: uint32(1000 + 2*i), UsedBytes: 30 << 30}, {PID: uint32(1001 + 2*i), UsedBytes: 20 << 30}}, []uint32{40, 30}, time.Now())
		cfg.GPUs = append(cfg.GPUs, GPUConfig{Index: i, Layout: layout.String()})
		set.Layouts[i] = layout
		for k, in := range layout {
			cfg.Engines = append(cfg.Engines, Engine{Tenant: fmt.Sprintf("t%d", (2*i+k)%5), GPU: i, Slice: in.String(),
				URL: fmt.Sprintf("http://e%d-%d/metrics", i, k), PID: uint32(1000 + 2*i + k), MemoryPlanned: 38e9, SMShare: 0.45})
		}
	}
	j, rep, _ := OpenJournal(filepath.Join(b.TempDir(), "j"))
	defer j.Close()
	ctx := context.Background()
	x, err := NewExecutor(ctx, j, rep, gate.State{Policy: gate.Policy{Cooldown: time.Hour}}, Deps{MIG: lib, Node: &LocalNode{Path: filepath.Join(b.TempDir(), "c")}})
	if err != nil {
		b.Fatal(err)
	}
	a := &Agent{Config: cfg, Settings: set, Tel: fakeTel{lib}, Exec: x, Scraper: &countScraper{n: map[string]float64{}},
		Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := a.Poll(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		fake.Advance(time.Second)
		if err := a.Poll(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if len(a.Snapshot().Tenants) != 5 || len(a.Snapshot().GPUs) != 8 {
		b.Fatalf("snapshot: %d tenants, %d GPUs", len(a.Snapshot().Tenants), len(a.Snapshot().GPUs))
	}
}

type xidEvents struct{ ev *nvml.Events }

func (x xidEvents) Next() (string, uint64, bool, error) {
	e, ok, err := x.ev.Wait(0)
	return e.GPU, e.Code, ok, err
}

// TestXIDMakesUnhealthy: a critical XID on a GPU turns /healthz's answer into an error naming the
// GPU and the code, and is counted per GPU and code.
func TestXIDMakesUnhealthy(t *testing.T) {
	fake, err := nvml.NewFake(nvml.FakeOptions{Model: "h200", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	ev, err := lib.WatchXID(fake.UUIDs())
	if err != nil {
		t.Fatal(err)
	}
	j, rep, _ := OpenJournal(filepath.Join(t.TempDir(), "j"))
	defer j.Close()
	ctx := context.Background()
	x, err := NewExecutor(ctx, j, rep, gate.State{}, Deps{MIG: lib, Node: &LocalNode{Path: filepath.Join(t.TempDir(), "c")}})
	if err != nil {
		t.Fatal(err)
	}
	a := &Agent{Settings: Settings{Poll: time.Second}, Tel: fakeTel{lib}, Exec: x, XIDs: xidEvents{ev},
		Now: time.Now, Log: slog.New(slog.DiscardHandler)}
	if err := a.Poll(ctx); err != nil || a.Healthy() != nil {
		t.Fatalf("before any XID: poll %v, healthy %v", err, a.Healthy())
	}
	fake.InjectXID(1, 79)
	if err := a.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Healthy(); err == nil || !strings.Contains(err.Error(), "XID 79") || !strings.Contains(err.Error(), fake.UUIDs()[1]) {
		t.Fatalf("healthy after XID 79 = %v", err)
	}
	if xs := a.Snapshot().XIDs; len(xs) != 1 || xs[0].Code != "79" || xs[0].Count != 1 {
		t.Fatalf("xids %+v", xs)
	}
}

// TestEnergyClassOnlyWhenAllowed: clocks and power limits are applied once, and only with
// allowClocks.
func TestEnergyClassOnlyWhenAllowed(t *testing.T) {
	fake, _ := nvml.NewFake(nvml.FakeOptions{Model: "h100", GPUs: 1})
	lib := nvml.New(fake.Interface(), nvml.Options{})
	u := fake.UUIDs()[0]
	gc := GPUConfig{Index: 0, PowerLimitWatts: 500}
	gc.Clocks = &struct {
		MinMHz uint32 `json:"minMHz"`
		MaxMHz uint32 `json:"maxMHz"`
	}{1200, 1500}
	a := &Agent{Clocks: lib, Config: Config{GPUs: []GPUConfig{gc}}}
	if err := a.applyEnergy(gc, u); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := fake.LockedClocks(u); ok {
		t.Fatal("clocks locked without allowClocks")
	}
	a.Config.AllowClocks = true
	if err := a.applyEnergy(gc, u); err != nil {
		t.Fatal(err)
	}
	lo, hi, ok := fake.LockedClocks(u)
	mw, _ := lib.PowerLimit(u)
	if !ok || lo != 1200 || hi != 1500 || mw != 500_000 {
		t.Fatalf("clocks %d-%d (%t), power %d mW; want 1200-1500, 500000", lo, hi, ok, mw)
	}
}
