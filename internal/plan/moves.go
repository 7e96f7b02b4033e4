package plan

import (
	"slices"
	"strconv"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Kinds of migration step.
const (
	StepGPU   = "gpu"   // a GPU changes mode or MIG layout
	StepStart = "start" // a new replica starts (nothing stops)
	StepMove  = "move"  // a replica moves: start the new one, wait until it is ready, stop the old
	StepStop  = "stop"  // a replica stops (nothing replaces it)
	// StepRestart: a replica moves onto GPUs its old slot holds (a tensor-parallel group that
	// grows, shrinks or shifts on its node), so the two cannot run side by side: stop the old,
	// then start the new; the tenant is a replica short meanwhile.
	StepRestart = "restart"
)

// slot is where a replica runs: a GPU and, under MIG, its instance.
type slot struct {
	gpu  v1.GPURef
	inst v1.InstanceRef
	tp   string // a tensor-parallel group's GPU indices ("0,1"); gpu is its first
}

// gpuIndices are the GPUs of its node the slot holds: a tensor-parallel group's, else its GPU's.
func (s slot) gpuIndices() []int {
	if s.tp == "" {
		return []int{s.gpu.Index}
	}
	var out []int
	for _, f := range strings.Split(s.tp, ",") {
		if i, err := strconv.Atoi(f); err == nil {
			out = append(out, i)
		}
	}
	return out
}

// overlaps reports whether a replica on s and one on o would need a GPU at the same time, one of
// them being a tensor-parallel group (two slots on one whole GPU are the same slot; MIG
// instances of one GPU are told apart by the GPU's layout step).
func (s slot) overlaps(o slot) bool {
	if s.gpu.Node != o.gpu.Node || s.tp == "" && o.tp == "" {
		return false
	}
	for _, i := range s.gpuIndices() {
		if slices.Contains(o.gpuIndices(), i) {
			return true
		}
	}
	return false
}

func (s slot) String() string {
	if s.tp != "" {
		return s.gpu.Node + "/" + s.tp
	}
	if s.inst.Profile == "" {
		return s.gpu.String()
	}
	return s.gpu.String() + " " + s.inst.String()
}

// replicaSlots lists, per tenant, the slots of its replicas, one entry per replica, from the
// replicas listed under the plan's GPUs.
func replicaSlots(pl *v1.Plan) map[string][]slot {
	out := map[string][]slot{}
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			s := slot{gpu: g.Ref()}
			if tp := r.TensorParallel.GPUs; len(tp) > 0 {
				if tp[0] != g.Index {
					continue // one slot per tensor-parallel replica, at its group's first GPU
				}
				parts := make([]string, len(tp))
				for i, x := range tp {
					parts[i] = strconv.Itoa(x)
				}
				s.tp = strings.Join(parts, ",")
			}
			out[r.Tenant] = append(out[r.Tenant], s)
		}
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				out[r.Tenant] = append(out[r.Tenant], slot{gpu: g.Ref(), inst: in.Ref()})
			}
		}
	}
	return out
}

// replicaSteps compares where each tenant's replicas run in cur and next. Replicas are matched by
// slot, not by index (indices are renumbered when a plan is assembled): a slot in both plans is
// no step. A new slot that overlaps old slots of the tenant that go away (a tensor-parallel group
// that grows, shrinks or shifts on its node) takes the first of them as a restart (stop, then
// start) after the others stop (clearing stops); the tenant's other new slots are paired with
// its other old slots as moves (start the new, wait, stop the old), in order; what is left over
// starts or stops.
func replicaSteps(cur, next *v1.Plan) []Step {
	before, after := replicaSlots(cur), replicaSlots(next)
	var names []string
	for n := range after {
		names = append(names, n)
	}
	for n := range before {
		if _, ok := after[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []Step
	for _, n := range names {
		old, now := slices.Clone(before[n]), slices.Clone(after[n])
		for i := 0; i < len(now); {
			if j := slices.Index(old, now[i]); j >= 0 {
				old = slices.Delete(old, j, j+1)
				now = slices.Delete(now, i, i+1)
				continue
			}
			i++
		}
		var rest []slot
		for _, to := range now {
			var hit []int
			for j, from := range old {
				if from.overlaps(to) {
					hit = append(hit, j)
				}
			}
			if len(hit) == 0 {
				rest = append(rest, to)
				continue
			}
			for _, j := range hit[1:] {
				out = append(out, Step{Tenant: n, Kind: StepStop, GPU: old[j].gpu, From: old[j].String(), To: "none", clears: true})
			}
			out = append(out, Step{Tenant: n, Kind: StepRestart, GPU: to.gpu, From: old[hit[0]].String(), To: to.String()})
			for k := len(hit) - 1; k >= 0; k-- {
				old = slices.Delete(old, hit[k], hit[k]+1)
			}
		}
		now = rest
		for i := 0; i < max(len(old), len(now)); i++ {
			s := Step{Tenant: n}
			switch {
			case i < len(old) && i < len(now):
				s.Kind, s.GPU, s.From, s.To = StepMove, now[i].gpu, old[i].String(), now[i].String()
			case i < len(now):
				s.Kind, s.GPU, s.From, s.To = StepStart, now[i].gpu, "none", now[i].String()
			default:
				s.Kind, s.GPU, s.From, s.To = StepStop, old[i].gpu, old[i].String(), "none"
			}
			out = append(out, s)
		}
	}
	return out
}

// order numbers the waves of a migration: GPUs that run nothing now are reconfigured first
// (wave 1); then replicas start or move onto GPUs that are not drained, at most maxUnavailable
// per wave (a move starts the new replica and waits for it before stopping the old one, so the
// tenant keeps its capacity; a restart's clearing stops come in the waves before it); then busy
// GPUs are drained, at most maxUnavailable per wave; then replicas start or move onto the drained
// GPUs; stops come last.
func order(gpuSteps, repSteps []Step, maxUnavailable int) []Step {
	var idle, busy []Step
	drained := map[v1.GPURef]bool{}
	for _, s := range gpuSteps {
		if s.Drain {
			busy = append(busy, s)
			drained[s.GPU] = true
		} else {
			idle = append(idle, s)
		}
	}
	var early, late, stops, earlyClear, lateClear []Step
	for i, s := range repSteps {
		switch {
		case s.clears:
			// a stop that frees GPUs for the restart after it: in waves before the restart's
			if r := restartAfter(repSteps, i); r != nil && drained[r.GPU] {
				lateClear = append(lateClear, s)
			} else {
				earlyClear = append(earlyClear, s)
			}
		case s.Kind == StepStop:
			stops = append(stops, s)
		case drained[s.GPU]:
			late = append(late, s)
		default:
			early = append(early, s)
		}
	}
	wave := 0
	var out []Step
	put := func(ss []Step, per int) {
		for i := range ss {
			if i%per == 0 {
				wave++
			}
			ss[i].Wave = wave
			out = append(out, ss[i])
		}
	}
	put(idle, max(len(idle), 1))
	put(earlyClear, maxUnavailable)
	put(early, maxUnavailable)
	put(busy, maxUnavailable)
	put(lateClear, maxUnavailable)
	put(late, maxUnavailable)
	put(stops, maxUnavailable)
	return out
}

// restartAfter is the restart that the clearing stops from steps[i] on lead to.
func restartAfter(steps []Step, i int) *Step {
	for ; i < len(steps); i++ {
		if steps[i].Kind == StepRestart {
			return &steps[i]
		}
	}
	return nil
}
