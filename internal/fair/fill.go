package fair

import (
	"slices"
	"time"
)

// refreshSteady puts t's steady leaf where its counts say it belongs.
func (a *Allocator) refreshSteady(t *tenantRec) { a.refreshSteadyAppended(t, 0) }

// refreshSteadyAppended is refreshSteady after tasks were appended to t.steady (newest last) when
// it held old of them: its oldest task is the same unless it held none, so when it was
// preemptible before (old above its reservation) its eligibility time is unchanged and is not
// read again (refreshSteady passes 0).
func (a *Allocator) refreshSteadyAppended(t *tenantRec, old int) {
	if a.needRebuild {
		return
	}
	a.st.setWant(t.sLeaf, len(t.steady) < t.steadyWant())
	a.st.setDem(t.sLeaf, t.steadyWant() > 0)
	if !a.st.demStale {
		a.st.setSur(t.sLeaf, len(t.steady) > a.keep(t))
	}
	a.st.setPre(t.sLeaf, t.preemptible())
	if old <= t.cfg.Reservation {
		a.st.setElig(t.sLeaf, eligValue(t))
	}
	if len(t.steady) < t.resTarget() && !t.inRes {
		t.inRes = true
		a.resList = append(a.resList, t.idx)
	}
}

// refreshLease does the same for the lease leaf; activation waits for the lease phase so that
// steady filling does not pay for lease-heap upkeep.
func (a *Allocator) refreshLease(t *tenantRec) {
	if a.needRebuild {
		return
	}
	want := a.leasesOn() && t.total() < t.cfg.Demand
	if want != t.unmet {
		t.unmet = want
		if want {
			a.unmetN++
		} else {
			a.unmetN--
		}
	}
	if want && a.lt.state[t.lLeaf] == idle {
		a.lt.state[t.lLeaf] = waiting // activated by the lease phase: see fillLeases
		a.lazyLease = append(a.lazyLease, t.idx)
	} else if !want {
		a.lt.setWant(t.lLeaf, false)
	}
	a.lt.setPre(t.lLeaf, len(t.leases) > 0)
}

// fillSteady is progressive filling of the steady pool over the hierarchy.
func (a *Allocator) fillSteady() { a.fill(&a.st, a.sUsed, a.capS, true, a.grantFair) }

// grantFair gives t n steady tasks from filling (n > 1 only for a plain run: no lease to convert,
// reservation met, room in the whole pool).
func (a *Allocator) grantFair(t *tenantRec, n int64) {
	if n == 1 || t.stoppedStamp == a.stamp && len(t.stopped) > 0 || t.renewStamp == a.stamp && len(t.expired) > 0 {
		for range n {
			reason := ReasonFairShare
			if len(t.steady) < t.resTarget() {
				reason = ReasonReservation
			}
			a.grantSteady(t, reason)
		}
		return
	}
	old := len(t.steady)
	for range n {
		a.seq++
		r := taskRec{seq: a.seq, start: a.nowNS}
		if t.classN != nil {
			r.class = t.nextClass()
			t.addClass(r)
		}
		t.steady = append(t.steady, r)
		a.emit(t, Item{Kind: KindGrant, Task: a.seq, Reason: ReasonFairShare, Class: t.className(r.class)})
	}
	a.steadyDelta(t, n)
	a.totalDelta(t, n)
	a.refreshSteadyAppended(t, old)
	a.refreshLease(t)
}

// fillLeases lends idle and burst capacity to tenants whose demand is still unmet, by the same
// hierarchical filling over the weighted shares of all their tasks, with the same skip rule.
func (a *Allocator) fillLeases() {
	a.flushLease()
	if !a.leasesOn() {
		return
	}
	a.presizeLeases(a.lazyLease)
	for _, i := range a.lazyLease {
		if t := a.tenants[i]; a.lt.state[t.lLeaf] == waiting {
			a.lt.activate(t.lLeaf)
		}
	}
	a.lazyLease = a.lazyLease[:0]
	a.flushLease()
	a.fill(&a.lt, a.tUsed, a.capT, false, a.grantLeaseN)
}

