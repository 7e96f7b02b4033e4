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
)

// slot is where a replica runs: a GPU and, under MIG, its instance.
type slot struct {
	gpu  v1.GPURef
	inst v1.InstanceRef
	tp   string // a tensor-parallel group's GPU indices ("0,1"); gpu is its first
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
// no step; the tenant's other new slots are paired with its other old slots as moves, in order,
// and what is left over starts or stops.
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
// tenant keeps its capacity); then busy GPUs are drained, at most maxUnavailable per wave; then
// replicas start or move onto the drained GPUs; stops come last.
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
	var early, late, stops []Step
	for _, s := range repSteps {
		switch {
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
	put(early, maxUnavailable)
	put(busy, maxUnavailable)
	put(late, maxUnavailable)
	put(stops, maxUnavailable)
	return out
}
