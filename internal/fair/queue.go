package fair

import "slices"

// queue emits one queue item per examined tenant whose demand is still unmet: every tenant on a
// full step, otherwise those the step touched. Items come in name order.
func (a *Allocator) queue(full bool) {
	if full {
		for _, t := range a.tenants {
			a.queueItem(t)
		}
		return
	}
	slices.Sort(a.touched) // index order is name order
	for _, i := range a.touched {
		a.queueItem(a.tenants[i])
	}
}

func (a *Allocator) queueItem(t *tenantRec) {
	n := t.cfg.Demand - t.total()
	if n <= 0 {
		return
	}
	it := Item{Kind: KindQueue, Tenant: t.cfg.Name, Count: n}
	it.Reason = a.queueReason(t)
	switch it.Reason {
	case ReasonWaitingForMinRuntime:
		it.RetryAt = t.minRunWait
	case ReasonReservationWaiting:
		it.RetryAt = t.resRetryAt
	}
	it.Retry = it.Reason.Retryable()
	a.out = append(a.out, it)
}

// queueReason reads the tenant's standing, not the filling's index of it (a leaf parked at a
// limit): a rebuilt Allocator, which has not parked the leaf yet, gives the same reason.
func (a *Allocator) queueReason(t *tenantRec) Reason {
	zero := make0(a)
	limited := a.overLimit(t)
	switch {
	case !fits(zero, a.capT, t.d):
		return ReasonExceedsCapacity
	case len(t.steady) < t.resTarget():
		if a.reservationsExceedPool() {
			return ReasonReservationUnsatisfiable
		}
		return ReasonReservationWaiting
	case limited && !a.leasesOn():
		return ReasonGroupLimit
	case t.cfg.Cap > 0 && len(t.steady) >= t.cfg.Cap, !fits(zero, a.capS, t.d), limited:
		if a.leasesOn() {
			return ReasonWaitingForBurst
		}
		if t.cfg.Cap > 0 && len(t.steady) >= t.cfg.Cap {
			return ReasonOverCap
		}
		return ReasonExceedsSteadyPool
	case t.minRunWait.After(a.now):
		return ReasonWaitingForMinRuntime
	}
	return ReasonPoolFull
}

// reservationsExceedPool reports, once per step, whether Σ min(reservation, demand)·task exceeds
// the steady pool in some resource (only lost capacity can make it so).
func (a *Allocator) reservationsExceedPool() bool {
	if a.resBadStamp == a.stamp {
		return a.resBad == 2
	}
	sum := make([]int64, len(a.capS))
	for _, t := range a.tenants {
		addScaled(sum, t.d, int64(t.resTarget()))
	}
	a.resBad, a.resBadStamp = 1, a.stamp
	if over(sum, a.capS) {
		a.resBad = 2
	}
	return a.resBad == 2
}
