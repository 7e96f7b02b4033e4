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
	errs = append(errs, validateTenants(cfg.Tenants, known, groups)...)
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
	if !(g.Weight > 0) || math.IsInf(g.Weight, 0) {
		errs = append(errs, fmt.Errorf("weight: %v must be a positive finite number", g.Weight))
	}
	return errs
}

func validateTenants(ts []Tenant, known, groups map[string]bool) []error {
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
		for _, err := range validateTenant(t, known) {
			errs = append(errs, fmt.Errorf("tenant %q: %w", t.Name, err))
		}
	}
	return errs
}

func validateTenant(t Tenant, known map[string]bool) []error {
	var errs []error
	if t.Name == "" || strings.ContainsAny(t.Name, "/#") || strings.IndexFunc(t.Name, unicode.IsSpace) >= 0 {
		errs = append(errs, fmt.Errorf("name %q must be non-empty, without '/', '#' or spaces", t.Name))
	}
	if err := validatePath(t.Path); err != nil {
		errs = append(errs, fmt.Errorf("path: %w", err))
	}
	if t.Weight < 0 || math.IsNaN(t.Weight) || math.IsInf(t.Weight, 0) {
		errs = append(errs, fmt.Errorf("weight: %v must be a positive finite number (0 means 1)", t.Weight))
	}
	errs = append(errs, validateTask(t.Task, known)...)
	for _, f := range []struct {
		name string
		v    int
	}{{"demand", t.Demand}, {"reservation", t.Reservation}, {"cap", t.Cap}} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative", f.name, f.v))
		}
	}
	if t.Cap > 0 && t.Reservation > t.Cap {
		errs = append(errs, fmt.Errorf("reservation: %d is above cap %d", t.Reservation, t.Cap))
	}
	if t.MinRuntime < 0 {
		errs = append(errs, fmt.Errorf("minRuntime: %s is negative", t.MinRuntime))
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
		addScaled(sum, d, int64(t.Reservation))
	}
	var errs []error
	for j, c := range capT {
		steady := c - int64(math.Floor(float64(c)*cfg.BurstPoolPercent/100))
		if sum[j] > steady {
			errs = append(errs, fmt.Errorf("reservations: need %v of %s, the steady pool has %v",
				fromMicro(sum[j]), names[j], fromMicro(steady)))
		}
	}
	return errs
}
