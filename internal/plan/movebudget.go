package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// countMoves counts the replicas a migration moves (moves and restarts).
func countMoves(steps []Step) int {
	n := 0
	for _, s := range steps {
		if s.Kind == StepMove || s.Kind == StepRestart {
			n++
		}
	}
	return n
}

// limitMoves applies Options.MaxMoves to the re-packed plan next: within the budget it stands.
// Above it the planner re-packs part of the pool (partialRepack: the components of the change
// that save the most GPUs within the budget, those with a tenant the plan in force does not serve
// included) or, when that saves nothing, keeps the plan in force if it still serves the pool;
// every tenant gets a MoveBudget reason saying what was given up. Otherwise it is an error, never
// a plan that moves more replicas than allowed.
func (p *planner) limitMoves(next *v1.Plan) (*v1.Plan, error) {
	limit := *p.o.MaxMoves
	moves := countMoves(replicaSteps(p.o.Current, next))
	if moves <= limit {
		return next, nil
	}
	kept, keepErr := p.keepCurrent(next)
	part, made, partErr := p.partialRepack(next, limit)
	if partErr == nil && countMoves(replicaSteps(p.o.Current, part)) > limit {
		partErr = fmt.Errorf("it would move %d replicas", countMoves(replicaSteps(p.o.Current, part)))
	}
	if partErr == nil && (keepErr != nil || part.Summary.GPUsUsed < kept.Summary.GPUsUsed) {
		gpus, _ := p.inForce()
		inForce := usedGPUs(gpus)
		r := v1.NewReason(v1.ReasonMoveBudget, "partly re-packed within max-moves %d: %d of the re-pack's %d replica moves, those that free the most GPUs; the pool runs on %d GPUs (re-packed: %d, plan in force: %d)",
			limit, made, moves, part.Summary.GPUsUsed, next.Summary.GPUsUsed, inForce)
		for i := range part.Tenants {
			part.Tenants[i].Reasons = append(slices.Clone(part.Tenants[i].Reasons), r)
		}
		return part, nil
	}
	if keepErr != nil {
		return nil, fmt.Errorf("build plan: re-packing moves %d replicas, more than max-moves %d, and the plan in force cannot be kept: %w",
			moves, limit, keepErr)
	}
	r := v1.NewReason(v1.ReasonMoveBudget, "the plan in force is kept: re-packing would run the pool on %d GPUs instead of %d (%d fewer) but move %d replicas, more than max-moves %d",
		next.Summary.GPUsUsed, kept.Summary.GPUsUsed, kept.Summary.GPUsUsed-next.Summary.GPUsUsed, moves, limit)
	for i := range kept.Tenants {
		kept.Tenants[i].Reasons = append(kept.Tenants[i].Reasons, r)
	}
	return kept, nil
}

// slotUse is one replica of the plan in force as keepCurrent weighs it: its board, slice kind,
// MIG profile, neighbours on its GPU or instance (share) and tensor-parallel degree.
type slotUse struct {
	board, kind, profile string
	share, tp            int
}

// inForce is the plan in force for the pool as it is now: its GPUs with the replicas of tenants
// no longer in the pool removed (a GPU left with none is idle), and each remaining tenant's
// replicas as slot uses.
func (p *planner) inForce() ([]v1.PlanGPU, map[string][]slotUse) {
	inPool := map[string]bool{}
	for _, tn := range p.tenants {
		inPool[tn.t.Name] = true
	}
	gone := func(r v1.PlanReplica) bool { return !inPool[r.Tenant] }
	var gpus []v1.PlanGPU
	uses := map[string][]slotUse{}
	for _, g := range p.o.Current.GPUs {
		g.LoRAEngine = "" // shared LoRA engines are placed apart (PlaceLoRAEngines), back here when idle
		g.Replicas = slices.DeleteFunc(slices.Clone(g.Replicas), gone)
		for _, r := range g.Replicas {
			if tp := r.TensorParallel.GPUs; len(tp) > 0 && tp[0] != g.Index {
				continue
			}
			uses[r.Tenant] = append(uses[r.Tenant], slotUse{g.Board, string(v1.SliceOf(g.Mode, "")), "", len(g.Replicas), max(r.TensorParallel.Size, 1)})
		}
		g.Instances = slices.Clone(g.Instances)
		for i := range g.Instances {
			in := &g.Instances[i]
			in.Replicas = slices.DeleteFunc(slices.Clone(in.Replicas), gone)
			for _, r := range in.Replicas {
				uses[r.Tenant] = append(uses[r.Tenant], slotUse{g.Board, string(v1.SliceOf(v1.ModeMIG, in.Sharing.Mode)), in.Profile, len(in.Replicas), 1})
			}
		}
		if g.Role == v1.RolePool && g.ReplicaCount() == 0 {
			g.Role = v1.RoleIdle
		}
		gpus = append(gpus, g)
	}
	return gpus, uses
}

