package sim

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// manyTenants is a pool of n tenants of qwen2.5-1.5b at totalRPS together (Poisson, 512 prompt
// and 128 output tokens each), on ⌈n/7⌉ H100s, planned uniformly with strategy.
func manyTenants(tb testing.TB, n int, totalRPS float64, strategy v1.Mode) Input {
	p := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: "many"},
		Fleet: v1.Fleet{Nodes: []v1.Node{{Name: "n", GPUs: []v1.GPUGroup{{Board: "H100-SXM5-80GB", Count: (n + 6) / 7}}}}}}
	for i := range n {
		p.Tenants = append(p.Tenants, v1.Tenant{Name: fmt.Sprintf("t%d", i), Path: "org/team", Isolation: v1.IsolationShared,
			Model: v1.Model{Name: "qwen2.5-1.5b"}, MaxContext: 4096,
			Traffic: v1.Traffic{RPS: totalRPS / float64(n), InputTokens: 512, OutputTokens: 128}})
	}
	v1.Default(p)
	if err := v1.Validate(p); err != nil {
		tb.Fatal(err)
	}
	plan, err := UniformPlan(p, strategy)
	if err != nil {
		tb.Fatal(err)
	}
	return Input{Pool: p, Plan: plan}
}

// BenchmarkEvents reports simulated events per second of wall time on one core (bar: ≥ 1e6).
func BenchmarkEvents(b *testing.B) {
	for _, c := range []struct {
		name string
		in   func() Input
	}{
		{"small-mig-mps", func() Input { return Input{Pool: loadPool(b, "pool-small.yaml"), Plan: loadPlan(b, "plan-small.yaml")} }},
		{"20-tenants-mps", func() Input { return manyTenants(b, 20, 20, v1.ModeMPS) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := c.in()
			var events int64
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				s, err := New(in, Config{Duration: 10 * time.Minute, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res, err := s.Run(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				events += res.Report.Events
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkHour100Tenants: one simulated hour of 100 tenants at 50 requests/s in total (bar:
// under 10 s a run).
func BenchmarkHour100Tenants(b *testing.B) {
	in := manyTenants(b, 100, 50, v1.ModeMIG)
	for b.Loop() {
		s, err := New(in, Config{Duration: time.Hour, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Report.Events), "events")
	}
}

// BenchmarkDuration runs the same pool for 15 and 60 simulated minutes: B/op and allocs/op of
// Run should not grow with the duration (streaming histograms, a request arena).
func BenchmarkDuration(b *testing.B) {
	in := manyTenants(b, 10, 10, v1.ModeMPS)
	for _, d := range []time.Duration{15 * time.Minute, time.Hour} {
		b.Run(d.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				s, err := New(in, Config{Duration: d, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := s.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// runAlloc returns the bytes Run allocates for a run of d.
func runAlloc(t *testing.T, in Input, d time.Duration) uint64 {
	s, err := New(in, Config{Duration: d, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestMemoryFlat: running 8× longer must not allocate 8× more. The allocations of Run are
// the request arena and queues growing to their peak, and the report: they depend on the load,
// not on the duration.
func TestMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 40 minutes")
	}
	in := manyTenants(t, 10, 10, v1.ModeMPS)
	short, long := runAlloc(t, in, 5*time.Minute), runAlloc(t, in, 40*time.Minute)
	t.Logf("Run allocated %d B for 5 min, %d B for 40 min", short, long)
	if float64(long) > 1.5*float64(short)+64<<10 {
		t.Errorf("allocations grow with duration: %d B for 5 min, %d B for 40 min", short, long)
	}
}
