package v1

import (
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
)

// Bounds of a fair-share scenario. Counts stay at most 2^53 so that sums of counts times amounts
// never overflow int64 unnoticed and every count converts to float64 exactly; an amount is held
// in millionths, so it stays at most 2^53 millionths; weights keep every share finite.
const (
	fairMaxCount  = 1 << 53
	fairMaxAmount = float64(1<<53) / 1e6
	fairMinWeight = 1e-6
	fairMaxWeight = 1e6
)

// ValidateFairScenario checks every field of a decoded scenario on its own (the allocator checks
// what depends on several fields together: reservations that fit the pool, tenants a step names,
// limits) and returns every problem at once as FieldErrors with paths, sorted.
func ValidateFairScenario(sc *FairScenario) error {
	var errs errList
	if sc.APIVersion != "" && sc.APIVersion != APIVersion {
		errs.add("apiVersion", "unsupported %q (supported: %s)", truncate(sc.APIVersion), APIVersion)
	}
	if sc.Kind != "" && sc.Kind != KindFairScenario {
		errs.add("kind", "unsupported %q (supported: %s)", truncate(sc.Kind), KindFairScenario)
	}
	if sc.Start != "" {
		if _, err := time.Parse(time.RFC3339, sc.Start); err != nil {
			errs.add("start", "%q is not an RFC 3339 time", truncate(sc.Start))
		}
	}
	checkFairCapacity(sc.Capacity, sc.Slices, "", &errs)
	if p := sc.BurstPoolPercent; math.IsNaN(p) || p < 0 || p >= 100 {
		errs.add("burstPoolPercent", "%v is outside [0, 100)", p)
	}
	checkFairDuration(sc.LeaseDuration, "leaseDuration", &errs)
	checkFairDuration(sc.MaxMinRuntime, "maxMinRuntime", &errs)
	checkFairDuration(sc.HistoryHalfLife, "historyHalfLife", &errs)
	if l := sc.Limits; l != nil {
		checkFairCount(l.MaxTenants, "limits.maxTenants", &errs)
		checkFairCount(l.MaxDemand, "limits.maxDemand", &errs)
		checkFairCount(l.MaxTotalDemand, "limits.maxTotalDemand", &errs)
	}
	for i, g := range sc.Groups {
		p := index("groups", i)
		if g.Path == "" {
			errs.add(field(p, "path"), "required (the root's weight is not configurable)")
		} else if !fairPathOK(g.Path) {
			errs.add(field(p, "path"), "%q has an empty segment or a space", truncate(g.Path))
		}
		checkFairWeight(g.Weight, field(p, "weight"), &errs)
		checkFairDuration(g.MaxMinRuntime, field(p, "maxMinRuntime"), &errs)
		checkFairPart(g.Deserved, field(p, "deserved"), &errs)
		checkFairPart(g.Limit, field(p, "limit"), &errs)
	}
	for i, t := range sc.Tenants {
		checkFairTenant(t, index("tenants", i), &errs)
	}
	var prev time.Duration
	for i, st := range sc.Steps {
		p := index("steps", i)
		at, err := time.ParseDuration(st.At)
		switch {
		case err != nil:
			errs.add(field(p, "at"), "%q is not a duration (e.g. 90s, 5m)", truncate(st.At))
		case at < 0:
			errs.add(field(p, "at"), "%s is negative", at)
		case at < prev:
			errs.add(field(p, "at"), "%s is before the previous step's %s", at, prev)
		}
		if err == nil && at > prev {
			prev = at
		}
		for _, name := range fairSortedKeys(st.Demand) {
			checkFairCount(st.Demand[name], key(field(p, "demand"), name), &errs)
		}
		for j, t := range st.Add {
			checkFairTenant(t, index(field(p, "add"), j), &errs)
		}
		for j, name := range st.Remove {
			if name == "" {
				errs.add(index(field(p, "remove"), j), "empty tenant name")
			}
		}
		checkFairCapacity(st.Capacity, st.Slices, p, &errs)
	}
	return errs.result()
}

