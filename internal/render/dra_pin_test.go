package render

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// TestForcedStarts checks which profiles' starts every legal layout of a GPU's counts shares.
func TestForcedStarts(t *testing.T) {
	b, err := gpu.Lookup(h100)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		counts map[string]int
		want   map[string]bool
	}{
		{map[string]int{"3g.40gb": 2}, map[string]bool{"3g.40gb": true}},
		{map[string]int{"3g.40gb": 1}, map[string]bool{"3g.40gb": false}},
		{map[string]int{"1g.10gb": 7}, map[string]bool{"1g.10gb": true}},
		{map[string]int{"1g.10gb": 1}, map[string]bool{"1g.10gb": false}},
		{map[string]int{"7g.80gb": 1}, map[string]bool{"7g.80gb": true}},
		// 3g.40gb@0 would leave slices 4-7 for a 2g and two 1g, and no 1g starts at 7.
		{map[string]int{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, map[string]bool{"1g.10gb": false, "2g.20gb": false, "3g.40gb": true}},
		{map[string]int{"4g.40gb": 1, "3g.40gb": 1}, map[string]bool{"4g.40gb": true, "3g.40gb": true}},
	}
	for _, c := range cases {
		if got := forcedStarts(b, c.counts); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("forcedStarts(%v) = %v, want %v", c.counts, got, c.want)
		}
	}
}

// migDevice is a MIG device as NVIDIA's DRA driver publishes it in a ResourceSlice (static MIG,
// cmd/gpu-kubelet-plugin/deviceinfo.go MigDeviceInfo.GetDevice and mig.go
// CommonAttributesMig/CommonCapacitiesMig of NVIDIA/k8s-dra-driver-gpu): type, profile, uuid,
// parentUUID, productName; memory and multiprocessors, and memorySlice<i> = 1 per occupied slice.
func migDevice(b *gpu.Board, parent, profile string, start int) dracel.Device {
	p, err := b.Profile(profile)
	if err != nil {
		panic(err)
	}
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(s)} }
	qty := func(n int64) resourcev1.DeviceCapacity {
		return resourcev1.DeviceCapacity{Value: *resource.NewQuantity(n, resource.BinarySI)}
	}
	d := dracel.Device{Driver: DRADriver,
		Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": str("mig"), "profile": str(profile), "uuid": str(fmt.Sprintf("MIG-%s-%s-%d", parent, profile, start)),
			"parentUUID": str(parent), "productName": str(b.NVMLNames[0]),
		},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
			"memory": qty(p.MemoryMiB << 20), "multiprocessors": qty(int64(p.SMs)),
		}}
	for i := start; i < start+p.MemorySlices; i++ {
		d.Capacity[resourcev1.QualifiedName(fmt.Sprintf("memorySlice%d", i))] = qty(1)
	}
	return d
}

// draRequests returns the requests of every rendered claim and template, by name.
func draRequests(t *testing.T, arts []Artifact) map[string]resourcev1.DeviceRequest {
	t.Helper()
	out := map[string]resourcev1.DeviceRequest{}
	for _, a := range arts {
		if !strings.HasPrefix(a.Path, "dra/") {
			continue
		}
		for _, doc := range strings.Split(string(a.Data), "\n---\n") {
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v", a.Path, err)
			}
			switch head.Kind {
			case "ResourceClaim":
				var c resourcev1.ResourceClaim
				if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
					t.Fatal(err)
				}
				out[c.Name] = c.Spec.Devices.Requests[0]
			case "ResourceClaimTemplate":
				var c resourcev1.ResourceClaimTemplate
				if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
					t.Fatal(err)
				}
				out[c.Name] = c.Spec.Spec.Devices.Requests[0]
			}
		}
	}
	return out
}

