package nvml

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"gpupool.dev/gpupool/internal/gpu"
)

var (
	real  = flag.Bool("nvml.real", false, "run the contract suite on the system's NVML (needs a GPU and libnvidia-ml)")
	write = flag.Bool("nvml.write", false, "with -nvml.real: also create and destroy MIG instances (needs root and MIG mode on GPU 0)")
)

// contract is what gpupool relies on from NVML, checked on each fake board and, with flags, on
// real NVML. writable allows MIG changes on the first MIG GPU.
func contract(t *testing.T, l *Lib, writable bool) {
	devs, err := l.Inventory()
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	if len(devs) == 0 {
		t.Fatal("inventory: no GPUs")
	}
	seen := map[string]bool{}
	for i, d := range devs {
		if d.Index != i || !strings.HasPrefix(d.UUID, "GPU-") || seen[d.UUID] {
			t.Errorf("device %d: index %d uuid %q (duplicate %t)", i, d.Index, d.UUID, seen[d.UUID])
		}
		seen[d.UUID] = true
		if d.Board == "" {
			t.Errorf("device %d %q: no catalog board", i, d.Name)
			continue
		}
		b, _ := gpu.Lookup(d.Board)
		// Memory: NVML's total is within 3% of the catalog's (the driver reserves a little).
		if ratio := float64(d.MemoryBytes) / float64(b.MemoryMiB<<20); ratio < 0.97 || ratio > 1.03 {
			t.Errorf("device %d: memory %d B vs catalog %d MiB (ratio %.3f)", i, d.MemoryBytes, b.MemoryMiB, ratio)
		}
		if err := b.Validate(append(slices.Clone(d.Instances), d.Partial...)); d.MIG && len(d.Instances) > 0 && err != nil {
			t.Errorf("device %d reports an illegal layout: %v", i, err)
		}
		if _, err := l.EnergyMilliJoules(d.UUID); err != nil && !IsNotSupported(err) {
			t.Errorf("device %d energy: %v", i, err)
		}
		if _, err := l.Processes(d.UUID); err != nil {
			t.Errorf("device %d processes: %v", i, err)
		}
		if _, err := l.ProcessUtilization(d.UUID, 0); err != nil && !IsNotSupported(err) {
			t.Errorf("device %d utilisation: %v", i, err)
		}
		if _, err := l.PowerLimit(d.UUID); err != nil && !IsNotSupported(err) {
			t.Errorf("device %d power limit: %v", i, err)
		}
	}
	if !writable {
		return
	}
	d := devs[0]
	b, _ := gpu.Lookup(d.Board)
	if !d.MIG || len(d.Instances)+len(d.Partial) > 0 {
		t.Skipf("MIG writes need GPU 0 in MIG mode with no instances (mig %t, %d instances)", d.MIG, len(d.Instances))
	}
	layouts, err := b.Enumerate(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []gpu.Layout{layouts[0], layouts[len(layouts)/2], layouts[len(layouts)-1]} {
		for _, in := range b.CreationOrder(want) {
			if err := l.Create(d.UUID, d.Board, in); err != nil {
				t.Fatalf("create %s of %q: %v", in, want, err)
			}
		}
		got, partial, err := l.Observe(d.UUID, d.Board)
		if err != nil || !slices.Equal(got, slices.Clone(want).Sorted()) || len(partial) > 0 {
			t.Fatalf("observe after creating %q: got %q partial %q err %v", want, got, partial, err)
		}
		// An overlapping create must fail and change nothing.
		if err := l.Create(d.UUID, d.Board, want[0]); err == nil {
			t.Fatalf("creating %s twice succeeded", want[0])
		}
		for _, in := range want {
			if err := l.Destroy(d.UUID, d.Board, in); err != nil {
				t.Fatalf("destroy %s: %v", in, err)
			}
		}
		if got, _, _ := l.Observe(d.UUID, d.Board); len(got) != 0 {
			t.Fatalf("after destroying all: %q left", got)
		}
	}
}

func TestContractFakes(t *testing.T) {
	for _, model := range []string{"a100", "h100", "h200"} {
		t.Run(model, func(t *testing.T) {
			f, err := NewFake(FakeOptions{Model: model})
			if err != nil {
				t.Fatal(err)
			}
			l := New(f.Interface(), Options{})
			if err := l.Init(); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			contract(t, l, true)
		})
	}
}

func TestContractReal(t *testing.T) {
	if !*real {
		t.Skip("real NVML not requested (-nvml.real)")
	}
	l := NewReal(Options{Timeout: 10 * time.Second})
	if err := l.Init(); err != nil {
		t.Fatalf("init real NVML: %v", err)
	}
	defer l.Close()
	contract(t, l, *write)
}

// TestFakePersists: a second fake on the same state file sees the first one's instances,
// including a half-made one.
func TestFakePersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mig.json")
	f1, err := NewFake(FakeOptions{Model: "h100", GPUs: 2, StatePath: path})
	if err != nil {
		t.Fatal(err)
	}
	l1 := New(f1.Interface(), Options{})
	u := f1.UUIDs()[1]
	for _, s := range []string{"3g.40gb@4", "2g.20gb@0"} {
		in, _ := gpu.ParseInstance(s)
		if err := l1.Create(u, "H100-SXM5-80GB", in); err != nil {
			t.Fatal(err)
		}
	}
	// A GPU instance without its compute instance, as a crash between the two calls leaves it.
	d, _ := f1.Interface().DeviceGetHandleByUUID(u)
	info, _ := d.GetGpuInstanceProfileInfo(profileIndex(mustProfile(t, "1g.10gb")))
	if _, r := d.CreateGpuInstanceWithPlacement(&info, &gonvml.GpuInstancePlacement{Start: 3, Size: 1}); r != 0 {
		t.Fatalf("create bare GPU instance: %d", r)
	}
	f2, err := NewFake(FakeOptions{Model: "h100", GPUs: 2, StatePath: path})
	if err != nil {
		t.Fatal(err)
	}
	got, partial, err := New(f2.Interface(), Options{}).Observe(u, "H100-SXM5-80GB")
	if err != nil || got.String() != "2g.20gb@0 3g.40gb@4" || partial.String() != "1g.10gb@3" {
		t.Fatalf("restored %q partial %q err %v; want \"2g.20gb@0 3g.40gb@4\" partial \"1g.10gb@3\"", got, partial, err)
	}
}

