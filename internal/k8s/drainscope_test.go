package k8s

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"gpupool.dev/gpupool/internal/migparted"
)

func mig(idx []int, devs map[string]int) migparted.Entry {
	return migparted.Entry{Devices: migparted.Devices{Indices: idx}, MigEnabled: true, MigDevices: devs}
}

func named(name string, es ...migparted.Entry) *migparted.NamedConfig {
	return &migparted.NamedConfig{Name: name, Entries: es}
}

// TestPlanDrainScope checks the rule for which GPU pods may stay through a MIG change: only
// resources whose every instance lies on GPUs that do not change, and whose count does not drop.
func TestPlanDrainScope(t *testing.T) {
	old := named("old", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"1g.10gb": 7}))
	cases := []struct {
		name          string
		old, new      *migparted.NamedConfig
		before, after map[string]int64
		keep, smoke   []string
		why           string
	}{
		{
			name: "one GPU changes",
			old:  old, new: named("new", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"2g.20gb": 3})),
			before: map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7},
			after:  map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-2g.20gb": 3},
			keep:   []string{"nvidia.com/mig-3g.40gb"}, smoke: []string{"nvidia.com/mig-2g.20gb"}, why: "GPU 1 only",
		},
		{
			name:   "a kind on both a kept and a changed GPU is drained",
			old:    named("old", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"3g.40gb": 1, "1g.10gb": 4})),
			new:    named("new", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"2g.20gb": 3})),
			before: map[string]int64{"nvidia.com/mig-3g.40gb": 3, "nvidia.com/mig-1g.10gb": 4},
			after:  map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-2g.20gb": 3},
			why:    "GPU 1 only", smoke: []string{"nvidia.com/mig-2g.20gb"},
		},
		{
			name: "the count of a kept kind drops",
			old:  old, new: named("new", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"2g.20gb": 3})),
			before: map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7},
			after:  map[string]int64{"nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-2g.20gb": 3},
			smoke:  []string{"nvidia.com/mig-2g.20gb"}, why: "counts drop for nvidia.com/mig-3g.40gb 2→1",
		},
		{
			name: "a MIG mode change resets every GPU",
			old:  old, new: named("new", mig([]int{0}, map[string]int{"3g.40gb": 2}), migparted.Entry{Devices: migparted.Devices{Indices: []int{1}}}),
			before: map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7},
			after:  map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/gpu": 1},
			smoke:  []string{"nvidia.com/gpu", "nvidia.com/mig-3g.40gb"}, why: "MIG mode of GPU 1 changes",
		},
		{
			name:   "devices: all changes every GPU",
			old:    named("old", migparted.Entry{Devices: migparted.AllDevices(), MigEnabled: true, MigDevices: map[string]int{"1g.10gb": 7}}),
			new:    named("new", migparted.Entry{Devices: migparted.AllDevices(), MigEnabled: true, MigDevices: map[string]int{"3g.40gb": 2}}),
			before: map[string]int64{"nvidia.com/mig-1g.10gb": 56}, after: map[string]int64{"nvidia.com/mig-3g.40gb": 16},
			smoke: []string{"nvidia.com/mig-3g.40gb"}, why: "the GPUs no entry names by index",
		},
		{
			name: "an entry for all GPUs and one by index: the indexed GPU is kept",
			old: named("old", migparted.Entry{Devices: migparted.AllDevices(), MigEnabled: true, MigDevices: map[string]int{"1g.10gb": 7}},
				mig([]int{7}, map[string]int{"7g.80gb": 1})),
			new: named("new", migparted.Entry{Devices: migparted.AllDevices(), MigEnabled: true, MigDevices: map[string]int{"1g.10gb": 7}},
				mig([]int{7}, map[string]int{"3g.40gb": 2})),
			// GPU 7 is covered by both entries, so the all-GPU entry's kind is on a changed GPU too
			before: map[string]int64{"nvidia.com/mig-1g.10gb": 56, "nvidia.com/mig-7g.80gb": 1},
			after:  map[string]int64{"nvidia.com/mig-1g.10gb": 56, "nvidia.com/mig-3g.40gb": 2},
			smoke:  []string{"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"}, why: "GPU 7 only",
		},
		{
			name:   "a profile with attributes is never kept and taints its base name",
			old:    named("old", mig([]int{0}, map[string]int{"1g.10gb": 7}), mig([]int{1}, map[string]int{"1g.10gb+me": 1})),
			new:    named("new", mig([]int{0}, map[string]int{"1g.10gb": 7}), mig([]int{1}, map[string]int{"7g.80gb": 1})),
			before: map[string]int64{"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-1g.10gb.me": 1},
			after:  map[string]int64{"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-7g.80gb": 1},
			smoke:  []string{"nvidia.com/mig-7g.80gb"}, why: "GPU 1 only",
		},
		{
			name: "unknown configs drain everything",
			old:  nil, new: named("new"),
			after: map[string]int64{"nvidia.com/mig-3g.40gb": 16},
			smoke: []string{"nvidia.com/mig-3g.40gb"}, why: "not known",
		},
		{
			name: "nothing changes",
			old:  old, new: named("same", old.Entries...),
			before: map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7},
			after:  map[string]int64{"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7},
			keep:   []string{"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"}, why: "no GPU's MIG devices change",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := planDrainScope(tc.old, tc.new, tc.before, tc.after)
			if !slices.Equal(d.Keep, tc.keep) || !slices.Equal(d.Smoke, tc.smoke) || !strings.Contains(d.Why, tc.why) {
				t.Errorf("got keep %v smoke %v why %q; want keep %v smoke %v why containing %q", d.Keep, d.Smoke, d.Why, tc.keep, tc.smoke, tc.why)
			}
		})
	}
}

