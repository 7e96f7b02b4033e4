package main

import (
	"errors"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/render"
)

// renderArtifacts returns the artifacts written beside plan.yaml, and the problems the renderer
// reports when the plan asks for something the target tools cannot express exactly (the
// artifacts are complete then, and still written).
func renderArtifacts(pl *v1.Plan, pool *v1.Pool) ([]outFile, []string, error) {
	arts, err := render.Artifacts(pl, pool)
	var probs *render.ProblemsError
	if err != nil && !errors.As(err, &probs) {
		return nil, nil, err
	}
	var lines []string
	if probs != nil {
		for _, p := range probs.Problems {
			lines = append(lines, p.String())
		}
	}
	out := make([]outFile, len(arts))
	for i, a := range arts {
		out[i] = outFile{Path: a.Path, Data: a.Data}
	}
	return out, lines, nil
}
