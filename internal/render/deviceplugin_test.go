package render

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

const h100 = "H100-SXM5-80GB" // 81559 MiB; 3g.40gb is 40448 MiB

func ts(n int) v1.Limits { return v1.Limits{TimeSliceReplicas: n} }

func mps(pct int, mem v1.Bytes) v1.Limits { return v1.Limits{SMPercent: pct, Memory: mem} }

var dpTenants = []tenantSpec{{"a", "org/x", v1.IsolationShared}, {"b", "org/x", v1.IsolationShared},
	{"c", "org/y", v1.IsolationSoft}, {"d", "org/y", v1.IsolationSoft}, {"e", "org/z", v1.IsolationSoft}, {"f", "org/z", v1.IsolationSoft}}

// dpCases are the device-plugin cases; problems are substrings, one per problem, in order.
var dpCases = []struct {
	name string
	edit func(p *v1.Plan)
	ts   []ReplicatedResource // want sharing.timeSlicing.resources on n0
	mps  []ReplicatedResource // want sharing.mps.resources on n0
	// problems are substrings, one per problem, in order.
	problems []string
	// resources a tenant's pods ask for.
	resources map[string]string
	// invalid, when set, is a substring of the plan validation's error that Artifacts returns
	// before rendering anything.
	invalid string
}{
	{name: "exclusive and MIG share nothing",
		edit: func(p *v1.Plan) {
			whole(p, "n0", 0, v1.ModeExclusive, rep("a", v1.Limits{}))
			mig(p, "n0", 1, inst("3g.40gb", 0, "", rep("b", v1.Limits{})))
		},
		resources: map[string]string{"a": "nvidia.com/gpu", "b": "nvidia.com/mig-3g.40gb"}},
	{name: "time-sliced GPUs: references are the replicas' timeSliceReplicas, at least 1 each",
		edit: func(p *v1.Plan) {
			// GPU 0: 1 + 1 + 1 = 3; GPU 1: 2 + 1 = 3, so one setting fits both.
			whole(p, "n0", 0, v1.ModeTimeSlice, rep("a", ts(0)), rep("a", ts(1)), rep("b", ts(1)))
			whole(p, "n0", 1, v1.ModeTimeSlice, rep("a", ts(2)), rep("b", ts(0)))
		},
		ts:        []ReplicatedResource{{"nvidia.com/gpu", 3}},
		resources: map[string]string{"a": "nvidia.com/gpu.shared", "b": "nvidia.com/gpu.shared"}},
	{name: "time-sliced MIG instances beside an exclusive GPU",
		edit: func(p *v1.Plan) {
			whole(p, "n0", 0, v1.ModeExclusive, rep("c", v1.Limits{}))
			mig(p, "n0", 1, inst("1g.10gb", 0, v1.SharingTimeSlice, rep("a", ts(1)), rep("b", ts(1))),
				inst("1g.10gb", 1, v1.SharingTimeSlice, rep("a", ts(1)), rep("b", ts(1))))
		},
		ts:        []ReplicatedResource{{"nvidia.com/mig-1g.10gb", 2}},
		resources: map[string]string{"a": "nvidia.com/mig-1g.10gb.shared", "c": "nvidia.com/gpu"}},
	// The plugin runs no MPS on MIG devices: the instances are handed out as time-slicing
	// references, and each MPS-shared instance is a problem naming its plan field.
	{name: "MIG + MPS: references by time-slicing, no MPS on this path",
		edit: func(p *v1.Plan) {
			mig(p, "n0", 0, inst("3g.40gb", 0, v1.SharingMPS, rep("c", mps(60, 20*v1.GiB)), rep("d", mps(40, 18*v1.GiB))),
				inst("3g.40gb", 4, v1.SharingMPS, rep("c", mps(50, 19*v1.GiB)), rep("d", mps(50, 19*v1.GiB))))
		},
		ts:        []ReplicatedResource{{"nvidia.com/mig-3g.40gb", 2}},
		resources: map[string]string{"c": "nvidia.com/mig-3g.40gb.shared"},
		problems: []string{"node n0: nvidia.com/mig-3g.40gb: gpus[0].instances[0].sharing: GPU 0 instance 3g.40gb@0 is shared by MPS among 2 replicas, but the device plugin runs no MPS on MIG devices",
			"node n0: nvidia.com/mig-3g.40gb: gpus[0].instances[1].sharing: GPU 0 instance 3g.40gb@4 is shared by MPS"}},
	{name: "whole-GPU MPS within the equal share",
		edit: func(p *v1.Plan) {
			// 81559 MiB / 2 = 40779 MiB and 100 / 2 = 50% per client; 30Gi = 30720 MiB fits.
			whole(p, "n0", 0, v1.ModeMPS, rep("c", mps(50, 30*v1.GiB)), rep("d", mps(40, 30*v1.GiB)))
		},
		mps:       []ReplicatedResource{{"nvidia.com/gpu", 2}},
		resources: map[string]string{"c": "nvidia.com/gpu.shared"}},
	{name: "whole-GPU MPS above the equal share",
		edit: func(p *v1.Plan) {
			// 70% > 100 / 2 = 50%.
			whole(p, "n0", 0, v1.ModeMPS, rep("c", mps(70, 30*v1.GiB)), rep("d", mps(30, 30*v1.GiB)))
		},
		// Plan validation refuses it on the device-plugin path (a client's own limits can only
		// lower the plugin's equal share), so nothing is rendered.
		invalid: "gpus[0].replicas[0].limits: 70% SMs and 30Gi memory, more than the device plugin's equal share of 2 replicas (50%, 40779Mi)"},
	{name: "whole-GPU MPS halves beside three replicas on the node",
		edit: func(p *v1.Plan) {
			// The node's one setting is 3 references a GPU (the most any of its MPS GPUs holds):
			// the halves on GPU 0 are above 100 / 3 = 33%.
			whole(p, "n0", 0, v1.ModeMPS, rep("c", mps(50, 30*v1.GiB)), rep("d", mps(50, 30*v1.GiB)))
			whole(p, "n0", 1, v1.ModeMPS, rep("e", mps(33, 20*v1.GiB)), rep("f", mps(33, 20*v1.GiB)), rep("e", mps(33, 20*v1.GiB)))
		},
		invalid: "more than the device plugin's equal share of 3 replicas (node n0's setting: another whole-GPU MPS GPU there holds 3) (33%, 27186Mi)"},
	{name: "time-slicing and MPS on one node",
		edit: func(p *v1.Plan) {
			whole(p, "n0", 0, v1.ModeMPS, rep("c", mps(50, 30*v1.GiB)), rep("d", mps(50, 30*v1.GiB)))
			mig(p, "n0", 1, inst("1g.10gb", 0, v1.SharingTimeSlice, rep("a", ts(1)), rep("b", ts(1))))
		},
		// The MIG GPU makes the node mixed, where the plugin refuses MPS: whole-GPU MPS is dropped
		// (a problem) and the MIG instances keep their time-slicing.
		ts:       []ReplicatedResource{{"nvidia.com/mig-1g.10gb", 2}},
		problems: []string{"node n0: nvidia.com/gpu: the plan MPS-shares whole GPUs on a node with MIG GPUs"}},
	{name: "time-slicing and MPS on one node without MIG",
		edit: func(p *v1.Plan) {
			whole(p, "n0", 0, v1.ModeMPS, rep("c", mps(50, 30*v1.GiB)), rep("d", mps(50, 30*v1.GiB)))
			whole(p, "n0", 1, v1.ModeTimeSlice, rep("a", ts(1)), rep("b", ts(1)))
		},
		problems: []string{"node n0: nvidia.com/gpu: the plan wants 2 references per device by mps (n0/0) and 2 references per device by time-slicing (n0/1)"}},
	{name: "exclusive and time-sliced GPUs on one node",
		edit: func(p *v1.Plan) {
			whole(p, "n0", 0, v1.ModeExclusive, rep("c", v1.Limits{}))
			whole(p, "n0", 1, v1.ModeTimeSlice, rep("a", ts(1)), rep("b", ts(1)))
		},
		problems: []string{"node n0: nvidia.com/gpu: the plan wants one pod per device (n0/0) and 2 references per device by time-slicing (n0/1)"}},
	// Two time-slice counts for one resource: one setting of 3 references serves both (n0/0's
	// replicas take 2 of its 3, the third stays free), so there is no problem.
	{name: "two time-slice counts for one resource",
		edit: func(p *v1.Plan) {
			whole(p, "n0", 0, v1.ModeTimeSlice, rep("a", ts(1)), rep("b", ts(1)))
			whole(p, "n0", 1, v1.ModeTimeSlice, rep("a", ts(1)), rep("b", ts(1)), rep("a", ts(1)))
		},
		ts: []ReplicatedResource{{"nvidia.com/gpu", 3}}},
	{name: "MPS-shared instances of two trust groups",
		edit: func(p *v1.Plan) {
			mig(p, "n0", 0, inst("3g.40gb", 0, v1.SharingMPS, rep("c", mps(50, 19*v1.GiB)), rep("d", mps(50, 19*v1.GiB))),
				inst("3g.40gb", 4, v1.SharingMPS, rep("e", mps(50, 19*v1.GiB)), rep("f", mps(50, 19*v1.GiB))))
		},
		ts: []ReplicatedResource{{"nvidia.com/mig-3g.40gb", 2}},
		problems: []string{"gpus[0].instances[0].sharing: GPU 0 instance 3g.40gb@0 is shared by MPS", "gpus[0].instances[1].sharing: GPU 0 instance 3g.40gb@4 is shared by MPS",
			"node n0: nvidia.com/mig-3g.40gb: the plan shares 2 devices among different tenants (c,d | e,f)"}},
}

