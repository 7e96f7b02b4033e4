package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrNoPlacement matches (errors.Is) every *PlacementError.
var ErrNoPlacement = errors.New("no legal placement")

// PlacementError says that a multiset of profiles has no legal placement on a board, and where
// the search got stuck: after placing Placed, Profile needed Needed more starts but only
// FreeStarts were free.
type PlacementError struct {
	Board      string
	Request    string // the multiset, "{2g.20gb: 3, 1g.10gb: 2}", largest profile first
	Placed     Layout // the deepest partial placement the search reached
	Profile    string // the profile that could not be placed next
	Needed     int
	FreeStarts []int
	// Compute and BoardCompute are set when the request needs more compute slices than the board has.
	Compute, BoardCompute int
}

func (e *PlacementError) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s cannot be placed on %s: ", e.Request, e.Board)
	if len(e.Placed) == 0 {
		sb.WriteString("on an empty GPU ")
	} else {
		sb.WriteString("after " + groupInstances(e.Placed) + " ")
	}
	switch len(e.FreeStarts) {
	case 0:
		fmt.Fprintf(&sb, "no start is free for %s", e.Profile)
	case 1:
		fmt.Fprintf(&sb, "only start %d is free for %s", e.FreeStarts[0], e.Profile)
	default:
		fmt.Fprintf(&sb, "only starts %s are free for %s", joinInts(e.FreeStarts, ","), e.Profile)
	}
	fmt.Fprintf(&sb, " (%d needed)", e.Needed)
	if e.Compute > e.BoardCompute {
		fmt.Fprintf(&sb, "; the request needs %d compute slices, the board has %d", e.Compute, e.BoardCompute)
	}
	return sb.String()
}

// Is reports whether target is ErrNoPlacement.
func (e *PlacementError) Is(target error) bool { return target == ErrNoPlacement }

// groupInstances renders a partial layout as "2g.20gb@0,2,4 + 1g.10gb@6", one group per profile
// in order of first appearance.
func groupInstances(l Layout) string {
	var names []string
	starts := map[string][]int{}
	for _, in := range l {
		if _, ok := starts[in.Profile]; !ok {
			names = append(names, in.Profile)
		}
		starts[in.Profile] = append(starts[in.Profile], in.Start)
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "@" + joinInts(starts[n], ",")
	}
	return strings.Join(parts, " + ")
}

// group is one profile of a Place request and how many instances of it are wanted.
type group struct {
	p *Profile
	n int
}

// Place finds legal starts for a multiset of profiles ({"3g.40gb": 1, "1g.10gb": 2}) and returns
// the layout sorted by start, or an error: a joined list of request errors (unknown profile,
// negative count, over a profile's max count, over MaxInstances, more than one +me), or a
// *PlacementError that says where the search got stuck.
//
// The search is exhaustive: profiles are placed largest first, each over all of its legal starts.
// Among all legal layouts it returns the one that leaves the most room, compared shape by shape
// from the largest (how many more 7g, then 4g, 3g ... instances would still fit in the free
// slices); ties go to the lowest starts in largest-first order. The result is deterministic, and
// for {3g: 1, 2g: 1, 1g: 2} it is mig-parted's all-balanced layout 2g@0 1g@2 1g@3 3g@4.
// Profile names match case-insensitively; the layout uses the catalog's spelling.
func (b *Board) Place(counts map[string]int) (Layout, error) {
	groups, req, err := b.placeGroups(counts)
	if err != nil {
		return nil, err
	}
	s := &placer{b: b, groups: groups, st: b.stateOf(nil), shapes: b.shapes()}
	s.search(0, 0, 0)
	compute := 0
	for _, g := range groups {
		compute += g.n * g.p.ComputeSlices
	}
	if s.best == nil && s.fail.profile == "" {
		// Every group had room but the limits (compute) blocked the combination.
		return nil, fmt.Errorf("place %s on %s: %w: the request needs %d compute slices, the board has %d",
			req, b.Name, ErrNoPlacement, compute, b.ComputeSlices)
	}
	if s.best == nil {
		f := s.fail
		return nil, &PlacementError{Board: b.Name, Request: req, Placed: f.placed, Profile: f.profile,
			Needed: f.needed, FreeStarts: f.free, Compute: compute, BoardCompute: b.ComputeSlices}
	}
	if compute > b.ComputeSlices {
		return nil, fmt.Errorf("place %s on %s: the request needs %d compute slices, the board has %d",
			req, b.Name, compute, b.ComputeSlices)
	}
	return s.best.Sorted(), nil
}

