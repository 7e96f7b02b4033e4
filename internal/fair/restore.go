package fair

import (
	"slices"
	"time"
)

// RestoreLeaseExpiry gives a running lease back the expiry it had before the allocator was
// rebuilt (a control plane that restarted decides again, and its new leases start a fresh term):
// the lease then ends, or is renewed, at that time, as if nothing had restarted. Only an earlier
// expiry than the lease's own is taken, so a lease is never extended this way; an expiry at or
// before the allocator's time takes effect at its next step. It reports whether task is a lease
// of tenant whose expiry changed.
func (a *Allocator) RestoreLeaseExpiry(tenant string, task uint64, at time.Time) bool {
	ti, ok := a.byName[tenant]
	if !ok {
		return false
	}
	t := a.tenants[ti]
	i := slices.IndexFunc(t.leases, func(l leaseRec) bool { return l.seq == task })
	if i < 0 || at.UnixNano() >= t.leases[i].expiry {
		return false
	}
	t.leases[i].expiry = at.UnixNano()
	// The old heap entry no longer matches the lease and is skipped when it comes due.
	a.expiries.push(expiryEntry{at: t.leases[i].expiry, seq: task, tenant: t.idx})
	return true
}
