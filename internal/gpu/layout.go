package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxSlices bounds the memory-slice lattice the placement code handles (one bit per slice).
const maxSlices = 64

// String renders the instance as "3g.40gb@4".
func (i Instance) String() string { return i.Profile + "@" + strconv.Itoa(i.Start) }

// String renders the layout as its instances separated by spaces, in the layout's order:
// "2g.20gb@0 1g.10gb@2 1g.10gb@3 3g.40gb@4". ParseLayout reads it back.
func (l Layout) String() string {
	parts := make([]string, len(l))
	for i, in := range l {
		parts[i] = in.String()
	}
	return strings.Join(parts, " ")
}

// ParseInstance parses "PROFILE@START", e.g. "3g.40gb@4". It checks the syntax only (a profile
// name without spaces, commas or '@', and a start in 0..63); Board.Validate checks the rest.
func ParseInstance(s string) (Instance, error) {
	name, start, ok := strings.Cut(strings.TrimSpace(s), "@")
	if !ok {
		return Instance{}, fmt.Errorf("parse instance %q: missing \"@start\" (want e.g. 3g.40gb@4)", s)
	}
	if name == "" || strings.ContainsAny(name, " \t\r\n,@") {
		return Instance{}, fmt.Errorf("parse instance %q: bad profile name %q", s, name)
	}
	n, err := strconv.Atoi(start)
	if err != nil || n < 0 || n >= maxSlices || strings.HasPrefix(start, "+") {
		return Instance{}, fmt.Errorf("parse instance %q: start %q is not a number in 0..%d", s, start, maxSlices-1)
	}
	return Instance{Profile: name, Start: n}, nil
}

// ParseLayout parses instances separated by spaces and/or commas, e.g. "2g.20gb@0 1g.10gb@2" or
// "2g.20gb@0,1g.10gb@2". An empty string is an empty layout. All syntax errors are joined.
func ParseLayout(s string) (Layout, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	l := Layout{}
	var errs []error
	for _, f := range fields {
		in, err := ParseInstance(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l = append(l, in)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return l, nil
}

// Sorted returns a copy of l ordered by start, then profile name.
func (l Layout) Sorted() Layout {
	out := slices.Clone(l)
	slices.SortFunc(out, func(a, b Instance) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), strings.Compare(a.Profile, b.Profile))
	})
	return out
}

// Counts returns the number of instances per profile name.
func (l Layout) Counts() map[string]int {
	m := make(map[string]int, len(l))
	for _, in := range l {
		m[in.Profile]++
	}
	return m
}

// span is the bit mask of the memory slices [start, start+memorySlices).
func span(start, memorySlices int) uint64 {
	if memorySlices >= maxSlices {
		return ^uint64(0)
	}
	return ((uint64(1) << memorySlices) - 1) << start
}

// occupancy returns the mask of memory slices the known instances of l use.
func (b *Board) occupancy(l Layout) uint64 {
	var occ uint64
	for _, in := range l {
		if p := b.profile(in.Profile); p != nil && in.Start >= 0 && in.Start+p.MemorySlices <= maxSlices {
			occ |= span(in.Start, p.MemorySlices)
		}
	}
	return occ
}

// FreeSlices returns the memory slices no instance of l uses, ascending. Instances of unknown
// profiles are ignored.
func (b *Board) FreeSlices(l Layout) []int {
	occ := b.occupancy(l)
	var free []int
	for s := 0; s < b.MemorySlices && s < maxSlices; s++ {
		if occ&(1<<s) == 0 {
			free = append(free, s)
		}
	}
	return free
}

// ComputeUsed returns the compute slices the known instances of l use.
func (b *Board) ComputeUsed(l Layout) int {
	n := 0
	for _, in := range l {
		if p := b.profile(in.Profile); p != nil {
			n += p.ComputeSlices
		}
	}
	return n
}

