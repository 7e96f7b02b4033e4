package plan

import (
	"fmt"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
)

// DevicePluginChange is a node whose device-plugin sharing setting for whole GPUs differs
// between the plan in force and the new plan: the references per GPU of its one MPS or
// time-slicing setting (what the rendered device-plugin config sets). The config is the node's,
// not a GPU's: it changes with no GPU reconfigured, when replicas start or stop on a shared GPU.
type DevicePluginChange struct {
	// Node is the node whose config changes.
	Node string `json:"node"`
	// From and To are the setting before and after: "mps 8", "time-slicing 4", or "none"
	// (whole GPUs unshared or idle).
	From string `json:"from"`
	To   string `json:"to"`
	// Running counts the replicas on the node's shared whole GPUs that run before and after:
	// they keep the limits they started with (an MPS client its own SM and memory limits) until
	// they restart.
	Running int `json:"running"`
	// Wave is the migration's wave its node-config step is in (OrderDevicePluginChanges); 0
	// when it was not ordered.
	Wave int `json:"wave,omitempty"`
	// Restarts counts the replicas restarted in place in that wave because the node's MPS
	// control daemon restarts with the change.
	Restarts int `json:"restarts,omitempty"`
	// Reason says why the change is in its wave, and why its restarts.
	Reason string `json:"reason,omitempty"`
}

// DevicePluginChanges lists the nodes of next whose device-plugin sharing setting for whole GPUs
// (nodeSetting) differs from cur's, in fleet order; none on the DRA path, which has no such
// setting.
func DevicePluginChanges(pool *v1.Pool, cur, next *v1.Plan) []DevicePluginChange {
	if pool != nil && pool.Policy.DeviceAPI() == v1.DeviceAPIDRA {
		return nil
	}
	before, after := nodeSettings(cur), nodeSettings(next)
	var out []DevicePluginChange
	seen := map[string]bool{}
	for _, g := range slices.Concat(next.GPUs, cur.GPUs) {
		if seen[g.Node] {
			continue
		}
		seen[g.Node] = true
		if before[g.Node] != after[g.Node] {
			out = append(out, DevicePluginChange{Node: g.Node, From: settingText(before[g.Node]), To: settingText(after[g.Node]), Running: runningShared(cur, next, g.Node)})
		}
	}
	return out
}

// nodeSetting is a node's one device-plugin sharing setting for whole GPUs: MPS or time-slicing
// and the references a GPU (the most any of its shared GPUs takes: an MPS GPU one a replica, a
// time-sliced GPU its replicas' timeSliceReplicas, at least 1 each).
type nodeSetting struct {
	mode v1.Mode
	refs int
}

func nodeSettings(pl *v1.Plan) map[string]nodeSetting {
	out := map[string]nodeSetting{}
	for _, g := range pl.GPUs {
		if len(g.Replicas) == 0 || g.Mode != v1.ModeMPS && g.Mode != v1.ModeTimeSlice {
			continue
		}
		n := len(g.Replicas)
		if g.Mode == v1.ModeTimeSlice {
			n = 0
			for _, r := range g.Replicas {
				n += max(1, r.Limits.TimeSliceReplicas)
			}
		}
		s := out[g.Node]
		if s.mode == "" || s.mode == g.Mode {
			out[g.Node] = nodeSetting{g.Mode, max(s.refs, n)}
		}
	}
	return out
}

func settingText(s nodeSetting) string {
	switch s.mode {
	case v1.ModeMPS:
		return fmt.Sprintf("mps %d", s.refs)
	case v1.ModeTimeSlice:
		return fmt.Sprintf("time-slicing %d", s.refs)
	}
	return "none"
}

// runningShared counts the replicas on node's shared whole GPUs in next that run there in cur
// too (per GPU and tenant, the fewer of the two counts).
func runningShared(cur, next *v1.Plan, node string) int {
	was := map[string]int{}
	for _, g := range cur.GPUs {
		if g.Node == node && (g.Mode == v1.ModeMPS || g.Mode == v1.ModeTimeSlice) {
			for _, r := range g.Replicas {
				was[g.Ref().String()+" "+r.Tenant]++
			}
		}
	}
	n := 0
	for _, g := range next.GPUs {
		if g.Node != node || g.Mode != v1.ModeMPS && g.Mode != v1.ModeTimeSlice {
			continue
		}
		for _, r := range g.Replicas {
			if k := g.Ref().String() + " " + r.Tenant; was[k] > 0 && cur != nil {
				was[k]--
				n++
			}
		}
	}
	return n
}
