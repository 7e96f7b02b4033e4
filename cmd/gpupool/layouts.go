package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"gpupool.dev/gpupool/internal/gpu"
)

// layoutsOutput is the -o json|yaml document of `gpupool layouts`.
type layoutsOutput struct {
	Board    string   `json:"board"`
	Profiles []string `json:"profiles"` // the profiles layouts were built from
	// Layouts are the maximal layouts, each sorted by start slice.
	Layouts []gpu.Layout `json:"layouts"`
	// Count is the number of layouts.
	Count int `json:"count"`
	// DistinctMultisets counts different profile multisets (layouts that differ only in starts count once).
	DistinctMultisets int `json:"distinctMultisets"`
	// FullCompute counts the distinct multisets that use every compute slice of the board.
	FullCompute int `json:"fullCompute"`
	// FullComputeLayouts counts the layouts that use every compute slice.
	FullComputeLayouts int `json:"fullComputeLayouts"`
	// UnverifiedStarts names the profiles whose legal starts are inferred, not seen in driver output.
	UnverifiedStarts []string `json:"unverifiedStarts,omitempty"`
}

func newLayoutsCmd(e *env) *cobra.Command {
	var output *string
	var profiles []string
	cmd := &cobra.Command{
		Use:   "layouts BOARD",
		Short: "List every maximal MIG layout of a board",
		Long: "layouts enumerates the maximal MIG layouts of BOARD: legal sets of instances (profile@start)\n" +
			"to which no further instance of the chosen profiles fits. --profiles limits the profiles\n" +
			"(default: all of the board's). Table output draws each layout over the memory slices.\n\n" +
			"Structured output (-o json|yaml) has: board, profiles, layouts ([[{profile, start}]]),\n" +
			"count (layouts), distinctMultisets (different profile multisets among them), fullCompute\n" +
			"(multisets using every compute slice), fullComputeLayouts (layouts using every compute slice)\n" +
			"and unverifiedStarts (profiles whose starts are inferred).\n\n" +
			"With the 1g, 2g, 3g, 4g and 7g profiles an 8-slice board has 19 layouts, 14 multisets, 11 full.",
		Example: "  gpupool layouts H100 --profiles 1g.10gb,2g.20gb,3g.40gb,4g.40gb,7g.80gb\n  gpupool layouts A30 -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := parseOutput(*output)
			if err != nil {
				return err
			}
			b, err := gpu.Lookup(args[0])
			if err != nil {
				return invalid(err)
			}
			ls, err := b.Enumerate(profiles)
			if err != nil {
				return invalid(err)
			}
			doc := newLayoutsOutput(b, profiles, ls)
			if f != outTable {
				return writeStructured(e.stdout, f, doc)
			}
			return layoutsTable(e.stdout, b, doc)
		},
	}
	output = addOutputFlag(cmd)
	cmd.Flags().StringSliceVar(&profiles, "profiles", nil, "comma-separated profiles to build layouts from (default: all)")
	return cmd
}

func newLayoutsOutput(b *gpu.Board, profiles []string, ls []gpu.Layout) layoutsOutput {
	s := b.Summarize(ls)
	doc := layoutsOutput{Board: b.Name, Layouts: ls, Count: s.Layouts, DistinctMultisets: s.DistinctMultisets,
		FullCompute: s.FullCompute, FullComputeLayouts: s.FullComputeLayouts}
	if doc.Layouts == nil {
		doc.Layouts = []gpu.Layout{}
	}
	for _, p := range b.Profiles {
		if len(profiles) > 0 && !layoutsHasProfile(profiles, p.Name) {
			continue
		}
		doc.Profiles = append(doc.Profiles, p.Name)
		if p.IsUnverified("starts") {
			doc.UnverifiedStarts = append(doc.UnverifiedStarts, p.Name)
		}
	}
	return doc
}

func layoutsHasProfile(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), s) {
			return true
		}
	}
	return false
}

// layoutSlotWidth is the width of one memory slice in the table drawing.
const layoutSlotWidth = 5

func layoutsTable(w io.Writer, b *gpu.Board, doc layoutsOutput) error {
	fmt.Fprintf(w, "%s: maximal MIG layouts over %s\n\n", b.Name, strings.Join(doc.Profiles, ", "))
	var ruler strings.Builder
	for s := 0; s < b.MemorySlices; s++ {
		ruler.WriteString(fmt.Sprintf("%-*s", layoutSlotWidth, fmt.Sprintf("  %d", s)))
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "#\t%s\tINSTANCES\tCOMPUTE\n", strings.TrimRight(ruler.String(), " "))
	for i, l := range doc.Layouts {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\n", i+1, layoutsDraw(b, l), l, b.ComputeUsed(l), b.ComputeSlices)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d layouts, %d distinct multisets; %d multisets (%d layouts) use all %d compute slices\n",
		doc.Count, doc.DistinctMultisets, doc.FullCompute, doc.FullComputeLayouts, b.ComputeSlices)
	if len(doc.UnverifiedStarts) > 0 {
		fmt.Fprintf(w, "? starts of %s on %s are unverified: inferred from the 8-slice rule, no `nvidia-smi mig -lgipp` output seen\n",
			strings.Join(doc.UnverifiedStarts, ", "), b.Name)
	}
	return nil
}

// layoutsDraw draws the memory slices of one layout: "[2g.20gb ][1g ][1g ][3g.40gb           ]".
// An instance over k slices is k*layoutSlotWidth wide and shows its full profile name when it
// fits, else the "Ng" part (with "+" or "-" for variants); a free slice shows "  .  ".
func layoutsDraw(b *gpu.Board, l gpu.Layout) string {
	byStart := map[int]gpu.Instance{}
	for _, in := range l {
		byStart[in.Start] = in
	}
	var sb strings.Builder
	for s := 0; s < b.MemorySlices; {
		in, ok := byStart[s]
		p, err := b.Profile(in.Profile)
		if !ok || err != nil {
			sb.WriteString("  .  ")
			s++
			continue
		}
		inner := p.MemorySlices*layoutSlotWidth - 2
		label := p.Name
		if len(label) > inner {
			label, _, _ = strings.Cut(p.Name, ".")
			if rest := p.Name[len(label):]; strings.ContainsAny(rest, "+-") && len(label) < inner {
				label += string(rest[strings.IndexAny(rest, "+-")])
			}
		}
		sb.WriteString("[" + fmt.Sprintf("%-*s", inner, label) + "]")
		s += p.MemorySlices
	}
	return sb.String()
}
