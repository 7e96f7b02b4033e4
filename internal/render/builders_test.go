package render

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
)

// loadFixture reads the schema's example pool and plan (copied into testdata; see testdata/README.md).
func loadFixture(t tb) (*v1.Plan, *v1.Pool) {
	t.Helper()
	return loadFixturePlan(t, "plan.yaml")
}

// loadMixedSharing reads the example pool with plan-mixed-sharing.yaml, a plan that shares one MIG
// resource of a node and leaves another device of it unshared.
func loadMixedSharing(t tb) (*v1.Plan, *v1.Pool) {
	t.Helper()
	return loadFixturePlan(t, "plan-mixed-sharing.yaml")
}

// loadFixturePlan reads testdata/pool.yaml and the plan testdata/planFile.
func loadFixturePlan(t tb, planFile string) (*v1.Plan, *v1.Pool) {
	t.Helper()
	pd, err := os.ReadFile("testdata/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := v1.LoadPool(pd)
	if err != nil {
		t.Fatalf("load pool: %v", err)
	}
	pl, err := os.ReadFile("testdata/" + planFile)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := v1.DecodePlan(pl)
	if err != nil {
		t.Fatalf("decode plan: %v", err)
	}
	return plan, pool
}

// tenantSpec is a tenant of a hand-built pool.
type tenantSpec struct {
	name, path string
	iso        v1.Isolation
}

// newPool builds a defaulted pool: nodes "n0", "n1", … each with count GPUs of board, and tenants
// serving llama-3.1-8b.
func newPool(t tb, board string, counts []int, tenants ...tenantSpec) *v1.Pool {
	t.Helper()
	p := &v1.Pool{APIVersion: v1.APIVersion, Kind: v1.KindPool, Metadata: v1.Metadata{Name: "test-pool"}}
	for i, c := range counts {
		p.Fleet.Nodes = append(p.Fleet.Nodes, v1.Node{Name: fmt.Sprintf("n%d", i), GPUs: []v1.GPUGroup{{Board: board, Count: c}}})
	}
	for _, ts := range tenants {
		p.Tenants = append(p.Tenants, v1.Tenant{Name: ts.name, Path: ts.path, Isolation: ts.iso,
			Model: v1.Model{Name: "llama-3.1-8b"}, Traffic: v1.Traffic{RPS: 1, InputTokens: 100, OutputTokens: 100}})
	}
	v1.Default(p)
	if err := v1.Validate(p); err != nil {
		t.Fatalf("test pool invalid: %v", err)
	}
	return p
}

// newPlan lists every GPU of pool as idle exclusive; tests then set modes and replicas with
// set, and finish fills the tenants and the summary.
func newPlan(pool *v1.Pool, board string) *v1.Plan {
	p := &v1.Plan{APIVersion: v1.APIVersion, Kind: v1.KindPlan, Metadata: v1.Metadata{Name: "test-plan"}, Pool: pool.Metadata.Name}
	for _, n := range pool.Fleet.Nodes {
		k := 0
		for _, g := range n.GPUs {
			for range g.Count {
				p.GPUs = append(p.GPUs, v1.PlanGPU{Node: n.Name, Index: k, Board: board, Role: v1.RoleIdle, Mode: v1.ModeExclusive})
				k++
			}
		}
	}
	return p
}

// at returns the plan's GPU node/index for editing.
func at(p *v1.Plan, node string, index int) *v1.PlanGPU {
	for i := range p.GPUs {
		if p.GPUs[i].Node == node && p.GPUs[i].Index == index {
			return &p.GPUs[i]
		}
	}
	panic("no gpu " + node)
}

// rep is a replica; indices are assigned by finish.
func rep(tenant string, l v1.Limits) v1.PlanReplica { return v1.PlanReplica{Tenant: tenant, Limits: l} }

// whole sets a GPU's mode and whole-GPU replicas.
func whole(p *v1.Plan, node string, index int, mode v1.Mode, rs ...v1.PlanReplica) {
	g := at(p, node, index)
	g.Role, g.Mode, g.Replicas = v1.RolePool, mode, rs
}

// mig sets a GPU's MIG layout.
func mig(p *v1.Plan, node string, index int, ins ...v1.PlanInstance) {
	g := at(p, node, index)
	g.Role, g.Mode, g.Instances = v1.RolePool, v1.ModeMIG, ins
}

func inst(profile string, start int, sharing v1.SharingMode, rs ...v1.PlanReplica) v1.PlanInstance {
	return v1.PlanInstance{Profile: profile, Start: start, Sharing: v1.Sharing{Mode: sharing}, Replicas: rs}
}

// finish numbers every tenant's replicas in GPU order and fills plan.Tenants and the summary.
func finish(p *v1.Plan, pool *v1.Pool) *v1.Plan {
	next := map[string]int{}
	refs := map[string][]v1.ReplicaRef{}
	used := 0
	number := func(rs []v1.PlanReplica, g v1.PlanGPU, in v1.InstanceRef, kind v1.SliceKind) {
		for i := range rs {
			rs[i].Index = next[rs[i].Tenant]
			next[rs[i].Tenant]++
			refs[rs[i].Tenant] = append(refs[rs[i].Tenant], v1.ReplicaRef{Index: rs[i].Index, GPU: g.Ref(), Instance: in, Slice: kind})
		}
	}
	for gi := range p.GPUs {
		g := &p.GPUs[gi]
		n := len(g.Replicas)
		kind := map[v1.Mode]v1.SliceKind{v1.ModeExclusive: v1.SliceExclusive, v1.ModeMPS: v1.SliceMPS, v1.ModeTimeSlice: v1.SliceTimeSlice}[g.Mode]
		number(g.Replicas, *g, v1.InstanceRef{}, kind)
		for ii := range g.Instances {
			in := &g.Instances[ii]
			n += len(in.Replicas)
			k := map[v1.SharingMode]v1.SliceKind{"": v1.SliceMIG, v1.SharingNone: v1.SliceMIG, v1.SharingMPS: v1.SliceMIGMPS,
				v1.SharingTimeSlice: v1.SliceMIGTimeSlice}[in.Sharing.Mode]
			number(in.Replicas, *g, in.Ref(), k)
		}
		if n > 0 {
			used++
		}
	}
	p.Tenants = nil
	for _, t := range pool.Tenants {
		p.Tenants = append(p.Tenants, v1.PlanTenant{Name: t.Name, Replicas: refs[t.Name]})
	}
	p.Summary = v1.Summary{GPUsUsed: used, GPUsTotal: len(p.GPUs), LowerBound: min(used, 1)}
	return p
}

// artifactMap indexes artifacts by path.
func artifactMap(arts []Artifact) map[string][]byte {
	m := map[string][]byte{}
	for _, a := range arts {
		m[a.Path] = a.Data
	}
	return m
}

// decodeDeployments strictly decodes every document of a k8s/<tenant>.yaml file.
func decodeDeployments(t tb, data []byte) []appsv1.Deployment {
	t.Helper()
	var out []appsv1.Deployment
	for _, doc := range bytes.Split(data, []byte("---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict(doc, &d); err != nil {
			t.Fatalf("decode deployment: %v\n%s", err, doc)
		}
		out = append(out, d)
	}
	return out
}

// decodeDP strictly decodes a device-plugin config, skipping its comment header.
func decodeDP(t tb, data []byte) DevicePluginConfig {
	t.Helper()
	var c DevicePluginConfig
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		t.Fatalf("decode device-plugin config: %v\n%s", err, data)
	}
	return c
}

func problemStrings(err error) []string {
	pe, ok := err.(*ProblemsError)
	if !ok {
		return nil
	}
	var out []string
	for _, p := range pe.Problems {
		out = append(out, p.String())
	}
	sort.Strings(out)
	return out
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func corev1ResourceName(s string) corev1.ResourceName { return corev1.ResourceName(s) }

// tb is what the plan builders and checks need of *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}
