package control

// This file is the only one that speaks to internal/plan.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// maxPoolBody bounds a Pool document sent for a dry-run plan or to apply.
const maxPoolBody = 1 << 20

// hPlanDryRun plans a Pool document (YAML or JSON) without changing anything and returns the
// Plan: layouts, replicas on slices, reasons, lower bound and baselines. It re-plans from the plan
// last applied (plan.Options.Current), as apply would.
func hPlanDryRun(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	p, _, err := planPool(w, r, s.cfg.Planning)
	if err != nil {
		return err
	}
	return writeJSON(w, 200, p)
}

// PlanApplied is the answer of POST /v1/plans/apply: the plan and the gate operations it asked.
type PlanApplied struct {
	Plan  *v1.Plan `json:"plan"`
	Gates []GateOp `json:"gates"`
}

// hPlanApply plans a Pool document from the plan last applied (incrementally) and hands the MIG
// layouts of its GPUs to the gate orchestration: one gate operation per GPU whose layout differs.
// The planner runs in the request's goroutine, not the engine's.
func hPlanApply(s *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	p, pool, err := planPool(w, r, s.cfg.Planning)
	if err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return e.ApplyPlan(now, pool, p) })
	if err != nil {
		return err
	}
	return writeJSON(w, 200, PlanApplied{Plan: p, Gates: v.([]GateOp)})
}

func planPool(w http.ResponseWriter, r *http.Request, pl Planning) (*v1.Plan, *v1.Pool, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPoolBody))
	if err != nil {
		return nil, nil, err
	}
	pool, err := v1.DecodePool(raw)
	if err == nil {
		v1.Default(pool)
		err = v1.Validate(pool)
	}
	if err != nil {
		return nil, nil, poolProblems(err)
	}
	cur := r.Context().Value(viewKey{}).(*View).Plan
	if cur != nil && cur.Pool != pool.Metadata.Name {
		cur = nil // another pool: plan from scratch
	}
	if err := adapterRanks(pool); err != nil {
		return nil, nil, err
	}
	p, err := pl.build(r.Context(), pool, cur) // a client that goes away stops the planner
	if err != nil {
		return nil, nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "plan pool: " + err.Error()}}}
	}
	return p, pool, nil
}

// Replanner plans the pool again, off the engine's goroutine, whenever the engine wants a re-plan
// (a tenant's demand rate or the fleet changed since the last plan was applied): the Pool document
// of the last plan with the fleet the agents report (nodes neither lost nor cordoned, GPUs in the
// order they report them) and each tenant's last demand rate as its traffic, from the plan in
// force (plan.Options.Current). At most one re-plan per Every; after a re-plan that failed (the
// planner's error, or the engine refused it: a GPU it changes is in another gate operation) the
// pause doubles with each failure in a row, up to MaxBackoff, so that a gate that takes minutes is
// not met by a plan (and its confirming simulations) every Every.
type Replanner struct {
	Loop       *Loop
	Every      time.Duration // default 2s
	MaxBackoff time.Duration // default 1 min
	Log        *slog.Logger
	// Planning is how the pool is planned (the zero value: by the queueing model alone).
	Planning Planning
}