// grantSteady gives t one steady task: its oldest lease turns steady if it has one; otherwise a
// new task starts, reclaiming leases that sit on the room it needs.
func (a *Allocator) grantSteady(t *tenantRec, reason Reason) {
	if len(t.leases) > 0 {
		l := t.leases[0]
		t.leases = append(t.leases[:0], t.leases[1:]...)
		r := taskRec{seq: l.seq, start: l.start}
		if t.classN != nil {
			r.class = t.nextClass()
			t.addClass(r)
		}
		insertTask(t, r)
		a.steadyDelta(t, 1)
		a.emit(t, Item{Kind: KindGrant, Task: l.seq, Reason: ReasonLeaseConverted, Class: t.className(r.class)})
	} else {
		if !fits(a.tUsed, a.capT, t.d) {
			a.reclaimLeases(t.d, t.cfg.Name, ReasonNeededBySteady)
		}
		if r, ok := a.restoreStopped(t); ok {
			t.addClass(r)
			insertTask(t, r)
			a.steadyDelta(t, 1)
			a.totalDelta(t, 1)
			a.refreshSteady(t)
			a.refreshLease(t)
			return
		}
		if l, ok := a.restoreExpired(t); ok {
			// A lease that expired in this step turns steady instead of ending (same task).
			r := taskRec{seq: l.seq, start: l.start}
			if t.classN != nil {
				r.class = t.nextClass()
				t.addClass(r)
			}
			insertTask(t, r)
			a.steadyDelta(t, 1)
			a.totalDelta(t, 1)
			a.emit(t, Item{Kind: KindGrant, Task: l.seq, Reason: ReasonLeaseConverted, Class: t.className(r.class)})
			a.refreshSteady(t)
			a.refreshLease(t)
			return
		}
		a.seq++
		r := taskRec{seq: a.seq, start: a.nowNS}
		if t.classN != nil {
			r.class = t.nextClass()
			t.addClass(r)
		}
		t.steady = append(t.steady, r)
		a.steadyDelta(t, 1)
		a.totalDelta(t, 1)
		a.emit(t, Item{Kind: KindGrant, Task: a.seq, Reason: reason, Class: t.className(r.class)})
		a.refreshSteadyAppended(t, len(t.steady)-1)
		a.refreshLease(t)
		return
	}
	a.refreshSteady(t)
	a.refreshLease(t)
}

func (a *Allocator) grantLeaseN(t *tenantRec, _ int64) { a.grantLease(t) }

func (a *Allocator) grantLease(t *tenantRec) {
	if r, ok := a.restoreStopped(t); ok {
		// The task a claim took keeps running as a lease: the preempt item is withdrawn and a
		// lease item with the same task number says when it now ends.
		a.putLease(t, leaseRec{seq: r.seq, start: r.start, expiry: a.nowNS + int64(a.leaseDur)}, ReasonSteadyToLease)
		return
	}
	if l, ok := a.restoreExpired(t); ok {
		// A lease that expired in this step goes back to its own tenant: it is renewed (same
		// task, a new term), and its reclaim item is withdrawn.
		l.expiry = a.nowNS + int64(a.leaseDur)
		a.putLease(t, l, ReasonLeaseRenewed)
		return
	}
	a.seq++
	a.putLease(t, leaseRec{seq: a.seq, start: a.nowNS, expiry: a.nowNS + int64(a.leaseDur)}, ReasonBurst)
}

// putLease adds lease l to t's leases, kept in start order (task number among equal starts),
// counts it, schedules its expiry and emits its item with the reason given.
func (a *Allocator) putLease(t *tenantRec, l leaseRec, reason Reason) {
	i := len(t.leases)
	for i > 0 && (t.leases[i-1].start > l.start || t.leases[i-1].start == l.start && t.leases[i-1].seq > l.seq) {
		i--
	}
	t.leases = slices.Insert(t.leases, i, l)
	a.totalDelta(t, 1)
	a.flushLease()
	a.expiries.push(expiryEntry{at: l.expiry, seq: l.seq, tenant: t.idx})
	a.emit(t, Item{Kind: KindLease, Task: l.seq, Reason: reason, Expires: a.now.Add(a.leaseDur)})
	a.refreshLease(t)
}

func (a *Allocator) steadyDelta(t *tenantRec, k int64) {
	addScaled(a.sUsed, t.d, k)
	if !a.needRebuild {
		a.st.add(t.sLeaf, t.d, k)
		if k < 0 {
			a.wakeLimited(t)
		}
	}
}