func mustProfile(t *testing.T, name string) *gpu.Profile {
	b, _ := gpu.Lookup("H100-SXM5-80GB")
	p, err := b.Profile(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFaultsAtEveryCall injects an error, then a hang, at every NVML call the inventory and a
// MIG change make: each returns an error naming the call (a hang within the timeout), and the
// GPU's layout stays legal.
func TestFaultsAtEveryCall(t *testing.T) {
	calls := map[string]bool{}
	record := func(c string) Fault { calls[c] = true; return Fault{} }
	f, _ := NewFake(FakeOptions{Model: "h100", GPUs: 1})
	l := New(f.Interface(), Options{Faults: record})
	u := f.UUIDs()[0]
	in := gpu.Instance{Profile: "3g.40gb", Start: 0}
	work := func(l *Lib) error {
		if _, err := l.Inventory(); err != nil {
			return err
		}
		if err := l.Create(u, "H100-SXM5-80GB", in); err != nil {
			return err
		}
		if _, err := l.EnergyMilliJoules(u); err != nil {
			return err
		}
		return l.Destroy(u, "H100-SXM5-80GB", in)
	}
	if err := work(l); err != nil {
		t.Fatalf("without faults: %v", err)
	}
	if len(calls) < 10 {
		t.Fatalf("only %d distinct calls recorded: %v", len(calls), calls)
	}
	for call := range calls {
		for _, fault := range []Fault{{Err: true}, {Hang: true}} {
			t.Run(fmt.Sprintf("%s/hang=%t", call, fault.Hang), func(t *testing.T) {
				f, _ := NewFake(FakeOptions{Model: "h100", GPUs: 1})
				l := New(f.Interface(), Options{Timeout: 20 * time.Millisecond, Faults: func(c string) Fault {
					if c == call {
						return fault
					}
					return Fault{}
				}})
				defer l.Close()
				start := time.Now()
				err := work(l)
				if err == nil || !strings.Contains(err.Error(), call) {
					t.Fatalf("fault at %s: err = %v, want one naming the call", call, err)
				}
				if fault.Hang && (!errors.Is(err, ErrTimeout) || time.Since(start) > 2*time.Second) {
					t.Fatalf("hang at %s: err %v after %s", call, err, time.Since(start))
				}
				got, partial, _ := New(f.Interface(), Options{}).Observe(f.UUIDs()[0], "H100-SXM5-80GB")
				if err := f.Board().Validate(append(got, partial...)); len(got)+len(partial) > 0 && err != nil {
					t.Fatalf("layout after fault illegal: %v", err)
				}
			})
		}
	}
}

func TestXIDAndTelemetry(t *testing.T) {
	f, _ := NewFake(FakeOptions{Model: "h200", GPUs: 2})
	l := New(f.Interface(), Options{Timeout: time.Second})
	u := f.UUIDs()
	ev, err := l.WatchXID(u)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if _, ok, err := ev.Wait(10 * time.Millisecond); ok || err != nil {
		t.Fatalf("no event queued: ok %t err %v", ok, err)
	}
	f.InjectXID(1, 79)
	x, ok, err := ev.Wait(100 * time.Millisecond)
	if !ok || err != nil || x.GPU != u[1] || x.Code != 79 {
		t.Fatalf("xid = %+v ok %t err %v, want 79 on %s", x, ok, err, u[1])
	}
	f.SetPower(u[0], 350)
	f.Advance(2 * time.Second) // 350 W × 2 s = 700 J = 700000 mJ
	if mj, _ := l.EnergyMilliJoules(u[0]); mj != 700000 {
		t.Fatalf("energy = %d mJ, want 700000", mj)
	}
	if err := l.LockClocks(u[0], 1200, 1400); err != nil {
		t.Fatal(err)
	}
	if lo, hi, ok := f.LockedClocks(u[0]); !ok || lo != 1200 || hi != 1400 {
		t.Fatalf("locked %d-%d %t", lo, hi, ok)
	}
	if err := l.SetPowerLimit(u[0], 2_000_000); err == nil {
		t.Fatal("a 2000 W limit on a 700 W board was accepted")
	}
}

// Fake nodes of one pool report distinct GPUs when they are named; unnamed they keep the
// historical UUIDs, and a named node's UUIDs are stable across restarts.
func TestFakeNodeUUIDs(t *testing.T) {
	uuids := func(node string) []string {
		f, err := NewFake(FakeOptions{Model: "h100", GPUs: 4, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		return f.UUIDs()
	}
	if got := uuids("")[1]; got != "GPU-h1000000-0000-4000-8000-000000000001" {
		t.Fatalf("unnamed node's GPU 1 = %s", got)
	}
	seen := map[string]string{}
	for _, node := range []string{"h100-a", "h100-b", "node-1", "node-2", ""} {
		for _, u := range uuids(node) {
			if other, dup := seen[u]; dup {
				t.Fatalf("UUID %s of node %q also on node %q", u, node, other)
			}
			seen[u] = node
		}
	}
	if a, b := uuids("h100-a"), uuids("h100-a"); !slices.Equal(a, b) {
		t.Fatalf("node h100-a's UUIDs changed between two starts: %v vs %v", a, b)
	}
}