// placeGroups checks a request and orders it largest first. req renders the request.
func (b *Board) placeGroups(counts map[string]int) ([]group, string, error) {
	if !b.MIGCapable() || b.MemorySlices > maxSlices {
		return nil, "", fmt.Errorf("place on %s: the board has no usable MIG geometry", b.Name)
	}
	byName := map[*Profile]int{}
	var errs []error
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		c := counts[n]
		p := b.profile(n)
		switch {
		case p == nil:
			errs = append(errs, &ProfileError{Board: b.Name, Profile: n, Valid: b.ProfileNames()})
		case c < 0:
			errs = append(errs, fmt.Errorf("count of %s is %d, must not be negative", n, c))
		default:
			byName[p] += c
		}
	}
	var groups []group
	total, mediaExt := 0, 0
	for p, n := range byName {
		if n == 0 {
			continue
		}
		groups = append(groups, group{p: p, n: n})
		total += n
		if p.MediaExtension {
			mediaExt += n
		}
	}
	slices.SortFunc(groups, func(x, y group) int {
		return cmp.Or(cmp.Compare(y.p.MemorySlices, x.p.MemorySlices), cmp.Compare(y.p.ComputeSlices, x.p.ComputeSlices),
			strings.Compare(x.p.Name, y.p.Name))
	})
	for _, g := range groups {
		if g.n > g.p.MaxCount {
			errs = append(errs, fmt.Errorf("%s: %d requested, at most %d per GPU on %s", g.p.Name, g.n, g.p.MaxCount, b.Name))
		}
	}
	if total > b.MaxInstances {
		errs = append(errs, fmt.Errorf("%d instances requested, at most %d per GPU on %s", total, b.MaxInstances, b.Name))
	}
	if mediaExt > 1 {
		errs = append(errs, fmt.Errorf("%d media-extension (+me) instances requested, at most 1 per GPU", mediaExt))
	}
	if len(errs) > 0 {
		return nil, "", fmt.Errorf("place %s on %s: %w", MultisetKey(counts), b.Name, errors.Join(errs...))
	}
	return groups, requestString(groups), nil
}

func requestString(groups []group) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = g.p.Name + ": " + strconv.Itoa(g.n)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// placer is the exhaustive search behind Place.
type placer struct {
	b         *Board
	groups    []group
	st        *state
	cur       Layout
	shapes    []*Profile // one profile per distinct shape, largest first: the room score
	best      Layout
	bestScore []int
	fail      failure
}

// failure is the deepest point where a group could not be placed.
type failure struct {
	depth   int // groups fully placed before it; -1 when unset
	placed  Layout
	profile string
	needed  int
	free    []int
}

// search places instance k of group g, at starts >= min (instances of one profile are placed
// in ascending start order, so each set of starts is tried once).
func (s *placer) search(g, k, min int) {
	if g == len(s.groups) {
		s.consider()
		return
	}
	gr := s.groups[g]
	if k == gr.n {
		s.search(g+1, 0, 0)
		return
	}
	if k == 0 && !s.enough(g) {
		return
	}
	for _, start := range gr.p.Starts {
		if start < min || !s.st.canAdd(s.b, gr.p, start) {
			continue
		}
		s.st.add(gr.p, start)
		s.cur = append(s.cur, Instance{Profile: gr.p.Name, Start: start})
		s.search(g, k+1, start+1)
		s.cur = s.cur[:len(s.cur)-1]
		s.st.remove(gr.p, start)
	}
}

// enough reports whether group g can still get all its instances; when not, it records the
// failure if it is the deepest so far.
func (s *placer) enough(g int) bool {
	gr := s.groups[g]
	var free []int
	for _, start := range gr.p.Starts {
		if start+gr.p.MemorySlices <= s.b.MemorySlices && s.st.occ&span(start, gr.p.MemorySlices) == 0 {
			free = append(free, start)
		}
	}
	if disjoint(free, gr.p.MemorySlices) >= gr.n {
		return true
	}
	if s.fail.profile == "" || g > s.fail.depth {
		s.fail = failure{depth: g, placed: slices.Clone(s.cur), profile: gr.p.Name, needed: gr.n, free: free}
	}
	return false
}

// consider keeps the current complete layout if it leaves more room than the best so far.
func (s *placer) consider() {
	score := s.room(s.st.occ)
	if s.best == nil || slices.Compare(score, s.bestScore) > 0 {
		s.best = append(Layout{}, s.cur...)
		s.bestScore = score
	}
}

// room scores free memory slices: for each shape, largest first, how many more instances of it
// would fit.
func (s *placer) room(occ uint64) []int {
	score := make([]int, len(s.shapes))
	for i, p := range s.shapes {
		var free []int
		for _, start := range p.Starts {
			if start+p.MemorySlices <= s.b.MemorySlices && occ&span(start, p.MemorySlices) == 0 {
				free = append(free, start)
			}
		}
		score[i] = disjoint(free, p.MemorySlices)
	}
	return score
}

// disjoint is the largest number of non-overlapping instances of width w at these ascending
// starts (greedy by earliest start is optimal for equal widths).
func disjoint(starts []int, w int) int {
	n, end := 0, -1
	for _, s := range starts {
		if s >= end {
			n++
			end = s + w
		}
	}
	return n
}

// shapes returns one profile per distinct (memory, compute, starts) shape, largest first.
func (b *Board) shapes() []*Profile {
	var out []*Profile
	for i := range b.Profiles {
		p := &b.Profiles[i]
		dup := slices.ContainsFunc(out, func(q *Profile) bool {
			return q.MemorySlices == p.MemorySlices && q.ComputeSlices == p.ComputeSlices && slices.Equal(q.Starts, p.Starts)
		})
		if !dup {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(x, y *Profile) int {
		return cmp.Or(cmp.Compare(y.MemorySlices, x.MemorySlices), cmp.Compare(y.ComputeSlices, x.ComputeSlices))
	})
	return out
}
