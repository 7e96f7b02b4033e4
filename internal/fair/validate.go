package fair

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
)

// validateConfig returns every problem in cfg. extra names resources the pool has known before
// (a capacity may drop a resource to zero by leaving it out). checkRes checks that the
// reservations fit the steady pool.
func validateConfig(cfg Config, checkRes bool, extra ...string) error {
	var errs []error
	known := map[string]bool{}
	for _, n := range extra {
		known[n] = true
	}
	errs = append(errs, validateCapacity(cfg.Capacity, known)...)
	if p := cfg.BurstPoolPercent; math.IsNaN(p) || p < 0 || p >= 100 {
		errs = append(errs, fmt.Errorf("burstPoolPercent: %v is outside [0, 100)", p))
	}
	if cfg.LeaseDuration < 0 {
		errs = append(errs, fmt.Errorf("leaseDuration: %s is negative", cfg.LeaseDuration))
	}
	if cfg.BurstPoolPercent > 0 && cfg.LeaseDuration == 0 {
		errs = append(errs, errors.New("leaseDuration: a burst pool needs a lease duration (it is only ever lent)"))
	}
	if cfg.MaxMinRuntime < 0 {
		errs = append(errs, fmt.Errorf("maxMinRuntime: %s is negative", cfg.MaxMinRuntime))
	}
	if cfg.HistoryHalfLife < 0 {
		errs = append(errs, fmt.Errorf("historyHalfLife: %s is negative", cfg.HistoryHalfLife))
	}
	errs = append(errs, validateLimits(cfg.Limits)...)
	lim := cfg.Limits.withDefaults()
	if n := len(cfg.Tenants); n > lim.MaxTenants {
		errs = append(errs, fmt.Errorf("tenants: %d tenants exceed the limit of %d (limits.maxTenants)", n, lim.MaxTenants))
	}
	var sum int64
	for _, t := range cfg.Tenants {
		if t.Demand > 0 {
			sum += int64(min(t.Demand, maxCount))
		}
	}
	if sum > int64(lim.MaxTotalDemand) {
		errs = append(errs, onField("demand", fmt.Errorf("tenants: total demand %d exceeds the limit of %d (limits.maxTotalDemand)", sum, lim.MaxTotalDemand)))
	}
	groups := map[string]bool{}
	for i, g := range cfg.Groups {
		for _, err := range validateGroup(g) {
			errs = append(errs, fmt.Errorf("groups[%d]: %w", i, err))
		}
		if groups[g.Path] {
			errs = append(errs, fmt.Errorf("groups[%d]: path %q appears twice", i, g.Path))
		}
		groups[g.Path] = true
	}
	errs = append(errs, validateTenants(cfg.Tenants, known, groups, lim)...)
	errs = append(errs, checkDeservedSums(cfg)...)
	if checkRes && len(errs) == 0 {
		errs = append(errs, checkReservations(cfg, known)...)
	}
	return errors.Join(errs...)
}

func validateCapacity(c Vector, known map[string]bool) []error {
	var errs []error
	if len(c) == 0 && len(known) == 0 {
		errs = append(errs, errors.New("capacity: empty: the pool needs at least one resource"))
	}
	for _, name := range sortedKeys(c) {
		if err := validateResourceName(name); err != nil {
			errs = append(errs, fmt.Errorf("capacity.%s: %w", name, err))
		}
		if _, err := toMicro(c[name]); err != nil {
			errs = append(errs, fmt.Errorf("capacity.%s: %w", name, err))
		}
		known[name] = true
	}
	return errs
}

func validateResourceName(name string) error {
	if name == "" || strings.IndexFunc(name, unicode.IsSpace) >= 0 || strings.ContainsAny(name, ",=:") {
		return fmt.Errorf("resource name %q must be non-empty, without spaces, commas, colons or '='", name)
	}
	return nil
}

func validatePath(p string) error {
	if p == "" {
		return nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || strings.IndexFunc(seg, unicode.IsSpace) >= 0 {
			return fmt.Errorf("path %q has an empty segment or a space", p)
		}
	}
	return nil
}

