package nvml

import (
	"errors"
	"math"
	"testing"
	"time"

	"gpupool.dev/gpupool/internal/gpu"
)

// InstanceActivity reads each MIG instance's SM activity between two calls from GPM: the first
// call only samples; the second gives the mean of what the instances did in between (one at 0.8,
// the other at 0.2 for 4 s then 0.6 for 6 s: 0.44); a destroyed instance's sample is freed.
func TestInstanceActivity(t *testing.T) {
	fake, err := NewFake(FakeOptions{Model: "h100", GPUs: 1, GPM: true})
	if err != nil {
		t.Fatal(err)
	}
	lib := New(fake.Interface(), Options{})
	u, board := fake.UUIDs()[0], fake.Board().Name
	a, b := gpu.Instance{Profile: "3g.40gb", Start: 0}, gpu.Instance{Profile: "3g.40gb", Start: 4}
	for _, in := range []gpu.Instance{a, b} {
		if err := lib.Create(u, board, in); err != nil {
			t.Fatal(err)
		}
	}
	fake.SetInstanceActivity(u, a, 0.8)
	fake.SetInstanceActivity(u, b, 0.2)
	first, err := lib.InstanceActivity(u, board)
	if err != nil || len(first) != 0 {
		t.Fatalf("first call: %v, %v: want no activity yet", first, err)
	}
	fake.Advance(4 * time.Second)
	fake.SetInstanceActivity(u, b, 0.6)
	fake.Advance(6 * time.Second)
	got, err := lib.InstanceActivity(u, board)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || math.Abs(got[a]-0.8) > 1e-9 || math.Abs(got[b]-0.44) > 1e-9 {
		t.Errorf("activity %v: want %s 0.8, %s 0.44", got, a, b)
	}
	if n := fake.GPMSamplesLive(); n != 2 {
		t.Errorf("%d GPM samples live, want one per instance", n)
	}
	if err := lib.Destroy(u, board, b); err != nil {
		t.Fatal(err)
	}
	fake.Advance(time.Second)
	got, err = lib.InstanceActivity(u, board)
	if err != nil || len(got) != 1 || math.Abs(got[a]-0.8) > 1e-9 {
		t.Errorf("after destroying %s: %v, %v", b, got, err)
	}
	if n := fake.GPMSamplesLive(); n != 1 {
		t.Errorf("%d GPM samples live after a destroy, want 1", n)
	}
}

// Without GPM (an A100, or a GPU that does not report it) InstanceActivity says so, so that the
// caller falls back to instance size.
func TestInstanceActivityUnsupported(t *testing.T) {
	for _, o := range []FakeOptions{{Model: "a100", GPUs: 1, GPM: true}, {Model: "h100", GPUs: 1}} {
		fake, err := NewFake(o)
		if err != nil {
			t.Fatal(err)
		}
		lib := New(fake.Interface(), Options{})
		if _, err := lib.InstanceActivity(fake.UUIDs()[0], fake.Board().Name); !errors.Is(err, ErrGPMUnsupported) {
			t.Errorf("%s, GPM %v: err %v, want ErrGPMUnsupported", o.Model, o.GPM, err)
		}
	}
}