// servedInForce says why the plan in force does not serve tn as next does, or nil: it must run
// at least next's replica count on the slice kind next chose (same board, kind, MIG profile and
// tensor-parallel group size), all its replicas there, with no more replicas per GPU or instance
// than next's share, so each has no more neighbours than the sizing assumed.
func servedInForce(tn *tenant, uses []slotUse, next *v1.Plan) error {
	c := tn.choice
	if c == nil {
		return nil
	}
	var have []slotUse
	for _, u := range uses {
		if u.board == c.board.Name && u.kind == string(c.kind) && u.profile == profName(c.profile) && u.tp == max(c.tp, 1) && u.share <= c.share {
			have = append(have, u)
		}
	}
	if want := planned(next, tn.t.Name); len(have) < want || len(have) < len(uses) {
		return fmt.Errorf("tenant %s runs %d replicas there, %d of them on %s of %s with at most %d per slice; the pool now needs %d",
			tn.t.Name, len(uses), len(have), c.label(), c.board.Name, c.share, want)
	}
	return nil
}

// keepCurrent is the plan in force for the pool as it is now: replicas of tenants no longer in
// the pool stop (their GPUs become idle when nothing else runs there), everything else stays.
// It serves the pool only when every tenant the re-packed plan next serves is served in force
// (servedInForce), and the result must pass v1.ValidatePlan against the pool (caps, fixed counts,
// policy, the new lower bound). The error says which tenant or rule fails.
func (p *planner) keepCurrent(next *v1.Plan) (*v1.Plan, error) {
	cur := p.o.Current
	gpus, uses := p.inForce()
	kept := &v1.Plan{APIVersion: next.APIVersion, Kind: next.Kind, Metadata: next.Metadata, Pool: next.Pool, GPUs: gpus}
	var errs []error
	for _, tn := range p.tenants {
		if err := servedInForce(tn, uses[tn.t.Name], next); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	inPool := map[string]bool{}
	for _, tn := range p.tenants {
		inPool[tn.t.Name] = true
	}
	for _, t := range cur.Tenants {
		if inPool[t.Name] {
			kept.Tenants = append(kept.Tenants, t)
		}
	}
	kept.Summary = v1.Summary{GPUsUsed: usedGPUs(kept.GPUs), GPUsTotal: len(kept.GPUs), LowerBound: next.Summary.LowerBound,
		Baselines: next.Summary.Baselines, Objective: cur.Summary.Objective}
	if err := v1.ValidatePlan(kept, p.pool); err != nil {
		return nil, fmt.Errorf("it is not valid for the pool: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return kept, nil
}

// usedGPUs counts the GPUs that run a replica.
func usedGPUs(gpus []v1.PlanGPU) int {
	n := 0
	for _, g := range gpus {
		if g.ReplicaCount() > 0 {
			n++
		}
	}
	return n
}

// planned is how many replicas next gives tenant name.
func planned(next *v1.Plan, name string) int {
	for _, t := range next.Tenants {
		if t.Name == name {
			return len(t.Replicas)
		}
	}
	return 0
}
