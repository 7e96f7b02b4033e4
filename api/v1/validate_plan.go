package v1

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

var (
	roles        = []Role{RolePool, RoleCanary, RoleBurst, RoleIdle}
	sharingModes = []SharingMode{SharingNone, SharingMPS, SharingTimeSlice}
)

// placed is one replica found under gpus, keyed by tenant and index.
type placed struct {
	path string
	ref  ReplicaRef
	// tp is the replica's tensor-parallel group and on, the GPU indices it was found on.
	tp TensorParallel
	on []int
}

// domain is the set of replicas that share one GPU (non-MIG modes) or one MIG instance.
type domain struct {
	path     string      // path of the replica list
	slice    SliceKind   // what each replica runs on
	instance InstanceRef // the MIG instance; zero for whole-GPU modes
	capacity Bytes       // memory of the GPU or instance; 0 when unknown
	replicas []PlanReplica
}

type planChecker struct {
	errs     errList
	cat      Catalog
	boards   *boards
	plan     *Plan
	pool     *Pool
	fleet    map[string][]string // nil without a pool
	tenants  map[string]Tenant   // the tenants replicas may name
	gpuAt    map[GPURef]int
	replicas map[string]map[int]placed // tenant → index → where
	used     int
	loraGPU  map[string]GPURef // LoRA engine → the GPU that names it
	mpsRefs  map[string]int    // node → the most replicas of its whole-GPU MPS GPUs (nodeMPSRefs)
}

// Plan checks plan, and its agreement with pool when pool is not nil, and returns every problem
// as FieldErrors, or nil. pool should have had Default applied.
func (v Validator) Plan(plan *Plan, pool *Pool) error {
	if plan == nil {
		return FieldErrors{{Msg: "no plan"}}
	}
	c := &planChecker{cat: v.catalog(), plan: plan, pool: pool, gpuAt: map[GPURef]int{},
		replicas: map[string]map[int]placed{}, tenants: map[string]Tenant{}}
	c.boards = newBoards(c.cat)
	checkHeader(&c.errs, plan.APIVersion, plan.Kind, KindPlan)
	checkName(&c.errs, "metadata.name", plan.Metadata.Name, true)
	checkName(&c.errs, "pool", plan.Pool, true)
	if pool != nil {
		c.fleet = fleetGPUs(pool.Fleet)
		for _, t := range pool.Tenants {
			c.tenants[t.Name] = t
		}
		if plan.Pool != "" && plan.Pool != pool.Metadata.Name {
			c.errs.add("pool", "the plan is for pool %q, not %q", plan.Pool, pool.Metadata.Name)
		}
	} else {
		for _, t := range plan.Tenants {
			c.tenants[t.Name] = Tenant{Name: t.Name}
		}
	}
	for i := range plan.GPUs {
		c.checkGPU(index("gpus", i), plan.GPUs[i])
	}
	c.checkMissingGPUs()
	c.checkTPGroups()
	c.checkTenants()
	c.checkLoRAEngines()
	c.checkSummary()
	return c.errs.result()
}

func (c *planChecker) checkGPU(p string, g PlanGPU) {
	ref := g.Ref()
	if _, dup := c.gpuAt[ref]; dup {
		c.errs.add(p, "duplicate GPU %q (first at %s)", ref.String(), index("gpus", c.gpuAt[ref]))
	} else {
		c.gpuAt[ref] = len(c.gpuAt)
	}
	if g.Node == "" {
		c.errs.add(field(p, "node"), "required")
	}
	if g.Index < 0 || g.Index >= maxGPUsPerNode {
		c.errs.add(field(p, "index"), "must be between 0 and %d (got %d)", maxGPUsPerNode-1, g.Index)
	}
	board := c.boards.check(&c.errs, field(p, "board"), g.Board)
	c.checkAgainstFleet(p, g, board)
	c.checkRoleMode(p, g)
	c.checkLoRAGPU(p, g)
	c.checkReasons(field(p, "reasons"), g.Reasons)
	if g.Mode == ModeMIG {
		c.checkMIG(p, g, board)
	} else {
		if len(g.Instances) > 0 {
			c.errs.add(field(p, "instances"), "only for mode %q (mode is %q)", ModeMIG, g.Mode)
		}
		c.checkDomain(g, domain{path: field(p, "replicas"), slice: SliceOf(g.Mode, ""),
			capacity: boardMemory(board), replicas: g.Replicas})
	}
	if n := g.ReplicaCount(); n > 0 {
		c.used++
		if g.Role == RoleCanary || g.Role == RoleIdle {
			c.errs.add(field(p, "role"), "GPUs with role %q run no tenant replicas (this one has %d)", g.Role, n)
		}
	}
}

