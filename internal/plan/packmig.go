package plan

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// useOf is how a MIG unit's instance is shared.
func useOf(u *unit) migUse {
	return migUse{kind: u.c.kind, share: u.c.share, group: pairGroup(u), board: u.c.board.Name}
}

// strategyKey is the node-wide pseudo-resource of the device plugin's sharing strategy:
// time-slicing and MPS never meet on one node.
const strategyKey = "~strategy"

// migStrategyKey is the node's device-plugin migStrategy: whole-GPU MPS needs "none", which a
// node with MIG GPUs cannot have.
const migStrategyKey = "~migStrategy"

// wholeResource is the resource of whole GPUs (nvidia.com/gpu) among the node's uses.
const wholeResource = "~gpu"

// strategyOf is the device plugin's sharing strategy for a slice kind: "ts" for time-slicing and
// for MPS inside a MIG instance (handed to Kubernetes as time-sliced references), "mps" for
// whole-GPU MPS, "" for a device one pod owns.
func strategyOf(k v1.SliceKind) string {
	switch k {
	case v1.SliceTimeSlice, v1.SliceMIGTimeSlice, v1.SliceMIGMPS:
		return "ts"
	case v1.SliceMPS:
		return "mps"
	}
	return ""
}

// wholeWant is what a whole-GPU unit asks of its node: nvidia.com/gpu used its way (and, shared,
// by its trust path), the node's sharing strategy, and for MPS a node without MIG GPUs (the
// device plugin's MPS sharing of whole GPUs runs with migStrategy none).
func wholeWant(u *unit) map[string]migUse {
	w := map[string]migUse{}
	addWholeWant(w, u)
	return w
}

// addWholeWant sets in use what wholeWant(u) asks, without a map of its own (resetNodeUses reads
// every GPU of a node).
func addWholeWant(use map[string]migUse, u *unit) {
	use[wholeResource] = useOf(u)
	if s := strategyOf(u.c.kind); s != "" {
		use[strategyKey] = migUse{group: s}
	}
	if u.c.kind == v1.SliceMPS {
		use[migStrategyKey] = migUse{group: "none"}
	}
}

// pairGroup is who may take the references of a shared instance's resource on its node: any
// shared-tier tenant, or tenants of the same trust path. Soft tenants without a path are not
// told apart here (all ""), as the renderer's check does not: Kubernetes may pair two such
// tenants' pods on one node's shared instances of a profile (docs/planner.md, "Not done yet").
func pairGroup(u *unit) string {
	if !u.c.shared() || len(u.reps) == 0 {
		return ""
	}
	t := u.reps[0].tn.t
	if isolationOf(t) == v1.IsolationShared {
		return "shared"
	}
	return "path:" + t.Path
}

