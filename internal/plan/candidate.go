package plan

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Shares tried per sharing mode: how many replicas split one GPU or MIG instance. The whole-GPU
// shares above coarseShare are tried only where one replica fits their memory cap (finestShare),
// a test of the memory fit alone, so that large models cost no evaluation there (ADR 0056). The
// MIG kinds keep their coarse ladders: MIG+MPS 6 and 8 and MIG+time-slicing 8 saved no GPU on the
// synthetic suites and cost about an eighth more planning time on the DRA path. Between two
// shares of a ladder, and past its last one up to the finest share that fits, the lower bound
// counts every other share by rounding (fineShareBound).
var (
	mpsShares      = []int{2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48}
	timeShares     = []int{2, 3, 4, 6, 8, 12, 16, 24, 32, 48}
	migMPSShares   = []int{2, 3, 4}
	migTimeShares  = []int{2, 4}
	kindPreference = []v1.SliceKind{v1.SliceExclusive, v1.SliceMIG, v1.SliceMIGMPS, v1.SliceMPS, v1.SliceMIGTimeSlice, v1.SliceTimeSlice}
)

// Limits of sharing. An MPS server runs at most maxMPSClients client processes on one GPU or
// MIG instance (NVIDIA's MPS: 48 on Volta and later), so no plan puts more MPS replicas there;
// time-slicing has no such limit, and perf models at most maxTimeShare contexts. Shares up to
// coarseShare are candidates whether or not they fit (their misfits are reported).
const (
	maxMPSClients = 48
	maxTimeShare  = 1024
	coarseShare   = 8
)

// cand is one way to serve a tenant: a slice kind on a board, evaluated.
type cand struct {
	board   *gpu.Board
	kind    v1.SliceKind
	profile *gpu.Profile // MIG kinds
	share   int          // replicas per GPU or instance: 1 for exclusive and mig
	// tp is the tensor-parallel degree: an exclusive replica over tp whole GPUs of one node
	// (unitFrac, memFrac and compFrac are tp); 1 otherwise.
	tp int
	// unitFrac is the GPU-equivalents of one unit (a GPU, or a MIG instance:
	// max(memory slices / board's, compute slices / board's)); memFrac and compFrac are its two parts.
	unitFrac, memFrac, compFrac float64
	ev                          *evalResult
	replicas                    int
	cost                        float64 // replicas / share × unitFrac
	reject                      v1.ReasonCode
	why                         string
	// sz is the queueing model's sizing (LLM tenants); lbReplicas is the fewest replicas any
	// plan on this slice kind can use (the larger of the load's saturation count and the TTFT
	// floor, both with idle neighbours, with the pool's bounds), which the lower bound uses
	// instead of replicas.
	sz         sizing
	lbReplicas int
	// need is the replicas the load needs within the SLO on this slice, before the pool's
	// bounds (0: no count meets it); asked is the count after them (redundancy, minReplicas,
	// the reservation or a fixed count), also kept when the candidate is rejected for it.
	need, asked int
	// key is keyOf(keyFor, c), set by its first call; kid is its number in kidIn (keyIDs.of).
	key    groupKey
	keyFor *tenant
	kid    int
	kidFor *tenant
	kidIn  *keyIDs
	// rkid is keyOf(rkidFor, c)'s number in rkidIn (rescueKeyIDs.of), set by its first call.
	rkidFor *tenant
	rkidIn  *rescueKeyIDs
	// use is useKey(c), set by its first call; useID is its number in useIn (keyIDs.useOf).
	use   string
	useIn *keyIDs
	// The small fields last, in one word: the evaluation keeps dozens of candidates per tenant
	// (TestEvalMemoSizes).
	// inBound marks a rejected candidate the lower bound still counts (in its tenant's boundExtra).
	inBound     bool
	rkid, useID int32
}

// evalResult is the memory fit and the performance of one replica on a slice.
type evalResult struct {
	// fit is the memory fit, shared with the fit cache and every evaluation of the same model,
	// options and slice (read only: a change is made on a copy); noFit when none was made.
	fit      *llm.Fit
	smPct    int   // MPS active-thread percentage, 0 when not MPS
	capBytes int64 // memory cap of a shared replica, 0 when not shared
	// q is the replica's queueing model (nil for a measured profile); oneRate is one replica's
	// highest rate within the SLO by it.
	q   *qmodel
	err error
	// memo is oneRate's answer: set by measureProfile for a measured profile, else computed by
	// the queueing model for slo and out tokens on first use (rateSet), since most candidates
	// are never chosen and their rate is read only for the chosen one's reasons and prediction.
	// Every read goes through oneRate; memo itself may not be set yet.
	memo    perf.Rate
	rateSet bool
	slo     perf.SLO
	out     int
	// point is the measured row chosen for a tenant with a measured profile; why says why
	// none meets its latency limit.
	point perf.MeasuredPoint
	why   string
}

// label names the candidate for people: "mig 3g.40gb", "mps 1/4", "mig 3g.40gb + mps 1/2".
func (c *cand) label() string {
	switch c.kind {
	case v1.SliceExclusive:
		if c.tp > 1 {
			return fmt.Sprintf("tensor-parallel %d GPUs", c.tp)
		}
		return "exclusive GPU"
	case v1.SliceMIG:
		return "mig " + c.profile.Name
	case v1.SliceMIGMPS:
		return fmt.Sprintf("mig %s + mps 1/%d", c.profile.Name, c.share)
	case v1.SliceMIGTimeSlice:
		return fmt.Sprintf("mig %s + timeslice 1/%d", c.profile.Name, c.share)
	case v1.SliceMPS:
		return fmt.Sprintf("mps 1/%d", c.share)
	}
	return fmt.Sprintf("timeslice 1/%d", c.share)
}

func (c *cand) shared() bool {
	return c.share > 1 || c.kind == v1.SliceMPS || c.kind == v1.SliceTimeSlice
}

func (c *cand) whole() bool {
	return c.kind == v1.SliceExclusive || c.kind == v1.SliceMPS || c.kind == v1.SliceTimeSlice
}

func kindRank(k v1.SliceKind) int {
	for i, x := range kindPreference {
		if x == k {
			return i
		}
	}
	return len(kindPreference)
}

