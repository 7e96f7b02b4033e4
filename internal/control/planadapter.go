package control

// This file is the only one that speaks to internal/plan.

import (
	"errors"
	"io"
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
	p, err := planPool(w, r)
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
	p, err := planPool(w, r)
	if err != nil {
		return err
	}
	v, err := s.loop.Do(r.Context(), func(e *Engine, now time.Time) (any, error) { return e.ApplyPlan(now, p) })
	if err != nil {
		return err
	}
	return writeJSON(w, 200, PlanApplied{Plan: p, Gates: v.([]GateOp)})
}

func planPool(w http.ResponseWriter, r *http.Request) (*v1.Plan, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPoolBody))
	if err != nil {
		return nil, err
	}
	pool, err := v1.DecodePool(raw)
	if err == nil {
		v1.Default(pool)
		err = v1.Validate(pool)
	}
	if err != nil {
		return nil, poolProblems(err)
	}
	cur := r.Context().Value(viewKey{}).(*View).Plan
	if cur != nil && cur.Pool != pool.Metadata.Name {
		cur = nil // another pool: plan from scratch
	}
	p, err := plan.Build(r.Context(), pool, plan.Options{Current: cur}) // a client that goes away stops the planner
	if err != nil {
		return nil, &InvalidError{Fields: []FieldError{{Path: "", Message: "plan pool: " + err.Error()}}}
	}
	return p, nil
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