// packMIG packs the MIG units of one board and energy class. The units are split into classes in
// which every profile is used one way (unshared, or shared k ways), largest use first; each class
// is packed as cutting stock over the board's patterns, and each of its GPUs goes to the first
// free GPU whose node does not use one of its profiles another way (the device plugin applies one
// sharing setting per resource and node, and hands out the references of any shared device of a
// resource on a node, so one sharing group per profile and node). A bin with no such GPU left is
// not placed. It returns the units that found no GPU.
//
// On the DRA path (perClaim) every instance is a claim of its own, with its own sharing setting
// and pairing, so no node rule applies and all units form one class: the cutting stock then
// covers the board's whole instance multiset at once, where class by class each way's last GPU
// is left part-empty (an odd number of a way's 1g.10gb instances wastes a memory slice on an
// H100 every time). The units keep formUnits' order, so each profile's instances still fill
// GPUs way by way.
func (p *planner) packMIG(board *gpu.Board, mig []*unit, free map[string][]*gpuPlan, pc *patternCache) ([]*unit, error) {
	pats, err := pc.get(board)
	if err != nil {
		return nil, err
	}
	var unplaced []*unit
	classes := [][]*unit{mig}
	if !p.perClaim {
		classes = useClasses(pats, mig)
	}
	for _, class := range classes {
		queues := map[string][]*unit{}
		dem := make([]int, len(pats.profiles))
		uses := map[string]migUse{} // a class uses each profile one way; on the DRA path, the last unit's (compatible takes any)
		for _, u := range class {
			dem[pats.index(u.c.profile.Name)]++
			queues[u.c.profile.Name] = append(queues[u.c.profile.Name], u)
			uses[u.c.profile.Name] = useOf(u)
		}
		bins := greedyPack(pats, dem)
		if !p.greedyOnly && sum(dem) <= p.o.ExactUnits && len(bins) > volumeBound(pats, dem) {
			if exact, ok := exactPack(pats, dem, len(bins)-1, 200000); ok {
				bins = exact
			}
		}
		for _, bin := range bins {
			want := map[string]migUse{}
			for i, n := range bin {
				if n > 0 {
					addInstWant(want, pats.profiles[i].Name, uses[pats.profiles[i].Name])
				}
			}
			g := p.takeCompatible(board, free, want)
			if g == nil {
				var left []*unit
				for _, prof := range pats.profiles {
					left = append(left, queues[prof.Name]...)
				}
				p.noteBlocked(left, board, free, want)
				break
			}
			if err := p.fillMIG(g, board, pats, bin, queues, pc); err != nil {
				return nil, err
			}
		}
		for _, prof := range pats.profiles {
			unplaced = append(unplaced, queues[prof.Name]...)
		}
	}
	return unplaced, nil
}

// useClasses splits units so that each class uses every profile one way: class i holds, per
// profile, the units of its i-th most used way (most replicas first; ties to the stronger
// isolation, then fewer shares). Units keep their order within a class.
func useClasses(pats *patterns, mig []*unit) [][]*unit {
	byProfile := map[string]map[migUse][]*unit{}
	for _, u := range mig {
		m := byProfile[u.c.profile.Name]
		if m == nil {
			m = map[migUse][]*unit{}
			byProfile[u.c.profile.Name] = m
		}
		m[useOf(u)] = append(m[useOf(u)], u)
	}
	var classes [][]*unit
	for _, prof := range pats.profiles {
		m := byProfile[prof.Name]
		uses := make([]migUse, 0, len(m))
		for u := range m {
			uses = append(uses, u)
		}
		slices.SortFunc(uses, func(a, b migUse) int {
			return cmp.Or(cmp.Compare(len(m[b]), len(m[a])), cmp.Compare(kindRank(a.kind), kindRank(b.kind)), cmp.Compare(a.share, b.share),
				cmp.Compare(a.group, b.group))
		})
		for i, u := range uses {
			for len(classes) <= i {
				classes = append(classes, nil)
			}
			classes[i] = append(classes[i], m[u]...)
		}
	}
	return classes
}

// takeCompatible takes the first free GPU of board whose node uses none of want's profiles
// another way (or for another sharing group), and records the node's uses; nil when there is
// none: a GPU the device plugin could not serve as planned is not used, and its units are
// reported short of capacity instead.
//
// A free list keeps fleet order; a GPU taken from its middle is left as nil (the list is not
// copied), and leading nils are dropped.
func (p *planner) takeCompatible(board *gpu.Board, free map[string][]*gpuPlan, want map[string]migUse) *gpuPlan {
	gs := free[board.Name]
	pick := -1
	skip := "" // a node found incompatible: its other GPUs need no second look
	for i, g := range gs {
		if g == nil || g.fg.ref.Node == skip {
			continue
		}
		if p.compatible(g.fg.ref.Node, want) {
			pick = i
			break
		}
		skip = g.fg.ref.Node
	}
	if pick < 0 {
		return nil
	}
	g := gs[pick]
	gs[pick] = nil
	for len(gs) > 0 && gs[0] == nil {
		gs = gs[1:]
	}
	free[board.Name] = gs
	p.reserve(g.fg.ref.Node, want)
	return g
}

// addInstWant adds to want what a MIG instance of profile used as u asks of its node: the
// profile used that way, the node's sharing strategy when shared, and migStrategy mixed.
func addInstWant(want map[string]migUse, profile string, u migUse) {
	want[profile] = u
	if s := strategyOf(u.kind); s != "" {
		want[strategyKey] = migUse{group: s}
	}
	want[migStrategyKey] = migUse{group: "mixed"}
}