// TestDRAClaimsPinPlacements renders a DRA plan with exclusive, time-sliced and MPS-shared MIG
// instances and evaluates every claim's selectors, with the DeviceClass's, through the
// scheduler's own CEL compiler (k8s.io/dynamic-resource-allocation/cel) against every instance
// the driver could publish on an H100: a claim for an instance whose start the GPU's counts force
// matches that placement alone; one whose start mig-parted may choose otherwise matches every
// start of its profile; whole GPUs carry no selector.
func TestDRAClaimsPinPlacements(t *testing.T) {
	plan, pool := allModesPlan(t)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, err := Artifacts(plan, pool)
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatal(err)
	}
	b, err := gpu.Lookup(h100)
	if err != nil {
		t.Fatal(err)
	}
	var published []dracel.Device
	for _, p := range b.Profiles {
		for _, s := range p.Starts {
			published = append(published, migDevice(b, "GPU-0", p.Name, s))
		}
	}
	compiler := dracel.GetCompiler(dracel.Features{})
	match := func(name string, exprs []string) []string {
		var out []string
		for _, d := range published {
			ok := true
			for _, e := range exprs {
				r := compiler.CompileCELExpression(e, dracel.Options{})
				if r.Error != nil {
					t.Fatalf("%s: compile %q: %v", name, e, r.Error)
				}
				m, _, err := r.DeviceMatches(context.Background(), d)
				if err != nil {
					t.Fatalf("%s: %q on %s: %v", name, e, *d.Attributes["uuid"].StringValue, err)
				}
				ok = ok && m
			}
			if ok {
				out = append(out, fmt.Sprintf("%s@%d", *d.Attributes["profile"].StringValue, startOf(d)))
			}
		}
		slices.Sort(out)
		return out
	}
	all1g := []string{"1g.10gb@0", "1g.10gb@1", "1g.10gb@2", "1g.10gb@3", "1g.10gb@4", "1g.10gb@5", "1g.10gb@6"}
	want := map[string][]string{
		"api-mig-3g-40gb":       {"3g.40gb@0"}, // exclusive, n0/1 3g.40gb@0 (3g.40gb ×2 forces 0 and 4)
		"batch-mig-3g-40gb":     {"3g.40gb@4"}, // exclusive, n0/1 3g.40gb@4
		"n3-gpu0-3g-40gb-4-mps": {"3g.40gb@4"}, // MIG+MPS, forced beside 2g.20gb and 1g.10gb ×2
		"n3-gpu0-1g-10gb-0-ts":  all1g,         // MIG time-slicing; the 1g starts are mig-parted's
		"n3-gpu0-1g-10gb-1-ts":  all1g,
		"api-gpu":               nil, // whole GPUs: no selector
		"n1-gpu0-ts":            nil,
		"n2-gpu0-mps":           nil,
	}
	reqs := draRequests(t, arts)
	for name, w := range want {
		r, ok := reqs[name]
		if !ok {
			t.Errorf("no claim or template %s among %d rendered", name, len(reqs))
			continue
		}
		var exprs []string
		for _, s := range r.Exactly.Selectors {
			exprs = append(exprs, s.CEL.Expression)
		}
		if w == nil {
			if r.Exactly.DeviceClassName != DeviceClassGPU || len(exprs) > 0 {
				t.Errorf("%s: class %s, selectors %q; want %s without selectors", name, r.Exactly.DeviceClassName, exprs, DeviceClassGPU)
			}
			continue
		}
		exprs = append(exprs, fmt.Sprintf("device.attributes['%s'].type == 'mig'", DRADriver)) // the mig.nvidia.com class
		if got := match(name, exprs); !slices.Equal(got, w) {
			t.Errorf("%s (selectors %q) matches %v, want %v", name, exprs, got, w)
		}
	}
}

// startOf is the first memorySlice<i> a published MIG device has.
func startOf(d dracel.Device) int {
	for i := 0; i < 8; i++ {
		if _, ok := d.Capacity[resourcev1.QualifiedName(fmt.Sprintf("memorySlice%d", i))]; ok {
			return i
		}
	}
	return -1
}

// TestDRASelectorsCompile compiles every selector of every golden case's claims with the
// scheduler's CEL compiler, and checks a template of several forced instances matches each of
// them: the example plan's code-complete runs on 3g.40gb instances at starts 0 and 4.
func TestDRASelectorsCompile(t *testing.T) {
	compiler := dracel.GetCompiler(dracel.Features{})
	b, err := gpu.Lookup("A100-SXM4-80GB")
	if err != nil {
		t.Fatal(err)
	}
	for name, load := range map[string]func(tb) (*v1.Plan, *v1.Pool){"example": loadFixture, "mixed-sharing": loadMixedSharing, "all-modes": allModesPlan, "mixed-board-dra": mixedBoardDRAPlan} {
		plan, pool := load(t)
		arts, err := Artifacts(plan, pool)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			t.Fatal(err)
		}
		for claim, r := range draRequests(t, arts) {
			for _, s := range r.Exactly.Selectors {
				if res := compiler.CompileCELExpression(s.CEL.Expression, dracel.Options{}); res.Error != nil {
					t.Errorf("%s %s: %q: %v", name, claim, s.CEL.Expression, res.Error)
				}
			}
		}
		if name != "example" {
			continue
		}
		r := draRequests(t, arts)["code-complete-mig-3g-40gb"]
		if len(r.Exactly.Selectors) != 2 {
			t.Fatalf("code-complete-mig-3g-40gb: selectors %v, want the profile and the placements", r.Exactly.Selectors)
		}
		pin := compiler.CompileCELExpression(r.Exactly.Selectors[1].CEL.Expression, dracel.Options{})
		for s, want := range map[int]bool{0: true, 4: true} {
			if ok, _, err := pin.DeviceMatches(context.Background(), migDevice(b, "GPU-0", "3g.40gb", s)); err != nil || ok != want {
				t.Errorf("code-complete-mig-3g-40gb on 3g.40gb@%d: %v, %v; want %v", s, ok, err, want)
			}
		}
		if ok, _, err := pin.DeviceMatches(context.Background(), migDevice(b, "GPU-0", "1g.10gb", 4)); err != nil || ok {
			t.Errorf("code-complete-mig-3g-40gb placement selector on 1g.10gb@4: %v, %v; want false", ok, err)
		}
	}
}