// TestGateDrainsOnlyChangedGPUs: a two-GPU node where GPU 0 keeps its two 3g.40gb instances and
// GPU 1 goes from seven 1g.10gb to three 2g.20gb. With the mig-parted ConfigMap to read, the gate
// evicts the pods asking for 1g.10gb (alone or with 3g.40gb) and leaves the pod asking only for
// 3g.40gb running; the smoke Job tests only 2g.20gb, with all three instances. When GPU 1's MIG
// mode changes instead, mig-parted resets every GPU, so every GPU pod is evicted.
func TestGateDrainsOnlyChangedGPUs(t *testing.T) {
	c := needAPI(t)
	ctx := context.Background()
	cfgs := map[string]map[string]int64{
		"split-a": {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-1g.10gb": 7},
		"split-b": {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/mig-2g.20gb": 3},
		"split-c": {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/gpu": 1},
	}
	file := &migparted.Config{Configs: []migparted.NamedConfig{
		*named("split-a", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"1g.10gb": 7})),
		*named("split-b", mig([]int{0}, map[string]int{"3g.40gb": 2}), mig([]int{1}, map[string]int{"2g.20gb": 3})),
		*named("split-c", mig([]int{0}, map[string]int{"3g.40gb": 2}), migparted.Entry{Devices: migparted.Devices{Indices: []int{1}}}),
	}}
	data, err := migparted.Encode(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		to       string
		left     []string
		smoke    []string
		drainWhy string
	}{
		{"split-b", []string{"cpu", "ds", "keep"}, []string{"nvidia.com/mig-2g.20gb=3"}, "except those asking only for nvidia.com/mig-3g.40gb: MIG devices change on GPU 1 only"},
		{"split-c", []string{"cpu", "ds"}, []string{"nvidia.com/gpu=1", "nvidia.com/mig-3g.40gb=2"}, "every GPU pod of the node: the MIG mode of GPU 1 changes"},
	} {
		t.Run(tc.to, func(t *testing.T) {
			ns := newNamespace(t, c, "scope")
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mig-parted", Namespace: ns}, Data: map[string]string{MigConfigKey: string(data)}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			node := nextNode("scope")
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{LabelMIGConfig: "split-a", LabelMIGConfigState: MIGStateSuccess}}}
			if err := c.Create(ctx, n); err != nil {
				t.Fatal(err)
			}
			setAllocatable(n, cfgs["split-a"])
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if err := c.Status().Update(ctx, n); err != nil {
				t.Fatal(err)
			}
			pod := func(name string, ds bool, res ...string) {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
					Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
				if len(res) > 0 {
					p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{}
				}
				for _, r := range res {
					p.Spec.Containers[0].Resources.Limits[corev1.ResourceName(r)] = resource.MustParse("1")
				}
				if ds {
					p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "dcgm", UID: types.UID("ds-" + node)}}
				}
				if err := c.Create(ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			pod("keep", false, "nvidia.com/mig-3g.40gb")
			pod("small", false, "nvidia.com/mig-1g.10gb")
			pod("both", false, "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb")
			pod("cpu", false)
			pod("ds", true, "nvidia.com/mig-1g.10gb")
			startDouble(t, &nodeDouble{c: c, node: node, configs: cfgs})
			g := smokeGate(c, ns)
			g.MigConfigMap = client.ObjectKeyFromObject(cm)
			if err := g.Request(ctx, node, tc.to, cfgs[tc.to]); err != nil {
				t.Fatal(err)
			}
			if err := runGate(t, g, node); err != nil {
				t.Fatal(err)
			}
			checkSettled(t, c, node, "", tc.to)
			if got := podNames(t, c, node); !slices.Equal(got, tc.left) {
				t.Errorf("pods left %v, want %v", got, tc.left)
			}
			r := checkRecord(t, c, node, "split-a", tc.to)
			if m := r.Status.Steps[0].Message; !strings.Contains(m, tc.drainWhy) {
				t.Errorf("draining step says %q, want it to say %q", m, tc.drainWhy)
			}
			var jobs batchv1.JobList
			if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{LabelNode: node}); err != nil {
				t.Fatal(err)
			}
			var smoke []string
			for _, j := range jobs.Items {
				for r, q := range j.Spec.Template.Spec.Containers[0].Resources.Limits {
					smoke = append(smoke, fmt.Sprintf("%s=%d", r, q.Value()))
				}
			}
			slices.Sort(smoke)
			if !slices.Equal(smoke, tc.smoke) {
				t.Errorf("smoke Jobs ask for %v, want %v", smoke, tc.smoke)
			}
		})
	}
}