func checkFairTenant(t FairTenant, p string, errs *errList) {
	if t.Name == "" || strings.ContainsAny(t.Name, "/#") || strings.IndexFunc(t.Name, unicode.IsSpace) >= 0 {
		errs.add(field(p, "name"), "%q must be non-empty, without '/', '#' or spaces", truncate(t.Name))
	}
	if t.Path != "" && !fairPathOK(t.Path) {
		errs.add(field(p, "path"), "%q has an empty segment or a space", truncate(t.Path))
	}
	if t.Weight != 0 {
		checkFairWeight(t.Weight, field(p, "weight"), errs)
	}
	checkFairPart(t.Deserved, field(p, "deserved"), errs)
	switch {
	case len(t.Task) > 0 && t.Slice != "":
		errs.add(p, "give task or slice, not both")
	case len(t.Task) == 0 && t.Slice == "":
		errs.add(p, "task or slice is required")
	}
	for _, name := range fairSortedKeys(t.Task) {
		checkFairAmount(t.Task[name], key(field(p, "task"), name), errs)
	}
	checkFairCount(t.Demand, field(p, "demand"), errs)
	checkFairCount(t.Reservation, field(p, "reservation"), errs)
	checkFairCount(t.Cap, field(p, "cap"), errs)
	checkFairDuration(t.MinRuntime, field(p, "minRuntime"), errs)
	seen := map[string]bool{}
	for i, c := range t.Classes {
		cp := index(field(p, "classes"), i)
		if c.Name == "" || seen[c.Name] {
			errs.add(field(cp, "name"), "%q must be non-empty and unique among the tenant's classes", truncate(c.Name))
		}
		seen[c.Name] = true
		if c.Replicas < 1 || c.Replicas > fairMaxCount {
			errs.add(field(cp, "replicas"), "%d is outside [1, 2^53]", c.Replicas)
		}
	}
}

func checkFairCapacity(c map[string]float64, slices map[string]int64, p string, errs *errList) {
	for _, name := range fairSortedKeys(c) {
		fp := key(field(p, "capacity"), name)
		if name == "" || strings.IndexFunc(name, unicode.IsSpace) >= 0 || strings.ContainsAny(name, ",=:") {
			errs.add(fp, "resource name must be non-empty, without spaces, commas, colons or '='")
		}
		checkFairAmount(c[name], fp, errs)
	}
	for _, name := range fairSortedKeys(slices) {
		checkFairCount(slices[name], key(field(p, "slices"), name), errs)
	}
}

func checkFairAmount(x float64, p string, errs *errList) {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		errs.add(p, "%v is not a finite number", x)
	case x < 0:
		errs.add(p, "%v is negative", x)
	case x > fairMaxAmount:
		errs.add(p, "%v is larger than %v (count memory in MiB, not bytes)", x, fairMaxAmount)
	}
}

func checkFairCount(n int64, p string, errs *errList) {
	switch {
	case n < 0:
		errs.add(p, "%d is negative", n)
	case n > fairMaxCount:
		errs.add(p, "%d is above 2^53", n)
	}
}

func checkFairWeight(w float64, p string, errs *errList) {
	switch {
	case math.IsNaN(w) || math.IsInf(w, 0):
		errs.add(p, "%v is not a finite number", w)
	case w < fairMinWeight || w > fairMaxWeight:
		errs.add(p, "%v is outside [%g, %g]", w, fairMinWeight, fairMaxWeight)
	}
}

func checkFairPart(x float64, p string, errs *errList) {
	if math.IsNaN(x) || x < 0 || x > 1 {
		errs.add(p, "%v is outside [0, 1] (a part of the steady pool)", x)
	}
}

func checkFairDuration(s, p string, errs *errList) {
	if s == "" {
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		errs.add(p, "%q is not a duration (e.g. 90s, 5m)", truncate(s))
	case d < 0:
		errs.add(p, "%s is negative", d)
	}
}

func fairPathOK(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || strings.IndexFunc(seg, unicode.IsSpace) >= 0 {
			return false
		}
	}
	return true
}

func fairSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
