package render

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// Artifact is one output file: a relative, slash-separated path and its bytes.
type Artifact struct {
	Path string
	Data []byte
}

// Problem is something the plan asks for that the target tools cannot express exactly. The
// artifacts are still written, in a form that never weakens isolation (see the package
// documentation), and README.md lists every problem.
type Problem struct {
	// Node is the node concerned; empty when the problem is not tied to one node.
	Node string
	// Resource is the Kubernetes resource name concerned, when there is one.
	Resource string
	// Field is the plan's field path concerned (gpus[2].instances[0].sharing), when there is one.
	Field string
	// Message says what cannot be expressed and what the artifacts do instead.
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Node != "" {
		b.WriteString("node " + p.Node + ": ")
	}
	if p.Resource != "" {
		b.WriteString(p.Resource + ": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ProblemsError is returned beside complete artifacts when the plan has Problems: the caller
// should write the artifacts and report the problems (a partial result).
type ProblemsError struct {
	Problems []Problem
}

func (e *ProblemsError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return fmt.Sprintf("render artifacts: %d problems:\n%s", len(e.Problems), strings.Join(lines, "\n"))
}

// Artifacts renders every artifact of plan for pool, in a fixed order with deterministic bytes.
// The plan must be valid against the pool (v1.ValidatePlan). When the plan asks for something
// the device plugin or MPS cannot express, Artifacts returns all artifacts together with a
// *ProblemsError; any other error comes with no artifacts.
func Artifacts(plan *v1.Plan, pool *v1.Pool) ([]Artifact, error) {
	m, err := build(plan, pool)
	if err != nil {
		return nil, err
	}
	var out []Artifact
	steps := []func(*model) ([]Artifact, error){
		migPartedArtifacts, devicePluginArtifacts, mpsArtifacts, vllmArtifacts, k8sArtifacts, loraEngineArtifacts, draArtifacts, svgArtifacts,
	}
	for _, step := range steps {
		a, err := step(m)
		if err != nil {
			return nil, err
		}
		out = append(out, a...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	out = append(out, readmeArtifact(m, out))
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if len(m.problems) > 0 {
		return out, &ProblemsError{Problems: slices.Clone(m.problems)}
	}
	return out, nil
}

// model is the plan flattened for rendering: nodes in name order, GPUs in index order.
type model struct {
	plan     *v1.Plan
	pool     *v1.Pool
	tenants  map[string]v1.Tenant
	nodes    []*node
	problems []Problem
	notes    []string // facts the README states (start positions, pairings)
}

type node struct {
	name string
	gpus []*gpuModel
	// filled by the renderers:
	migConfig string // the nvidia.com/mig.config value
	dpConfig  string // the nvidia.com/device-plugin.config value
	pool      string // the gpupool.dev/pool value
}

type gpuModel struct {
	plan    v1.PlanGPU
	at      int // the GPU's index in plan.gpus, for field paths
	board   *gpu.Board
	devices []*device // one per non-MIG GPU, one per MIG instance
}

// device is what the device plugin advertises: a whole GPU or a MIG instance.
type device struct {
	node     string
	gpu      int
	board    *gpu.Board
	instance *v1.PlanInstance // nil for a whole GPU
	kind     v1.SliceKind
	capacity v1.Bytes
	replicas []v1.PlanReplica
	// loraEngine names the shared LoRA engine on the whole GPU, whose pod asks for it unshared.
	loraEngine string
}

// baseResource is the device plugin's resource name for the device (mixed MIG strategy).
func (d *device) baseResource() string {
	if d.instance != nil {
		return "nvidia.com/mig-" + d.instance.Profile
	}
	return "nvidia.com/gpu"
}

// shared tells whether the device is handed out as several references (renamed ".shared").
func (d *device) shared() bool {
	switch d.kind {
	case v1.SliceTimeSlice, v1.SliceMPS, v1.SliceMIGTimeSlice, v1.SliceMIGMPS:
		return true
	}
	return false
}

// resource is the name a pod requests for the device.
func (d *device) resource() string {
	if d.shared() {
		return d.baseResource() + ".shared"
	}
	return d.baseResource()
}

// where names the device: "gpu-node-a/4" or "gpu-node-a/4 3g.40gb@4".
func (d *device) where() string {
	s := fmt.Sprintf("%s/%d", d.node, d.gpu)
	if d.instance != nil {
		s += " " + d.instance.Ref().String()
	}
	return s
}

func build(plan *v1.Plan, pool *v1.Pool) (*model, error) {
	if plan == nil || pool == nil {
		return nil, errors.New("render artifacts: plan and pool are required")
	}
	p := *pool
	p.Tenants = slices.Clone(pool.Tenants)
	v1.Default(&p)
	if err := v1.ValidatePlan(plan, &p); err != nil {
		return nil, fmt.Errorf("render artifacts: validate plan %q: %w", plan.Metadata.Name, err)
	}
	m := &model{plan: plan, pool: &p, tenants: map[string]v1.Tenant{}}
	for _, t := range p.Tenants {
		m.tenants[t.Name] = t
	}
	byName := map[string]*node{}
	for i, g := range plan.GPUs {
		b, err := gpu.Lookup(g.Board)
		if err != nil {
			return nil, fmt.Errorf("render artifacts: gpu %s/%d: %w", g.Node, g.Index, err)
		}
		n := byName[g.Node]
		if n == nil {
			n = &node{name: g.Node}
			byName[g.Node] = n
			m.nodes = append(m.nodes, n)
		}
		gm := newGPUModel(g, b)
		gm.at = i
		n.gpus = append(n.gpus, gm)
	}
	sort.Slice(m.nodes, func(i, j int) bool { return m.nodes[i].name < m.nodes[j].name })
	for _, n := range m.nodes {
		sort.Slice(n.gpus, func(i, j int) bool { return n.gpus[i].plan.Index < n.gpus[j].plan.Index })
	}
	return m, nil
}

func newGPUModel(g v1.PlanGPU, b *gpu.Board) *gpuModel {
	gm := &gpuModel{plan: g, board: b}
	if g.Mode != v1.ModeMIG {
		kind := map[v1.Mode]v1.SliceKind{v1.ModeExclusive: v1.SliceExclusive, v1.ModeMPS: v1.SliceMPS,
			v1.ModeTimeSlice: v1.SliceTimeSlice}[g.Mode]
		gm.devices = []*device{{node: g.Node, gpu: g.Index, board: b, kind: kind,
			capacity: v1.Bytes(b.MemoryMiB) * v1.MiB, replicas: g.Replicas, loraEngine: g.LoRAEngine}}
		return gm
	}
	for i := range g.Instances {
		in := &g.Instances[i]
		d := &device{node: g.Node, gpu: g.Index, board: b, instance: in, replicas: in.Replicas}
		switch in.Sharing.Mode {
		case v1.SharingMPS:
			d.kind = v1.SliceMIGMPS
		case v1.SharingTimeSlice:
			d.kind = v1.SliceMIGTimeSlice
		default:
			d.kind = v1.SliceMIG
		}
		if p, err := b.Profile(in.Profile); err == nil {
			d.capacity = v1.Bytes(p.MemoryMiB) * v1.MiB
		}
		gm.devices = append(gm.devices, d)
	}
	return gm
}

// devices lists every device of the model in node, GPU, instance order.
func (m *model) devices() []*device {
	var out []*device
	for _, n := range m.nodes {
		for _, g := range n.gpus {
			out = append(out, g.devices...)
		}
	}
	return out
}

func (m *model) problem(nodeName, resource, format string, args ...any) {
	m.problems = append(m.problems, Problem{Node: nodeName, Resource: resource, Message: fmt.Sprintf(format, args...)})
}
