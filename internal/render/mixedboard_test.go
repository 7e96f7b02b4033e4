package render

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

const (
	a30     = "A30-24GB"
	a100x80 = "A100-SXM4-80GB"
)

// mixedBoardPlan is a plan on nodes with GPUs of two boards: node mixed has an A30 (small) and an
// H100 (big), both whole and exclusive under nvidia.com/gpu; node mixed-mig has an A100-80GB and
// an H100 in MIG mode, each with a 1g.10gb instance (small's, exclusive, on the A100; small and
// embed MPS-sharing it on the H100) under nvidia.com/mig-1g.10gb; node h100 has one H100, the
// board of big's second replica.
func mixedBoardPlan(t tb) (*v1.Plan, *v1.Pool) {
	pool := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: "test-pool"}}
	pool.Fleet.Nodes = []v1.Node{
		{Name: "h100", GPUs: []v1.GPUGroup{{Board: h100, Count: 1}}},
		{Name: "mixed", GPUs: []v1.GPUGroup{{Board: a30, Count: 1}, {Board: h100, Count: 1}}},
		{Name: "mixed-mig", GPUs: []v1.GPUGroup{{Board: a100x80, Count: 1}, {Board: h100, Count: 1}}},
	}
	for _, ts := range []tenantSpec{{"big", "acme/a", v1.IsolationHard}, {"small", "acme/b", v1.IsolationSoft}, {"embed", "acme/b", v1.IsolationSoft}} {
		pool.Tenants = append(pool.Tenants, v1.Tenant{Name: ts.name, Path: ts.path, Isolation: ts.iso,
			Model: v1.Model{Name: "llama-3.1-8b"}, Traffic: v1.Traffic{RPS: 1, InputTokens: 100, OutputTokens: 100}})
	}
	v1.Default(pool)
	if err := v1.Validate(pool); err != nil {
		t.Fatalf("test pool invalid: %v", err)
	}
	plan := &v1.Plan{APIVersion: v1.APIVersion, Kind: v1.KindPlan, Metadata: v1.Metadata{Name: "test-plan"}, Pool: pool.Metadata.Name}
	for _, n := range pool.Fleet.Nodes {
		k := 0
		for _, g := range n.GPUs {
			for range g.Count {
				plan.GPUs = append(plan.GPUs, v1.PlanGPU{Node: n.Name, Index: k, Board: g.Board, Role: v1.RoleIdle, Mode: v1.ModeExclusive})
				k++
			}
		}
	}
	whole(plan, "h100", 0, v1.ModeExclusive, rep("big", v1.Limits{Memory: 70 * v1.GiB}))
	whole(plan, "mixed", 0, v1.ModeExclusive, rep("small", v1.Limits{Memory: 20 * v1.GiB}))
	whole(plan, "mixed", 1, v1.ModeExclusive, rep("big", v1.Limits{Memory: 70 * v1.GiB}))
	mig(plan, "mixed-mig", 0, inst("1g.10gb", 0, "", rep("small", v1.Limits{Memory: 9 * v1.GiB})))
	mig(plan, "mixed-mig", 1, inst("1g.10gb", 0, v1.SharingMPS, rep("small", mps(50, 4*v1.GiB)), rep("embed", mps(50, 4*v1.GiB))))
	return finish(plan, pool), pool
}

// mixedBoardDRAPlan is mixedBoardPlan on the DRA path (a golden case, whose claims the k8s
// package creates and schedules on the real API server).
func mixedBoardDRAPlan(t tb) (*v1.Plan, *v1.Pool) {
	plan, pool := mixedBoardPlan(t)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	return plan, pool
}

