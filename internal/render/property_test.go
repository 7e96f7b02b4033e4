package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

var propTenants = []tenantSpec{{"t0", "org/x", v1.IsolationShared}, {"t1", "org/x", v1.IsolationShared},
	{"t2", "org/x", v1.IsolationShared}, {"t3", "org/x", v1.IsolationShared}}

// genPlan draws a pool of 1–3 H100 nodes with 1–4 GPUs each and a valid plan on it: every GPU idle,
// exclusive, MPS, time-sliced or MIG (a maximal legal layout, each instance unshared, MPS- or
// time-slice-shared), replicas of four shared-isolation tenants on them.
func genPlan(t *rapid.T, layouts []gpu.Layout) (*v1.Plan, *v1.Pool) {
	counts := rapid.SliceOfN(rapid.IntRange(1, 4), 1, 3).Draw(t, "gpusPerNode")
	pool := newPool(t, h100, counts, propTenants...)
	plan := newPlan(pool, h100)
	tenant := func(label string) string { return propTenants[rapid.IntRange(0, 3).Draw(t, label)].name }
	reps := func(label string, lo, hi int) []v1.PlanReplica {
		var rs []v1.PlanReplica
		for i := range rapid.IntRange(lo, hi).Draw(t, label) {
			rs = append(rs, rep(tenant(fmt.Sprintf("%s-%d", label, i)), v1.Limits{}))
		}
		return rs
	}
	for i := range plan.GPUs {
		g := &plan.GPUs[i]
		label := fmt.Sprintf("%s/%d", g.Node, g.Index)
		switch rapid.IntRange(0, 4).Draw(t, label+"-mode") {
		case 1:
			whole(plan, g.Node, g.Index, v1.ModeExclusive, reps(label, 1, 1)...)
		case 2:
			whole(plan, g.Node, g.Index, v1.ModeMPS, reps(label, 1, 3)...)
		case 3:
			whole(plan, g.Node, g.Index, v1.ModeTimeSlice, reps(label, 1, 3)...)
		case 4:
			l := layouts[rapid.IntRange(0, len(layouts)-1).Draw(t, label+"-layout")]
			var ins []v1.PlanInstance
			for k, in := range l {
				il := fmt.Sprintf("%s-%d", label, k)
				switch rapid.IntRange(0, 2).Draw(t, il+"-sharing") {
				case 0:
					ins = append(ins, inst(in.Profile, in.Start, v1.SharingNone, reps(il, 0, 1)...))
				case 1:
					ins = append(ins, inst(in.Profile, in.Start, v1.SharingMPS, reps(il, 1, 3)...))
				default:
					ins = append(ins, inst(in.Profile, in.Start, v1.SharingTimeSlice, reps(il, 1, 3)...))
				}
			}
			mig(plan, g.Node, g.Index, ins...)
		}
	}
	return finish(plan, pool), pool
}

func h100Layouts(t testing.TB) []gpu.Layout {
	b, err := gpu.Lookup(h100)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := b.Enumerate([]string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"})
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// TestArtifactsProperties: on any valid plan, rendering succeeds (problems aside) and is
// deterministic; every tenant replica is counted in exactly one Deployment; every MIG GPU's
// counts are its entry in its node's mig-parted config, which validates; device-plugin configs
// decode strictly and never mix time-slicing and MPS; the pool map is well-formed XML.
func TestArtifactsProperties(t *testing.T) {
	layouts := h100Layouts(t)
	rapid.Check(t, func(rt *rapid.T) {
		plan, pool := genPlan(rt, layouts)
		arts, err := Artifacts(plan, pool)
		var pe *ProblemsError
		if err != nil && !errors.As(err, &pe) {
			rt.Fatalf("Artifacts: %v", err)
		}
		again, _ := Artifacts(plan, pool)
		for i := range arts {
			if arts[i].Path != again[i].Path || !bytes.Equal(arts[i].Data, again[i].Data) {
				rt.Fatalf("%s differs between two renderings", arts[i].Path)
			}
		}
		files := artifactMap(arts)
		checkReplicaCounts(rt, plan, files)
		_, names, err := MigPartedConfig(plan, pool)
		if err != nil {
			rt.Fatal(err)
		}
		cfg := checkMigParted(rt, plan, files[MigPartedPath])
		for _, g := range plan.GPUs {
			if g.Mode != v1.ModeMIG {
				continue
			}
			e, ok := entryFor(rt, cfg, names[g.Node], g.Index)
			if !ok || !e.MigEnabled || gpu.MultisetKey(e.MigDevices) != gpu.MultisetKey(planLayout(g).Counts()) {
				rt.Fatalf("gpu %s: entry %+v, plan %s", g.Ref(), e, planLayout(g))
			}
		}
		for _, n := range pool.Fleet.Nodes {
			var c DevicePluginConfig
			if err := yaml.UnmarshalStrict(files["device-plugin/"+n.Name+".yaml"], &c); err != nil {
				rt.Fatal(err)
			}
			if c.Sharing != nil && c.Sharing.TimeSlicing != nil && c.Sharing.MPS != nil {
				rt.Fatalf("node %s mixes time-slicing and MPS", n.Name)
			}
		}
		if err := wellFormed(files["pool-map.svg"]); err != nil {
			rt.Fatalf("pool map: %v", err)
		}
	})
}

// checkReplicaCounts: per tenant, the Deployments' replicas add up to the plan's, and every
// replica index is in exactly one Deployment's placement annotation.
func checkReplicaCounts(t *rapid.T, plan *v1.Plan, files map[string][]byte) {
	for _, pt := range plan.Tenants {
		data, ok := files["k8s/"+pt.Name+".yaml"]
		if len(pt.Replicas) == 0 {
			if ok {
				t.Fatalf("tenant %s has no replicas but a manifest", pt.Name)
			}
			continue
		}
		var sum int32
		seen := map[string]int{}
		for _, d := range decodeDeployments(t, data) {
			sum += *d.Spec.Replicas
			slots := strings.Split(d.Annotations[AnnotationSlots], ", ")
			if int32(len(slots)) != *d.Spec.Replicas {
				t.Fatalf("%s: %d replicas but slots %q", d.Name, *d.Spec.Replicas, slots)
			}
			for _, s := range slots {
				idx, _, _ := strings.Cut(s, "@")
				seen[idx]++
			}
		}
		if int(sum) != len(pt.Replicas) {
			t.Fatalf("tenant %s: deployments run %d replicas, plan has %d", pt.Name, sum, len(pt.Replicas))
		}
		for _, r := range pt.Replicas {
			if n := seen[fmt.Sprint(r.Index)]; n != 1 {
				t.Fatalf("tenant %s replica %d is in %d deployments", pt.Name, r.Index, n)
			}
		}
	}
}

func wellFormed(data []byte) error {
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func BenchmarkArtifacts(b *testing.B) {
	// 100 nodes × 8 H100s, every other GPU MIG with two unshared 3g.40gb, the rest exclusive.
	counts := make([]int, 100)
	for i := range counts {
		counts[i] = 8
	}
	pool := newPool(b, h100, counts, propTenants...)
	plan := newPlan(pool, h100)
	for i, g := range plan.GPUs {
		if i%2 == 0 {
			whole(plan, g.Node, g.Index, v1.ModeExclusive, rep("t0", v1.Limits{}))
		} else {
			mig(plan, g.Node, g.Index, inst("3g.40gb", 0, "", rep("t1", v1.Limits{})), inst("3g.40gb", 4, "", rep("t2", v1.Limits{})))
		}
	}
	finish(plan, pool)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Artifacts(plan, pool); err != nil {
			b.Fatal(err)
		}
	}
}
