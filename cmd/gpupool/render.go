package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/render"
)

func newRenderCmd(e *env) *cobra.Command {
	var poolFile, outDir string
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "render PLAN --pool POOL (--out DIR | --dry-run)",
		Short: "Write the artifacts of a plan: mig-parted, device-plugin, MPS, vLLM, Deployments, pool map",
		Long: "render reads a Plan and its Pool and writes what NVIDIA's and Kubernetes' tools consume:\n" +
			"the mig-parted config and node labels, a k8s-device-plugin config per node, MPS settings,\n" +
			"vLLM arguments per replica, one Deployment per tenant and slice kind, an SVG pool map and a\n" +
			"README saying how to apply them. --dry-run lists the files without writing. --out is replaced as a\n" +
			"whole and atomically (old content or all of the new, never a mix); a non-empty directory gpupool\n" +
			"did not write is refused unless --force.\n" +
			"Exit 1 when the plan is invalid; exit 2 when the plan asks for something the device plugin\n" +
			"cannot express (the files are still written and README.md lists the problems).",
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&poolFile, "pool", "", "the Pool the plan is for (required)")
	cmd.Flags().StringVar(&outDir, "out", "", "directory to write the artifacts into (created if missing)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list the artifacts without writing them")
	cmd.Flags().BoolVar(&force, "force", false, "replace a non-empty --out directory gpupool did not write")
	_ = cmd.MarkFlagRequired("pool")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if outDir == "" && !dryRun {
			return invalid(errors.New("flag --out: required unless --dry-run"))
		}
		pool, err := readPoolFlag(e.ctx, poolFile)
		if err != nil {
			return invalid(err)
		}
		plan, err := readPlan(e.ctx, args[0], "plan")
		if err != nil {
			return invalid(err)
		}
		arts, err := render.Artifacts(plan, pool)
		var pe *render.ProblemsError
		if err != nil && !errors.As(err, &pe) {
			return invalid(err)
		}
		if dryRun {
			if werr := listArtifacts(e.stdout, arts); werr != nil {
				return werr
			}
		} else if werr := writeArtifacts(e.ctx, outDir, arts, force); werr != nil {
			return werr
		} else if _, werr := fmt.Fprintf(e.stdout, "wrote %d files to %s\n", len(arts), outDir); werr != nil {
			return werr
		}
		if pe != nil {
			return partial(pe)
		}
		return nil
	}
	return cmd
}

func listArtifacts(w io.Writer, arts []render.Artifact) error {
	var b strings.Builder
	for _, a := range arts {
		fmt.Fprintf(&b, "%s\t%d bytes\n", a.Path, len(a.Data))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeArtifacts replaces dir with the artifacts (writeOutDir).
func writeArtifacts(ctx context.Context, dir string, arts []render.Artifact, force bool) error {
	files := make([]outFile, len(arts))
	for i, a := range arts {
		files[i] = outFile{Path: a.Path, Data: a.Data}
	}
	return writeOutDir(ctx, dir, files, force)
}