// TestMixedBoardResourceIsAProblem: on the device-plugin path a resource whose devices on a node
// are of two boards is a problem naming the node, the resource, the boards and the replicas
// (whole GPUs on mixed, the 1g.10gb profile of two boards on mixed-mig); a node of one board is
// none, and on the DRA path, whose claims select the board, both are notes on the device-plugin
// config only.
func TestMixedBoardResourceIsAProblem(t *testing.T) {
	plan, pool := mixedBoardPlan(t)
	_, err := Artifacts(plan, pool)
	got := problemStrings(err)
	want := [][]string{
		{"node mixed: nvidia.com/gpu: ", "boards A30-24GB (GPU 0) and H100-SXM5-80GB (GPU 1)", "small#0 (mixed/0 A30-24GB)", "big#1 (mixed/1 H100-SXM5-80GB)", "policy.kubernetesDeviceAPI: dra"},
		{"node mixed-mig: nvidia.com/mig-1g.10gb: ", "boards A100-SXM4-80GB (GPU 0) and H100-SXM5-80GB (GPU 1)", "small#1 (mixed-mig/0 1g.10gb@0 A100-SXM4-80GB)", "small#2 (mixed-mig/1 1g.10gb@0 H100-SXM5-80GB)", "embed#0 (mixed-mig/1"},
	}
	var mixed []string
	for _, p := range got {
		if strings.Contains(p, "boards ") {
			mixed = append(mixed, p)
		}
		if strings.HasPrefix(p, "node h100:") {
			t.Errorf("a node of one board has a problem: %s", p)
		}
	}
	if len(mixed) != len(want) {
		t.Fatalf("problems %q, want one per mixed resource (%d)", got, len(want))
	}
	for _, w := range want {
		i := slices.IndexFunc(mixed, func(p string) bool { return strings.HasPrefix(p, w[0]) })
		if i < 0 || !containsAll(mixed[i], w...) {
			t.Errorf("problems %q, want one naming %q", mixed, w)
		}
	}

	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, err := Artifacts(plan, pool)
	if err != nil {
		t.Fatalf("DRA path: %v", err)
	}
	readme := string(artifactMap(arts)["README.md"])
	if !containsAll(readme, "device-plugin config only (this pool's pods take their devices by DRA claims): node mixed: nvidia.com/gpu: ",
		"device-plugin config only (this pool's pods take their devices by DRA claims): node mixed-mig: nvidia.com/mig-1g.10gb: ") {
		t.Errorf("DRA README.md does not note the device-plugin config's mixed boards")
	}
}

// gpuDevice is a whole GPU as NVIDIA's DRA driver publishes it (GpuInfo.Attributes): type, uuid
// and productName, the GPU's NVML name.
func gpuDevice(b *gpu.Board, uuid string) dracel.Device {
	str := func(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: ptr.To(s)} }
	return dracel.Device{Driver: DRADriver, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type": str("gpu"), "uuid": str(uuid), "productName": str(b.NVMLNames[0]), "brand": str("Nvidia")}}
}