func validateGroup(g Group) []error {
	var errs []error
	if g.Path == "" {
		errs = append(errs, errors.New("path: empty (the root's weight is not configurable)"))
	} else if err := validatePath(g.Path); err != nil {
		errs = append(errs, fmt.Errorf("path: %w", err))
	}
	if err := checkWeight(g.Weight); err != nil {
		errs = append(errs, fmt.Errorf("weight: %w", err))
	}
	if g.MaxMinRuntime < 0 {
		errs = append(errs, fmt.Errorf("maxMinRuntime: %s is negative", g.MaxMinRuntime))
	}
	if err := checkDeserved(g.Deserved); err != nil {
		errs = append(errs, err)
	}
	if l := g.Limit; math.IsNaN(l) || l < 0 || l > 1 {
		errs = append(errs, fmt.Errorf("limit: %v is outside [0, 1] (a part of the pool; 0 for none)", l))
	} else if l > 0 && g.Deserved > l {
		errs = append(errs, fmt.Errorf("deserved: %v is above the group's limit %v", g.Deserved, l))
	}
	return errs
}

func validateTenants(ts []Tenant, known, groups map[string]bool, lim Limits) []error {
	var errs []error
	names := map[string]bool{}
	interior := map[string]bool{}
	for _, t := range ts {
		for p := t.Path; p != ""; {
			interior[p] = true
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	for _, t := range ts {
		if names[t.Name] {
			errs = append(errs, fmt.Errorf("tenant %q: name appears twice", t.Name))
		}
		names[t.Name] = true
		leaf := t.Name
		if t.Path != "" {
			leaf = t.Path + "/" + t.Name
		}
		if interior[leaf] || groups[leaf] {
			errs = append(errs, fmt.Errorf("tenant %q: %q is also a group path", t.Name, leaf))
		}
		for _, err := range validateTenant(t, known, lim) {
			errs = append(errs, fmt.Errorf("tenant %q: %w", t.Name, err))
		}
	}
	return errs
}

func validateTenant(t Tenant, known map[string]bool, lim Limits) []error {
	var errs []error
	if t.Name == "" || strings.ContainsAny(t.Name, "/#") || strings.IndexFunc(t.Name, unicode.IsSpace) >= 0 {
		errs = append(errs, onField("name", fmt.Errorf("name %q must be non-empty, without '/', '#' or spaces", t.Name)))
	}
	if err := validatePath(t.Path); err != nil {
		errs = append(errs, onField("path", fmt.Errorf("path: %w", err)))
	}
	if t.Weight != 0 {
		if err := checkWeight(t.Weight); err != nil {
			errs = append(errs, onField("weight", fmt.Errorf("weight: %w (0 means 1)", err)))
		}
	}
	errs = append(errs, validateTask(t.Task, known)...)
	for _, f := range []struct {
		name string
		v    int
	}{{"demand", t.Demand}, {"reservation", t.Reservation}, {"cap", t.Cap}} {
		if err := checkCount(f.v, lim.MaxDemand); err != nil {
			errs = append(errs, onField(f.name, fmt.Errorf("%s: %w", f.name, err)))
		}
	}
	if t.Cap > 0 && t.Reservation > t.Cap {
		errs = append(errs, onField("reservation", fmt.Errorf("reservation: %d is above cap %d", t.Reservation, t.Cap)))
	}
	if err := checkDeserved(t.Deserved); err != nil {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for i, c := range t.Classes {
		if c.Name == "" || seen[c.Name] {
			errs = append(errs, fmt.Errorf("classes[%d].name: %q must be non-empty and unique", i, c.Name))
		}
		seen[c.Name] = true
		if c.Replicas < 1 || c.Replicas > maxCount {
			errs = append(errs, fmt.Errorf("classes[%d].replicas: %d is outside [1, 2^53]", i, c.Replicas))
		}
	}
	if t.MinRuntime < 0 {
		errs = append(errs, onField("minRuntime", fmt.Errorf("minRuntime: %s is negative", t.MinRuntime)))
	}
	return errs
}

func validateTask(task Vector, known map[string]bool) []error {
	var errs []error
	if len(task) == 0 {
		return []error{errors.New("task: empty")}
	}
	shared := false
	for _, name := range sortedKeys(task) {
		if !known[name] {
			errs = append(errs, fmt.Errorf("task.%s: resource is not in the pool capacity", name))
			continue
		}
		m, err := toMicro(task[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("task.%s: %w", name, err))
		}
		if m > 0 && !IsSliceKind(name) {
			shared = true
		}
	}
	if !shared && len(errs) == 0 {
		errs = append(errs, errors.New("task: needs a positive amount of at least one resource that is not a slice-kind count"))
	}
	return errs
}

// checkReservations checks Σ reservation·task ≤ steady pool in every resource.
func checkReservations(cfg Config, known map[string]bool) []error {
	names := sortedKeys(known)
	idx := newResIndex(names)
	capT, _ := idx.dense(cfg.Capacity)
	sum := make([]int64, len(names))
	for _, t := range cfg.Tenants {
		d, _ := idx.dense(t.Task)
		for j, x := range d {
			// Saturating: reservation × amount can exceed int64 (2^53 × 2^53); anything above
			// the largest capacity is refused anyway.
			if x > 0 && t.Reservation > 0 {
				if int64(t.Reservation) > (math.MaxInt64-sum[j])/x {
					sum[j] = math.MaxInt64
				} else {
					sum[j] += int64(t.Reservation) * x
				}
			}
		}
	}
	var errs []error
	for j, c := range capT {
		steady := c - int64(math.Floor(float64(c)*cfg.BurstPoolPercent/100))
		if sum[j] == math.MaxInt64 {
			errs = append(errs, onField("reservation", fmt.Errorf("reservations: need more than %v of %s, the steady pool has %v",
				fromMicro(math.MaxInt64), names[j], fromMicro(steady))))
		} else if sum[j] > steady {
			errs = append(errs, onField("reservation", fmt.Errorf("reservations: need %v of %s, the steady pool has %v",
				fromMicro(sum[j]), names[j], fromMicro(steady))))
		}
	}
	return errs
}

// Weights are bounded so that every share (use / capacity / weight) and every entitlement
// (weight / sum of sibling weights) stays a finite, well-conditioned number.
const (
	minWeight = 1e-6
	maxWeight = 1e6
)

// maxCount bounds every count (demand, reservation, cap, limits): 2^53, where int64 arithmetic
// on counts times amounts and float64 conversions are still exact.
const maxCount = 1 << 53

func checkWeight(w float64) error {
	if math.IsNaN(w) || math.IsInf(w, 0) {
		return fmt.Errorf("%v is not a finite number", w)
	}
	if w < minWeight || w > maxWeight {
		return fmt.Errorf("%v is outside [%g, %g]", w, float64(minWeight), float64(maxWeight))
	}
	return nil
}

func checkCount(n, limit int) error {
	switch {
	case n < 0:
		return fmt.Errorf("%d is negative", n)
	case n > maxCount:
		return fmt.Errorf("%d is above 2^53", n)
	case n > limit:
		return fmt.Errorf("%d exceeds the limit of %d (limits.maxDemand)", n, limit)
	}
	return nil
}

func validateLimits(l Limits) []error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"maxTenants", l.MaxTenants}, {"maxDemand", l.MaxDemand}, {"maxTotalDemand", l.MaxTotalDemand}} {
		if f.v < 0 || f.v > maxCount {
			errs = append(errs, fmt.Errorf("limits.%s: %d is outside [0, 2^53]", f.name, f.v))
		}
	}
	return errs
}