// migProfiles are the MIG profiles of b the planner uses: those with a known memory size, media
// variants folded into their base profile (llm.Slices).
func migProfiles(b *gpu.Board) []*gpu.Profile {
	if !b.MIGCapable() {
		return nil
	}
	var out []*gpu.Profile
	for _, s := range llm.Slices(b) {
		if s.Kind != llm.SliceMIG {
			continue
		}
		if p, err := b.Profile(s.Name); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// migProfiles is migProfiles(b), memoised (callers read it, never change it).
func (c *evalCache) migProfiles(b *gpu.Board) []*gpu.Profile {
	ps, ok := c.migProfs[b]
	if !ok {
		ps = migProfiles(b)
		if c.migProfs == nil {
			c.migProfs = map[*gpu.Board][]*gpu.Profile{}
		}
		c.migProfs[b] = ps
	}
	return ps
}

// candSlabLen is how many candidates newCand allocates at once: as many as fill candSlabBytes,
// whole pages of the allocator, so that no slab leaves most of a page unused (128 candidates of
// 400 bytes took seven pages and used six and a quarter of them).
const candSlabLen = candSlabBytes / int(unsafe.Sizeof(cand{}))

// candSlabBytes is the memory of one slab of candidates: seven pages of 8 KiB.
const candSlabBytes = 7 << 13

// newCand is a zero candidate for candidates, allocated with others: every tenant gets dozens.
func (c *evalCache) newCand() *cand {
	if len(c.cands) == 0 {
		c.cands = make([]cand, candSlabLen)
	}
	cd := &c.cands[0]
	c.cands = c.cands[1:]
	return cd
}

// candidates lists the slice kinds the tenant's isolation tier and the policy allow on b.
func (p *planner) candidates(tn *tenant, b *gpu.Board) []*cand {
	var out []*cand
	add := func(kind v1.SliceKind, prof *gpu.Profile, share int) {
		c := p.cache.newCand()
		*c = cand{board: b, kind: kind, profile: prof, share: share, tp: 1, unitFrac: 1, memFrac: 1, compFrac: 1}
		if prof != nil {
			c.memFrac = float64(prof.MemorySlices) / float64(b.MemorySlices)
			c.compFrac = float64(prof.ComputeSlices) / float64(b.ComputeSlices)
			c.unitFrac = max(c.memFrac, c.compFrac)
		}
		out = append(out, c)
	}
	shareMPS := tn.group != "" && p.modes[v1.ModeMPS]
	shareMIGMPS := shareMPS && p.migMPSServed()
	shareTS := tn.group == "shared" && tn.t.LowFrequency && p.modes[v1.ModeTimeSlice]
	if tn.measured != nil { // measured: MPS up to measuredMaxProcs processes, no time-slicing
		shareTS = false
		add = measuredAdd(add)
	}
	if p.modes[v1.ModeExclusive] {
		add(v1.SliceExclusive, nil, 1)
		if tn.measured == nil && tn.perfM != nil {
			// tensor parallelism over whole GPUs of one node, at the degrees the model's heads and
			// the board's link allow, no more than a node of the fleet holds
			for _, tp := range tn.perfM.TensorParallelDegrees(b) {
				if tp <= p.maxNodeGPUs(b) {
					c := p.cache.newCand()
					*c = cand{board: b, kind: v1.SliceExclusive, share: 1, tp: tp,
						unitFrac: float64(tp), memFrac: float64(tp), compFrac: float64(tp)}
					out = append(out, c)
				}
			}
		}
	}
	if p.modes[v1.ModeMIG] {
		for _, prof := range p.cache.migProfiles(b) {
			add(v1.SliceMIG, prof, 1)
			for _, k := range migMPSShares {
				if shareMIGMPS && p.shareTried(tn, b, prof, v1.SliceMIGMPS, k) {
					add(v1.SliceMIGMPS, prof, k)
				}
			}
			for _, k := range migTimeShares {
				if shareTS && p.shareTried(tn, b, prof, v1.SliceMIGTimeSlice, k) {
					add(v1.SliceMIGTimeSlice, prof, k)
				}
			}
		}
	}
	for _, k := range mpsShares {
		if shareMPS && p.shareTried(tn, b, nil, v1.SliceMPS, k) {
			add(v1.SliceMPS, nil, k)
		}
	}
	for _, k := range timeShares {
		if shareTS && p.shareTried(tn, b, nil, v1.SliceTimeSlice, k) {
			add(v1.SliceTimeSlice, nil, k)
		}
	}
	return out
}

// shareTried says whether the share 1/k of kind is a candidate: always up to coarseShare, finer
// only where one replica fits its memory cap. Measured profiles keep their own limit
// (measuredAdd).
func (p *planner) shareTried(tn *tenant, b *gpu.Board, prof *gpu.Profile, kind v1.SliceKind, k int) bool {
	return k <= coarseShare || tn.measured != nil || k <= p.finestShare(tn, b, prof, kind)
}

// fineShare reports whether c shares a whole GPU finer than coarseShare, the ladders the planner
// used before it tried finer shares (ADR 0056); optimise holds a second plan to those when the
// first leaves tenants short, and the choice also starts from them (coarseSeed).
func fineShare(c *cand) bool {
	return (c.kind == v1.SliceMPS || c.kind == v1.SliceTimeSlice) && c.share > coarseShare
}

// dropDominatedFine keeps a feasible share finer than the coarse ladders (fineShare) among the
// choice's candidates only where it costs less than every feasible coarse share of its board,
// kind and profile: a finer share needs no fewer replicas, so it pays only where its replicas
// take less of a GPU in all, and the choice's local search then weighs fewer candidates per
// tenant. The shares dropped stay in the lower bound (boundExtra), at their own counts.
func (p *planner) dropDominatedFine(tn *tenant) {
	if !slices.ContainsFunc(tn.feasible, fineShare) {
		return
	}
	kept := tn.feasible[:0:0]
	for _, c := range tn.feasible {
		if fineShare(c) && slices.ContainsFunc(tn.feasible, func(o *cand) bool {
			return !fineShare(o) && o.board == c.board && o.kind == c.kind && o.profile == c.profile && o.cost <= c.cost+1e-9
		}) {
			tn.boundExtra = append(tn.boundExtra, c)
			continue
		}
		kept = append(kept, c)
	}
	tn.feasible = kept
}

// maxShare is the most replicas one GPU or MIG instance holds under a sharing kind.
func maxShare(kind v1.SliceKind) int {
	if kind == v1.SliceMPS || kind == v1.SliceMIGMPS {
		return maxMPSClients
	}
	return maxTimeShare
}

// sharedSlice is the memory one replica of a share 1/k of b's GPU (prof nil) or of MIG instance
// prof gets: the device's memory over k, in whole MiB, as the plan's limits give it.
func sharedSlice(b *gpu.Board, prof *gpu.Profile, k int) (sl llm.Slice, capBytes int64) {
	devBytes, capBytes := sharedCap(b, prof, k)
	return llm.Slice{Board: b.Name, Kind: llm.SliceShared, Name: "shared-" + llm.FormatGiB(capBytes), MemoryBytes: capBytes, GPUBytes: devBytes}, capBytes
}

// sharedCap is sharedSlice's device memory and memory cap, without the slice.
func sharedCap(b *gpu.Board, prof *gpu.Profile, k int) (devBytes, capBytes int64) {
	devBytes = llm.VisibleBytes(b.MemoryMiB)
	if prof != nil {
		devBytes = prof.MemoryMiB * llm.MiB
	}
	return devBytes, devBytes / int64(k) / llm.MiB * llm.MiB
}

// finestShare is the most replicas of tn that one GPU of b (prof nil) or one MIG instance of
// prof holds under kind, each with its equal share of the memory: the largest k up to
// maxShare(kind) whose memory cap passes the memory fit (1 when not even a half does). The fit
// is monotone in the cap (a smaller cap holds less weights and cache), so a binary search finds
// it; it is memoised by model, options, device and limit.
func (p *planner) finestShare(tn *tenant, b *gpu.Board, prof *gpu.Profile, kind v1.SliceKind) int {
	top := maxShare(kind)
	k := finestKey{shape: p.cache.qshape(tn), board: b, prof: prof, top: top}
	if v, ok := p.cache.finest[k]; ok {
		return v
	}
	fits := func(n int) bool {
		f, err := p.cache.fitOn(tn, b, prof, n)
		return err == nil && f.Fits
	}
	v := 1
	switch {
	case !fits(2):
	case fits(top):
		v = top
	default:
		lo, hi := 2, top // fits(lo), !fits(hi)
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if fits(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		v = lo
	}
	p.cache.finest[k] = v
	return v
}

// finestKey is what finestShare depends on: the tenant's model and options (within its shape
// without the SLO, evalCache.qshape), the device and the limit.
type finestKey struct {
	shape int
	board *gpu.Board
	prof  *gpu.Profile
	top   int
}

// fineShareBound adds to tn.boundExtra the shares no candidate tries, so that the lower bound
// covers every share 1/n of a GPU or MIG instance a plan may use: n up to maxShare(kind) and up
// to the finest that fits the memory (finestShare). For two consecutive shares k1 < k2 of a
// kind's ladder that the bound counts, a share n with k1 < n < k2 is counted as a column of
// share k2 − 1 (a replica takes at least 1/(k2 − 1) of its unit, since its unit holds at most
// k2 − 1 replicas) at the lower bound's count of k1 (its replica has less memory, and under MPS
// fewer SMs, than one at k1, and a replica never does more with less of either: fewer or equal
// KV cache places and no faster a step, with idle neighbours — the monotonicity asserted by
// TestBoundCountMonotoneInShare); past the ladder's last share kL that the bound counts, up to
// the finest share that fits, a column of that finest share at kL's count. A share the bound
// does not count (no fit, no request in the cache, a step alone above the SLO) leaves every
// finer share out, by the same monotonicity.
func (p *planner) fineShareBound(tn *tenant) {
	if tn.measured != nil {
		return
	}
	// candidates lists each board's and profile's shares of one kind together, coarsest first
	cs := tn.cands
	for i := 0; i < len(cs); {
		c := cs[i]
		j := i + 1
		if !c.shared() || c.tp > 1 {
			i = j
			continue
		}
		for j < len(cs) && cs[j].board == c.board && cs[j].kind == c.kind && cs[j].profile == c.profile {
			j++
		}
		p.fineSeries(tn, cs[i:j])
		i = j
	}
}

// fineSeries adds the rounded columns of one series of shares (one board, kind and profile,
// coarsest first).
func (p *planner) fineSeries(tn *tenant, cs []*cand) {
	top := p.finestShare(tn, cs[0].board, cs[0].profile, cs[0].kind)
	for i, c := range cs {
		if !(c.reject == "" || c.inBound) || c.lbReplicas <= 0 || c.share >= top {
			return
		}
		if i+1 < len(cs) && cs[i+1].share <= c.share {
			return // not a ladder, coarsest first: count nothing more
		}
		hi := top
		if i+1 < len(cs) {
			hi = min(cs[i+1].share-1, top)
		}
		if hi > c.share {
			tn.boundExtra = append(tn.boundExtra, finerColumn(c, hi))
		}
	}
}

// finerColumn is a column of the lower bound only: c's slice at share n, at c's bound count.
func finerColumn(c *cand, n int) *cand {
	return &cand{board: c.board, kind: c.kind, profile: c.profile, share: n, tp: 1,
		unitFrac: c.unitFrac, memFrac: c.memFrac, compFrac: c.compFrac, ev: c.ev,
		lbReplicas: c.lbReplicas, sz: c.sz, need: c.need, asked: c.asked,
		reject: v1.ReasonSLOUnmet, why: fmt.Sprintf("counted by the lower bound only, at the count of %s", c.label())}
}

// migMPSServed says whether the pool's device path serves MPS inside a MIG instance. NVIDIA's
// DRA driver runs MPS for the very instance a claim got; the device plugin runs no MPS on MIG
// devices (its getMPSOptions: "sharing using MPS is not supported for MIG devices") and hands a
// pod any instance of a profile, and the node agent runs no per-instance daemons either. So
// MIG+MPS is a candidate only with policy.kubernetesDeviceAPI: dra; on any other path the
// renderer would report every such instance as a problem.
func (p *planner) migMPSServed() bool {
	return p.pool.Policy.DeviceAPI() == v1.DeviceAPIDRA
}

// noMIGMPS is why a tenant that may share by MPS gets no MIG+MPS candidate on a MIG-capable
// board of the fleet, or "" when it does or could not anyway.
func (p *planner) noMIGMPS(tn *tenant) string {
	if tn.group == "" || !p.modes[v1.ModeMPS] || !p.modes[v1.ModeMIG] || p.migMPSServed() {
		return ""
	}
	for _, b := range p.boards {
		if len(migProfiles(b)) > 0 {
			return "MIG+MPS needs policy.kubernetesDeviceAPI: dra (the device plugin runs no MPS on MIG instances)"
		}
	}
	return ""
}

// exclusions explains the slice kinds the tenant may not use, or "".
func (p *planner) exclusions(tn *tenant) (v1.ReasonCode, string) {
	var parts []string
	code := v1.ReasonModeNotAllowed
	for _, m := range []v1.Mode{v1.ModeExclusive, v1.ModeMIG, v1.ModeMPS, v1.ModeTimeSlice} {
		if !p.modes[m] {
			parts = append(parts, fmt.Sprintf("%s is not in policy.allowedModes", m))
		}
	}
	switch {
	case tn.group == "":
		code = v1.ReasonIsolationHard
		parts = append(parts, "isolation hard allows only exclusive GPUs and unshared MIG instances (no MPS or time-slice neighbour)")
	case strings.HasPrefix(tn.group, "solo:"):
		code = v1.ReasonTrustGroup
		parts = append(parts, "isolation soft without a path has no trust group: MPS only among its own replicas, no time-slicing")
	case strings.HasPrefix(tn.group, "soft:"):
		code = v1.ReasonTrustGroup
		parts = append(parts, fmt.Sprintf("isolation soft: MPS only within trust group %q, no time-slicing", strings.TrimPrefix(tn.group, "soft:")))
	case !tn.t.LowFrequency:
		parts = append(parts, "time-slicing is kept for low-frequency tenants")
	}
	if len(parts) == 0 {
		return "", ""
	}
	return code, strings.Join(parts, "; ")
}

// evaluate fits every tenant on every candidate slice, sizes its replicas and keeps the feasible
// candidates sorted cheapest first.
func (p *planner) evaluate() {
	for _, tn := range p.tenants {
		if p.stopped() {
			return
		}
		p.evalTenant(tn)
		if splits := e2eSplits(tn); len(splits) > 1 {
			p.evalSplits(tn, splits)
		}
		fixedFloors(tn)
	}
}

// evalTenant is evaluate for one tenant, at its SLO targets tn.slo.
func (p *planner) evalTenant(tn *tenant) {
	for _, b := range p.boards {
		for _, c := range p.candidates(tn, b) {
			p.evalCand(tn, c)
			tn.cands = append(tn.cands, c)
			if c.reject == "" {
				tn.feasible = append(tn.feasible, c)
			}
		}
	}
	p.fixedSlices(tn)
	p.dropDominatedFine(tn)
	sortCands(tn.feasible)
	for _, c := range tn.cands {
		if c.reject != "" && p.boundAdmits(tn, c) {
			tn.boundExtra = append(tn.boundExtra, c)
			c.inBound = true
		}
	}
	p.fineShareBound(tn)
}

// boundAdmits reports whether the lower bound must still count a rejected candidate, and sets
// its lbReplicas. The sizing rejects a slice kind when its SLO check fails with every neighbour
// busy (sizingLoad), or when the busy count exceeds maxReplicas or the fleet, and fixedSlices
// drops kinds where a fixed count fares worse by that check; a plan may still give the replicas
// idle neighbours (light tenants, or none) and meet the SLO there, so the bound keeps every
// such kind at its own count, the larger of the saturation count and the TTFT floor with idle
// neighbours under the pool's bounds. It leaves a kind out only for reasons no neighbour load
// changes: the replica does not fit its memory, its KV cache holds less than one request, a
// request's decode step alone (each of its decode steps takes at least that, lbfloor.go) is
// above the TPOT target or its whole prompt alone above the TTFT target (fixed request
// lengths only), or its own count is above maxReplicas or what the fleet holds. Measured
// profiles are left as they are.
func (p *planner) boundAdmits(tn *tenant, c *cand) bool {
	ev := c.ev
	if ev == nil || ev.q == nil || ev.err != nil || !ev.fit.Fits || ev.why != "" {
		return false
	}
	q := ev.q.bestCase()
	if q.kvSeqs < 1 {
		return false
	}
	if lengthLaw(tn.t.Traffic) == "" {
		pf, dec := q.floorTimes()
		if tn.slo.TPOT > 0 && q.out >= 2 && dec > tn.slo.TPOT.Seconds() {
			return false
		}
		if tn.slo.TTFT > 0 && pf > tn.slo.TTFT.Seconds() {
			return false
		}
	}
	if c.replicas > 0 && c.lbReplicas > 0 { // sized, then dropped by fixedSlices: its count stands
		return true
	}
	lowest := 1
	if lam := peakRate(tn.t.Traffic); lam > 0 {
		lowest = q.saturation(lam)
	}
	lb := poolFloor(tn.t, max(lowest, ev.q.ttftFloor(floorRate(tn.t.Traffic), tn.slo)))
	if m := maxReplicasOf(tn.t); m > 0 && lb > m {
		return false
	}
	if lb > len(p.fleet)*7*max(c.share, 1) {
		return false
	}
	c.lbReplicas = lb
	return true
}

// poolFloor applies the pool's bounds to a lower bound on the replicas the load needs: a fixed
// count replaces it, redundancy adds one, minReplicas and the reservation are floors.
func poolFloor(t v1.Tenant, lowest int) int {
	lb := lowest
	if t.Replicas != nil {
		lb = *t.Replicas
	}
	if t.Redundancy {
		lb++
	}
	if t.Replicas == nil {
		lb = max(lb, minReplicasOf(t))
	}
	return max(lb, t.Reservation, 1)
}

func sortCands(cs []*cand) {
	less := func(a, b *cand) int {
		switch {
		case a.cost < b.cost-1e-12:
			return -1
		case a.cost > b.cost+1e-12:
			return 1
		case a.tp != b.tp: // at equal cost, fewer GPUs per replica: no tensor parallelism unless cheaper
			return a.tp - b.tp
		case a.replicas != b.replicas:
			return a.replicas - b.replicas
		case kindRank(a.kind) != kindRank(b.kind):
			return kindRank(a.kind) - kindRank(b.kind)
		case a.share != b.share:
			return a.share - b.share
		}
		return compareJoined(a.board.Name, profName(a.profile), b.board.Name, profName(b.profile))
	}
	sortFunc(cs, less)
}

// compareJoined is strings.Compare(a1+a2, b1+b2) without joining the strings.
func compareJoined(a1, a2, b1, b2 string) int {
	for i := 0; ; i++ {
		ca, okA := byteOfJoined(a1, a2, i)
		cb, okB := byteOfJoined(b1, b2, i)
		switch {
		case !okA && !okB:
			return 0
		case !okA:
			return -1
		case !okB:
			return 1
		case ca != cb:
			if ca < cb {
				return -1
			}
			return 1
		}
	}
}

// byteOfJoined is byte i of s1+s2, false past its end.
func byteOfJoined(s1, s2 string, i int) (byte, bool) {
	if i < len(s1) {
		return s1[i], true
	}
	if i -= len(s1); i < len(s2) {
		return s2[i], true
	}
	return 0, false
}

func profName(p *gpu.Profile) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// evalCand fills c's evaluation, replicas, cost or rejection.
func (p *planner) evalCand(tn *tenant, c *cand) {
	k := p.cache.key(tn, c)
	ev := p.cache.get(k, func() *evalResult { return p.measure(tn, c) })
	c.ev = ev
	switch {
	case ev.err != nil:
		c.reject, c.why = v1.ReasonNoFit, ev.err.Error()
		return
	case !ev.fit.Fits:
		c.reject, c.why = v1.ReasonNoFit, strings.Join(ev.fit.Reasons, "; ")
		return
	case ev.why != "":
		c.reject, c.why = v1.ReasonSLOUnmet, ev.why
		return
	}
	if tn.overCtx > overContextMiss {
		// More requests than a p99 target allows are refused for their length: no count helps.
		c.reject, c.why = v1.ReasonSLOUnmet, "no replica count meets the SLO: "+overContextWhy(tn.overCtx, tn.llmOpt.Context)+
			fmt.Sprintf(", more than the %.0f %% a p99 target allows", 100*overContextMiss)
		return
	}
	if ev.q == nil { // a measured profile: ParvaGPU's rule, replicas = ⌈rps / rate⌉
		p.sizeByRate(tn, c)
		return
	}
	edge := p.edgeMargin(tn)
	sz := p.cache.size(tn, k, edge, func() sizing {
		lam := peakRate(tn.t.Traffic)
		s := ev.q.size(lam, tn.slo)
		if edge && s.n > 0 && !ev.q.admits(lam/confirmRiskLoad, s.n, tn.slo) {
			// A pool the confirmation does not simulate: the count carries the rate at most
			// confirmRiskLoad of the model's capacity (edgeMargin). More than
			// maxSearchReplicas at the margin's rate keeps the model's count.
			if e := ev.q.size(lam/confirmRiskLoad, tn.slo); e.n > s.n {
				s.n, s.at = e.n, &sizedState{q: ev.q, lam: lam, n: e.n}
			}
		}
		switch {
		case s.n > 0 && s.lowest > 1: // idle neighbours never make it larger
			s.boundLowest = min(s.lowest, ev.q.bestCase().saturation(lam))
		case s.n > 0:
			s.boundLowest = s.lowest
		}
		return s
	})
	c.sz = sz
	if sz.n == 0 && tn.t.Replicas == nil {
		c.reject, c.why = v1.ReasonSLOUnmet, sz.why
		if sz.tooMany {
			c.reject = v1.ReasonNoCapacity
		}
		return
	}
	// The lower bound's count: the saturation count, or the TTFT floor (lbfloor.go) when higher,
	// both with idle neighbours (the sizing's saturation count assumes busy ones).
	p.setReplicas(tn, c, sz.n, max(sz.boundLowest, ev.q.ttftFloor(floorRate(tn.t.Traffic), tn.slo)))
}

// edgeMargin reports whether tn's queueing-model count must carry its rate at most
// confirmRiskLoad of the model's capacity (ADR 0104): when the planner is given a simulator
// (Options.Simulate) but the pool has more than confirmMaxTenants tenants, so that no
// simulation confirms its counts, for a tenant the confirmation would have judged (a Poisson,
// constant or diurnal rate; not a count the pool fixes). A load at the model's edge is what the
// confirmation raises on smaller pools, and above its size nothing else would. Without a
// simulator the caller asks for the queueing model's counts alone, and gets them.
func (p *planner) edgeMargin(tn *tenant) bool {
	return p.o.Simulate != nil && len(p.tenants) > confirmMaxTenants && tn.t.Replicas == nil &&
		tn.t.Traffic.RPS > 0 && patternConfirmable(tn.t.Traffic.Pattern)
}

// sizeByRate sizes a measured tenant's candidate: ⌈rps / rate⌉ replicas of the measured rate.
func (p *planner) sizeByRate(tn *tenant, c *cand) {
	ev := c.ev
	if ev.oneRate().RequestsPerSec <= 0 && tn.t.Traffic.RPS > 0 && tn.t.Replicas == nil {
		c.reject, c.why = v1.ReasonSLOUnmet, fmt.Sprintf("no rate meets the SLO (p99 latency %s at a trickle)", roundDur(ev.oneRate().TTFT))
		return
	}
	n, lowest, need := 1, 1, 1
	if tn.t.Traffic.RPS > 0 && ev.oneRate().RequestsPerSec <= 0 {
		need = 0 // a fixed count, which no rate carries
	}
	if rate := ev.oneRate().RequestsPerSec; rate > 0 && tn.t.Traffic.RPS > 0 {
		// Checked: a tiny rate would make the quotient overflow int; above maxDemandReplicas no
		// fleet can place the replicas anyway (setReplicas rejects them for capacity).
		n = max(1, int(min(math.Ceil(tn.t.Traffic.RPS/rate-1e-9), maxDemandReplicas)))
		lowest = n
		n = p.fillPartialUnit(tn, c, n)
		need = n
	}
	p.setReplicas(tn, c, need, lowest)
}

// fillPartialUnit makes n replicas of a measured tenant on c's slice carry its rate when they
// do not fill their last GPU or instance: that unit runs n mod share processes, each at the
// measured rate for that many processes (which may be below the rate for share processes), so
// replicas are added until the units together carry traffic.rps, at most up to a full last unit.
func (p *planner) fillPartialUnit(tn *tenant, c *cand, n int) int {
	k := c.share
	if k <= 1 || n >= maxDemandReplicas {
		return n
	}
	full := c.ev.oneRate().RequestsPerSec
	for ; n%k != 0; n++ {
		r := n % k
		part := 0.0
		if pt, err := tn.measured.Best(measuredGPCs(c), r, tn.batchLimit); err == nil {
			part = float64(r) * pt.Throughput
		}
		if float64(n-r)*full+part >= tn.t.Traffic.RPS-1e-9 {
			break
		}
	}
	return n
}

// setReplicas applies the pool's bounds to the replicas the load needs (need; 0: no count meets
// the SLO) and sets the candidate's replicas, lower bound and cost, or rejects it.
func (p *planner) setReplicas(tn *tenant, c *cand, need, lowest int) {
	t := tn.t
	n, lb := need, lowest
	c.need = need
	if t.Replicas != nil {
		n, lb = *t.Replicas, *t.Replicas
		if t.Redundancy {
			n, lb = n+1, lb+1
		}
	} else {
		if t.Redundancy {
			n, lb = n+1, lb+1
		}
		if m := minReplicasOf(t); n < m {
			n = m
		}
		lb = max(lb, minReplicasOf(t))
	}
	n, lb = max(n, t.Reservation, 1), max(lb, t.Reservation, 1)
	c.asked = n
	if m := maxReplicasOf(t); m > 0 && n > m {
		c.reject, c.why = v1.ReasonOverCap, fmt.Sprintf("needs %d replicas%s, more than %s", n, spareNote(t), maxReplicasName(t))
		return
	}
	if most := len(p.fleet) * 7 * max(c.share, 1); n > most { // 7: the most MIG instances a GPU holds
		c.reject, c.why = v1.ReasonNoCapacity, fmt.Sprintf("needs %d replicas for %.3g req/s, more than the %d GPUs of the fleet can hold on this slice kind (%d)",
			n, t.Traffic.RPS, len(p.fleet), most)
		return
	}
	c.lbReplicas = min(lb, n)
	p.setCandReplicas(c, n)
}

// setCandReplicas sets c's replica count and the cost the choice weighs it by (GPU-equivalents:
// replicas over the share, times the unit's fraction of a GPU), and counts the change
// (planner.replicasSet).
func (p *planner) setCandReplicas(c *cand, n int) {
	c.replicas, c.cost = n, float64(n)/float64(c.share)*c.unitFrac
	p.replicasSet.Add(1)
}

// minReplicasOf is the pool's floor on the replica count (minReplicas), 0 when unset.
func minReplicasOf(t v1.Tenant) int {
	if t.MinReplicas != nil {
		return *t.MinReplicas
	}
	return 0
}

// maxReplicasOf is the tighter of maxReplicas and cap, 0 when neither is set.
func maxReplicasOf(t v1.Tenant) int {
	m := 0
	for _, x := range []*int{t.MaxReplicas, t.Cap} {
		if x != nil && (m == 0 || *x < m) {
			m = *x
		}
	}
	return m
}

// spareNote says, for a tenant with redundancy, that a count includes its spare replica: a
// bound that only the spare exceeds is then not read as the SLO's need.
func spareNote(t v1.Tenant) string {
	if t.Redundancy {
		return ", one of them the spare redundancy asks for"
	}
	return ""
}

func maxReplicasName(t v1.Tenant) string {
	if t.MaxReplicas != nil && (t.Cap == nil || *t.MaxReplicas <= *t.Cap) {
		return fmt.Sprintf("maxReplicas %d", *t.MaxReplicas)
	}
	if t.Cap != nil {
		return fmt.Sprintf("cap %d", *t.Cap)
	}
	return "the pool's bounds"
}

// measure runs the memory fit and the performance model for one replica on c's slice.
func (p *planner) measure(tn *tenant, c *cand) *evalResult {
	if tn.measured != nil {
		return p.measureProfile(tn, c)
	}
	if c.tp > 1 {
		return p.measureTP(tn, c)
	}
	b := c.board
	// The replica runs at its energy class's clock lock, as the simulator and the agent run it.
	ps := perf.Slice{Board: b, Profile: c.profile, Replicas: c.share, ClockCap: tn.clock}
	r := &evalResult{fit: &noFit}
	switch c.kind {
	case v1.SliceMPS, v1.SliceMIGMPS:
		ps.Mode, r.smPct = perf.MPS, 100/c.share
		ps.SMPercent = float64(r.smPct)
	case v1.SliceTimeSlice, v1.SliceMIGTimeSlice:
		ps.Mode = perf.TimeSlice
	}
	share := 0 // the whole GPU or MIG instance, as the simulator sizes it
	if c.shared() {
		share = c.share
		_, r.capBytes = sharedCap(b, c.profile, c.share)
		ps.MemoryMiB = r.capBytes / llm.MiB
	}
	fit, err := p.cache.fitOn(tn, b, c.profile, share)
	if err != nil {
		r.err = fmt.Errorf("fit %s on %s %s: %w", tn.t.Name, b.Name, c.label(), err)
		return r
	}
	r.fit = fit
	if !fit.Fits {
		return r
	}
	e, err := p.cache.place(tn, ps)
	if err != nil {
		r.err = err
		return r
	}
	// The engine the replica runs (perf's, from the slice's memory, as the simulator builds it)
	// must hold one request: the memory fit's capacity rounds differently, and with prompts of
	// several thousand tokens the two can fall either side of one request (qwen2.5-7b at 14,444
	// + 64 tokens on an H200 MPS 1/8 share: the fit's cache held it, perf's 14,448 tokens do not,
	// and the simulator refuses the plan).
	if own, need := e.KVCapacityTokens(), int64(tn.work.InputTokens+tn.work.OutputTokens); own < need {
		short := *fit
		short.Fits = false
		short.Reasons = []string{fmt.Sprintf("the engine's KV cache on %s holds %d tokens, less than one request of %d", c.label(), max(own, 0), need)}
		r.fit = &short
		return r
	}
	// max-num-seqs (concurrency, or the device default) or what the KV cache runs; one model
	// (and its step-time memo) serves every SLO of the same engine and request shape, so the
	// engine with the fit's KV capacity is derived only for a new model
	r.q = p.cache.qmodel(tn, c, func() *qmodel {
		l := sizingLoad(c)
		q := newQModelAt(p.cache.atLoad(e, fit.MaxTokens, l), tn.work, l)
		if l != (perf.Load{}) {
			q.idleAt = p.cache.atLoad(e, fit.MaxTokens, perf.Load{})
		}
		return q.withLengths(lengthLaw(tn.t.Traffic), tn.t.MaxContext).withSeqCap(tn.t.Concurrency)
	})
	r.slo, r.out = tn.slo, tn.work.OutputTokens
	return r
}

// oneRate is the highest rate one replica sustains within the SLO, with its p99 TTFT and TPOT
// there and the term that binds just above it: the measured row's for a measured profile, else
// the queueing model's (maxRate), computed on first use and kept.
func (r *evalResult) oneRate() perf.Rate {
	if r.rateSet || r.q == nil {
		return r.memo
	}
	rate, st := r.q.maxRate(r.slo)
	r.memo = perf.Rate{RequestsPerSec: rate, OutputTokensPerSec: rate * float64(r.out),
		TTFT: seconds(st.ttft), TPOT: seconds(st.tpot), Limit: meets(r.q.stateFor(rate*1.01+1e-9, 1, tpotBound(r.slo), 0), r.slo)}
	r.rateSet = true
	return r.memo
}

// oneRateExceeds reports whether rps > frac × oneRate().RequestsPerSec, the same answer, but
// without finishing the rate's search where it is decided before: the baselines ask it of
// candidates the plan does not choose, whose rate nothing else reads (exceedsMaxRate).
func (r *evalResult) oneRateExceeds(rps, frac float64) bool {
	if r.rateSet || r.q == nil {
		return rps > frac*r.memo.RequestsPerSec
	}
	return r.q.exceedsMaxRate(r.slo, rps, frac)
}

// sizingLoad is the neighbours a replica is sized against: every other replica of its GPU or
// instance in a step at the same time (the simulator's and the hardware's worst case, which a
// tenant whose requests queue meets often), and, on a MIG instance, the rest of the board busy
// (it lowers the power-limited clock).
func sizingLoad(c *cand) perf.Load {
	l := perf.Load{Active: c.share - 1}
	if l.Active > 0 {
		l.Duty = 1
	}
	if c.profile != nil {
		l.BoardBusy = 1 - c.compFrac
	}
	return l
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// evalCache memoises evaluations: the rate one replica sustains does not depend on the tenant's
// request rate, so tenants with the same model, serving options, request shape and SLO share it.
type evalCache struct {
	// byShape holds the evaluations, sizings and queueing models by the shape number of their
	// key (evalKey.shape; qmodels by the number of the shape without the SLO), each shape's in
	// maps of its own: a tenant's candidates look up one shape's few entries, not maps of the
	// whole pool's, whose lookups missed the processor's caches on every candidate.
	byShape []*shapeMemo
	// fits are the memory fits by model, serving options and slice: the request shape and the
	// SLO do not change them.
	fits map[fitKey]*fitResult
	// migProfs is migProfiles by board, and cands the rest of newCand's latest allocation.
	migProfs map[*gpu.Board][]*gpu.Profile
	cands    []cand
	// deviceFits are the same fits by deviceFitKey (fitOn).
	deviceFits map[deviceFitKey]*fitResult
	// places are perf's engines by model, quantization, perf options and slice: the request
	// shape and the SLO do not change them either.
	places map[placeKey]placeResult
	// shapes number the tenants' model, serving options, request shape and SLO (shapeKey), so
	// that the keys above hash a number and pointers instead of strings.
	shapes map[shapeKey]int
	// finest is finestShare's memo.
	finest map[finestKey]int
	// fitModels and placeModels number the tenants' model with their memory-fit options
	// (fitModel) and their performance model's quantization and options (placeModel), so that
	// fits and places hash a number and the slice instead of strings and option structs: on
	// distinct request shapes nearly every evaluation is a miss that looks both up.
	fitModels   map[fitModel]int
	placeModels map[placeModel]int
	// loads is atLoad's memo.
	loads map[loadKey]*perf.AtLoad
}

// shapeMemo is one shape number's memos (evalCache.byShape).
type shapeMemo struct {
	evals map[slotKey]*evalResult
	sizes map[sizeSlot]sizing
	// qs are the queueing models by evaluation without the SLO: the model and its memoised step
	// times depend only on the engine, the request shape and the neighbours' load.
	qs map[slotKey]*qmodel
}

// slotKey is an evalKey without its shape: the candidate's slice.
type slotKey struct {
	board     *gpu.Board
	profile   *gpu.Profile
	share, tp int32
	kind      int8 // kindRank
}

// sizeSlot is a sizeKey without its shape.
type sizeSlot struct {
	slotKey
	rps  float64
	edge bool
}

// memo is shape's memos, made on first use.
func (c *evalCache) memo(shape int32) *shapeMemo {
	if int(shape) >= len(c.byShape) {
		c.byShape = append(c.byShape, make([]*shapeMemo, int(shape)+1-len(c.byShape))...)
	}
	m := c.byShape[shape]
	if m == nil {
		m = &shapeMemo{evals: map[slotKey]*evalResult{}, sizes: map[sizeSlot]sizing{}, qs: map[slotKey]*qmodel{}}
		c.byShape[shape] = m
	}
	return m
}

// slot is k without its shape.
func (k evalKey) slot() slotKey {
	return slotKey{board: k.board, profile: k.profile, share: k.share, tp: k.tp, kind: k.kind}
}

// fitModel is what a memory fit takes from the tenant.
type fitModel struct {
	model string // tenant.modKey
	opt   llm.Options
}

// placeModel is what perf's Place takes from the tenant.
type placeModel struct {
	model string // tenant.modKey
	quant llm.Quantization
	opt   perf.Options
}

// deviceFitKey is a memory fit by the tenant's fitModel number and the device: b's GPU (prof
// nil) or MIG instance prof, whole (share 0, llm.ReplicaSlice) or its share 1/share
// (sharedSlice). fitOn looks it up before it builds the slice, whose name and board strings
// fitKey hashes.
type deviceFitKey struct {
	model, share int32
	board        *gpu.Board
	prof         *gpu.Profile
}

type fitKey struct {
	model int // fitModels' number of the tenant's fitModel
	slice llm.Slice
}

type fitResult struct {
	fit llm.Fit
	err error
}

// noFit is the memory fit of an evaluation that made none (an error before it): it fits nothing.
var noFit llm.Fit

// fit memoises llm.FitSlice of tn's model and options on sl (callers read the Fit, never change it).
// The fit returned is the cache's own: callers read it and copy it to change it.
func (c *evalCache) fit(tn *tenant, sl llm.Slice) (*llm.Fit, error) {
	c.shape(tn)
	k := fitKey{tn.fitID, sl}
	if r, ok := c.fits[k]; ok {
		return &r.fit, r.err
	}
	f, err := llm.FitSlice(tn.model, tn.llmOpt, sl)
	r := &fitResult{f, err}
	c.fits[k] = r
	return &r.fit, err
}

// fitOn is fit on b's GPU (prof nil) or MIG instance prof, whole (share 0) or its share
// 1/share: the same fit, memoised also by the device, so that a repeated one builds and hashes
// no slice.
func (c *evalCache) fitOn(tn *tenant, b *gpu.Board, prof *gpu.Profile, share int) (*llm.Fit, error) {
	c.shape(tn)
	k := deviceFitKey{model: int32(tn.fitID), share: int32(share), board: b, prof: prof}
	if r, ok := c.deviceFits[k]; ok {
		return &r.fit, r.err
	}
	sl := llm.ReplicaSlice(b, prof, 0, 1)
	if share > 0 {
		sl, _ = sharedSlice(b, prof, share)
	}
	c.fit(tn, sl)
	r := c.fits[fitKey{tn.fitID, sl}]
	c.deviceFits[k] = r
	return &r.fit, r.err
}

type placeKey struct {
	model int // placeModels' number of the tenant's placeModel
	slice perf.Slice
}

type placeResult struct {
	e   *perf.Engine
	err error
}

// place memoises perf's Place of tn's model on s: tenants of the same model, quantization and
// perf options get the same engine (callers derive engines from it, never change it).
func (c *evalCache) place(tn *tenant, s perf.Slice) (*perf.Engine, error) {
	c.shape(tn)
	k := placeKey{tn.placeID, s}
	if r, ok := c.places[k]; ok {
		return r.e, r.err
	}
	e, err := tn.perfM.Place(s)
	c.places[k] = placeResult{e, err}
	return e, err
}

// shapeKey is what an evaluation takes from the tenant.
type shapeKey struct {
	model             string
	quant             llm.Quantization
	kv                string
	ctx, conc         int
	in, out           int
	ttft, tpot, batch time.Duration
	lengths           v1.Lengths // lengthLaw
	clock             float64    // tenant.clock: the energy class's clock lock
}

// evalKey is a tenant's shape number and the candidate's slice (boards and profiles are the
// catalog's, one pointer per name), in 32 bytes; the memos keep it by shape (byShape) and hash
// the rest, slotKey, one per candidate.
// Shapes are numbered per tenant (at most one per tenant and SLO), shares and tensor-parallel
// degrees are single digits, so the narrow fields hold them.
type evalKey struct {
	board     *gpu.Board
	profile   *gpu.Profile
	shape     int32
	share, tp int32
	kind      int8 // kindRank
}

func newEvalCache() *evalCache {
	return &evalCache{fits: map[fitKey]*fitResult{}, deviceFits: map[deviceFitKey]*fitResult{}, places: map[placeKey]placeResult{}, shapes: map[shapeKey]int{}, finest: map[finestKey]int{},
		fitModels: map[fitModel]int{}, placeModels: map[placeModel]int{}}
}

// loadKey is what evalCache.atLoad's answer depends on: the placed engine (place's, one pointer
// per model and slice), the KV capacity it is given and the neighbours' load.
type loadKey struct {
	e    *perf.Engine
	kv   int64
	load perf.Load
}

// atLoad is e.WithKVCapacity(kv).AtLoad(l), memoised: queueing models of different request
// shapes and SLOs on the same engine, memory fit and load share one engine and its step-time
// rates (read only), instead of a copy of each per model.
func (c *evalCache) atLoad(e *perf.Engine, kv int64, l perf.Load) *perf.AtLoad {
	k := loadKey{e, kv, l}
	if a, ok := c.loads[k]; ok {
		return a
	}
	if c.loads == nil {
		c.loads = map[loadKey]*perf.AtLoad{}
	}
	a := e.WithKVCapacity(kv).AtLoad(l)
	c.loads[k] = a
	return a
}

// qmodel memoises the queueing model of a tenant's replica on a candidate across SLOs.
func (c *evalCache) qmodel(tn *tenant, cd *cand, f func() *qmodel) *qmodel {
	k := c.slotKey(c.qshape(tn), cd)
	qs := c.memo(k.shape).qs
	if q, ok := qs[k.slot()]; ok {
		return q
	}
	q := f()
	qs[k.slot()] = q
	return q
}

// sizeKey is an evaluation, the rate its replicas carry, and whether the count keeps
// edgeMargin's margin below the model's capacity (tenants of one shape and rate may differ).
type sizeKey struct {
	evalKey
	rps  float64
	edge bool
}

// size memoises the queueing model's sizing of a tenant's load on a candidate (k: key(tn, cd)).
func (c *evalCache) size(tn *tenant, k evalKey, edge bool, f func() sizing) sizing {
	sk := sizeSlot{k.slot(), peakRate(tn.t.Traffic), edge}
	sizes := c.memo(k.shape).sizes
	if r, ok := sizes[sk]; ok {
		return r
	}
	r := f()
	sizes[sk] = r
	return r
}

// get memoises an evaluation (k: key(tn, cd)).
func (c *evalCache) get(k evalKey, f func() *evalResult) *evalResult {
	evals := c.memo(k.shape).evals
	if r, ok := evals[k.slot()]; ok {
		return r
	}
	r := f()
	evals[k.slot()] = r
	return r
}

func (c *evalCache) key(tn *tenant, cd *cand) evalKey { return c.slotKey(c.shape(tn), cd) }

func (c *evalCache) slotKey(shape int, cd *cand) evalKey {
	return evalKey{shape: int32(shape), board: cd.board, kind: int8(kindRank(cd.kind)), profile: cd.profile, share: int32(cd.share), tp: int32(cd.tp)}
}

// shape is the number of tn's shapeKey, kept on tn; qshape that of its shapeKey without the SLO.
func (c *evalCache) shape(tn *tenant) int {
	if tn.shapeIn != c {
		k := shapeKey{model: tn.modKey, quant: tn.llmOpt.Quantization, kv: tn.llmOpt.KVCacheDType, ctx: tn.llmOpt.Context,
			conc: tn.llmOpt.MaxNumSeqs, in: tn.work.InputTokens, out: tn.work.OutputTokens, ttft: tn.slo.TTFT, tpot: tn.slo.TPOT, batch: tn.batchLimit,
			lengths: lengthLaw(tn.t.Traffic), clock: tn.clock}
		tn.shapeID = c.number(k)
		k.ttft, k.tpot, k.batch = 0, 0, 0
		tn.qshapeID = c.number(k)
		tn.fitID = numberOf(c.fitModels, fitModel{tn.modKey, tn.llmOpt})
		if tn.perfM != nil {
			tn.placeID = numberOf(c.placeModels, placeModel{tn.modKey, tn.perfM.Quantization(), tn.perfM.Options()})
		}
		tn.shapeIn = c
	}
	return tn.shapeID
}

func (c *evalCache) qshape(tn *tenant) int {
	c.shape(tn)
	return tn.qshapeID
}

func (c *evalCache) number(k shapeKey) int { return numberOf(c.shapes, k) }

// numberOf is k's number in m, the next one when k is new.
func numberOf[K comparable, V int | int32](m map[K]V, k K) V {
	id, ok := m[k]
	if !ok {
		id = V(len(m))
		m[k] = id
	}
	return id
}