// TestDRAClaimsSelectBoard renders the mixed-board plan on the DRA path and evaluates every
// claim's selectors, with its DeviceClass's, through the scheduler's CEL compiler against the
// devices the driver publishes on the mixed nodes: each claim matches its own board's devices
// only (big's template the H100, small's the A30; small's 1g.10gb template the A100's instance,
// the shared MPS claim the H100's). big's template also serves its replica on the node of one
// H100 (a selector sees no node; the pin names the H100 there too).
func TestDRAClaimsSelectBoard(t *testing.T) {
	plan, pool := mixedBoardPlan(t)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, err := Artifacts(plan, pool)
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatal(err)
	}
	boards := map[string]*gpu.Board{}
	for _, n := range []string{a30, h100, a100x80} {
		b, err := gpu.Lookup(n)
		if err != nil {
			t.Fatal(err)
		}
		boards[n] = b
	}
	published := map[string]dracel.Device{
		"A30":                gpuDevice(boards[a30], "GPU-a30"),
		"H100":               gpuDevice(boards[h100], "GPU-h100"),
		"A100 1g.10gb@0":     migDevice(boards[a100x80], "GPU-a100", "1g.10gb", 0),
		"H100 1g.10gb@0":     migDevice(boards[h100], "GPU-h100m", "1g.10gb", 0),
		"H100 1g.10gb@1":     migDevice(boards[h100], "GPU-h100m", "1g.10gb", 1),
		"A100 whole (MIG)":   gpuDevice(boards[a100x80], "GPU-a100w"),
		"H100 3g.40gb@4 MIG": migDevice(boards[h100], "GPU-h100m", "3g.40gb", 4),
	}
	class := map[string]string{
		DeviceClassGPU: fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == 'gpu'", DRADriver, DRADriver),
		DeviceClassMIG: fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == 'mig'", DRADriver, DRADriver),
	}
	compiler := dracel.GetCompiler(dracel.Features{})
	match := func(name string, r resourcev1.DeviceRequest) []string {
		exprs := []string{class[r.Exactly.DeviceClassName]}
		for _, s := range r.Exactly.Selectors {
			exprs = append(exprs, s.CEL.Expression)
		}
		var out []string
		for dn, d := range published {
			ok := true
			for _, e := range exprs {
				c := compiler.CompileCELExpression(e, dracel.Options{})
				if c.Error != nil {
					t.Fatalf("%s: compile %q: %v", name, e, c.Error)
				}
				m, _, err := c.DeviceMatches(context.Background(), d)
				if err != nil {
					t.Fatalf("%s: %q on %s: %v", name, e, dn, err)
				}
				if !m {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, dn)
			}
		}
		slices.Sort(out)
		return out
	}
	want := map[string][]string{
		"big-gpu":                      {"H100"},
		"small-gpu":                    {"A30"},
		"small-mig-1g-10gb":            {"A100 1g.10gb@0"},
		"mixed-mig-gpu1-1g-10gb-0-mps": {"H100 1g.10gb@0", "H100 1g.10gb@1"},
	}
	reqs := draRequests(t, arts)
	for name, w := range want {
		r, ok := reqs[name]
		if !ok {
			t.Errorf("no claim or template %s among %v", name, slices.Sorted(mapsKeys(reqs)))
			continue
		}
		if got := match(name, r); !slices.Equal(got, w) {
			t.Errorf("%s (selectors %v) matches %v, want %v", name, r.Exactly.Selectors, got, w)
		}
	}
	if len(reqs) != len(want) {
		t.Errorf("rendered %v, want %d claims and templates", slices.Sorted(mapsKeys(reqs)), len(want))
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestDRABoardSelectorOnlyOnMixedNodes: a pool whose nodes each have one board renders no
// productName selector (the node affinity already fixes the board, and the claims keep their
// content), and a board whose NVML names the catalog lacks cannot be selected: on a mixed node
// that is a problem on the DRA path.
func TestDRABoardSelectorOnlyOnMixedNodes(t *testing.T) {
	plan, pool := allModesPlan(t)
	pool.Policy.KubernetesDeviceAPI = v1.DeviceAPIDRA
	arts, err := Artifacts(plan, pool)
	var pe *ProblemsError
	if err != nil && !errors.As(err, &pe) {
		t.Fatal(err)
	}
	for name, r := range draRequests(t, arts) {
		for _, s := range r.Exactly.Selectors {
			if strings.Contains(s.CEL.Expression, "productName") {
				t.Errorf("%s on a node of one board selects %q", name, s.CEL.Expression)
			}
		}
	}
	m := &model{nodes: []*node{{name: "n", gpus: []*gpuModel{{board: &gpu.Board{Name: "X"}}, {board: &gpu.Board{Name: "Y", NVMLNames: []string{"NVIDIA Y"}}}}}}}
	devs := []*device{{node: "n", board: m.nodes[0].gpus[0].board}}
	if expr, unknown := m.draBoardSelector(devs); expr != "" || !slices.Equal(unknown, []string{"X"}) {
		t.Errorf("board without NVML names: %q, %v; want no selector and X unknown", expr, unknown)
	}
	if expr, _ := m.draBoardSelector([]*device{{node: "n", board: m.nodes[0].gpus[1].board}}); expr != "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA Y'" {
		t.Errorf("one NVML name: %q", expr)
	}
	if got := celString(`it's \ x`); got != `'it\'s \\ x'` {
		t.Errorf("celString = %s", got)
	}
}
