package agent

import (
	"context"
	"log/slog"
	"math"
	"path/filepath"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/metrics"
	"gpupool.dev/gpupool/internal/nvml"
)

// TestEnergyIdleLine: an H100 with two 3g.40gb instances, one tenant each, draws 400 W for 10 s
// (4,000 J on its one counter). Idle power (15 % of 700 W) over the 10 s, 1,050 J, stays on the
// GPU's idle line; the 2,950 J above it are split 3:3 by the instances' compute slices. Tenants
// plus idle equal the counter's increase: the parent's energy is not repeated per instance.
func TestEnergyIdleLine(t *testing.T) {
	layout, _ := gpu.ParseLayout("3g.40gb@0 3g.40gb@4")
	r := newMIGRig(t, nvml.FakeOptions{Model: "h100", GPUs: 1}, layout, nil)
	u := r.uuid
	r.poll(t, 10*time.Second)
	r.poll(t, 0)
	s := r.a.Snapshot()
	if len(s.GPUs) != 1 || len(s.Tenants) != 2 {
		t.Fatalf("snapshot: %d GPUs, %d tenants", len(s.GPUs), len(s.Tenants))
	}
	idle := s.GPUs[0].IdleEnergyJoules
	sum := idle + s.Tenants[0].EnergyJoules + s.Tenants[1].EnergyJoules
	if math.Abs(idle-1050) > 1e-6 || math.Abs(s.Tenants[0].EnergyJoules-1475) > 1e-6 || math.Abs(sum-4000) > 1e-6 {
		t.Errorf("idle %g J, a %g J, b %g J; want 1,050, 1,475, 1,475 adding up to 4,000", idle, s.Tenants[0].EnergyJoules, s.Tenants[1].EnergyJoules)
	}
	// The same split per GPU, and where the GPU sits in a plan.
	if len(s.TenantGPUs) != 2 || s.TenantGPUs[0].GPU != u || math.Abs(s.TenantGPUs[0].EnergyJoules-1475) > 1e-6 || s.GPUs[0].Index != 0 {
		t.Errorf("per GPU: %+v, gpu %+v", s.TenantGPUs, s.GPUs[0])
	}
	// The fake reports no GPM, so the split is by instance size, and says so.
	if s.GPUs[0].Split != SplitMIGSize {
		t.Errorf("split %q, want %q", s.GPUs[0].Split, SplitMIGSize)
	}
}

// TestEnergySplitByInstanceActivity: with GPM, a GPU's energy above idle is split by each MIG
// instance's SM activity × its size. An H100 with 4g.40gb@0 (tenant a, 30 % busy) and 3g.40gb@4
// (tenant b, 80 % busy) draws 400 W for 10 s: 1,050 J idle, 2,950 J split 4×0.3 : 3×0.8 = 1 : 2
// (983.3 and 1,966.7 J; by size alone a would get 4/7). Tenants plus idle add up to the counter's
// 4,000 J: the parent's energy is not repeated per instance. On the first poll GPM has no earlier
// sample, so that interval is split by size, and the GPU says which.
func TestEnergySplitByInstanceActivity(t *testing.T) {
	layout, _ := gpu.ParseLayout("4g.40gb@0 3g.40gb@4")
	r := newMIGRig(t, nvml.FakeOptions{Model: "h100", GPUs: 1, GPM: true}, layout, nil)
	r.fake.SetInstanceActivity(r.uuid, layout[0], 0.3)
	r.fake.SetInstanceActivity(r.uuid, layout[1], 0.8)
	r.poll(t, 10*time.Second)
	if s := r.a.Snapshot(); s.GPUs[0].Split != SplitMIGSize {
		t.Errorf("first poll: split %q, want %q (no earlier GPM sample)", s.GPUs[0].Split, SplitMIGSize)
	}
	r.poll(t, 0)
	s := r.a.Snapshot()
	if len(s.GPUs) != 1 || len(s.Tenants) != 2 {
		t.Fatalf("snapshot: %d GPUs, %d tenants", len(s.GPUs), len(s.Tenants))
	}
	idle, ja, jb := s.GPUs[0].IdleEnergyJoules, s.Tenants[0].EnergyJoules, s.Tenants[1].EnergyJoules
	if math.Abs(idle-1050) > 1e-6 || math.Abs(ja-2950.0/3) > 1e-6 || math.Abs(jb-2*2950.0/3) > 1e-6 || math.Abs(idle+ja+jb-4000) > 1e-6 {
		t.Errorf("idle %g J, a %g J, b %g J; want 1,050, 983.3, 1,966.7 adding up to 4,000", idle, ja, jb)
	}
	if s.GPUs[0].Split != SplitMIGActivity {
		t.Errorf("split %q, want %q", s.GPUs[0].Split, SplitMIGActivity)
	}
	per := 0.0
	for _, tg := range s.TenantGPUs {
		per += tg.EnergyJoules
	}
	if math.Abs(per+idle-4000) > 1e-6 {
		t.Errorf("per-GPU tenant energy %g J + idle %g J: want the counter's 4,000 J", per, idle)
	}
}

