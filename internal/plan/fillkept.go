package plan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// keptSlot is a slot of a GPU that the kept plan runs replicas on: the whole GPU (in −1) or one
// of its MIG instances, by index into the kept plan's GPUs and that GPU's instances.
type keptSlot struct {
	g, in int
}

// fillKept starts the tenants of place in room that the kept plan's busy GPUs have, before any
// GPU is partitioned or taken for them: a slot of a GPU that keeps its layout and runs other
// replicas, and that carries fewer replicas than it was sized for (a departed tenant's, or one
// the plan in force left empty). A replica goes only where the packer could have put it: a slot
// whose replicas are of its group (groupKey: board, energy class, slice kind, MIG profile, share
// and, when shared, sharing group), with fewer than the share; or an empty unshared or shared
// MIG instance of its profile and sharing on a GPU of its board whose tenants are of its energy
// class. A tenant that grows (grow: how many replicas it adds) takes the slice kind its replicas
// run on in force (uses); any other tenant takes the slice kind and count the re-pack (next)
// gives it, and next's entry for it. A tenant is placed so only when all its replicas find room
// (on distinct GPUs when it asks for redundancy). Nothing is reconfigured and nothing moves: each
// is a start. kept is changed in place (each tenant started here says where in a MoveBudget
// reason of its own); it returns the tenants left to place, the names of those started here and,
// for each, where.
func (p *planner) fillKept(kept, next *v1.Plan, place []v1.Tenant, grow map[string]int, uses map[string][]slotUse) (rest []v1.Tenant, filled map[string]bool, notes []error) {
	filled = map[string]bool{}
	byName := map[string]*tenant{}
	for _, tn := range p.tenants {
		byName[tn.t.Name] = tn
	}
	room := p.keptRoom(kept, byName, uses)
	nextUses := planUses(next)
	for _, t := range place {
		name := t.Name
		tn := byName[name]
		var u []slotUse
		var tmpl v1.PlanReplica
		var entry *v1.PlanTenant
		n := 0
		if more := grow[name]; more > 0 && len(uses[name]) > 0 {
			i := slices.IndexFunc(kept.Tenants, func(pt v1.PlanTenant) bool { return pt.Name == name })
			r, ok := replicaOf(kept, name)
			if i < 0 || !ok {
				rest = append(rest, t)
				continue
			}
			u, n, entry, tmpl = uses[name], more, &kept.Tenants[i], r
		} else {
			pt, ok := planTenant(next, name)
			r, rok := replicaOf(next, name)
			if !ok || !rok || pt.Infeasible {
				rest = append(rest, t)
				continue
			}
			u, n, tmpl = nextUses[name], len(nextUses[name]), r
			pt.Replicas = nil
			entry = &pt
		}
		if tn == nil || len(u) == 0 {
			rest = append(rest, t)
			continue
		}
		c, err := inForceCand(tn, u) // the candidate of those slot uses, in force or re-packed
		if err != nil || c.tp > 1 || c.kind == v1.SliceExclusive {
			rest = append(rest, t)
			continue
		}
		slots := room.take(keyOf(tn, c), n, tn.t.Redundancy)
		if slots == nil {
			if tn.t.Redundancy {
				p.noteUnspread(name, room.spreadRoom(kept, keyOf(tn, c), c, n, grow[name] > 0))
			}
			rest = append(rest, t)
			continue
		}
		where := startInRoom(kept, entry, tmpl, c.kind, slots)
		note := fmt.Errorf("tenant %s starts %s in room the plan in force leaves free (%s), on GPUs that keep their layout: %s",
			name, replicasN(n), c.label(), strings.Join(where, ", "))
		entry.Reasons = append(slices.Clone(entry.Reasons), v1.NewReason(v1.ReasonMoveBudget, "%s", note))
		if grow[name] == 0 {
			kept.Tenants = append(kept.Tenants, *entry)
		}
		filled[name] = true
		notes = append(notes, note)
	}
	kept.Summary.GPUsUsed = usedGPUs(kept.GPUs)
	return rest, filled, notes
}

// startInRoom starts a replica of entry's tenant like tmpl, on slice kind kind, on each of slots
// of kept, numbered after entry's replicas, and returns where each runs.
func startInRoom(kept *v1.Plan, entry *v1.PlanTenant, tmpl v1.PlanReplica, kind v1.SliceKind, slots []keptSlot) []string {
	index := 0
	for _, r := range entry.Replicas {
		index = max(index, r.Index+1)
	}
	var where []string
	for _, s := range slots {
		g := &kept.GPUs[s.g]
		r := tmpl
		r.Tenant, r.Index = entry.Name, index
		r.VLLMArgs = slices.Clone(tmpl.VLLMArgs)
		ref := v1.ReplicaRef{Index: index, GPU: g.Ref(), Slice: kind}
		if s.in < 0 {
			g.Replicas = append(g.Replicas, r)
			where = append(where, g.Ref().String())
		} else {
			in := &g.Instances[s.in]
			in.Replicas = append(in.Replicas, r)
			ref.Instance = in.Ref()
			where = append(where, fmt.Sprintf("%s of %s", in.Ref(), g.Ref()))
		}
		entry.Replicas = append(entry.Replicas, ref)
		index++
	}
	return where
}

