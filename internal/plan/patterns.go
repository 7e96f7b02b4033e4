package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// patterns are a board's maximal MIG layouts over the profiles the planner uses, as count
// vectors: a[p][i] instances of profiles[i] in pattern p. Any legal layout of those profiles is
// a sub-multiset of one of them, so covering demand with patterns is exactly MIG packing.
type patterns struct {
	board    *gpu.Board
	profiles []*gpu.Profile
	a        [][]int
	weight   []float64 // max(memory slices/8, compute slices/7) of each profile
	mem      []float64 // memory slices / board's
	comp     []float64 // compute slices / board's
}

func (ps *patterns) index(name string) int {
	for i, p := range ps.profiles {
		if p.Name == name {
			return i
		}
	}
	return -1
}

func (ps *patterns) describe(bin []int) string {
	var parts []string
	for i, n := range bin {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d×%s", n, ps.profiles[i].Name))
		}
	}
	return strings.Join(parts, " + ")
}

// patternCache holds each board's patterns and the layouts gpu.Place gave per multiset.
type patternCache struct {
	byBoard map[string]*patterns
	placed  map[string]gpu.Layout
}

func newPatternCache() *patternCache {
	return &patternCache{byBoard: map[string]*patterns{}, placed: map[string]gpu.Layout{}}
}

// patternCache is a new patternCache whose patterns are the run's (planner.packPats): made once
// per board and read only after, for the packings and the spreading of redundant replicas.
func (p *planner) patternCache() *patternCache {
	if p.packPats == nil {
		p.packPats = map[string]*patterns{}
	}
	pc := newPatternCache()
	pc.byBoard = p.packPats
	return pc
}

func (pc *patternCache) get(b *gpu.Board) (*patterns, error) {
	if ps, ok := pc.byBoard[b.Name]; ok {
		return ps, nil
	}
	profs := migProfiles(b)
	names := make([]string, len(profs))
	for i, p := range profs {
		names[i] = p.Name
	}
	layouts, err := b.Enumerate(names)
	if err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	ps := &patterns{board: b, profiles: profs}
	for _, p := range profs {
		m := float64(p.MemorySlices) / float64(b.MemorySlices)
		c := float64(p.ComputeSlices) / float64(b.ComputeSlices)
		ps.mem, ps.comp, ps.weight = append(ps.mem, m), append(ps.comp, c), append(ps.weight, max(m, c))
	}
	seen := map[string]bool{}
	for _, l := range layouts {
		v := make([]int, len(profs))
		for _, in := range l {
			v[ps.index(in.Profile)]++
		}
		if k := fmt.Sprint(v); !seen[k] {
			seen[k] = true
			ps.a = append(ps.a, v)
		}
	}
	pc.byBoard[b.Name] = ps
	return ps, nil
}

// place lays out the multiset bin on b with gpu.Place, which picks legal starts.
func (pc *patternCache) place(b *gpu.Board, ps *patterns, bin []int) (gpu.Layout, error) {
	key := b.Name + fmt.Sprint(bin)
	if l, ok := pc.placed[key]; ok {
		return l, nil
	}
	counts := map[string]int{}
	for i, n := range bin {
		if n > 0 {
			counts[ps.profiles[i].Name] = n
		}
	}
	l, err := b.Place(counts)
	if err != nil {
		return nil, err
	}
	pc.placed[key] = l
	return l, nil
}

// volumeBound is a lower bound on the GPUs dem needs: its memory slices and compute slices each
// fit at most one board's worth per GPU.
func volumeBound(ps *patterns, dem []int) int {
	var m, c float64
	for i, n := range dem {
		m += float64(n) * ps.mem[i]
		c += float64(n) * ps.comp[i]
	}
	return int(math.Ceil(max(m, c) - 1e-9))
}

// greedyPack covers dem with patterns, one GPU at a time: each GPU takes the pattern that covers
// the most remaining weight (ties: the least weight wasted, then the earlier pattern).
func greedyPack(ps *patterns, dem []int) [][]int {
	rem := slices.Clone(dem)
	var bins [][]int
	for sum(rem) > 0 {
		bestI, bestW, bestWaste := -1, 0.0, 0.0
		for pi, a := range ps.a {
			w, waste := 0.0, 0.0
			for i, n := range a {
				k := min(n, rem[i])
				w += float64(k) * ps.weight[i]
				waste += float64(n-k) * ps.weight[i]
			}
			if w > bestW+1e-12 || (w > bestW-1e-12 && bestI >= 0 && waste < bestWaste-1e-12) {
				bestI, bestW, bestWaste = pi, w, waste
			}
		}
		if bestI < 0 {
			break // a profile no pattern holds; cannot happen for the board's own profiles
		}
		bin := make([]int, len(rem))
		for i, n := range ps.a[bestI] {
			bin[i] = min(n, rem[i])
			rem[i] -= bin[i]
		}
		bins = append(bins, bin)
	}
	return bins
}

// exactPack searches for a cover of dem with at most limit GPUs by branch and bound: the next
// GPU must hold the largest remaining profile (symmetry breaking), each branch takes
// min(pattern, remaining) for a distinct pattern, and a branch is cut when its GPUs plus the
// volume bound of what remains exceed the best found. It gives up after nodes nodes.
func exactPack(ps *patterns, dem []int, limit, nodes int) ([][]int, bool) {
	s := &bnb{ps: ps, best: limit + 1, budget: nodes}
	s.search(slices.Clone(dem), nil)
	if s.found == nil {
		return nil, false
	}
	return s.found, true
}

type bnb struct {
	ps     *patterns
	best   int
	found  [][]int
	budget int
}

func (s *bnb) search(rem []int, cur [][]int) {
	if s.budget <= 0 {
		return
	}
	s.budget--
	if sum(rem) == 0 {
		if len(cur) < s.best {
			s.best, s.found = len(cur), slices.Clone(cur)
		}
		return
	}
	if len(cur)+volumeBound(s.ps, rem) >= s.best {
		return
	}
	first := -1 // the largest remaining profile
	for i := range rem {
		if rem[i] > 0 && (first < 0 || s.ps.weight[i] > s.ps.weight[first]) {
			first = i
		}
	}
	for _, bin := range s.branches(rem, first) {
		for i := range rem {
			rem[i] -= bin[i]
		}
		s.search(rem, append(cur, bin))
		for i := range rem {
			rem[i] += bin[i]
		}
	}
}

// branches are the distinct takes min(pattern, rem) of the patterns that hold profile first,
// the heaviest first so that good covers are found early.
func (s *bnb) branches(rem []int, first int) [][]int {
	seen := map[string]bool{}
	var out [][]int
	var ws []float64
	for _, a := range s.ps.a {
		if a[first] == 0 {
			continue
		}
		bin := make([]int, len(rem))
		w := 0.0
		for i, n := range a {
			bin[i] = min(n, rem[i])
			w += float64(bin[i]) * s.ps.weight[i]
		}
		k := fmt.Sprint(bin)
		if seen[k] {
			continue
		}
		seen[k] = true
		out, ws = append(out, bin), append(ws, w)
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		switch {
		case ws[x] > ws[y]:
			return -1
		case ws[x] < ws[y]:
			return 1
		}
		return 0
	})
	sorted := make([][]int, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}