// splitScraper reports, per scrape, 300 more prompt tokens and 100 more generated ones.
type splitScraper struct{ n map[string]float64 }

func (c *splitScraper) Scrape(_ context.Context, url string) (metrics.Engine, error) {
	c.n[url]++
	return metrics.Engine{PromptTokens: 300 * c.n[url], GenerationTokens: 100 * c.n[url]}, nil
}

// TestOutputTokensCountedApart: the agent counts a tenant's generated tokens apart from its
// prompt tokens (vLLM's vllm:generation_tokens_total and vllm:prompt_tokens_total), summed over
// its engines: two engines of tenant a, three polls, 400 tokens each per poll of which 100 are
// output.
func TestOutputTokensCountedApart(t *testing.T) {
	layout, _ := gpu.ParseLayout("7g.80gb@0")
	r := newMIGRig(t, nvml.FakeOptions{Model: "h100", GPUs: 1}, layout, nil)
	r.a.Config.Engines = []Engine{{Tenant: "a", GPU: 0, Slice: "7g.80gb@0", URL: "http://e1"}, {Tenant: "a", GPU: 0, Slice: "7g.80gb@0", URL: "http://e2"}}
	r.a.Scraper = &splitScraper{n: map[string]float64{}}
	for range 3 {
		r.poll(t, time.Second)
	}
	s := r.a.Snapshot()
	if len(s.Tenants) != 1 || s.Tenants[0].Tokens != 2400 || s.Tenants[0].OutputTokens != 600 {
		t.Errorf("tenants %+v: want 2,400 tokens, 600 of them output", s.Tenants)
	}
}

// migRig is an agent over one fake H100 with a MIG layout created and one engine per instance,
// tenants a, b, … in layout order, the GPU drawing 400 W; poll polls and then moves the fake's
// time and the agent's clock on by d.
type migRig struct {
	a    *Agent
	fake *nvml.Fake
	uuid string
	now  time.Time
}

func newMIGRig(t *testing.T, o nvml.FakeOptions, layout gpu.Layout, cost *v1.CostPolicy) *migRig {
	t.Helper()
	fake, err := nvml.NewFake(o)
	if err != nil {
		t.Fatal(err)
	}
	lib := nvml.New(fake.Interface(), nvml.Options{})
	r := &migRig{fake: fake, uuid: fake.UUIDs()[0], now: time.Unix(1_800_000_000, 0)}
	for _, in := range layout {
		if err := lib.Create(r.uuid, fake.Board().Name, in); err != nil {
			t.Fatal(err)
		}
	}
	fake.SetPower(r.uuid, 400)
	cfg := Config{StateDir: t.TempDir(), GPUs: []GPUConfig{{Index: 0, Layout: layout.String()}}, Cost: cost}
	if _, err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for k, in := range layout {
		cfg.Engines = append(cfg.Engines, Engine{Tenant: string(rune('a' + k)), GPU: 0, Slice: in.String()})
	}
	j, rep, err := OpenJournal(filepath.Join(t.TempDir(), "j"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	x, err := NewExecutor(context.Background(), j, rep, gate.State{Policy: gate.Policy{Cooldown: time.Hour}},
		Deps{MIG: lib, Node: &LocalNode{Path: filepath.Join(t.TempDir(), "c")}})
	if err != nil {
		t.Fatal(err)
	}
	r.a = &Agent{Config: cfg, Settings: Settings{Poll: time.Second, Layouts: map[int]gpu.Layout{0: layout}}, Tel: fakeTel{lib}, Exec: x,
		Now: func() time.Time { return r.now }, Log: slog.New(slog.DiscardHandler)}
	return r
}

func (r *migRig) poll(t *testing.T, d time.Duration) {
	t.Helper()
	if err := r.a.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	r.fake.Advance(d)
	r.now = r.now.Add(d)
}
