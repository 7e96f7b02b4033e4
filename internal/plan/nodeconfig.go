package plan

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// StepNodeConfig is a node's device-plugin sharing setting for whole GPUs changing (a
// DevicePluginChange put into the migration by OrderDevicePluginChanges): relabel the node's
// nvidia.com/device-plugin.config. GPU names the node's first GPU the setting covers; From and
// To are the settings ("mps 8", "time-slicing 4", "none").
const StepNodeConfig = "node-config"

// NodeConfigSteps counts a migration's node-config steps (Moves counts them with the replica
// steps, as every step that is not a GPU step).
func NodeConfigSteps(steps []Step) int {
	n := 0
	for _, s := range steps {
		if s.Kind == StepNodeConfig {
			n++
		}
	}
	return n
}

// OrderDevicePluginChanges puts each node change of changes into steps (a migration as Migration
// orders it) as a node-config step in a wave of its own, and returns the steps, waves renumbered,
// and the changes with their Wave, Restarts and Reason set. What the device plugin does on such a
// change decides where (ADR 0062): the GPU Operator relabels the node, the plugin's config-manager
// sidecar links the new config and signals the plugin (SIGHUP), which stops its gRPC servers and
// registers again with kubelet, advertising the new number of replicas; under MPS sharing the
// MPS control daemon's sidecar does the same to it, and the daemon quits its
// nvidia-cuda-mps-control and starts a new one with the new per-client defaults (active thread
// percentage and pinned memory a GPU over the replicas).
//
//   - A setting that admits more (more references, same mode; a node that starts sharing) goes
//     just before the first replica step onto the node's shared GPUs: those need it.
//   - One that admits fewer (fewer references; a node that stops sharing) goes just after the
//     last step that takes a replica off the node's shared GPUs (a stop, a move or restart away,
//     a drain): kubelet keeps the allocations of running pods when fewer replicas are
//     advertised, but admits no new pod while more are allocated than advertised, and the old,
//     larger setting admits the steps before.
//   - One that changes mode goes after the departures that come before the first arrival and
//     before that arrival.
//
// With no such step the change goes last. When the node shares by MPS before and after, the
// daemon's restart reaches the replicas running on its MPS GPUs at that wave: quit stops the
// daemon taking new clients and waits for the running ones, and the defaults it is given apply to
// servers it starts later, so no replica on the node starts under the new setting, nor keeps
// running under it with the new limits, until the running clients have stopped. They restart
// (stop, start on the same slot) in the change's wave, in place; the restart is node-wide, so all
// of them are in that one wave, even above maxUnavailable (Reason says so). A time-slicing
// change restarts nobody: the plugin's restart does not touch running containers.
func OrderDevicePluginChanges(cur, next *v1.Plan, steps []Step, changes []DevicePluginChange, maxUnavailable int) ([]Step, []DevicePluginChange) {
	maxUnavailable = max(maxUnavailable, 1)
	out := slices.Clone(steps)
	done := slices.Clone(changes)
	before, after := nodeSettings(cur), nodeSettings(next)
	for i := range done {
		c := &done[i]
		from, to := before[c.Node], after[c.Node]
		was, now := sharedWhole(cur, c.Node), sharedWhole(next, c.Node)
		first, last := 0, 0 // the first arrival's wave and the last departure's (0: none)
		var departs []int   // departures' waves
		for _, s := range out {
			if s.LoRAEngine != "" {
				continue
			}
			if arrives(s, now) && (first == 0 || s.Wave < first) {
				first = s.Wave
			}
			if departsFrom(s, was) {
				departs = append(departs, s.Wave)
				last = max(last, s.Wave)
			}
		}
		end := 1
		for _, s := range out {
			end = max(end, s.Wave+1)
		}
		var w int
		var why string
		switch {
		case from.mode == to.mode && to.refs > from.refs || from.mode == "":
			w, why = first, fmt.Sprintf("before the first replica step onto the node's shared GPUs, which need the setting (%s admits more)", settingText(to))
		case from.mode == to.mode || to.mode == "":
			w, why = last+1, fmt.Sprintf("after the last step that takes a replica off the node's shared GPUs: %s admits fewer, and the device plugin admits no new pod while more are allocated than it advertises (kubelet keeps running pods' allocations)", settingText(to))
			if last == 0 {
				w = 0
			}
		default: // the mode changes
			w = first
			for _, d := range departs {
				if first == 0 || d < first {
					w = max(w, d+1)
				}
			}
			why = "after the steps that take replicas off the node's shared GPUs under the old mode, before the first onto them under the new"
		}
		if w == 0 {
			w, why = end, "last: no replica step onto or off the node's shared GPUs orders it"
		}
		for j := range out {
			if out[j].Wave >= w {
				out[j].Wave++
			}
		}
		for j := range done[:i] { // the changes already put in waves from w on move with them
			if done[j].Wave >= w {
				done[j].Wave++
			}
		}
		step := Step{Kind: StepNodeConfig, GPU: nodeGPU(next, cur, c.Node), From: c.From, To: c.To, Wave: w}
		var restarts []Step
		if from.mode == v1.ModeMPS && to.mode == v1.ModeMPS {
			restarts = mpsClientsAt(cur, out, c.Node, w)
			out, restarts = stopsForRestarts(out, restarts, w)
		}
		n := 0 // restarts, not the stops brought forward
		for _, r := range restarts {
			if r.Kind == StepRestart {
				n++
			}
		}
		c.Wave, c.Restarts = w, n
		c.Reason = why
		if len(restarts) > 0 {
			c.Reason += fmt.Sprintf("; the node's MPS control daemon restarts with it (its config-manager sidecar signals it), and its quit waits for the running MPS clients and takes no new ones, "+
				"while the new per-client defaults apply only to servers started after: the %d replica(s) running on the node's MPS GPUs then restart (stop, start on the same slot) in this wave", n)
			if k := len(restarts) - n; k > 0 {
				c.Reason += fmt.Sprintf(", and %d that stop later in the migration stop in this wave instead", k)
			}
			if len(restarts) > maxUnavailable {
				c.Reason += fmt.Sprintf(", more than maxUnavailable (%d), as the daemon's restart is node-wide and cannot be staggered", maxUnavailable)
			}
		} else if to.mode == v1.ModeTimeSlice || from.mode == v1.ModeTimeSlice && to.mode == "" {
			c.Reason += "; time-slicing has no daemon: the device plugin's restart leaves running containers as they are"
		}
		at := slices.IndexFunc(out, func(s Step) bool { return s.Wave > w })
		if at < 0 {
			at = len(out)
		}
		out = slices.Insert(out, at, append([]Step{step}, restarts...)...)
	}
	// Number the waves 1, 2, … again: a stop brought forward may have left its wave empty.
	renum := map[int]int{}
	for i := range out {
		if _, ok := renum[out[i].Wave]; !ok {
			renum[out[i].Wave] = len(renum) + 1
		}
		out[i].Wave = renum[out[i].Wave]
	}
	for i := range done {
		done[i].Wave = renum[done[i].Wave]
	}
	return out, done
}