// checkAgainstFleet checks that the GPU exists in the pool's fleet with the same board.
func (c *planChecker) checkAgainstFleet(p string, g PlanGPU, board *gpu.Board) {
	if c.fleet == nil || g.Node == "" || g.Index < 0 {
		return
	}
	if !checkGPURef(&c.errs, p, g.Ref(), c.fleet) || board == nil {
		return
	}
	want := c.fleet[g.Node][g.Index]
	fb, err := c.cat.Board(want)
	if err != nil {
		return // reported by Validate on the pool
	}
	if fb.Name != board.Name {
		c.errs.add(field(p, "board"), "%q, but the fleet has %q at %s", g.Board, fb.Name, g.Ref().String())
	}
}

func (c *planChecker) checkRoleMode(p string, g PlanGPU) {
	if g.Role == "" {
		c.errs.add(field(p, "role"), "required")
	}
	checkEnum(&c.errs, field(p, "role"), g.Role, roles)
	if g.Mode == "" {
		c.errs.add(field(p, "mode"), "required")
	}
	checkEnum(&c.errs, field(p, "mode"), g.Mode, allModes)
	if c.pool == nil {
		return
	}
	canary := slices.Contains(c.pool.Policy.CanaryGPUs, g.Ref())
	switch {
	case canary && g.Role != RoleCanary && g.Role != "":
		c.errs.add(field(p, "role"), "%s is a canary GPU in policy.canaryGPUs, so its role must be %q (got %q)", g.Ref().String(), RoleCanary, g.Role)
	case !canary && g.Role == RoleCanary:
		c.errs.add(field(p, "role"), "%s is not in policy.canaryGPUs", g.Ref().String())
	}
	if g.Role == RolePool || g.Role == RoleBurst {
		c.checkModeAllowed(field(p, "mode"), g.Mode)
	}
}

func (c *planChecker) checkModeAllowed(p string, m Mode) {
	if c.pool == nil || m == "" || !slices.Contains(allModes, m) {
		return
	}
	allowed := c.pool.Policy.AllowedModes
	if len(allowed) > 0 && !slices.Contains(allowed, m) {
		c.errs.add(p, "%q is not in policy.allowedModes (%s)", m, listOrNone(allowed))
	}
}