// FreeStarts returns the starts at which one more instance of profile could be added to l
// without breaking a rule: free memory slices, the profile's max count, the board's instance and
// compute limits, and at most one +me instance. l itself is assumed valid.
func (b *Board) FreeStarts(l Layout, profile string) ([]int, error) {
	p, err := b.Profile(profile)
	if err != nil {
		return nil, err
	}
	st := b.stateOf(l)
	var out []int
	for _, s := range p.Starts {
		if st.canAdd(b, p, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// CreationOrder returns l reordered for creation on a GPU: largest memory footprint first, then
// most compute, then lowest start. NVIDIA's MIG User Guide notes that creating small instances
// first can fail ("-cgi 19,19,14,9" on A100); creating in this order avoids that.
func (b *Board) CreationOrder(l Layout) Layout {
	out := slices.Clone(l)
	size := func(in Instance) (int, int) {
		if p := b.profile(in.Profile); p != nil {
			return p.MemorySlices, p.ComputeSlices
		}
		return 0, 0
	}
	slices.SortStableFunc(out, func(a, c Instance) int {
		am, ac := size(a)
		cm, cc := size(c)
		return cmp.Or(cmp.Compare(cm, am), cmp.Compare(cc, ac), cmp.Compare(a.Start, c.Start))
	})
	return out
}

// state is what the rules need to know about a partial layout.
type state struct {
	occ      uint64
	counts   map[string]int
	inst     int
	compute  int
	mediaExt int
}

func (b *Board) stateOf(l Layout) *state {
	st := &state{counts: map[string]int{}}
	for _, in := range l {
		if p := b.profile(in.Profile); p != nil {
			st.add(p, in.Start)
		}
	}
	return st
}

func (st *state) add(p *Profile, start int) {
	st.occ |= span(start, p.MemorySlices)
	st.counts[p.Name]++
	st.inst++
	st.compute += p.ComputeSlices
	if p.MediaExtension {
		st.mediaExt++
	}
}

func (st *state) remove(p *Profile, start int) {
	st.occ &^= span(start, p.MemorySlices)
	st.counts[p.Name]--
	st.inst--
	st.compute -= p.ComputeSlices
	if p.MediaExtension {
		st.mediaExt--
	}
}

// canAdd reports whether an instance of p at start can join the state under every rule.
func (st *state) canAdd(b *Board, p *Profile, start int) bool {
	if start < 0 || start+p.MemorySlices > b.MemorySlices || b.MemorySlices > maxSlices {
		return false
	}
	return st.occ&span(start, p.MemorySlices) == 0 &&
		st.counts[p.Name] < p.MaxCount &&
		st.inst < b.MaxInstances &&
		st.compute+p.ComputeSlices <= b.ComputeSlices &&
		(!p.MediaExtension || st.mediaExt == 0)
}

// Summary counts what Enumerate returned.
type Summary struct {
	// Layouts is the number of layouts.
	Layouts int `json:"count"`
	// DistinctMultisets is the number of different profile multisets among them: layouts that
	// differ only in where the same instances start count once.
	DistinctMultisets int `json:"distinctMultisets"`
	// FullCompute is the number of distinct multisets that use every compute slice of the board.
	FullCompute int `json:"fullCompute"`
	// FullComputeLayouts is the number of layouts that use every compute slice of the board.
	FullComputeLayouts int `json:"fullComputeLayouts"`
}

// Summarize counts layouts, distinct multisets, and those of both that use all compute slices.
// For the 1g (1 memory slice), 2g, 3g, 4g and 7g profiles of an 8-slice board it gives
// {19, 14, 11, 16}: NVIDIA's 19 combinations, 11 of whose multisets use all 7 compute slices.
func (b *Board) Summarize(layouts []Layout) Summary {
	seen := map[string]bool{}
	full := map[string]bool{}
	s := Summary{Layouts: len(layouts)}
	for _, l := range layouts {
		k := MultisetKey(l.Counts())
		seen[k] = true
		if b.ComputeUsed(l) == b.ComputeSlices {
			full[k] = true
			s.FullComputeLayouts++
		}
	}
	s.DistinctMultisets, s.FullCompute = len(seen), len(full)
	return s
}

// MultisetKey renders counts as "{1g.10gb: 2, 2g.20gb: 1}" with names sorted and zero counts
// left out: equal multisets give equal keys.
func MultisetKey(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for n, c := range counts {
		if c != 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ": " + strconv.Itoa(counts[n])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