// Run re-plans until ctx ends.
func (rp *Replanner) Run(ctx context.Context) {
	every := rp.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	most := rp.MaxBackoff
	if most <= 0 {
		most = time.Minute
	}
	backoff := every // the pause after the next failure
	for {
		changed := rp.Loop.Changed()
		v := rp.Loop.View()
		if v.Pool != nil && v.Replan.Wanted > v.Replan.Done {
			gen := v.Replan.Wanted
			pool, err := replanPool(v)
			var p *v1.Plan
			if err == nil {
				p, err = rp.Planning.build(ctx, pool, v.Plan)
			}
			if ctx.Err() != nil {
				return
			}
			if pool == nil {
				pool = v.Pool
			}
			applied, derr := rp.Loop.Do(ctx, func(e *Engine, now time.Time) (any, error) {
				return e.Replanned(now, gen, pool, p, err), nil
			})
			if derr != nil && ctx.Err() == nil {
				rp.Log.Warn("re-plan", "err", derr)
			}
			pause := every
			if ok, _ := applied.(bool); ok {
				backoff = every
			} else {
				pause, backoff = backoff, min(2*backoff, max(most, every))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// replanPool is the Pool to plan again: the last applied one with today's fleet and rates.
func replanPool(v *View) (*v1.Pool, error) {
	raw, err := json.Marshal(v.Pool)
	if err != nil {
		return nil, err
	}
	var pool v1.Pool
	if err := json.Unmarshal(raw, &pool); err != nil {
		return nil, err
	}
	pool.Fleet.Nodes = nil
	for _, n := range v.Nodes {
		if n.Lost || n.Cordoned || len(n.Inventory.GPUs) == 0 {
			continue
		}
		node := v1.Node{Name: n.Name}
		for _, g := range n.Inventory.GPUs {
			if k := len(node.GPUs); k > 0 && node.GPUs[k-1].Board == g.Board {
				node.GPUs[k-1].Count++
			} else {
				node.GPUs = append(node.GPUs, v1.GPUGroup{Board: g.Board, Count: 1})
			}
		}
		pool.Fleet.Nodes = append(pool.Fleet.Nodes, node)
	}
	rates := map[string]float64{}
	for _, t := range v.Tenants {
		if t.Rate > 0 {
			rates[t.Name] = t.Rate
		}
	}
	for i := range pool.Tenants {
		if r, ok := rates[pool.Tenants[i].Name]; ok {
			pool.Tenants[i].Traffic.RPS = r
		}
	}
	v1.Default(&pool)
	if err := v1.Validate(&pool); err != nil {
		return nil, fmt.Errorf("the pool with the reported fleet: %w", err)
	}
	return &pool, nil
}

// Planning is how the control plane plans a pool, as `gpupool plan` does: Simulate confirms the
// plan's replica counts by simulation (plan.Options.Simulate; `gpupool serve` passes the
// project's simulator), SimulateLoRA its shared LoRA engines' (plan.Options.SimulateLoRA), and
// ConfirmRequests bounds each run (plan.Options.ConfirmRequests: 0 the default, -1 none). The
// zero value plans by the queueing model alone.
type Planning struct {
	Simulate        plan.Simulator
	SimulateLoRA    plan.LoRASimulator
	ConfirmRequests int
}

// build plans pool from the plan in force cur: adapter tenants that may share a base-model
// engine go on shared LoRA engines (plan.BuildWithLoRA), the others get replicas.
func (pl Planning) build(ctx context.Context, pool *v1.Pool, cur *v1.Plan) (*v1.Plan, error) {
	p, _, err := plan.BuildWithLoRA(ctx, pool, pl.Options(cur), nil)
	return p, err
}

// Options are the planner's options for planning from the plan in force cur (nil: from scratch).
func (pl Planning) Options(cur *v1.Plan) plan.Options {
	return plan.Options{Current: cur, Simulate: pl.Simulate, SimulateLoRA: pl.SimulateLoRA, ConfirmRequests: pl.ConfirmRequests}
}

// adapterRanks refuses an adapter given by its PEFT folder without its rank: the control plane
// plans Pool documents sent to it and reads no folders named in them, so the rank must be given.
func adapterRanks(pool *v1.Pool) error {
	inv := &InvalidError{}
	for i, t := range pool.Tenants {
		if a := t.Model.Adapter; a != nil && a.Dir != "" && a.Rank == 0 {
			inv.add(fmt.Sprintf("tenants[%d].model.adapter.rank", i), "is required here: the control plane does not read the adapter folder %s", a.Dir)
		}
	}
	return inv.err()
}

// poolProblems turns api/v1's field errors into a problem's field list.
func poolProblems(err error) error {
	var fes v1.FieldErrors
	if errors.As(err, &fes) {
		inv := &InvalidError{}
		for _, fe := range fes {
			inv.Fields = append(inv.Fields, FieldError{Path: fe.Path, Message: fe.Msg})
		}
		return inv
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return err
	}
	return &InvalidError{Fields: []FieldError{{Path: "", Message: err.Error()}}}
}