// TestPodMayRunOn checks the node selector and required node affinity the surge weighs.
func TestPodMayRunOn(t *testing.T) {
	node := func(name string, l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	pinned := func(op corev1.NodeSelectorOperator, vals ...string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{LabelPool: "a"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: op, Values: vals}}}}}}}}}
	}
	h := func(name, pool string) *corev1.Node {
		return node(name, map[string]string{"kubernetes.io/hostname": name, LabelPool: pool})
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		node *corev1.Node
		want bool
	}{
		{pinned(corev1.NodeSelectorOpIn, "n1", "n2"), h("n2", "a"), true},
		{pinned(corev1.NodeSelectorOpIn, "n1", "n2"), h("n3", "a"), false},
		{pinned(corev1.NodeSelectorOpIn, "n1", "n2"), h("n2", "b"), false},
		{pinned(corev1.NodeSelectorOpNotIn, "n1"), h("n2", "a"), true},
		{pinned(corev1.NodeSelectorOpDoesNotExist), h("n2", "a"), false},
		{pinned(corev1.NodeSelectorOpExists), h("n2", "a"), true},
		{&corev1.Pod{}, node("x", nil), true},
	} {
		if got := podMayRunOn(tc.pod, tc.node); got != tc.want {
			t.Errorf("pod %+v on node %v: %v, want %v", tc.pod.Spec.Affinity, tc.node.Labels, got, tc.want)
		}
	}
}
