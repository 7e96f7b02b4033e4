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

// maxPoolBody bounds a Pool document sent for a dry-run plan.
const maxPoolBody = 1 << 20

// hPlanDryRun plans a Pool document (YAML or JSON) without changing anything and returns the
// Plan: layouts, replicas on slices, reasons, lower bound and baselines. It re-plans from the plan
// last applied (plan.Options.Current), as apply would.
func hPlanDryRun(_ *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	p, _, err := planPool(w, r)
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
	p, pool, err := planPool(w, r)
	if err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return e.ApplyPlan(now, pool, p) })
	if err != nil {
		return err
	}
	return writeJSON(w, 200, PlanApplied{Plan: p, Gates: v.([]GateOp)})
}

func planPool(w http.ResponseWriter, r *http.Request) (*v1.Plan, *v1.Pool, error) {
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
	p, err := buildPlan(r.Context(), pool, cur) // a client that goes away stops the planner
	if err != nil {
		return nil, nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "plan pool: " + err.Error()}}}
	}
	return p, pool, nil
}

// Replanner plans the pool again, off the engine's goroutine, whenever the engine wants a re-plan
// (a tenant's demand rate or the fleet changed since the last plan was applied): the Pool document
// of the last plan with the fleet the agents report (nodes neither lost nor cordoned, GPUs in the
// order they report them) and each tenant's last demand rate as its traffic, from the plan in
// force (plan.Options.Current). At most one re-plan per Every.
type Replanner struct {
	Loop  *Loop
	Every time.Duration // default 2s
	Log   *slog.Logger
}

// Run re-plans until ctx ends.
func (rp *Replanner) Run(ctx context.Context) {
	every := rp.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		changed := rp.Loop.Changed()
		v := rp.Loop.View()
		if v.Pool != nil && v.Replan.Wanted > v.Replan.Done {
			gen := v.Replan.Wanted
			pool, err := replanPool(v)
			var p *v1.Plan
			if err == nil {
				p, err = buildPlan(ctx, pool, v.Plan)
			}
			if ctx.Err() != nil {
				return
			}
			if pool == nil {
				pool = v.Pool
			}
			if _, derr := rp.Loop.Do(ctx, func(e *Engine, now time.Time) (any, error) {
				return nil, e.Replanned(now, gen, pool, p, err)
			}); derr != nil && ctx.Err() == nil {
				rp.Log.Warn("re-plan", "err", derr)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
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

// buildPlan plans pool from the plan in force cur: adapter tenants that may share a base-model
// engine go on shared LoRA engines (plan.BuildWithLoRA), the others get replicas.
func buildPlan(ctx context.Context, pool *v1.Pool, cur *v1.Plan) (*v1.Plan, error) {
	p, _, err := plan.BuildWithLoRA(ctx, pool, plan.Options{Current: cur}, nil)
	return p, err
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
