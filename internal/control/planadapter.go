package control

// This file is the only one that speaks to internal/plan.

import (
	"errors"
	"io"
	"net/http"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/plan"
)

// maxPoolBody bounds a Pool document sent for a dry-run plan.
const maxPoolBody = 1 << 20

// hPlanDryRun plans a Pool document (YAML or JSON) without changing anything and returns the
// Plan: layouts, replicas on slices, reasons, lower bound and baselines.
func hPlanDryRun(_ *Server, w http.ResponseWriter, r *http.Request, _ Principal) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPoolBody))
	if err != nil {
		return err
	}
	pool, err := v1.DecodePool(raw)
	if err == nil {
		v1.Default(pool)
		err = v1.Validate(pool)
	}
	if err != nil {
		return poolProblems(err)
	}
	p, err := plan.Build(r.Context(), pool, plan.Options{}) // a client that goes away stops the planner
	if err != nil {
		return &InvalidError{Fields: []FieldError{{Path: "", Message: "plan pool: " + err.Error()}}}
	}
	return writeJSON(w, 200, p)
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
