package fair

import (
	"slices"
	"sort"
	"time"
)

// step runs the phases of one decision, in this order:
//  1. leases that reached their expiry are reclaimed;
//  2. if capacity shrank below use, steady tasks are preempted (CapacityLost) until the steady
//     pool holds, then leases are reclaimed until the whole pool holds;
//  3. tenants below their reservation are served first, preempting above-reservation tasks;
//  4. progressive filling of the steady pool over the hierarchy, with the skip rule;
//  5. share claims: waiting tenants (those an event touched, those whose retry time came, or
//     all of them on Recompute) preempt under the share rule, and filling resumes after each move;
//  6. leases are lent from whatever room is left, lowest weighted share first;
//  7. queue items say why each examined tenant still waits.
func (a *Allocator) step(full bool) Decision {
	if a.needRebuild {
		a.rebuild()
	}
	full = full || !a.started
	if full || a.allPending {
		for _, t := range a.tenants {
			a.markPending(t)
		}
	}
	a.started, a.allPending = true, false
	a.expireLeases()
	a.enforceCapacity()
	a.dueRetries()
	for pass := 0; ; pass++ {
		a.reservations()
		a.fillSteady()
		moved := a.claims()
		// A full step runs to a fixed point: a move can open a claim examined earlier in the
		// pass, so the claims of every waiting tenant are examined again until a pass moves
		// nothing. Each move raises the potential of docs/fairness.md §5, so this ends; the bound
		// on passes only guards against a defect.
		if !full || !moved || pass > len(a.tenants)+16 {
			break
		}
		for _, t := range a.tenants {
			a.markPending(t)
			a.refreshSteady(t)
		}
	}
	a.fillLeases()
	a.flushLease()
	a.st.ensurePre()
	a.lt.ensurePre()
	a.compact()
	a.queue(full)
	return Decision{At: a.now, Items: a.out}
}

// begin starts a step at now.
func (a *Allocator) begin(now time.Time) {
	a.now, a.nowNS = now, now.UnixNano()
	a.advanceHistory(a.nowNS)
	a.stamp++
	a.out = a.out[:0]
	a.touched = a.touched[:0]
}

func (a *Allocator) expireLeases() {
	now := a.now.UnixNano()
	for a.expiries.len() > 0 && a.expiries.top().at <= now {
		e := a.expiries.pop()
		t := a.tenants[e.tenant]
		i := slices.IndexFunc(t.leases, func(l leaseRec) bool { return l.seq == e.seq })
		if i < 0 || t.leases[i].expiry != e.at {
			continue // converted, reclaimed or renewed earlier
		}
		if a.unmetN == 0 || a.unmetN == 1 && t.unmet {
			// No other tenant waits for room: the lease is renewed in place, same task.
			t.leases[i].expiry = now + int64(a.leaseDur)
			a.expiries.push(expiryEntry{at: t.leases[i].expiry, seq: e.seq, tenant: t.idx})
			a.emit(t, Item{Kind: KindLease, Task: e.seq, Reason: ReasonLeaseRenewed, Expires: a.now.Add(a.leaseDur)})
			continue
		}
		if t.renewStamp != a.stamp {
			t.renewStamp, t.expired = a.stamp, t.expired[:0]
		}
		t.expired = append(t.expired, expiredRec{lease: t.leases[i], out: len(a.out)})
		t.leases = append(t.leases[:i], t.leases[i+1:]...)
		a.totalDelta(t, -1)
		a.emit(t, Item{Kind: KindReclaim, Task: e.seq, Reason: ReasonLeaseExpired})
		a.refreshLease(t)
	}
}

func (a *Allocator) dueRetries() {
	now := a.now.UnixNano()
	for a.retries.len() > 0 && a.retries.top().at <= now {
		e := a.retries.pop()
		if t := a.tenants[e.tenant]; !t.retryAt.IsZero() && t.retryAt.UnixNano() == e.at {
			t.retryAt = time.Time{}
			a.markPending(t)
		}
	}
}

func (a *Allocator) enforceCapacity() {
	if over(a.sUsed, a.capS) {
		a.evictSteady()
	}
	if over(a.tUsed, a.capT) {
		a.reclaimLeases(nil, "", ReasonCapacityLost)
	}
}

