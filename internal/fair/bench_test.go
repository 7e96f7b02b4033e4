package fair

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// cpuTime is this process's user+system CPU time: the benchmarks report it per operation
// beside wall time, since wall time on a shared machine includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

// fleetConfig builds the benchmark pool: 10,000 H100 SXM5 GPUs cut into 70,000 slices (4,000
// as 7× 1g.10gb; 3,000 as 3g.40gb + 2g.20gb + 2× 1g.10gb; 3,000 as 10 MPS shares of 10%) and
// 5,000 tenants in 20 orgs × 10 teams × 25, asking for about 75,000 slices in all.
func fleetConfig(tb testing.TB) Config {
	const board = "H100-SXM5-80GB/"
	counts := map[string]int{board + "1g.10gb": 4000*7 + 3000*2, board + "2g.20gb": 3000, board + "3g.40gb": 3000, board + "mps-10": 3000 * 10}
	capv, _, err := SliceCapacity(counts)
	if err != nil {
		tb.Fatal(err)
	}
	kinds := []string{board + "1g.10gb", board + "mps-10", board + "2g.20gb", board + "3g.40gb"}
	cum := []int{34000, 64000, 67000, 70000}
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := Config{Capacity: capv, BurstPoolPercent: 10, LeaseDuration: 5 * time.Minute}
	for o := range 20 {
		cfg.Groups = append(cfg.Groups, Group{Path: fmt.Sprintf("org%02d", o), Weight: float64(1 + o%3)})
	}
	shapes := map[string]Vector{}
	for _, k := range kinds {
		s, err := SliceVector(k)
		if err != nil {
			tb.Fatal(err)
		}
		shapes[k] = s.Vector
	}
	for i := range 5000 {
		x := rng.IntN(70000)
		k := 0
		for cum[k] <= x {
			k++
		}
		t := Tenant{
			Name: fmt.Sprintf("t%04d", i), Path: fmt.Sprintf("org%02d/team%d", i%20, (i/20)%10),
			Weight: float64(1 + rng.IntN(3)), Task: shapes[kinds[k]], Demand: 10 + rng.IntN(11),
			MinRuntime: 30 * time.Second,
		}
		if i%10 == 0 && k < 2 {
			t.Reservation = 1
		}
		cfg.Tenants = append(cfg.Tenants, t)
	}
	return cfg
}

// BenchmarkRecomputeFull: the first full decision for the whole fleet (about 70,000 grants).
func BenchmarkRecomputeFull(b *testing.B) {
	cfg := fleetConfig(b)
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		a, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := cpuTime()
		if _, err := a.Recompute(t0); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - start
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkRefillWarm: the same 70,000 grants on a long-lived Allocator whose buffers are warm:
// every tenant drops to zero (untimed), then one batch restores every demand (timed).
func BenchmarkRefillWarm(b *testing.B) {
	cfg := fleetConfig(b)
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	if _, err := a.Recompute(now); err != nil {
		b.Fatal(err)
	}
	zero, back := make([]Event, len(cfg.Tenants)), make([]Event, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		zero[i], back[i] = SetDemand{Tenant: t.Name}, SetDemand{Tenant: t.Name, Demand: t.Demand}
	}
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		now = now.Add(time.Hour)
		if _, err := a.Apply(now, zero...); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := cpuTime()
		d, err := a.Apply(now, back...)
		if err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - start
		if len(d.Items) < 60000 {
			b.Fatalf("only %d items", len(d.Items))
		}
	}
	b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
}

// BenchmarkRecomputeLoaded: a periodic full reconciliation of a loaded fleet: every waiting
// tenant's claim is examined again.
func BenchmarkRecomputeLoaded(b *testing.B) {
	a, err := New(fleetConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	if _, err := a.Recompute(now); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		now = now.Add(10 * time.Second)
		if _, err := a.Recompute(now); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

// BenchmarkSetDemand: one replica more or fewer for a random tenant of the loaded fleet (what
// an autoscaler step looks like) → one decision, incremental. The clock moves 100 ms per event,
// so leases expire and minimum runtimes pass as they would.
func BenchmarkSetDemand(b *testing.B) { benchDemand(b, 1, 0) }

// BenchmarkSetDemandJump: the same with jumps of up to ±10 replicas per event.
func BenchmarkSetDemandJump(b *testing.B) { benchDemand(b, 10, 0) }

// BenchmarkSetDemandHistory: BenchmarkSetDemand with usage history on (one-hour half-life): every
// event at a later time decays every tenant's history and derives the indexes again.
func BenchmarkSetDemandHistory(b *testing.B) { benchDemand(b, 1, time.Hour) }

func benchDemand(b *testing.B, step int, halfLife time.Duration) {
	cfg := fleetConfig(b)
	cfg.HistoryHalfLife = halfLife
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	now := t0
	if _, err := a.Recompute(now); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	names := make([]string, len(cfg.Tenants))
	demand := make([]int, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		names[i], demand[i] = t.Name, t.Demand
	}
	items := 0
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		now = now.Add(100 * time.Millisecond)
		i := rng.IntN(len(names))
		demand[i] = max(0, min(40, demand[i]+rng.IntN(2*step+1)-step))
		d, err := a.SetDemand(now, names[i], demand[i])
		if err != nil {
			b.Fatal(err)
		}
		items += len(d.Items)
	}
	reportCPU(b, start)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(items)/float64(b.N), "items/decision")
}