// sharedWhole are the whole GPUs of node that pl shares by MPS or time-slicing, with replicas.
func sharedWhole(pl *v1.Plan, node string) map[v1.GPURef]bool {
	out := map[v1.GPURef]bool{}
	for _, g := range pl.GPUs {
		if g.Node == node && len(g.Replicas) > 0 && (g.Mode == v1.ModeMPS || g.Mode == v1.ModeTimeSlice) {
			out[g.Ref()] = true
		}
	}
	return out
}

// wholeSlot parses a step's From or To as a whole GPU's slot ("node/index"); ok is false for a
// MIG instance, a tensor-parallel group, "none" or an engine's description.
func wholeSlot(s string) (v1.GPURef, bool) {
	if strings.ContainsAny(s, " ,") {
		return v1.GPURef{}, false
	}
	g, err := v1.ParseGPURef(s)
	return g, err == nil
}

// arrives reports whether s starts a replica on one of gpus.
func arrives(s Step, gpus map[v1.GPURef]bool) bool {
	if s.Kind != StepStart && s.Kind != StepMove && s.Kind != StepRestart {
		return false
	}
	g, ok := wholeSlot(s.To)
	return ok && gpus[g]
}

// departsFrom reports whether s takes a replica off one of gpus: a stop, a move or restart away
// (not in place), or the GPU's drain.
func departsFrom(s Step, gpus map[v1.GPURef]bool) bool {
	switch s.Kind {
	case StepGPU:
		return s.Drain && gpus[s.GPU]
	case StepStop, StepMove, StepRestart:
		g, ok := wholeSlot(s.From)
		return ok && gpus[g] && s.From != s.To
	}
	return false
}

// nodeGPU is node's first shared whole GPU in next, else in cur, else its first GPU.
func nodeGPU(next, cur *v1.Plan, node string) v1.GPURef {
	for _, pl := range []*v1.Plan{next, cur} {
		var refs []v1.GPURef
		for g := range sharedWhole(pl, node) {
			refs = append(refs, g)
		}
		if len(refs) > 0 {
			return slices.MinFunc(refs, func(a, b v1.GPURef) int { return a.Index - b.Index })
		}
	}
	return v1.GPURef{Node: node}
}