// reserve records want's uses on node (those not set yet) and returns the keys it set, so that
// a tentative placement can be undone (release).
func (p *planner) reserve(node string, want map[string]migUse) []string {
	nu := p.nodeUse[node]
	if nu == nil {
		nu = map[string]migUse{}
		p.nodeUse[node] = nu
	}
	var set []string
	for prof, u := range want {
		if _, ok := nu[prof]; !ok {
			nu[prof] = u
			set = append(set, prof)
		}
	}
	return set
}

// release undoes a reserve.
func (p *planner) release(node string, set []string) {
	for _, k := range set {
		delete(p.nodeUse[node], k)
	}
}

// compatible reports whether node takes want: every resource, the sharing strategy and the
// migStrategy used the way want asks (by the same board), or not used yet, and on a node with
// GPUs of two boards whole GPUs only where the other boards' GPUs can keep off nvidia.com/gpu
// (boardsFit). Always true on the DRA path (perClaim), where the DRA driver sets sharing per
// claim and device, claims select the board, and nothing is set per node.
func (p *planner) compatible(node string, want map[string]migUse) bool {
	if p.perClaim {
		return true
	}
	for prof, u := range want {
		if have, set := p.nodeUse[node][prof]; set && have != u {
			return false
		}
	}
	return p.boardsFit(node, want) == ""
}

// blockage is why a unit found no GPU although free GPUs of its board were left: the node rule
// that every one of them broke, and the slice kind that asked for it.
type blockage struct {
	rule string
	kind v1.SliceKind
}

// noteBlocked records, for units that want could not place, the device-plugin rule that the
// first free GPU of board breaks (nothing when no free GPU of the board is left: the pool is
// simply full).
func (p *planner) noteBlocked(units []*unit, board *gpu.Board, free map[string][]*gpuPlan, want map[string]migUse) {
	for _, g := range free[board.Name] {
		if g == nil {
			continue
		}
		rule := p.conflictRule(g.fg.ref.Node, want)
		if rule == "" {
			return
		}
		for _, u := range units {
			p.blocked[u] = blockage{rule: rule, kind: u.c.kind}
		}
		return
	}
}

// conflictRule says which of the device plugin's per-node rules want breaks on node, "" when none.
func (p *planner) conflictRule(node string, want map[string]migUse) string {
	keys := slices.Sorted(maps.Keys(want))
	for _, k := range keys {
		u := want[k]
		have, set := p.nodeUse[node][k]
		if !set || have == u {
			continue
		}
		if have.board != u.board {
			return boardRule(node, k, have.board, u.board)
		}
		switch k {
		case migStrategyKey:
			if u.group == "none" {
				return fmt.Sprintf("whole-GPU MPS needs the device plugin's migStrategy none and node %s has MIG GPUs", node)
			}
			return fmt.Sprintf("MIG instances need the device plugin's migStrategy mixed and node %s runs whole-GPU MPS", node)
		case strategyKey:
			return fmt.Sprintf("node %s shares GPUs by %s and this slice by %s (one sharing strategy per node: time-slicing and MPS never meet)", node, have.group, u.group)
		case wholeResource:
			return fmt.Sprintf("node %s serves whole GPUs (nvidia.com/gpu) as %s and this slice needs %s (one sharing setting and trust path per resource and node)", node, describeUse(have), describeUse(u))
		default:
			return fmt.Sprintf("node %s serves MIG profile %s as %s and this slice needs %s (one sharing setting and trust path per resource and node)", node, k, describeUse(have), describeUse(u))
		}
	}
	return p.boardsFit(node, want)
}

// describeUse names a resource's use for people: "exclusive", "mps 1/3 for path:team/a".
func describeUse(u migUse) string {
	s := string(u.kind)
	if u.share > 1 {
		s += fmt.Sprintf(" 1/%d", u.share)
	}
	if u.group != "" {
		s += " for " + u.group
	}
	return s
}