func checkDeserved(d float64) error {
	if math.IsNaN(d) || d < 0 || d > 1 {
		return fmt.Errorf("deserved: %v is outside [0, 1] (a part of the steady pool)", d)
	}
	return nil
}

// checkDeservedSums checks that the deserved parts of a node's children fit in its own (in the
// whole pool for the root's children, and for a group without a deserved part of its own).
func checkDeservedSums(cfg Config) []error {
	own := map[string]float64{}
	sum := map[string]float64{}
	parentOf := func(p string) string {
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			return p[:i]
		}
		return ""
	}
	for _, g := range cfg.Groups {
		if g.Deserved > 0 {
			own[g.Path] = g.Deserved
			sum[parentOf(g.Path)] += g.Deserved
		}
	}
	for _, t := range cfg.Tenants {
		if t.Deserved > 0 {
			sum[t.Path] += t.Deserved
		}
	}
	var errs []error
	for _, p := range sortedKeys(sum) {
		limit, ok := own[p]
		if !ok {
			limit = 1
		}
		if sum[p] > limit*(1+tieTolerance) {
			where := "the root"
			if p != "" {
				where = fmt.Sprintf("group %q", p)
			}
			errs = append(errs, fmt.Errorf("deserved: the children of %s ask for %v, more than its %v", where, sum[p], limit))
		}
	}
	return errs
}