// mpsClientsAt are the restarts (in place, in wave w) of the replicas that run on node's whole MPS
// GPUs when wave w starts: those of cur, less the ones steps before w take off (stops, moves and
// restarts away, drains), plus the ones they start there, in GPU and tenant order.
func mpsClientsAt(cur *v1.Plan, steps []Step, node string, w int) []Step {
	type key struct {
		gpu    v1.GPURef
		tenant string
	}
	run := map[key]int{}
	for _, g := range cur.GPUs {
		if g.Node == node && g.Mode == v1.ModeMPS {
			for _, r := range g.Replicas {
				run[key{g.Ref(), r.Tenant}]++
			}
		}
	}
	byWave := slices.Clone(steps)
	slices.SortStableFunc(byWave, func(a, b Step) int { return a.Wave - b.Wave })
	for _, s := range byWave {
		if s.Wave >= w || s.LoRAEngine != "" {
			continue
		}
		if s.Kind == StepGPU && s.Drain {
			for k := range run {
				if k.gpu == s.GPU {
					delete(run, k)
				}
			}
			continue
		}
		if s.Kind == StepStop || s.Kind == StepMove || s.Kind == StepRestart {
			if g, ok := wholeSlot(s.From); ok && g.Node == node && run[key{g, s.Tenant}] > 0 && s.From != s.To {
				run[key{g, s.Tenant}]--
			}
		}
		if s.Kind == StepStart || s.Kind == StepMove || s.Kind == StepRestart {
			if g, ok := wholeSlot(s.To); ok && g.Node == node && mpsIn(cur, g, steps) {
				run[key{g, s.Tenant}]++
			}
		}
	}
	var keys []key
	for k, n := range run {
		if n > 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.gpu.Index != b.gpu.Index {
			return a.gpu.Index - b.gpu.Index
		}
		return strings.Compare(a.tenant, b.tenant)
	})
	var out []Step
	for _, k := range keys {
		for range run[k] {
			out = append(out, Step{Wave: w, Kind: StepRestart, GPU: k.gpu, Tenant: k.tenant, From: k.gpu.String(), To: k.gpu.String(), inPlace: true})
		}
	}
	return out
}

// mpsIn reports whether g shares by MPS at the time of a step onto it: in cur, unless a GPU step
// of steps changes it, then as that step leaves it.
func mpsIn(cur *v1.Plan, g v1.GPURef, steps []Step) bool {
	for _, s := range steps {
		if s.Kind == StepGPU && s.GPU == g {
			return strings.HasPrefix(s.To, string(v1.ModeMPS))
		}
	}
	for _, x := range cur.GPUs {
		if x.Ref() == g {
			return x.Mode == v1.ModeMPS
		}
	}
	return false
}

// stopsForRestarts takes, for each restart of restarts whose replica a later step of steps stops
// (a stop from its slot, after wave w), that stop into wave w instead of the restart: the replica
// leaves when the daemon restarts rather than restart only to stop later. It returns steps without
// those stops, and restarts with them in place of their restarts.
func stopsForRestarts(steps, restarts []Step, w int) ([]Step, []Step) {
	out := slices.Clone(steps)
	var rs []Step
	for _, r := range restarts {
		i := slices.IndexFunc(out, func(s Step) bool {
			return s.Wave > w && s.Kind == StepStop && s.Tenant == r.Tenant && s.From == r.From && s.LoRAEngine == ""
		})
		if i < 0 {
			rs = append(rs, r)
			continue
		}
		st := out[i]
		st.Wave = w
		rs = append(rs, st)
		out = slices.Delete(out, i, i+1)
	}
	return out, rs
}

// NodeConfigRestarts is the device-plugin config changes re-planning from cur to next makes
// (DevicePluginChanges), ordered into the migration as the command orders them (Migration, then
// OrderDevicePluginChanges, at the pool's maxUnavailable), and the replicas their MPS control
// daemons' restarts restart in place (the sum of their Restarts): the one count re-planning
// weighs and the migration shows.
func NodeConfigRestarts(pool *v1.Pool, cur, next *v1.Plan) (int, []DevicePluginChange) {
	changes := DevicePluginChanges(pool, cur, next)
	if len(changes) == 0 {
		return 0, nil
	}
	mu := 1
	if pool != nil {
		mu = pool.Policy.MaxUnavailable.Resolve(next.Summary.GPUsTotal)
	}
	_, done := OrderDevicePluginChanges(cur, next, Migration(cur, next, mu), changes, mu)
	n := 0
	for _, c := range done {
		n += c.Restarts
	}
	return n, done
}

// restartsText names the nodes of changes whose MPS clients restart and how many, "" when none.
func restartsText(changes []DevicePluginChange) string {
	var parts []string
	for _, c := range changes {
		if c.Restarts > 0 {
			parts = append(parts, fmt.Sprintf("%d on %s (%s to %s)", c.Restarts, c.Node, c.From, c.To))
		}
	}
	return strings.Join(parts, ", ")
}
