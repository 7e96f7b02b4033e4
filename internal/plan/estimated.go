package plan

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// estimatedFigure names a board's estimated compute figure (gpu.Board.Estimated) in words, with
// its value.
func estimatedFigure(b *gpu.Board, field string) string {
	switch field {
	case "sms":
		return fmt.Sprintf("SM count (%d)", b.SMs)
	case "bf16Tflops":
		return fmt.Sprintf("BF16 TFLOPS (%g)", b.BF16TFLOPS)
	case "fp8Tflops":
		return fmt.Sprintf("FP8 TFLOPS (%g)", b.FP8TFLOPS)
	}
	return field
}

// estimatedReasonMessage says which figures of board b are estimates; "" when none is.
func estimatedReasonMessage(b *gpu.Board) string {
	if len(b.Estimated) == 0 {
		return ""
	}
	figs := make([]string, len(b.Estimated))
	for i, f := range b.Estimated {
		figs[i] = estimatedFigure(b, f)
	}
	what := "the catalog's estimates, not NVIDIA table values"
	if len(figs) == 1 {
		what = "the catalog's estimate, not an NVIDIA table value"
	}
	return fmt.Sprintf("%s's %s: %s", b.Name, strings.Join(figs, " and "), what)
}

// markEstimated gives every tenant with a replica (or a shared LoRA engine) on a board whose
// compute figures are estimates (gpu.Board.Estimated) an EstimatedFigures reason naming the boards
// and figures, after its other reasons: the predictions of the plan rest on them. A tenant sized
// from a measured profile (MeasuredProfile) does not rest on them and is left alone, and so is a
// tenant with no placement. The reason is made afresh each time (a kept plan's old one is
// replaced), so the pass may run more than once on one plan; tenants on boards with table figures
// are not touched.
func markEstimated(pl *v1.Plan) {
	if pl == nil {
		return
	}
	boards := pl.TenantBoards()
	for i := range pl.Tenants {
		t := &pl.Tenants[i]
		if slices.ContainsFunc(t.Reasons, func(r v1.Reason) bool { return r.Code == v1.ReasonEstimatedFigures }) {
			t.Reasons = slices.DeleteFunc(t.Reasons, func(r v1.Reason) bool { return r.Code == v1.ReasonEstimatedFigures })
			if len(t.Reasons) == 0 {
				t.Reasons = nil
			}
		}
		if _, measured := t.Reason(v1.ReasonMeasuredProfile); measured {
			continue
		}
		var parts []string
		for _, n := range boards[t.Name] {
			b, err := gpu.Lookup(n)
			if err != nil {
				continue
			}
			if m := estimatedReasonMessage(b); m != "" {
				parts = append(parts, m)
			}
		}
		if len(parts) == 0 {
			continue
		}
		t.Reasons = append(t.Reasons, v1.NewReason(v1.ReasonEstimatedFigures,
			"predictions rest on %s; check them on hardware, or give the tenant a measured profile", strings.Join(parts, "; ")))
	}
}