func (c *planChecker) checkMIG(p string, g PlanGPU, board *gpu.Board) {
	if len(g.Replicas) > 0 {
		c.errs.add(field(p, "replicas"), "must be empty in mode %q: replicas run inside instances", ModeMIG)
	}
	if board != nil && (board.MemorySlices == 0 || len(board.Profiles) == 0) {
		c.errs.add(field(p, "mode"), "board %q has no MIG", board.Name)
		board = nil
	}
	var layout gpu.Layout
	legal := board != nil
	for j, in := range g.Instances {
		ip := index(field(p, "instances"), j)
		checkEnum(&c.errs, field(ip, "sharing.mode"), in.Sharing.Mode, sharingModes)
		if in.Sharing.Mode == SharingMPS || in.Sharing.Mode == SharingTimeSlice {
			if g.Role == RolePool || g.Role == RoleBurst {
				c.checkModeAllowed(field(ip, "sharing.mode"), Mode(in.Sharing.Mode))
			}
		}
		prof := c.checkProfile(ip, in, board)
		legal = legal && prof != nil && slices.Contains(prof.Starts, in.Start)
		c.checkDomain(g, domain{path: field(ip, "replicas"), slice: SliceOf(ModeMIG, in.Sharing.Mode),
			instance: in.Ref(), capacity: profileMemory(prof), replicas: in.Replicas})
		layout = append(layout, gpu.Instance{Profile: in.Profile, Start: in.Start})
	}
	// Each instance is known and well placed; the board's own rules check how they combine
	// (overlaps, counts per profile, compute slices, one +me instance).
	if legal && len(layout) > 0 {
		if err := board.Validate(layout); err != nil {
			c.errs.add(field(p, "instances"), "illegal MIG layout: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
}

// checkProfile checks that an instance's profile exists on the board and may start where it does.
func (c *planChecker) checkProfile(ip string, in PlanInstance, board *gpu.Board) *gpu.Profile {
	if in.Profile == "" {
		c.errs.add(field(ip, "profile"), "required")
		return nil
	}
	if board == nil {
		return nil
	}
	var names []string
	for k := range board.Profiles {
		prof := &board.Profiles[k]
		names = append(names, prof.Name)
		if prof.Name != in.Profile {
			continue
		}
		if !slices.Contains(prof.Starts, in.Start) {
			c.errs.add(field(ip, "start"), "%s cannot start at memory slice %d on %q (legal starts: %v)",
				in.Profile, in.Start, board.Name, prof.Starts)
		}
		return prof
	}
	c.errs.add(field(ip, "profile"), "unknown profile %q on board %q (valid: %s)", in.Profile, board.Name, listOrNone(names))
	return nil
}

func boardMemory(b *gpu.Board) Bytes {
	if b == nil {
		return 0
	}
	return Bytes(b.MemoryMiB) * MiB
}

func profileMemory(p *gpu.Profile) Bytes {
	if p == nil {
		return 0
	}
	return Bytes(p.MemoryMiB) * MiB
}

// sliceOf returns the slice kind a replica gets from a GPU mode and, under MIG, a sharing mode.
func SliceOf(m Mode, s SharingMode) SliceKind {
	switch m {
	case ModeExclusive:
		return SliceExclusive
	case ModeMPS:
		return SliceMPS
	case ModeTimeSlice:
		return SliceTimeSlice
	case ModeMIG:
		switch s {
		case SharingMPS:
			return SliceMIGMPS
		case SharingTimeSlice:
			return SliceMIGTimeSlice
		case SharingNone, "":
			return SliceMIG
		}
	}
	return ""
}

// checkDomain checks the replicas that share one GPU or instance.
func (c *planChecker) checkDomain(g PlanGPU, d domain) {
	if (d.slice == SliceExclusive || d.slice == SliceMIG) && len(d.replicas) > 1 {
		c.errs.add(d.path, "slice kind %q holds one replica (got %d)", d.slice, len(d.replicas))
	}
	if (d.slice == SliceMPS || d.slice == SliceMIGMPS) && len(d.replicas) > MaxMPSClients {
		c.errs.add(d.path, "an MPS server runs at most %d clients (got %d replicas)", MaxMPSClients, len(d.replicas))
	}
	c.checkEqualShares(g, d)
	var mem Bytes
	for k, r := range d.replicas {
		rp := index(d.path, k)
		c.checkReplica(rp, r, d.slice)
		if r.Limits.Memory > 0 {
			mem += r.Limits.Memory
		}
		ref := ReplicaRef{Index: r.Index, GPU: g.Ref(), Instance: d.instance, Slice: d.slice}
		if !r.TensorParallel.IsZero() {
			c.checkTP(field(rp, "tensorParallel"), g, r.TensorParallel, d.slice)
			if len(r.TensorParallel.GPUs) > 0 {
				ref.GPU.Index = r.TensorParallel.GPUs[0] // the group's first GPU stands for it
			}
		}
		c.place(rp, r, ref, g.Index)
		c.checkIsolation(rp, r.Tenant, d)
	}
	if d.capacity > 0 && mem > d.capacity {
		c.errs.add(d.path, "memory limits add up to %s, more than the %s the slice has", mem, d.capacity)
	}
}

// checkEqualShares reports, on the device-plugin path, a whole-GPU MPS replica whose limits are
// above the equal share of the node's setting: the plugin applies one MPS setting to every GPU of
// the node, N references a GPU (the most replicas any whole-GPU MPS GPU of the node holds, as the
// rendered config sets it), and its MPS daemon gives each client 100/N % of the SMs and 1/N of the
// memory; a client's own settings can only lower that, so such a plan does not run as written. A
// GPU of fewer replicas beside one of more on the same node is held to the larger count. (The DRA
// path runs unequal limits: the claim's daemon takes the largest and each client lowers its own.)
func (c *planChecker) checkEqualShares(g PlanGPU, d domain) {
	if c.pool == nil || c.pool.Policy.DeviceAPI() == DeviceAPIDRA || d.slice != SliceMPS || len(d.replicas) == 0 {
		return
	}
	k := max(len(d.replicas), c.nodeMPSRefs(g.Node))
	if k < 2 {
		return
	}
	share, pct := d.capacity/Bytes(k)/MiB*MiB, 100/k
	for i, r := range d.replicas {
		if r.Limits.SMPercent > pct || (d.capacity > 0 && r.Limits.Memory > share) {
			on := ""
			if k > len(d.replicas) {
				on = fmt.Sprintf(" (node %s's setting: another whole-GPU MPS GPU there holds %d)", g.Node, k)
			}
			c.errs.add(field(index(d.path, i), "limits"), "%d%% SMs and %s memory, more than the device plugin's equal share of %d replicas%s (%d%%, %s): it gives every MPS client of a node's GPUs the same share",
				r.Limits.SMPercent, r.Limits.Memory, k, on, pct, share)
		}
	}
}

// nodeMPSRefs is the most replicas a whole-GPU MPS GPU of node holds in the plan: the references
// per GPU of the node's one MPS setting on the device-plugin path.
func (c *planChecker) nodeMPSRefs(node string) int {
	if c.mpsRefs == nil {
		c.mpsRefs = map[string]int{}
		for _, g := range c.plan.GPUs {
			if g.Mode == ModeMPS {
				c.mpsRefs[g.Node] = max(c.mpsRefs[g.Node], len(g.Replicas))
			}
		}
	}
	return c.mpsRefs[node]
}

func (c *planChecker) checkReplica(rp string, r PlanReplica, slice SliceKind) {
	if r.Tenant == "" {
		c.errs.add(field(rp, "tenant"), "required")
	} else if _, ok := c.tenants[r.Tenant]; !ok {
		c.errs.add(field(rp, "tenant"), "unknown tenant %q", r.Tenant)
	}
	if r.Index < 0 || r.Index >= MaxReplicaCount {
		c.errs.add(field(rp, "index"), "must be between 0 and %d (got %d)", MaxReplicaCount-1, r.Index)
	}
	lp := field(rp, "limits")
	switch sm := r.Limits.SMPercent; {
	case sm < 0 || sm > 100:
		c.errs.add(field(lp, "smPercent"), "must be between 1 and 100 (got %d)", sm)
	case sm > 0 && slice != SliceMPS && slice != SliceMIGMPS:
		c.errs.add(field(lp, "smPercent"), "only for MPS slices (slice is %q)", slice)
	}
	if r.Limits.Memory < 0 {
		c.errs.add(field(lp, "memory"), "must be ≥ 0 (got %s)", r.Limits.Memory)
	}
	switch ts := r.Limits.TimeSliceReplicas; {
	case ts < 0 || ts > MaxTimeSliceReplicas:
		c.errs.add(field(lp, "timeSliceReplicas"), "must be between 0 and %d (got %d)", MaxTimeSliceReplicas, ts)
	case ts > 0 && slice != SliceTimeSlice && slice != SliceMIGTimeSlice:
		c.errs.add(field(lp, "timeSliceReplicas"), "only for time-sliced slices (slice is %q)", slice)
	}
	for k, a := range r.VLLMArgs {
		if a == "" {
			c.errs.add(index(field(rp, "vllmArgs"), k), "must not be empty")
		}
	}
}

// place records a replica found under gpus and reports a second replica with the same tenant
// and index.
//
// A tensor-parallel replica is listed under each GPU of its group, identically.
func (c *planChecker) place(rp string, r PlanReplica, ref ReplicaRef, gpuIndex int) {
	if r.Tenant == "" || r.Index < 0 {
		return
	}
	byIndex := c.replicas[r.Tenant]
	if byIndex == nil {
		byIndex = map[int]placed{}
		c.replicas[r.Tenant] = byIndex
	}
	first, dup := byIndex[r.Index]
	switch {
	case dup && !first.tp.IsZero() && sameTP(first.tp, r.TensorParallel) && first.ref.GPU.Node == ref.GPU.Node &&
		!slices.Contains(first.on, gpuIndex):
		first.on = append(first.on, gpuIndex)
		byIndex[r.Index] = first
	case dup && (!first.tp.IsZero() || !r.TensorParallel.IsZero()):
		c.errs.add(rp, "replica %d of tenant %q is listed again with another tensor-parallel group or on another node (first at %s)",
			r.Index, r.Tenant, first.path)
	case dup:
		c.errs.add(rp, "duplicate replica %d of tenant %q (first at %s)", r.Index, r.Tenant, first.path)
	default:
		byIndex[r.Index] = placed{path: rp, ref: ref, tp: r.TensorParallel, on: []int{gpuIndex}}
	}
}

func sameTP(a, b TensorParallel) bool { return a.Size == b.Size && slices.Equal(a.GPUs, b.GPUs) }

// checkTP checks one listing of a tensor-parallel replica: a degree of TensorParallelSizes, that
// many ascending GPU indices of the node including this GPU's, on an exclusive whole GPU.
func (c *planChecker) checkTP(p string, g PlanGPU, tp TensorParallel, slice SliceKind) {
	if !slices.Contains(TensorParallelSizes, tp.Size) {
		c.errs.add(field(p, "size"), "must be one of %v (got %d)", TensorParallelSizes, tp.Size)
	}
	if len(tp.GPUs) != tp.Size {
		c.errs.add(field(p, "gpus"), "must list size (%d) GPUs of the node (got %d)", tp.Size, len(tp.GPUs))
	}
	for k, i := range tp.GPUs {
		if i < 0 || i >= maxGPUsPerNode {
			c.errs.add(index(field(p, "gpus"), k), "must be between 0 and %d (got %d)", maxGPUsPerNode-1, i)
		}
		if k > 0 && i <= tp.GPUs[k-1] {
			c.errs.add(index(field(p, "gpus"), k), "indices must ascend (%d after %d)", i, tp.GPUs[k-1])
		}
	}
	if !slices.Contains(tp.GPUs, g.Index) {
		c.errs.add(field(p, "gpus"), "%v does not include this GPU's index %d", tp.GPUs, g.Index)
	}
	if slice != SliceExclusive {
		c.errs.add(p, "only on whole GPUs of mode %q (this replica's slice is %q)", ModeExclusive, slice)
	}
}

// checkTPGroups reports a tensor-parallel replica missing from a GPU its group names.
func (c *planChecker) checkTPGroups() {
	names := make([]string, 0, len(c.replicas))
	for t := range c.replicas {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		byIndex := c.replicas[t]
		idx := make([]int, 0, len(byIndex))
		for i := range byIndex {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			pl := byIndex[i]
			for _, gi := range pl.tp.GPUs {
				if !slices.Contains(pl.on, gi) {
					c.errs.add(field(pl.path, "tensorParallel.gpus"), "names GPU %s/%d, which does not list replica %d of tenant %q",
						pl.ref.GPU.Node, gi, i, t)
				}
			}
		}
	}
}

// checkIsolation reports a replica whose tenant's isolation tier forbids its co-residents.
func (c *planChecker) checkIsolation(rp, tenant string, d domain) {
	t, ok := c.tenants[tenant]
	if !ok || c.pool == nil {
		return
	}
	for _, other := range d.replicas {
		o, known := c.tenants[other.Tenant]
		if other.Tenant == tenant || !known {
			continue
		}
		iso := t.Isolation
		if iso == "" {
			iso = DefaultIsolation
		}
		switch {
		case iso == IsolationHard:
			c.errs.add(field(rp, "tenant"), "tenant %q has isolation %q but shares a %q slice with tenant %q", tenant, iso, d.slice, o.Name)
		case iso == IsolationSoft && (d.slice == SliceTimeSlice || d.slice == SliceMIGTimeSlice):
			c.errs.add(field(rp, "tenant"), "tenant %q has isolation %q, which forbids time-slicing with tenant %q", tenant, iso, o.Name)
		case iso == IsolationSoft && t.Path == "":
			c.errs.add(field(rp, "tenant"), "tenant %q has isolation %q and no path, so no trust group to share MPS with (it shares with tenant %q)", tenant, iso, o.Name)
		case iso == IsolationSoft && t.Path != o.Path:
			c.errs.add(field(rp, "tenant"), "tenant %q has isolation %q and shares MPS only within its trust group (path %q); tenant %q has path %q", tenant, iso, t.Path, o.Name, o.Path)
		default:
			continue
		}
		return
	}
}

func finiteNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

func describeCount(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
