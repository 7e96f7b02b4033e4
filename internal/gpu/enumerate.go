package gpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Enumerate returns every maximal layout built from the named profiles (every profile of the
// board when profiles is empty): legal layouts to which no further instance of those profiles
// can be added without breaking a rule. Each layout is sorted by start, and each appears once.
//
// Order: layouts compare instance by instance from slice 0, smaller instances first (compute
// slices, then memory slices, then name, then start), so on an 8-slice board the list runs
// 1-1-1-1-1-1-1, 1-1-1-1-2-1, 1-1-1-1-3, ... 4-3, 7 as in NVIDIA's and ParvaGPU's lists.
// Unknown names are reported together, as *ProfileError values joined.
func (b *Board) Enumerate(profiles []string) ([]Layout, error) {
	if !b.MIGCapable() || b.MemorySlices > maxSlices {
		return nil, fmt.Errorf("enumerate layouts on %s: the board has no usable MIG geometry", b.Name)
	}
	allowed, err := b.resolve(profiles)
	if err != nil {
		return nil, fmt.Errorf("enumerate layouts on %s: %w", b.Name, err)
	}
	e := &enumerator{b: b, allowed: allowed, st: b.stateOf(nil)}
	e.walk(0)
	slices.SortFunc(e.out, b.compareLayouts)
	return slices.CompactFunc(e.out, func(x, y Layout) bool { return slices.Equal(x, y) }), nil
}

// resolve turns profile names into the board's profiles, deduplicated, in catalog order; each
// unknown name is reported once.
func (b *Board) resolve(names []string) ([]*Profile, error) {
	if len(names) == 0 {
		out := make([]*Profile, len(b.Profiles))
		for i := range b.Profiles {
			out[i] = &b.Profiles[i]
		}
		return out, nil
	}
	var errs []error
	set := map[*Profile]bool{}
	bad := map[string]bool{} // a name given twice is reported once
	for _, n := range names {
		n = strings.TrimSpace(n)
		p, err := b.Profile(n)
		if err != nil {
			if !bad[n] {
				errs = append(errs, err)
			}
			bad[n] = true
			continue
		}
		set[p] = true
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var out []*Profile
	for i := range b.Profiles {
		if set[&b.Profiles[i]] {
			out = append(out, &b.Profiles[i])
		}
	}
	return out, nil
}

// enumerator walks the memory slices left to right: at each slice it either starts an allowed
// instance there or leaves the slice empty; complete walks that are maximal are kept.
type enumerator struct {
	b       *Board
	allowed []*Profile
	st      *state
	cur     Layout
	out     []Layout
}

func (e *enumerator) walk(pos int) {
	if pos >= e.b.MemorySlices {
		if e.maximal() {
			e.out = append(e.out, slices.Clone(e.cur))
		}
		return
	}
	for _, p := range e.allowed {
		if !slices.Contains(p.Starts, pos) || !e.st.canAdd(e.b, p, pos) {
			continue
		}
		e.st.add(p, pos)
		e.cur = append(e.cur, Instance{Profile: p.Name, Start: pos})
		e.walk(pos + p.MemorySlices)
		e.cur = e.cur[:len(e.cur)-1]
		e.st.remove(p, pos)
	}
	e.walk(pos + 1)
}

// maximal reports whether no allowed instance can be added to the current layout.
func (e *enumerator) maximal() bool {
	for _, p := range e.allowed {
		for _, s := range p.Starts {
			if e.st.canAdd(e.b, p, s) {
				return false
			}
		}
	}
	return true
}

// compareLayouts orders layouts instance by instance, smaller instances first.
func (b *Board) compareLayouts(x, y Layout) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if c := b.compareInstances(x[i], y[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(x), len(y))
}

func (b *Board) compareInstances(x, y Instance) int {
	px, py := b.profile(x.Profile), b.profile(y.Profile)
	if px == nil || py == nil {
		return cmp.Or(strings.Compare(x.Profile, y.Profile), cmp.Compare(x.Start, y.Start))
	}
	return cmp.Or(cmp.Compare(px.ComputeSlices, py.ComputeSlices), cmp.Compare(px.MemorySlices, py.MemorySlices),
		strings.Compare(px.Name, py.Name), cmp.Compare(x.Start, y.Start))
}