// TestDevicePluginConfigs checks each node's sharing section against the k8s-device-plugin
// README's schema, the problems reported, and the resource every pod asks for.
func TestDevicePluginConfigs(t *testing.T) {
	for _, tc := range dpCases {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t, h100, []int{2, 1}, dpTenants...)
			plan := newPlan(pool, h100)
			tc.edit(plan)
			finish(plan, pool)
			arts, err := Artifacts(plan, pool)
			if tc.invalid != "" {
				if err == nil || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("Artifacts: %v, want a validation error containing %q", err, tc.invalid)
				}
				return
			}
			var pe *ProblemsError
			if err != nil && !errors.As(err, &pe) {
				t.Fatalf("Artifacts: %v", err)
			}
			got := problemStrings(err)
			if len(got) != len(tc.problems) {
				t.Fatalf("problems = %q, want %d", got, len(tc.problems))
			}
			for i, want := range tc.problems {
				if !strings.Contains(got[i], want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], want)
				}
			}
			files := artifactMap(arts)
			c := decodeDP(t, files["device-plugin/n0.yaml"])
			// mixed where n0 has a MIG GPU (instances are advertised by profile), none elsewhere
			// (the plugin runs MPS only with none).
			wantStrat := MigStrategyNone
			for _, g := range plan.GPUs {
				if g.Node == "n0" && g.Mode == v1.ModeMIG {
					wantStrat = MigStrategyMixed
				}
			}
			if c.Version != "v1" || c.Flags.MigStrategy != wantStrat {
				t.Errorf("header = %+v, want migStrategy %s", c, wantStrat)
			}
			var gotTS, gotMPS []ReplicatedResource
			if c.Sharing != nil && c.Sharing.TimeSlicing != nil {
				r := c.Sharing.TimeSlicing
				if !r.RenameByDefault || !r.FailRequestsGreaterThanOne {
					t.Errorf("time-slicing must set renameByDefault and failRequestsGreaterThanOne: %+v", r)
				}
				gotTS = r.Resources
			}
			if c.Sharing != nil && c.Sharing.MPS != nil {
				if !c.Sharing.MPS.RenameByDefault {
					t.Error("mps must set renameByDefault")
				}
				gotMPS = c.Sharing.MPS.Resources
			}
			if !slices.Equal(gotTS, tc.ts) || !slices.Equal(gotMPS, tc.mps) {
				t.Errorf("timeSlicing = %v, mps = %v; want %v, %v", gotTS, gotMPS, tc.ts, tc.mps)
			}
			if d := decodeDP(t, files["device-plugin/n1.yaml"]); d.Sharing != nil {
				t.Errorf("the idle node n1 shares %+v", d.Sharing)
			}
			for tenant, res := range tc.resources {
				for _, d := range decodeDeployments(t, files["k8s/"+tenant+".yaml"]) {
					lim := d.Spec.Template.Spec.Containers[0].Resources.Limits
					if q, ok := lim[corev1ResourceName(res)]; !ok || q.Value() != 1 || len(lim) != 1 {
						t.Errorf("tenant %s: limits %v, want %s: 1", tenant, lim, res)
					}
				}
			}
		})
	}
}

// TestIdleDeviceShared: the time-slicing of nvidia.com/gpu on n0 also covers its idle GPU 1, and
// README.md says so.
func TestIdleDeviceShared(t *testing.T) {
	pool := newPool(t, h100, []int{2}, dpTenants...)
	plan := newPlan(pool, h100)
	whole(plan, "n0", 0, v1.ModeTimeSlice, rep("a", ts(1)), rep("b", ts(1)))
	finish(plan, pool)
	arts, err := Artifacts(plan, pool)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(artifactMap(arts)["README.md"])
	if !strings.Contains(readme, "node n0: nvidia.com/gpu is shared with 2 references per device by time-slicing, so devices without replicas (n0/1)") {
		t.Errorf("README.md lacks the note:\n%s", readme)
	}
}