// slotRoom is the free room of the kept plan's busy GPUs: per slot, its group and how many more
// replicas it takes; an empty MIG instance has no group yet (open), only its board, profile,
// sharing and its GPU's energy class, and takes the share of the first group put there.
type slotRoom struct {
	slots []keptSlot
	key   []groupKey
	free  []int
	open  []bool
}

// keptRoom lists the room of kept's busy pool GPUs in fleet order. A GPU whose tenants' slice
// kinds in force are not all known (inForceCand), or whose tenants differ in energy class, has
// none. On the device-plugin path a whole-GPU MPS GPU takes replicas only up to the finest share
// of its node's MPS GPUs (the node's one setting gives each client 1/N of its GPU, N the most
// replicas a GPU of the node holds).
func (p *planner) keptRoom(kept *v1.Plan, byName map[string]*tenant, uses map[string][]slotUse) *slotRoom {
	out := &slotRoom{}
	keyOfReplica := func(r v1.PlanReplica) (groupKey, bool) {
		tn := byName[r.Tenant]
		if tn == nil {
			return groupKey{}, false
		}
		c, err := inForceCand(tn, uses[r.Tenant])
		if err != nil {
			return groupKey{}, false
		}
		return keyOf(tn, c), true
	}
	// On the device-plugin path a node's whole-GPU MPS GPUs share one setting: N references a
	// GPU, the most replicas any of them holds, and each client gets 1/N of its GPU. A GPU may
	// take replicas only up to the finest share among the node's MPS GPUs (nodeMin), so that
	// every client keeps the share it was sized for.
	nodeMin := map[string]int{}
	if p.pool.Policy.DeviceAPI() != v1.DeviceAPIDRA {
		for _, g := range kept.GPUs {
			if g.Mode != v1.ModeMPS || len(g.Replicas) == 0 {
				continue
			}
			share := len(g.Replicas) // a GPU whose share is not known is held to what it runs
			if k, ok := keyOfReplica(g.Replicas[0]); ok && k.kind == v1.SliceMPS {
				share = k.share
			}
			if m, ok := nodeMin[g.Node]; !ok || share < m {
				nodeMin[g.Node] = share
			}
		}
	}
	for gi, g := range kept.GPUs {
		if g.Role != v1.RolePool || g.ReplicaCount() == 0 || g.LoRAEngine != "" {
			continue
		}
		var keys []groupKey
		ok := true
		var all []v1.PlanReplica
		all = append(all, g.Replicas...)
		for _, in := range g.Instances {
			all = append(all, in.Replicas...)
		}
		for _, r := range all {
			k, kok := keyOfReplica(r)
			ok = ok && kok
			keys = append(keys, k)
		}
		if !ok || slices.ContainsFunc(keys, func(k groupKey) bool { return k.energy != keys[0].energy }) {
			continue
		}
		energy := keys[0].energy
		add := func(s keptSlot, rs []v1.PlanReplica, kind v1.SliceKind, profile string) {
			if len(rs) == 0 {
				out.slots = append(out.slots, s)
				out.key = append(out.key, groupKey{board: g.Board, profile: profile, energy: energy, kind: kind, tp: 1})
				out.free = append(out.free, 0)
				out.open = append(out.open, true)
				return
			}
			k, _ := keyOfReplica(rs[0])
			for _, r := range rs[1:] {
				if o, _ := keyOfReplica(r); o != k {
					return // a slot of mixed groups: the packer made none
				}
			}
			f := k.share - len(rs)
			if m, ok := nodeMin[g.Node]; ok && s.in < 0 && kind == v1.SliceMPS {
				f = min(f, m-len(rs)) // the node's finest MPS share bounds every GPU's count
			}
			if f > 0 {
				out.slots = append(out.slots, s)
				out.key = append(out.key, k)
				out.free = append(out.free, f)
				out.open = append(out.open, false)
			}
		}
		switch g.Mode {
		case v1.ModeMPS, v1.ModeTimeSlice:
			add(keptSlot{gi, -1}, g.Replicas, v1.SliceOf(g.Mode, ""), "")
		case v1.ModeMIG:
			for ii, in := range g.Instances {
				add(keptSlot{gi, ii}, in.Replicas, v1.SliceOf(v1.ModeMIG, in.Sharing.Mode), in.Profile)
			}
		}
	}
	return out
}

// take reserves n replicas' room for group k, in fleet order, on distinct GPUs when spread is
// set; nil, reserving nothing, when there is not that much.
func (r *slotRoom) take(k groupKey, n int, spread bool) []keptSlot {
	fits := func(i int) bool {
		if !r.open[i] {
			return r.key[i] == k && r.free[i] > 0
		}
		o := r.key[i]
		return o.board == k.board && o.profile == k.profile && o.energy == k.energy && o.kind == k.kind && k.kind == v1.SliceMIG
	}
	free := slices.Clone(r.free)
	open := slices.Clone(r.open)
	var out []keptSlot
	var used []int // GPUs taken, for spread
	for i := 0; i < len(r.slots) && len(out) < n; i++ {
		if !fits(i) {
			continue
		}
		if open[i] {
			free[i], open[i] = k.share, false
		}
		for free[i] > 0 && len(out) < n {
			if spread && slices.Contains(used, r.slots[i].g) {
				break
			}
			out = append(out, r.slots[i])
			used = append(used, r.slots[i].g)
			free[i]--
		}
	}
	if len(out) < n {
		return nil
	}
	for i := range r.slots {
		if open[i] != r.open[i] {
			r.key[i] = k
		}
	}
	r.free, r.open = free, open
	return out
}