// evictSteady preempts the newest steady tasks of the tenants furthest above their share (above
// their reservation first; minimum runtime does not protect against lost capacity).
func (a *Allocator) evictSteady() {
	a.st.ensurePre()
	for over(a.sUsed, a.capS) {
		v := a.evictVictim()
		if v == nil {
			return
		}
		i := v.leastImportant(len(v.steady))
		r := v.steady[i]
		a.emit(v, Item{Kind: KindPreempt, Task: r.seq, Reason: ReasonCapacityLost, Class: v.className(r.class)})
		v.steady = slices.Delete(v.steady, i, i+1)
		v.dropClass(r)
		a.steadyDelta(v, -1)
		a.totalDelta(v, -1)
		a.refreshSteady(v)
		a.refreshLease(v)
		a.markPending(v)
	}
}

// evictVictim looks above reservations first (tasks helping on every short resource, then on
// any), then at reserved tasks.
func (a *Allocator) evictVictim() *tenantRec {
	for _, strict := range [2]bool{true, false} {
		a.vs.mode, a.vs.strict = vsEvict, strict
		if leaf := a.descend(&a.st, 0, 0); leaf >= 0 {
			return a.tenants[a.st.tenant[leaf]]
		}
	}
	if v := a.evictFallback(true); v != nil {
		return v
	}
	return a.evictFallback(false)
}

// evictFallback picks, when only reserved tasks are left on the short resources, the tenant with
// the highest weighted share (ties: larger name) holding any.
func (a *Allocator) evictFallback(strict bool) *tenantRec {
	var best *tenantRec
	for _, t := range a.tenants {
		if len(t.steady) == 0 || !helps(a.sUsed, a.capS, nil, t.d, strict) {
			continue
		}
		if best == nil || a.st.preOrd.before(t.sLeaf, best.sLeaf) {
			best = t
		}
	}
	return best
}

// reclaimLeases ends leases, newest first from the holder with the highest weighted share of all
// its tasks, until need fits the whole pool (need nil: until use fits the capacity).
func (a *Allocator) reclaimLeases(need []int64, by string, reason Reason) {
	a.flushLease()
	a.lt.ensurePre()
	for (need == nil && over(a.tUsed, a.capT)) || (need != nil && !fits(a.tUsed, a.capT, need)) {
		a.vs.mode, a.vs.need, a.vs.strict = vsReclaim, need, true
		leaf := a.descend(&a.lt, 0, 0)
		if leaf < 0 {
			a.vs.strict = false
			if leaf = a.descend(&a.lt, 0, 0); leaf < 0 {
				return
			}
		}
		h := a.tenants[a.lt.tenant[leaf]]
		l := h.leases[len(h.leases)-1]
		h.leases = h.leases[:len(h.leases)-1]
		a.emit(h, Item{Kind: KindReclaim, Task: l.seq, Reason: reason, By: by})
		a.totalDelta(h, -1)
		a.flushLease()
		a.refreshLease(h)
	}
}

// reservations serves tenants below their reservation, lowest weighted share first, preempting
// tasks above other tenants' reservations (past their minimum runtime) when the pool is full.
func (a *Allocator) reservations() {
	ids := a.claimBuf[:0]
	for _, i := range a.resList {
		t := a.tenants[i]
		t.inRes = false
		if len(t.steady) < t.resTarget() {
			ids = append(ids, i)
		}
	}
	a.resList = a.resList[:0]
	a.sortByShare(ids)
	for _, i := range ids {
		t := a.tenants[i]
		for len(t.steady) < t.resTarget() {
			if fits(a.sUsed, a.capS, t.d) {
				a.grantSteady(t, ReasonReservation)
			} else if !a.reservationClaim(t) {
				break
			}
		}
		a.refreshSteady(t)
	}
	a.claimBuf = ids[:0]
}

// reservationClaim takes first only from tenants above what they keep (reservation and floor),
// so that a reservation does not push a lumpy tenant below its whole-task floor when others could
// give the room; then, if that fails, from tenants above their reservations alone.
func (a *Allocator) reservationClaim(c *tenantRec) bool {
	if a.groupClaim(c, false, true) || a.groupClaim(c, false, false) {
		return true
	}
	c.resRetryAt = earliest(a.vs.retry, a.vs.pruned)
	a.touch(c)
	return false
}