// totalDelta records k more (or fewer) tasks of t in the whole pool. The lease tree learns of it
// lazily (flushLease), since only the lease phase and lease reclaims read it.
func (a *Allocator) totalDelta(t *tenantRec, k int64) {
	addScaled(a.tUsed, t.d, k)
	if !a.needRebuild && !t.lDirty {
		t.lDirty = true
		a.lDirty = append(a.lDirty, t.idx)
	}
}

// flushLease brings the lease tree's use up to date.
func (a *Allocator) flushLease() {
	for _, i := range a.lDirty {
		t := a.tenants[i]
		t.lDirty = false
		if d := int64(t.total() - t.lCount); d != 0 {
			a.lt.add(t.lLeaf, t.d, d)
			t.lCount = t.total()
		}
	}
	a.lDirty = a.lDirty[:0]
}

// emit records an item about t.
func (a *Allocator) emit(t *tenantRec, it Item) {
	it.Tenant = t.cfg.Name
	it.Retry = it.Reason.Retryable()
	a.out = append(a.out, it)
	a.touch(t)
}

func (a *Allocator) touch(t *tenantRec) {
	if t.touched != a.stamp {
		t.touched = a.stamp
		if !a.needRebuild {
			a.touched = append(a.touched, t.idx)
		}
	}
}

func (a *Allocator) markPending(t *tenantRec) {
	t.pending = true
	if !t.inPending && !a.needRebuild {
		t.inPending = true
		a.pendingList = append(a.pendingList, t.idx)
	}
}

// insertTask keeps t.steady sorted by (start, seq).
func insertTask(t *tenantRec, r taskRec) {
	i := len(t.steady)
	for i > 0 && laterTask(t.steady[i-1], r) {
		i--
	}
	t.steady = append(t.steady, taskRec{})
	copy(t.steady[i+1:], t.steady[i:])
	t.steady[i] = r
}

func laterTask(a, b taskRec) bool {
	if a.start != b.start {
		return a.start > b.start
	}
	return a.seq > b.seq
}

// eligible is how many of t's oldest steady tasks may be preempted at now: started before now
// and running at least MinRuntime. They are a prefix of the sorted list.
func eligible(t *tenantRec, now time.Time) int {
	ns := now.UnixNano()
	cut := ns - int64(t.minRun)
	lo, hi := 0, len(t.steady)
	for lo < hi {
		mid := (lo + hi) / 2
		s := t.steady[mid].start
		if s <= cut && s < ns {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// eligValue is the leaf value of minElig for t.
func eligValue(t *tenantRec) int64 {
	if !t.preemptible() {
		return noElig
	}
	return eligibleNS(t, t.steady[0])
}

// eligibleNS is when task r of t becomes preemptible, in Unix nanoseconds.
func eligibleNS(t *tenantRec, r taskRec) int64 {
	return r.start + max(int64(t.minRun), 1)
}

// eligibleAt is eligibleNS as a time.
func eligibleAt(t *tenantRec, r taskRec) time.Time { return time.Unix(0, eligibleNS(t, r)).UTC() }

// restoreStopped takes back the newest task a claim stopped for t in this step, withdrawing its
// preempt item, so that a tenant is never stopped and started again in one decision.
func (a *Allocator) restoreStopped(t *tenantRec) (taskRec, bool) {
	if t.stoppedStamp != a.stamp || len(t.stopped) == 0 {
		return taskRec{}, false
	}
	s := t.stopped[len(t.stopped)-1]
	t.stopped = t.stopped[:len(t.stopped)-1]
	a.out[s.out].Kind = 0
	a.withdrawn++
	return s.rec, true
}

// restoreExpired takes back t's newest lease that expired in this step, withdrawing its reclaim
// item.
func (a *Allocator) restoreExpired(t *tenantRec) (leaseRec, bool) {
	if t.renewStamp != a.stamp || len(t.expired) == 0 {
		return leaseRec{}, false
	}
	e := t.expired[len(t.expired)-1]
	t.expired = t.expired[:len(t.expired)-1]
	a.out[e.out].Kind = 0
	a.withdrawn++
	return e.lease, true
}

// compact drops withdrawn items from the decision.
func (a *Allocator) compact() {
	if a.withdrawn == 0 {
		return
	}
	a.out = slices.DeleteFunc(a.out, func(it Item) bool { return it.Kind == 0 })
	a.withdrawn = 0
}
