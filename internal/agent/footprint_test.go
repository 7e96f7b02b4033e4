package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
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