// groupClaim takes, for claimant c, the newest eligible tasks of the tenants furthest above their
// share (several tenants if needed) that make room for one task of c, and grants it. A
// reservation claim (floor false) leaves every victim its reservation, and its floor too when
// keepFloors is set; a floor claim leaves it its reservation and its own sharing-incentive floor.
// The plan is trimmed to what c needs.
func (a *Allocator) groupClaim(c *tenantRec, floor, keepFloors bool) bool {
	keep := floor || keepFloors
	if keep {
		a.freshSurplus()
	}
	vs := &a.vs
	vs.mode, vs.claim, vs.floor, vs.retry, vs.pruned, vs.plan = vsReserve, c, keep, time.Time{}, time.Time{}, vs.plan[:0]
	vs.short = append(vs.short[:0], a.sUsed...)
	for j := range vs.short {
		vs.short[j] += c.d[j] - a.capS[j]
	}
	// A floor claim of a tenant at a group's limit takes from inside the innermost group whose
	// limit binds, enough to bring it under every binding limit as well as into the pool.
	root := int32(0)
	if floor && a.overLimit(c) {
		if root = a.limitShort(c, vs.short); root <= 0 {
			return false
		}
	}
	var short uint64
	for j := range vs.short {
		if vs.short[j] > 0 && j < 64 {
			short |= 1 << j
		}
	}
	vs.helpful = nil
	if keep {
		// Only tenants whose tasks use a short resource can help; with few such classes the
		// search skips groups holding none of them.
		if vs.helpful = a.st.ci.helpfulAny(short, vs.hbuf); vs.helpful != nil {
			vs.hbuf = vs.helpful
		}
	}
	a.st.ensurePre()
	if a.descend(&a.st, root, 0) < 0 {
		return false
	}
	a.trimPlan()
	reason, grant := ReasonReservationClaim, ReasonReservation
	if floor {
		reason, grant = ReasonBelowFloor, ReasonFairShare
	}
	for _, p := range vs.plan {
		if p.k > 0 {
			a.preemptNewestEligible(p.t, p.k, Item{Kind: KindPreempt, Reason: reason, By: c.cfg.Name})
		}
	}
	a.grantSteady(c, grant)
	return true
}

// claims runs claims for pending tenants that still wait, lowest weighted share first: a tenant
// below its sharing-incentive floor first makes a floor claim, then (or otherwise) a share claim.
// It reports whether any task moved.
func (a *Allocator) claims() bool {
	moves := a.moves
	ids := a.claimBuf[:0]
	for _, i := range a.pendingList {
		t := a.tenants[i]
		t.inPending = false
		if st := a.st.state[t.sLeaf]; t.pending && (st == blocked || st == limited) && len(t.steady) >= t.resTarget() {
			ids = append(ids, i)
		}
		t.pending = false
	}
	a.pendingList = a.pendingList[:0]
	a.sortByShare(ids)
	// Floors first, for every claimant: a tenant below its floor takes free room before anyone
	// else and makes floor claims, so that the room a claim leaves over goes to tenants below
	// their floors and not, by filling, to a tenant whose new task could not be taken back in
	// this step.
	served := false
	for _, i := range ids {
		t := a.tenants[i]
		t.retryAt, t.minRunWait, t.floorPruned = time.Time{}, time.Time{}, time.Time{}
		for len(t.steady) < a.floor(t) {
			if fits(a.sUsed, a.capS, t.d) && !a.overLimit(t) {
				a.grantSteady(t, ReasonFairShare)
			} else if !a.groupClaim(t, true, true) {
				t.minRunWait, t.floorPruned = a.vs.retry, a.vs.pruned
				break
			}
			served = true
		}
	}
	if served {
		a.fillSteady()
	}
	for _, i := range ids {
		t := a.tenants[i]
		for len(t.steady) < t.steadyWant() && !fits(a.sUsed, a.capS, t.d) && !a.overLimit(t) {
			if !a.shareClaim(t) {
				t.minRunWait = earliest(t.minRunWait, a.vs.retry)
				if t.retryAt = earliest(t.minRunWait, earliest(t.floorPruned, a.vs.pruned)); !t.retryAt.IsZero() {
					a.retries.push(retryEntry{at: t.retryAt.UnixNano(), tenant: t.idx})
				}
				a.touch(t)
				break
			}
			a.fillSteady()
		}
		if t.retryAt.IsZero() && len(t.steady) < a.floor(t) {
			// A floor claim waits for minimum runtimes even when no share claim was tried.
			if t.retryAt = earliest(t.minRunWait, t.floorPruned); !t.retryAt.IsZero() {
				a.retries.push(retryEntry{at: t.retryAt.UnixNano(), tenant: t.idx})
				a.touch(t)
			}
		}
	}
	a.claimBuf = ids[:0]
	return a.moves != moves
}

