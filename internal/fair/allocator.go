package fair

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// leafState is where a tenant stands in one of the two fillings.
type leafState uint8

const (
	idle    leafState = iota // wants nothing more
	waiting                  // in the act heaps
	blocked                  // its next task does not fit; counted in its class (classes.go)
	limited                  // its next steady task would take a group above its limit
)

// Task times are Unix nanoseconds: records without pointers cost the garbage collector nothing.
type taskRec struct {
	seq   uint64
	start int64
	class int32 // index in Tenant.Classes; len(Classes) for the unnamed last class
}

type stoppedRec struct {
	rec taskRec
	out int
}

// expiredRec is a lease that reached its expiry in this step, with the index of its reclaim item.
type expiredRec struct {
	lease leaseRec
	out   int
}

type leaseRec struct {
	seq           uint64
	start, expiry int64
}

// tenantRec is the authoritative state of one tenant; everything else is derived from it.
type tenantRec struct {
	cfg    Tenant
	d      []int64
	steady []taskRec  // sorted by (start, seq): newest last
	leases []leaseRec // sorted by (start, seq): newest last

	sLeaf, lLeaf int32 // nodes in the steady and the lease tree

	pending     bool // its preemption claim is examined in the next claims phase
	inPending   bool
	retryAt     time.Time // a claim waits for victims' minimum runtime until then
	minRunWait  time.Time // a move that passes every check but minimum runtime becomes possible then
	resRetryAt  time.Time // a reservation claim waits until then (retried every step anyway)
	floorPruned time.Time // a floor claim found groups inside their minimum runtime until then
	// stopped are the tasks claims took from it in the step stoppedStamp, with the index of
	// their preempt item: a grant or lease for it in the same step restores the newest instead of
	// starting a new task, and the preempt item is withdrawn.
	stopped      []stoppedRec
	stoppedStamp uint64
	touched      uint64 // step stamp
	// expired are its leases that reached their expiry in the step renewStamp and were reclaimed
	// because another tenant waited: a lease or steady grant for it later in the same step takes
	// the newest back (same task) instead of starting a new one, and the reclaim item is withdrawn.
	expired    []expiredRec
	renewStamp uint64
	inRes      bool // listed in resList
	idx        int32
	removed    bool
	lDirty     bool // its lease-tree use lags behind its tasks
	lCount     int  // the task count the lease tree holds for it
	// unit is one task's dominant share of the steady pool (+Inf when it does not fit it).
	unit float64
	// minRun is the minimum runtime in force: the tenant's own, capped by the operator's
	// maxMinRuntime of the pool and of every group on its path.
	minRun time.Duration
	unmet  bool // counted in Allocator.unmetN: wants more tasks than it holds (leases on)
	// classN counts its steady tasks per replica class (nil without classes).
	classN []int
	// fCache is its floor as computed at entitlement epoch fEpoch for steady want fWant.
	fCache, fWant int
	fEpoch        uint64
	fOK           bool
	// hist is its usage history, a decayed task count (history.go); 0 without history.
	hist float64
}

func (t *tenantRec) steadyWant() int {
	if t.cfg.Cap > 0 && t.cfg.Cap < t.cfg.Demand {
		return t.cfg.Cap
	}
	return t.cfg.Demand
}

func (t *tenantRec) resTarget() int { return min(t.cfg.Reservation, t.cfg.Demand) }
func (t *tenantRec) total() int     { return len(t.steady) + len(t.leases) }
func (t *tenantRec) preemptible() bool {
	return len(t.steady) > t.cfg.Reservation
}

func (t *tenantRec) weight() float64 {
	if t.cfg.Weight == 0 {
		return 1
	}
	return t.cfg.Weight
}