// replicaOf is one of tenant name's replicas in pl.
func replicaOf(pl *v1.Plan, name string) (v1.PlanReplica, bool) {
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if r.Tenant == name {
				return r, true
			}
		}
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				if r.Tenant == name {
					return r, true
				}
			}
		}
	}
	return v1.PlanReplica{}, false
}

// refreshGPUReasons rewrites the reasons the kept plan's GPUs carry from the plan in force for
// what they run now: a whole-GPU MPS or time-sliced GPU's clients (their count and tenants, as
// gpuReasons words them), a MIG GPU's layout with each instance's tenants now, free where none
// runs (migKeptReason), and "not needed" for a pool GPU left with nothing. A GPU whose tenants'
// slice kinds in force are not all known keeps its reasons.
func refreshGPUReasons(kept *v1.Plan, byName map[string]*tenant, uses map[string][]slotUse) {
	for i := range kept.GPUs {
		g := &kept.GPUs[i]
		if g.Role == v1.RoleIdle && g.ReplicaCount() == 0 {
			g.Reasons = []v1.Reason{v1.NewReason(v1.ReasonIdle, "not needed by this plan")}
			continue
		}
		if g.Role == v1.RolePool && g.Mode == v1.ModeMIG && g.ReplicaCount() > 0 {
			if r, ok := migKeptReason(*g, byName); ok {
				g.Reasons = slices.Clone(g.Reasons)
				shape := func(o v1.Reason) bool { return o.Code == v1.ReasonSLOShapeUniform || o.Code == v1.ReasonSLOShapeMixed }
				if j := slices.IndexFunc(g.Reasons, shape); j >= 0 {
					g.Reasons[j] = r
				} else {
					g.Reasons = append([]v1.Reason{r}, g.Reasons...)
				}
			}
			continue
		}
		if g.Role != v1.RolePool || len(g.Replicas) == 0 || g.Mode != v1.ModeMPS && g.Mode != v1.ModeTimeSlice {
			continue
		}
		var names []string
		for _, r := range g.Replicas {
			if !slices.Contains(names, r.Tenant) {
				names = append(names, r.Tenant)
			}
		}
		list := strings.Join(names, ", ")
		var r v1.Reason
		if g.Mode == v1.ModeTimeSlice {
			r = v1.NewReason(v1.ReasonLowFrequency, "time-sliced by %d low-frequency shared tenant replica(s): %s", len(g.Replicas), list)
		} else {
			at := slices.IndexFunc(names, func(n string) bool { return byName[n] != nil && len(uses[n]) > 0 }) // one that ran here
			if at < 0 {
				continue
			}
			tn := byName[names[at]]
			c, err := inForceCand(tn, uses[names[at]])
			if err != nil || c.ev == nil {
				continue
			}
			k := keyOf(tn, c)
			r = v1.NewReason(v1.ReasonTrustGroup, "MPS with %d of %d client slots used by %s (%d%% of SMs and %s pinned memory each), all of %s",
				len(g.Replicas), c.share, list, 100/c.share, gib(c.ev.capBytes), groupText(k.group))
		}
		g.Reasons = slices.Clone(g.Reasons)
		if j := slices.IndexFunc(g.Reasons, func(o v1.Reason) bool { return o.Code == r.Code }); j >= 0 {
			g.Reasons[j] = r
		} else {
			g.Reasons = append([]v1.Reason{r}, g.Reasons...)
		}
	}
}

// migKeptReason is the layout reason of a MIG GPU of the kept plan, as gpuReasons words it for
// a fresh plan: each instance in layout order with the tenants that run on it now ("free" where
// none does) and their SLO shape; false when a tenant there is not in the pool.
func migKeptReason(g v1.PlanGPU, byName map[string]*tenant) (v1.Reason, bool) {
	var parts, names []string
	var ttfts []time.Duration
	for _, in := range g.Instances {
		if len(in.Replicas) == 0 {
			parts = append(parts, in.Ref().String()+" free")
			continue
		}
		var who []string
		for _, r := range in.Replicas {
			tn := byName[r.Tenant]
			if tn == nil {
				return v1.Reason{}, false
			}
			who = append(who, r.Tenant)
			if !slices.Contains(names, r.Tenant) {
				names = append(names, r.Tenant)
				ttfts = append(ttfts, tn.slo.TTFT)
			}
		}
		parts = append(parts, in.Ref().String()+" "+strings.Join(who, "+"))
	}
	return migLayoutReason(parts, ttfts), true
}
