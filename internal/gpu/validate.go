package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Validate checks a layout on b against every MIG rule and returns all problems joined, one
// message each naming the board, the instance and what to change:
//
//   - the profile exists on the board;
//   - the start is one of the profile's legal starts;
//   - no two instances share a memory slice;
//   - each profile's instance count is within its max count;
//   - the instance count is within the board's MaxInstances;
//   - the compute slices add up to at most the board's ComputeSlices;
//   - at most one media-extension (+me) instance.
//
// Nil means the layout is legal. An empty layout is legal.
func (b *Board) Validate(l Layout) error {
	if !b.MIGCapable() {
		return fmt.Errorf("validate layout on %s: the board has no MIG profiles", b.Name)
	}
	if b.MemorySlices > maxSlices {
		return fmt.Errorf("validate layout on %s: %d memory slices, at most %d supported", b.Name, b.MemorySlices, maxSlices)
	}
	var errs []error
	owner := make([]int, b.MemorySlices) // index+1 of the instance holding each slice
	counts := map[string]int{}
	var mediaExt []string
	compute, known := 0, 0
	for i, in := range l {
		p := b.profile(in.Profile)
		if p == nil {
			errs = append(errs, fmt.Errorf("%s: %w", in, &ProfileError{Board: b.Name, Profile: in.Profile, Valid: b.ProfileNames()}))
			continue
		}
		if !slices.Contains(p.Starts, in.Start) || in.Start+p.MemorySlices > b.MemorySlices {
			errs = append(errs, fmt.Errorf("%s: %s: start %d is not legal for %s (legal starts: %s)",
				b.Name, in, in.Start, p.Name, joinInts(p.Starts, ", ")))
			continue
		}
		errs = append(errs, b.claim(owner, l, i, p)...)
		counts[p.Name]++
		known++
		compute += p.ComputeSlices
		if p.MediaExtension {
			mediaExt = append(mediaExt, in.String())
		}
	}
	for i := range b.Profiles {
		p := &b.Profiles[i]
		if n := counts[p.Name]; n > p.MaxCount {
			errs = append(errs, fmt.Errorf("%s: %d instances of %s, at most %d per GPU", b.Name, n, p.Name, p.MaxCount))
		}
	}
	if known > b.MaxInstances {
		errs = append(errs, fmt.Errorf("%s: %d instances, at most %d per GPU", b.Name, known, b.MaxInstances))
	}
	if compute > b.ComputeSlices {
		errs = append(errs, fmt.Errorf("%s: the instances use %d compute slices, the board has %d", b.Name, compute, b.ComputeSlices))
	}
	if len(mediaExt) > 1 {
		errs = append(errs, fmt.Errorf("%s: %d media-extension instances (%s), at most 1 per GPU",
			b.Name, len(mediaExt), strings.Join(mediaExt, ", ")))
	}
	return errors.Join(errs...)
}

// claim marks the memory slices of instance i as owned, and reports each earlier instance it
// overlaps once, with the shared slices.
func (b *Board) claim(owner []int, l Layout, i int, p *Profile) []error {
	in := l[i]
	shared := map[int][]int{} // earlier instance index -> slices
	var order []int
	for s := in.Start; s < in.Start+p.MemorySlices; s++ {
		if j := owner[s] - 1; j >= 0 {
			if _, ok := shared[j]; !ok {
				order = append(order, j)
			}
			shared[j] = append(shared[j], s)
			continue
		}
		owner[s] = i + 1
	}
	var errs []error
	for _, j := range order {
		word := "slice"
		if len(shared[j]) > 1 {
			word = "slices"
		}
		errs = append(errs, fmt.Errorf("%s: %s overlaps %s on memory %s %s; move one of them",
			b.Name, in, l[j], word, joinInts(shared[j], ", ")))
	}
	return errs
}

func joinInts(xs []int, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, sep)
}