// Allocator holds the pool, the tenants and every running task. It is not safe for concurrent
// use; Clone gives an independent copy (for what-if questions).
type Allocator struct {
	res        resIndex
	capacity   Vector
	capT, capS []int64 // whole pool; steady pool (whole minus burst)
	burstPct   float64
	leaseDur   time.Duration
	histHL     time.Duration // usage history half-life (0: no history)
	histAt     int64         // Unix nanoseconds the history was last decayed to
	groups     map[string]float64
	known      map[string]bool // every resource the pool has had

	limits     Limits
	maxMinRun  time.Duration            // the pool's cap on minimum runtimes (0: none)
	groupMaxMR map[string]time.Duration // per group
	groupDes   map[string]float64       // deserved part per group
	groupLim   map[string]float64       // limit per group

	tenants []*tenantRec // sorted by name at every rebuild
	byName  map[string]int32

	now         time.Time
	nowNS       int64
	started     bool
	seq         uint64
	stamp       uint64
	needRebuild bool
	allPending  bool

	sUsed, tUsed []int64
	st, lt       tree // hierarchy over steady use; the same hierarchy over all use (leases)
	expiries     entryHeap[expiryEntry]
	retries      entryHeap[retryEntry]
	lazyLease    []int32
	lDirty       []int32

	out         []Item
	touched     []int32
	pendingList []int32
	resList     []int32
	claimBuf    []int32
	pathBuf     []int32
	iters       []*descIter
	vs          victimSearch
	zero        []int64
	sorter      byShare
	resBad      int8 // cached per step: 1 reservations fit the steady pool, 2 they do not
	resBadStamp uint64
	unmetN      int    // tenants with unmet demand while leases are on
	moves       uint64 // preemptions for claims so far (fixed-point passes stop when it stays)
	withdrawn   int    // items withdrawn in this step (compacted at its end)
	demandSum   int64  // every tenant's demand, summed (limits.maxTotalDemand)
	leafBuf     []int32
	// ffFloor is every tenant's floor (by index) as filled at entitlement epoch ffEpoch (floors.go).
	ffFloor     []int
	ffEnt       []float64 // ensureFloors' scratch
	ffEpoch     uint64
	ffOK        bool
	batchDemand map[string]int // validateEvents' scratch: demands set earlier in the batch
}

// Time queues hold Unix nanoseconds.
type expiryEntry struct {
	at     int64
	seq    uint64
	tenant int32
}

type retryEntry struct {
	at     int64
	tenant int32
}