// shareClaim looks for one move for claimant c: from the root down its path, at each common
// ancestor the sibling subtrees whose share exceeds c's side's share after the move, highest
// first; inside one, the leaf furthest above its share first.
func (a *Allocator) shareClaim(c *tenantRec) bool {
	vs := &a.vs
	vs.mode, vs.claim, vs.retry, vs.pruned = vsClaim, c, time.Time{}, time.Time{}
	if !fits(make0(a), a.capS, c.d) {
		return false
	}
	a.freshSurplus()
	a.st.ensurePre()
	var short uint64
	for j, x := range c.d {
		if a.sUsed[j]+x > a.capS[j] && j < 64 {
			short |= 1 << j
		}
	}
	vs.helpful = a.st.ci.helpful(short, vs.hbuf)
	if vs.helpful != nil {
		vs.hbuf = vs.helpful
	}
	a.pathBuf = a.st.path(c.sLeaf, a.pathBuf)
	vs.path = a.pathBuf
	for l := 0; l+1 < len(vs.path); l++ {
		vs.level = l
		vs.before = a.st.share[vs.path[l+1]]
		vs.bound = a.st.shareDelta(vs.path[l+1], c.d, 1, nil, 0)
		it := a.iter(0)
		it.start(&a.st, vs.path[l], vs.path[l+1])
		it.withBound(vs.bound)
		for top := it.next(); top >= 0; top = it.next() {
			vs.top = top
			if vs.helpful != nil && !a.topCanPass(c) {
				continue
			}
			if leaf := a.descend(&a.st, top, 1); leaf >= 0 {
				v := a.tenants[a.st.tenant[leaf]]
				a.preemptNewestEligible(v, int(vs.k), Item{Kind: KindPreempt, Reason: ReasonOverShare,
					By: c.cfg.Name, Level: a.st.full[vs.path[l]], ByShare: vs.bound, Share: vs.after})
				a.grantSteady(c, ReasonFairShare)
				return true
			}
		}
	}
	return false
}

// topCanPass checks the share rule and the ancestor condition for the current top once per
// helpful class: every tenant of a class has the same task, so a class that fails here fails
// for every leaf below, and the top is skipped without a descent.
func (a *Allocator) topCanPass(c *tenantRec) bool {
	vs := &a.vs
	for _, cl := range vs.helpful {
		d := a.st.ci.d[cl]
		k := tasksToCover(a.sUsed, a.capS, c.d, d)
		if k <= 0 || !shareRule(vs.before, vs.bound, a.st.shareDelta(vs.top, d, -k, nil, 0), a.st.share[vs.top]) {
			continue
		}
		ok := true
		for j := 1; j <= vs.level && ok; j++ {
			n := vs.path[j]
			ok = a.st.shareDelta(n, c.d, 1, d, -k) >= a.st.share[n]
		}
		if ok {
			return true
		}
	}
	return false
}

// earliest is the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// make0 returns a zero vector of the pool's dimension (reused).
func make0(a *Allocator) []int64 {
	if len(a.zero) != len(a.capT) {
		a.zero = make([]int64, len(a.capT))
	}
	return a.zero
}

// byShare sorts tenant indices by steady weighted share, then name (index order is name order).
type byShare struct {
	a   *Allocator
	ids []int32
}

func (s *byShare) Len() int      { return len(s.ids) }
func (s *byShare) Swap(i, j int) { s.ids[i], s.ids[j] = s.ids[j], s.ids[i] }
func (s *byShare) Less(i, j int) bool {
	a, b := s.a.tenants[s.ids[i]], s.a.tenants[s.ids[j]]
	sa, sb := s.a.st.share[a.sLeaf], s.a.st.share[b.sLeaf]
	if sa != sb {
		return sa < sb
	}
	return s.ids[i] < s.ids[j]
}

func (a *Allocator) sortByShare(ids []int32) {
	a.sorter.a, a.sorter.ids = a, ids
	sort.Sort(&a.sorter)
	a.sorter.ids = nil
}
