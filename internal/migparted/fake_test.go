package migparted

import (
	"fmt"
	"sort"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// fakeCatalog is a small board catalog with the MIG placement rules of NVIDIA's MIG User Guide
// (8 memory slices: 1g {0..6}, 1g with 2 memory slices {0,2,4,6}, 2g {0,2,4}, 3g {0,4},
// 4g {0}, 7g {0}; 4 memory slices on A30: 1g {0..3}, 2g {0,2}, 4g {0}), so that validation can
// be tested independently of the real catalog.
type fakeCatalog struct{ list []*gpu.Board }

func prof(name string, compute, mem, maxCount int, starts ...int) gpu.Profile {
	return gpu.Profile{Name: name, ComputeSlices: compute, MemorySlices: mem, MaxCount: maxCount,
		Starts: starts, MediaExtension: strings.HasSuffix(name, "+me")}
}

func newFakeCatalog() *fakeCatalog {
	a100 := &gpu.Board{Name: "A100-SXM4-40GB", PCIDeviceIDs: []string{"0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"},
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7, Profiles: []gpu.Profile{
			prof("1g.5gb", 1, 1, 7, 0, 1, 2, 3, 4, 5, 6),
			prof("1g.5gb+me", 1, 1, 1, 0, 1, 2, 3, 4, 5, 6),
			prof("1g.10gb", 1, 2, 4, 0, 2, 4, 6),
			prof("2g.10gb", 2, 2, 3, 0, 2, 4),
			prof("3g.20gb", 3, 4, 2, 0, 4),
			prof("4g.20gb", 4, 4, 1, 0),
			prof("7g.40gb", 7, 8, 1, 0),
		}}
	h100 := &gpu.Board{Name: "H100-SXM5-80GB", PCIDeviceIDs: []string{"0x233010DE", "0x232210DE"},
		MemorySlices: 8, ComputeSlices: 7, MaxInstances: 7, Profiles: []gpu.Profile{
			prof("1g.10gb", 1, 1, 7, 0, 1, 2, 3, 4, 5, 6),
			prof("1g.10gb+me", 1, 1, 1, 0, 1, 2, 3, 4, 5, 6),
			prof("1g.20gb", 1, 2, 4, 0, 2, 4, 6),
			prof("2g.20gb", 2, 2, 3, 0, 2, 4),
			prof("3g.40gb", 3, 4, 2, 0, 4),
			prof("4g.40gb", 4, 4, 1, 0),
			prof("7g.80gb", 7, 8, 1, 0),
		}}
	a30 := &gpu.Board{Name: "A30-24GB", PCIDeviceIDs: []string{"0x20B710DE"},
		MemorySlices: 4, ComputeSlices: 4, MaxInstances: 4, Profiles: []gpu.Profile{
			prof("1g.6gb", 1, 1, 4, 0, 1, 2, 3),
			prof("2g.12gb", 2, 2, 2, 0, 2),
			prof("4g.24gb", 4, 4, 1, 0),
		}}
	l40s := &gpu.Board{Name: "L40S", PCIDeviceIDs: []string{"0x26B910DE"}}
	c := &fakeCatalog{list: []*gpu.Board{a100, a30, h100, l40s}} // sorted by name
	return c
}

func (c *fakeCatalog) board(name string) *gpu.Board {
	for _, b := range c.list {
		if b.Name == name {
			return b
		}
	}
	panic("no fake board " + name)
}

func (c *fakeCatalog) boards() []*gpu.Board { return c.list }

func (c *fakeCatalog) byPCIDeviceID(id string) []*gpu.Board {
	var out []*gpu.Board
	for _, b := range c.list {
		if hasPCIID(b, id) {
			out = append(out, b)
		}
	}
	return out
}

func (c *fakeCatalog) profile(b *gpu.Board, name string) (*gpu.Profile, error) {
	var valid []string
	for i := range b.Profiles {
		if b.Profiles[i].Name == name {
			return &b.Profiles[i], nil
		}
		valid = append(valid, b.Profiles[i].Name)
	}
	return nil, fmt.Errorf("profile %q does not exist on %s (valid: %s)", name, b.Name, strings.Join(valid, ", "))
}

// place searches starts by backtracking, largest instances first, and checks memory-slice
// overlap, the compute-slice total and MaxCount.
func (c *fakeCatalog) place(b *gpu.Board, counts map[string]int) (gpu.Layout, error) {
	var queue []*gpu.Profile
	compute := 0
	for _, name := range sortedKeys(counts) {
		p, err := c.profile(b, name)
		if err != nil {
			return nil, err
		}
		if counts[name] > p.MaxCount {
			return nil, fmt.Errorf("%d x %s exceeds its maximum of %d on %s", counts[name], name, p.MaxCount, b.Name)
		}
		for range counts[name] {
			queue = append(queue, p)
		}
		compute += counts[name] * p.ComputeSlices
	}
	if compute > b.ComputeSlices {
		return nil, fmt.Errorf("profiles need %d compute slices; %s has %d", compute, b.Name, b.ComputeSlices)
	}
	sort.SliceStable(queue, func(i, j int) bool { return queue[i].MemorySlices > queue[j].MemorySlices })
	used := make([]bool, b.MemorySlices)
	var out gpu.Layout
	var rec func(k int) bool
	rec = func(k int) bool {
		if k == len(queue) {
			return true
		}
		p := queue[k]
		for _, s := range p.Starts {
			if !free(used, s, p.MemorySlices) {
				continue
			}
			mark(used, s, p.MemorySlices, true)
			out = append(out, gpu.Instance{Profile: p.Name, Start: s})
			if rec(k + 1) {
				return true
			}
			out = out[:len(out)-1]
			mark(used, s, p.MemorySlices, false)
		}
		return false
	}
	if !rec(0) {
		return nil, fmt.Errorf("no legal placement of %v on %s", counts, b.Name)
	}
	return out, nil
}

func free(used []bool, s, n int) bool {
	if s+n > len(used) {
		return false
	}
	for i := s; i < s+n; i++ {
		if used[i] {
			return false
		}
	}
	return true
}

func mark(used []bool, s, n int, v bool) {
	for i := s; i < s+n; i++ {
		used[i] = v
	}
}
