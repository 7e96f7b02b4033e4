package fair

import (
	"sort"
	"strings"
)

// refFillOrder is a deliberately plain re-statement of the filling semantics, for comparison:
// every pick scans every node. Reservations first (lowest share, then name; all shares are zero
// in a fresh allocation, so by name), then recursive progressive filling with the skip rule.
// Caps bound steady tasks; there are no leases. It returns the tasks per tenant and the names of
// the grantees in grant order.
func refFillOrder(cfg Config) (map[string]int, []string) {
	var order []string
	names := sortedKeys(cfg.Capacity)
	idx := newResIndex(names)
	capT, _ := idx.dense(cfg.Capacity)
	capS := make([]int64, len(capT))
	for j, c := range capT {
		capS[j] = c - int64(float64(c)*cfg.BurstPoolPercent/100)
	}
	ts := append([]Tenant(nil), cfg.Tenants...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	d := map[string][]int64{}
	for _, t := range ts {
		d[t.Name], _ = idx.dense(t.Task)
	}
	used := make([]int64, len(capT))
	n := map[string]int{}
	for _, t := range ts {
		for n[t.Name] < min(t.Reservation, t.Demand) && fits(used, capS, d[t.Name]) {
			addScaled(used, d[t.Name], 1)
			n[t.Name]++
			order = append(order, t.Name)
		}
	}
	want := func(t Tenant) int {
		if t.Cap > 0 {
			return min(t.Cap, t.Demand)
		}
		return t.Demand
	}
	done := map[string]bool{}
	gw := map[string]float64{}
	for _, g := range cfg.Groups {
		gw[g.Path] = g.Weight
	}
	for {
		var active []Tenant
		for _, t := range ts {
			if !done[t.Name] && n[t.Name] < want(t) {
				active = append(active, t)
			}
		}
		if len(active) == 0 {
			return n, order
		}
		t := refPick(active, ts, n, d, capT, idx.share, gw, "")
		if fits(used, capS, d[t.Name]) {
			addScaled(used, d[t.Name], 1)
			n[t.Name]++
			order = append(order, t.Name)
		} else {
			done[t.Name] = true
		}
	}
}

// refPick chooses, among the children of prefix that hold an active tenant, the one with the
// lowest weighted dominant share of its subtree (ties within 1e-9 to the smaller name), and
// recurses.
func refPick(active, all []Tenant, n map[string]int, d map[string][]int64, capT []int64, dims []int,
	gw map[string]float64, prefix string) Tenant {
	type child struct {
		name   string
		leaf   *Tenant
		weight float64
		share  float64
	}
	kids := map[string]*child{}
	for i := range active {
		t := active[i]
		if !inside(t, prefix) {
			continue
		}
		seg, leaf := childOf(t, prefix)
		if _, ok := kids[seg]; !ok {
			c := &child{name: seg, weight: 1}
			if leaf {
				c.leaf, c.weight = &active[i], t.Weight
				if c.weight == 0 {
					c.weight = 1
				}
			} else if w, ok := gw[joinPath(prefix, seg)]; ok {
				c.weight = w
			}
			kids[seg] = c
		}
	}
	for _, c := range kids {
		u := make([]int64, len(capT))
		for _, t := range all {
			if seg, _ := childOf(t, prefix); seg == c.name && inside(t, prefix) {
				addScaled(u, d[t.Name], int64(n[t.Name]))
			}
		}
		c.share = dominant(u, capT, dims) / c.weight
	}
	var best *child
	for _, c := range kids {
		if best == nil || c.share < best.share {
			best = c
		}
	}
	s0 := best.share
	for _, c := range kids {
		if tie(c.share, s0) && c.name < best.name {
			best = c
		}
	}
	if best.leaf != nil {
		return *best.leaf
	}
	return refPick(active, all, n, d, capT, dims, gw, joinPath(prefix, best.name))
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	return a + "/" + b
}

func inside(t Tenant, prefix string) bool {
	return prefix == "" || t.Path == prefix || strings.HasPrefix(t.Path, prefix+"/")
}

// childOf returns the segment under prefix on t's way down, and whether it is t itself.
func childOf(t Tenant, prefix string) (string, bool) {
	if !inside(t, prefix) {
		return "\x00", false
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(t.Path, prefix), "/")
	if rest == "" {
		return t.Name, true
	}
	seg, _, _ := strings.Cut(rest, "/")
	return seg, false
}