func expiryLess(a, b expiryEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func retryLess(a, b retryEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.tenant < b.tenant
}

// New validates cfg (returning every problem at once) and builds an Allocator with no task
// running. Call Recompute to make the first decision.
func New(cfg Config) (*Allocator, error) {
	if err := validateConfig(cfg, true); err != nil {
		return nil, err
	}
	a := &Allocator{
		capacity:   cloneVector(cfg.Capacity),
		burstPct:   cfg.BurstPoolPercent,
		leaseDur:   cfg.LeaseDuration,
		histHL:     cfg.HistoryHalfLife,
		maxMinRun:  cfg.MaxMinRuntime,
		limits:     cfg.Limits,
		groupMaxMR: map[string]time.Duration{},
		groupDes:   map[string]float64{},
		groupLim:   map[string]float64{},
		groups:     map[string]float64{},
		byName:     map[string]int32{},
		known:      map[string]bool{},
	}
	for name := range cfg.Capacity {
		a.known[name] = true
	}
	a.expiries.less = expiryLess
	a.retries.less = retryLess
	for _, g := range cfg.Groups {
		a.setGroup(g)
	}
	for _, tc := range cfg.Tenants {
		a.addTenantRec(tc)
	}
	a.needRebuild, a.allPending = true, true
	return a, nil
}

func cloneVector(v Vector) Vector {
	out := make(Vector, len(v))
	for k, x := range v {
		out[k] = x
	}
	return out
}

func cloneTenant(t Tenant) Tenant {
	t.Task = cloneVector(t.Task)
	if t.Classes != nil {
		t.Classes = append([]ReplicaClass(nil), t.Classes...)
	}
	return t
}

func (a *Allocator) addTenantRec(tc Tenant) *tenantRec {
	t := &tenantRec{cfg: cloneTenant(tc), sLeaf: -1, lLeaf: -1, pending: true}
	a.demandSum += int64(tc.Demand)
	a.byName[tc.Name] = int32(len(a.tenants))
	a.tenants = append(a.tenants, t)
	return t
}

// countClasses recounts t's steady tasks per replica class (classes may have changed).
func (t *tenantRec) countClasses() {
	k := int32(len(t.cfg.Classes))
	if k == 0 {
		t.classN = nil
		for i := range t.steady {
			t.steady[i].class = 0
		}
		return
	}
	t.classN = make([]int, k+1)
	for i := range t.steady {
		t.steady[i].class = min(t.steady[i].class, k)
		t.classN[t.steady[i].class]++
	}
}

// nextClass is the class a new steady task of t takes: the most important one not full.
func (t *tenantRec) nextClass() int32 {
	for c, rc := range t.cfg.Classes {
		if t.classN[c] < rc.Replicas {
			return int32(c)
		}
	}
	return int32(len(t.cfg.Classes))
}

// className names class c of t ("" for the unnamed last class).
func (t *tenantRec) className(c int32) string {
	if int(c) < len(t.cfg.Classes) {
		return t.cfg.Classes[c].Name
	}
	return ""
}

// addClass and dropClass keep the class counts as steady tasks come and go.
func (t *tenantRec) addClass(r taskRec) {
	if t.classN != nil {
		t.classN[r.class]++
	}
}

func (t *tenantRec) dropClass(r taskRec) {
	if t.classN != nil {
		t.classN[r.class]--
	}
}

// leastImportant is the index, among t.steady[:n], of the task to stop first: the least
// important class, the newest within it. Without classes it is n-1.
func (t *tenantRec) leastImportant(n int) int {
	if t.classN == nil {
		return n - 1
	}
	best := n - 1
	for i := n - 2; i >= 0; i-- {
		if t.steady[i].class > t.steady[best].class {
			best = i
		}
	}
	return best
}

// setGroup records a group's weight and minimum-runtime cap.
func (a *Allocator) setGroup(g Group) {
	a.groups[g.Path] = g.Weight
	if g.MaxMinRuntime > 0 {
		a.groupMaxMR[g.Path] = g.MaxMinRuntime
	} else {
		delete(a.groupMaxMR, g.Path)
	}
	if g.Deserved > 0 {
		a.groupDes[g.Path] = g.Deserved
	} else {
		delete(a.groupDes, g.Path)
	}
	if g.Limit > 0 {
		a.groupLim[g.Path] = g.Limit
	} else {
		delete(a.groupLim, g.Path)
	}
}

// effMinRuntime is t's minimum runtime capped by the pool's and every enclosing group's cap.
func (a *Allocator) effMinRuntime(t *tenantRec) time.Duration {
	m := t.cfg.MinRuntime
	if a.maxMinRun > 0 {
		m = min(m, a.maxMinRun)
	}
	if len(a.groupMaxMR) == 0 {
		return m
	}
	for p := t.cfg.Path; p != ""; {
		if c, ok := a.groupMaxMR[p]; ok {
			m = min(m, c)
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return m
}

// floor is t's sharing-incentive floor in steady tasks, at most what it wants: its demand-aware
// entitlement of the steady pool (tree.entitlement) in whole tasks of its own, rounded down
// within the tolerance, or, when some tenant's entitlement holds none of its tasks, the
// whole-task filling of floors.go.
func (a *Allocator) floor(t *tenantRec) int {
	w := t.steadyWant()
	if w == 0 || t.unit == 0 {
		return w
	}
	if t.fEpoch == a.st.demEpoch && t.fWant == w && t.fOK {
		return t.fCache
	}
	a.ensureFloors()
	n := min(w, a.ffFloor[t.idx])
	t.fEpoch, t.fWant, t.fCache, t.fOK = a.st.demEpoch, w, n, true
	return n
}

// freshSurplus sets every leaf's surplus mark again once entitlements have changed.
func (a *Allocator) freshSurplus() {
	tr := &a.st
	a.ensureFloors()
	if tr.demStale {
		tr.demStale, tr.demDirty = false, tr.demDirty[:0]
		for _, t := range a.tenants {
			tr.setSur(t.sLeaf, len(t.steady) > a.keep(t))
		}
		return
	}
	for _, n := range tr.demDirty {
		a.leafBuf = tr.leavesUnder(n, a.leafBuf[:0])
		for _, l := range a.leafBuf {
			t := a.tenants[tr.tenant[l]]
			tr.setSur(l, len(t.steady) > a.keep(t))
		}
	}
	tr.demDirty = tr.demDirty[:0]
}

// limitRoom is how many more steady tasks of t the limits of its groups allow (a large number
// when none of them has a limit).
func (a *Allocator) limitRoom(t *tenantRec) int64 {
	tr := &a.st
	room := int64(1 << 62)
	if !tr.hasLimit {
		return room
	}
	for n := tr.parent[t.sLeaf]; n > 0; n = tr.parent[n] {
		l := tr.limit[n]
		if l == 0 {
			continue
		}
		u, h := tr.u(n), tr.histOf(n)
		for i, j := range tr.dims {
			if x := t.d[j]; x > 0 {
				used := u[i]
				if h != nil {
					used -= h[i] // limits bound tasks, not history
				}
				allowed := l * (1 + tieTolerance) * float64(a.capT[j])
				room = min(room, int64(math.Floor((allowed-float64(used))/float64(x))))
			}
		}
	}
	return max(room, 0)
}

// limitShort raises short (per resource, what must be freed for one more task of t) by what every
// group limit on t's path that one more task would exceed needs, and returns the innermost such
// group (0 when none binds): tasks stopped below it lower every binding group's use.
func (a *Allocator) limitShort(t *tenantRec, short []int64) int32 {
	tr := &a.st
	inner := int32(0)
	for n := tr.parent[t.sLeaf]; n > 0; n = tr.parent[n] {
		l := tr.limit[n]
		if l == 0 {
			continue
		}
		u, h := tr.u(n), tr.histOf(n)
		for i, j := range tr.dims {
			x := t.d[j]
			if x <= 0 {
				continue
			}
			used := u[i]
			if h != nil {
				used -= h[i]
			}
			allowed := int64(math.Floor(l * (1 + tieTolerance) * float64(a.capT[j])))
			if s := used + x - allowed; s > 0 {
				short[j] = max(short[j], s)
				if inner == 0 {
					inner = n
				}
			}
		}
	}
	return inner
}

// overLimit reports whether one more steady task of t would take a group above its limit.
func (a *Allocator) overLimit(t *tenantRec) bool { return a.limitRoom(t) < 1 }

// wakeLimited gives the tenants parked at a group's limit another try once the group's steady use
// fell (they are picked again and parked again if still over it).
func (a *Allocator) wakeLimited(t *tenantRec) {
	tr := &a.st
	if !tr.hasLimit {
		return
	}
	for n := tr.parent[t.sLeaf]; n > 0; n = tr.parent[n] {
		if tr.limit[n] == 0 || tr.limIn[n] == 0 {
			continue
		}
		a.leafBuf = tr.leavesUnder(n, a.leafBuf[:0])
		for _, l := range a.leafBuf {
			if tr.state[l] == limited {
				tr.unlimit(l)
				a.refreshSteady(a.tenants[tr.tenant[l]])
			}
		}
	}
}

// keep is how many steady tasks a share or floor claim leaves t: its reservation or its floor.
func (a *Allocator) keep(t *tenantRec) int { return max(t.cfg.Reservation, a.floor(t)) }

// leasesOn reports whether leases may be lent.
func (a *Allocator) leasesOn() bool { return a.leaseDur > 0 }

// rebuild derives every index from the authoritative state: resource index, dense vectors,
// both trees, usage, heaps, block indexes and time queues.
func (a *Allocator) rebuild() {
	kept := a.tenants[:0]
	for _, t := range a.tenants {
		if !t.removed {
			kept = append(kept, t)
		}
	}
	clear(a.tenants[len(kept):])
	a.tenants = kept
	sort.Slice(a.tenants, func(i, j int) bool { return a.tenants[i].cfg.Name < a.tenants[j].cfg.Name })
	names := sortedKeys(a.capacity)
	a.res = newResIndex(names)
	a.capT, _ = a.res.dense(a.capacity)
	a.capS = make([]int64, len(a.capT))
	for j, c := range a.capT {
		a.capS[j] = c - int64(math.Floor(float64(c)*a.burstPct/100))
	}
	clear(a.byName)
	a.pendingList, a.resList, a.touched = a.pendingList[:0], a.resList[:0], a.touched[:0]
	m := len(a.res.names)
	dense := make([]int64, len(a.tenants)*m) // one block for every task vector
	for i, t := range a.tenants {
		a.byName[t.cfg.Name] = int32(i)
		t.idx = int32(i)
		t.d = dense[i*m : (i+1)*m : (i+1)*m]
		a.denseInto(t.d, t.cfg.Task)
		t.inPending, t.inRes = false, false
		t.minRun = a.effMinRuntime(t)
		t.countClasses()
		t.fOK = false
		a.ffOK = false
		t.unit = dominant(t.d, a.capS, a.res.share)
		if t.touched == a.stamp {
			a.touched = append(a.touched, t.idx)
		}
	}
	a.needRebuild = false
	a.presize()
	a.buildTrees()
	a.recount()
	a.resetQueues()
}

// presize makes room for a first decision (an item per wanted task, a queue item per tenant, up
// to a bound) and for a few tasks per tenant, so that a first filling does not keep regrowing them.
// The tenants' task lists are cut from one block (each with its own capacity: growing one past it
// moves it out).
func (a *Allocator) presize() {
	est, need := 64, 0
	for _, t := range a.tenants {
		est += min(t.cfg.Demand, 1<<12) + 1
		if c := min(t.cfg.Demand, 32); cap(t.steady) < c {
			need += c
		}
	}
	if need > 0 {
		buf := make([]taskRec, need)
		for _, t := range a.tenants {
			if c := min(t.cfg.Demand, 32); cap(t.steady) < c {
				n := copy(buf[:c], t.steady)
				t.steady, buf = buf[:n:c], buf[c:]
			}
		}
	}
	if est = min(est, 1<<17); cap(a.out) < est {
		a.out = append(make([]Item, 0, est), a.out...)
	}
}

// presizeLeases does the same for the lease lists of the tenants about to ask for leases.
func (a *Allocator) presizeLeases(idx []int32) {
	want := func(t *tenantRec) int { return len(t.leases) + min(t.cfg.Demand-t.total(), 32) }
	need := 0
	for _, i := range idx {
		if t := a.tenants[i]; cap(t.leases) < want(t) {
			need += want(t)
		}
	}
	if need == 0 {
		return
	}
	buf := make([]leaseRec, need)
	for _, i := range idx {
		if t := a.tenants[i]; cap(t.leases) < want(t) {
			c := want(t)
			n := copy(buf[:c], t.leases)
			t.leases, buf = buf[:n:c], buf[c:]
		}
	}
}

// denseInto converts a task vector into d (zeroed, one entry per resource); resources the pool
// no longer has become a zero-capacity dimension implicitly (they were validated when the tenant
// arrived).
func (a *Allocator) denseInto(d []int64, v Vector) {
	for name, x := range v {
		if j, ok := a.res.pos[name]; ok {
			d[j], _ = toMicro(x)
		}
	}
}

func (a *Allocator) buildTrees() {
	a.st.reset(a.res.share, a.capT, 2*len(a.tenants)+1)
	a.lt.reset(a.res.share, a.capT, 2*len(a.tenants)+1)
	sNodes, lNodes := map[string]int32{"": 0}, map[string]int32{"": 0}
	for i, t := range a.tenants {
		t.sLeaf = a.st.addNode(a.ensureGroup(&a.st, sNodes, t.cfg.Path), t.cfg.Name, "", t.weight(), int32(i))
		t.lLeaf = a.lt.addNode(a.ensureGroup(&a.lt, lNodes, t.cfg.Path), t.cfg.Name, "", t.weight(), int32(i))
	}
	a.st.finish()
	a.lt.finish()
	for n, full := range a.st.full {
		if ti := a.st.tenant[n]; ti >= 0 {
			a.st.deserved[n] = a.tenants[ti].cfg.Deserved
		} else if n > 0 {
			a.st.deserved[n] = a.groupDes[full]
			if l := a.groupLim[full]; l > 0 {
				a.st.limit[n] = l
				a.st.hasLimit = true
			}
		}
	}
	a.assignClasses()
	a.st.preEager, a.st.preStale = false, true
	a.lt.preEager, a.lt.preStale = false, true
}

// ensureGroup returns the node of an interior path, creating it and its ancestors.
func (a *Allocator) ensureGroup(tr *tree, nodes map[string]int32, path string) int32 {
	if n, ok := nodes[path]; ok {
		return n
	}
	parent, name := int32(0), path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		parent, name = a.ensureGroup(tr, nodes, path[:i]), path[i+1:]
	}
	w, ok := a.groups[path]
	if !ok {
		w = 1
	}
	n := tr.addNode(parent, name, path, w, -1)
	nodes[path] = n
	return n
}

// assignClasses groups tenants with identical task vectors into classes, in both trees.
func (a *Allocator) assignClasses() {
	ids := map[string]int32{}
	var vecs [][]int64
	key := make([]byte, 0, 8*len(a.res.names))
	for _, t := range a.tenants {
		key = key[:0]
		for _, x := range t.d {
			key = binary.LittleEndian.AppendUint64(key, uint64(x))
		}
		c, ok := ids[string(key)]
		if !ok {
			c = int32(len(vecs))
			ids[string(key)] = c
			vecs = append(vecs, t.d)
		}
		a.st.class[t.sLeaf], a.lt.class[t.lLeaf] = c, c
	}
	for _, tr := range []*tree{&a.st, &a.lt} {
		tr.ci.reset(vecs, len(a.res.names))
		tr.blockedIn.init(len(tr.parent), len(vecs))
		tr.surIn.init(len(tr.parent), len(vecs))
	}
}

// recount recomputes usage, shares, preemptible marks and leaf states from the tasks.
func (a *Allocator) recount() {
	m := len(a.res.names)
	a.sUsed, a.tUsed = make([]int64, m), make([]int64, m)
	a.lDirty = a.lDirty[:0]
	a.lazyLease = a.lazyLease[:0]
	a.unmetN = 0
	a.st.initDem(func(leaf int32) bool { return a.tenants[a.st.tenant[leaf]].steadyWant() > 0 })
	for _, t := range a.tenants {
		t.unmet = false
		ns, nt := int64(len(t.steady)), int64(t.total())
		addScaled(a.sUsed, t.d, ns)
		addScaled(a.tUsed, t.d, nt)
		for n := t.sLeaf; n > 0; n = a.st.parent[n] {
			a.st.addUse(n, t.d, ns)
		}
		for n := t.lLeaf; n > 0; n = a.lt.parent[n] {
			a.lt.addUse(n, t.d, nt)
		}
		t.lCount, t.lDirty = t.total(), false
		a.st.setPre(t.sLeaf, t.preemptible())
		a.lt.setPre(t.lLeaf, len(t.leases) > 0)
	}
	a.addHistory()
	for n := range a.st.share {
		a.st.recalc(int32(n))
	}
	for _, t := range a.tenants {
		a.st.minElig[t.sLeaf] = eligValue(t)
	}
	a.st.recalcElig()
	for n := range a.lt.share {
		a.lt.recalc(int32(n))
	}
	for _, t := range a.tenants {
		a.refreshSteady(t)
		a.refreshLease(t)
	}
}

func (a *Allocator) resetQueues() {
	a.expiries.reset()
	a.retries.reset()
	for _, t := range a.tenants {
		for _, l := range t.leases {
			a.expiries.push(expiryEntry{at: l.expiry, seq: l.seq, tenant: t.idx})
		}
		if !t.retryAt.IsZero() {
			a.retries.push(retryEntry{at: t.retryAt.UnixNano(), tenant: t.idx})
		}
		if t.pending {
			a.markPending(t)
		}
	}
}

// Snapshot returns every tenant's standing, sorted by name.
func (a *Allocator) Snapshot() []TenantState {
	if a.needRebuild {
		a.rebuild()
	}
	out := make([]TenantState, 0, len(a.tenants))
	for _, t := range a.tenants {
		u := make([]int64, len(t.d))
		addScaled(u, t.d, int64(t.total()))
		ds := dominant(u, a.capT, a.res.share)
		out = append(out, TenantState{
			Name: t.cfg.Name, Path: t.cfg.Path, Demand: t.cfg.Demand,
			Tasks: t.total(), Steady: len(t.steady), Leased: len(t.leases),
			Reservation: t.cfg.Reservation, Cap: t.cfg.Cap,
			DominantShare: ds, WeightedShare: ds / t.weight(), History: t.hist,
		})
	}
	return out
}

// Config returns the Allocator's current configuration (capacity, groups, tenants with their
// current demand), sorted by tenant name.
func (a *Allocator) Config() Config {
	cfg := Config{Capacity: cloneVector(a.capacity), BurstPoolPercent: a.burstPct, LeaseDuration: a.leaseDur,
		MaxMinRuntime: a.maxMinRun, Limits: a.limits, HistoryHalfLife: a.histHL}
	for _, p := range sortedKeys(a.groups) {
		cfg.Groups = append(cfg.Groups, Group{Path: p, Weight: a.groups[p], MaxMinRuntime: a.groupMaxMR[p], Deserved: a.groupDes[p],
			Limit: a.groupLim[p]})
	}
	ts := make([]*tenantRec, len(a.tenants))
	copy(ts, a.tenants)
	sort.Slice(ts, func(i, j int) bool { return ts[i].cfg.Name < ts[j].cfg.Name })
	for _, t := range ts {
		if !t.removed {
			cfg.Tenants = append(cfg.Tenants, cloneTenant(t.cfg))
		}
	}
	return cfg
}

// Clone returns an independent copy with the same tasks, leases, time and task numbering.
func (a *Allocator) Clone() *Allocator {
	c := &Allocator{
		capacity: cloneVector(a.capacity), burstPct: a.burstPct, leaseDur: a.leaseDur,
		histHL: a.histHL, histAt: a.histAt,
		maxMinRun: a.maxMinRun, limits: a.limits, groupMaxMR: map[string]time.Duration{}, groupDes: map[string]float64{},
		groupLim: map[string]float64{},
		groups:   map[string]float64{}, byName: map[string]int32{}, known: map[string]bool{},
		now: a.now, nowNS: a.nowNS, started: a.started, seq: a.seq, stamp: a.stamp,
	}
	c.expiries.less = expiryLess
	c.retries.less = retryLess
	for k, w := range a.groups {
		c.groups[k] = w
	}
	for k, m := range a.groupMaxMR {
		c.groupMaxMR[k] = m
	}
	for k, d := range a.groupDes {
		c.groupDes[k] = d
	}
	for k, l := range a.groupLim {
		c.groupLim[k] = l
	}
	for k := range a.known {
		c.known[k] = true
	}
	for _, t := range a.tenants {
		if t.removed {
			continue
		}
		n := c.addTenantRec(t.cfg)
		n.steady = append([]taskRec(nil), t.steady...)
		n.leases = append([]leaseRec(nil), t.leases...)
		if t.classN != nil { // the class counts go with the tasks (nil: the tenant has no classes)
			n.classN = append([]int(nil), t.classN...)
		}
		n.pending, n.retryAt, n.resRetryAt, n.minRunWait = t.pending, t.retryAt, t.resRetryAt, t.minRunWait
		n.hist = t.hist
	}
	c.needRebuild, c.allPending = true, a.allPending
	return c
}

// Now is the time of the last step.
func (a *Allocator) Now() time.Time { return a.now }

func (a *Allocator) checkNow(now time.Time) error {
	if a.started && now.Before(a.now) {
		return fmt.Errorf("apply at %s: time went backwards from %s", now.Format(time.RFC3339Nano), a.now.Format(time.RFC3339Nano))
	}
	return nil
}
