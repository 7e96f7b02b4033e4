package plan

// reusedMaps are maps that steps run on every packing (pack runs once per choice the
// optimisation tries) would otherwise build from empty each time, growing them entry by entry:
// spreadRedundant's index of the units (rebuilt after each replica it moves to another GPU),
// the compaction's indexes, takeGroup's count of free GPUs per node (once per
// tensor-parallel unit), formUnits' tenants by group, markUnplaced's short tenants and score's
// sharing settings per node. Each is handed out empty (cleared), keeping the room it grew to, and
// is valid only until it is handed out again; no result keeps one.
type reusedMaps struct {
	// spreadWhere and spreadByKey are spreadRedundant's index: each unit's GPU, and the units by
	// group key in fleet order. spreadByKey's slices are truncated, not dropped, so that their
	// arrays are filled again; a caller reads them only until the next spreadIndex.
	spreadWhere map[*unit]*gpuPlan
	spreadByKey map[groupKey][]*unit
	// compactWhere, compactUnits, compactByNode and compactPos are the compactor's where, units,
	// byNode and pos; units' and byNode's slices are truncated like spreadByKey's (the
	// compaction reads them, it appends to none after compact's indexing).
	compactWhere  map[*unit]*gpuPlan
	compactUnits  map[*tenant][]*unit
	compactByNode map[string][]*gpuPlan
	compactPos    map[*gpuPlan]int
	// takeCount and takeOrder are takeGroup's free GPUs per node and the nodes in order of
	// their first free GPU, for one call.
	takeCount map[string]int
	takeOrder []string
	// formByKey, formKeys and formReps are formUnits' tenants by group key, the keys in the
	// order met and the replicas of each; formByKey's slices are truncated like spreadByKey's.
	formByKey map[groupKey][]*tenant
	formKeys  []groupKey
	formReps  []int
	// shortCount, shortWhy and shortOrder are markUnplaced's replicas left short per tenant,
	// the rule that blocked each and the tenants in order met.
	shortCount map[*tenant]int
	shortWhy   map[*tenant]string
	shortOrder []*tenant
	// scoreUses and scoreConflicts are score's sharing setting per node and MIG profile, and
	// the node and profile pairs set two ways.
	scoreUses      map[nodeProfile]migUse
	scoreConflicts map[nodeProfile]bool
}

// nodeProfile is a MIG profile on a node, as score counts the sharing settings.
type nodeProfile struct{ node, profile string }

// formIndex hands out formUnits' index, empty: byKey with every slice truncated, keys and
// reps truncated (the caller stores what it grew back in formKeys and formReps).
func (r *reusedMaps) formIndex() (byKey map[groupKey][]*tenant, keys []groupKey, reps []int) {
	if r.formByKey == nil {
		r.formByKey = map[groupKey][]*tenant{}
	}
	truncateAll(r.formByKey)
	return r.formByKey, r.formKeys[:0], r.formReps[:0]
}

// shortIndex hands out markUnplaced's maps, empty, and its order, truncated (the caller stores
// the order it grew back in shortOrder).
func (r *reusedMaps) shortIndex() (count map[*tenant]int, why map[*tenant]string, order []*tenant) {
	if r.shortCount == nil {
		r.shortCount, r.shortWhy = map[*tenant]int{}, map[*tenant]string{}
	}
	clear(r.shortCount)
	clear(r.shortWhy)
	clear(r.shortOrder)
	return r.shortCount, r.shortWhy, r.shortOrder[:0]
}

// scoreIndex hands out score's maps, empty.
func (r *reusedMaps) scoreIndex() (uses map[nodeProfile]migUse, conflicts map[nodeProfile]bool) {
	if r.scoreUses == nil {
		r.scoreUses, r.scoreConflicts = map[nodeProfile]migUse{}, map[nodeProfile]bool{}
	}
	clear(r.scoreUses)
	clear(r.scoreConflicts)
	return r.scoreUses, r.scoreConflicts
}

// spreadIndex hands out spreadRedundant's index maps, empty: where with room for at least
// hint units, byKey with every slice of its last use truncated to length 0.
func (r *reusedMaps) spreadIndex(hint int) (where map[*unit]*gpuPlan, byKey map[groupKey][]*unit) {
	if r.spreadWhere == nil {
		r.spreadWhere, r.spreadByKey = make(map[*unit]*gpuPlan, hint), map[groupKey][]*unit{}
	}
	clear(r.spreadWhere)
	truncateAll(r.spreadByKey)
	return r.spreadWhere, r.spreadByKey
}

// compactIndex hands out the compactor's maps, empty; pos with room for at least hint GPUs.
func (r *reusedMaps) compactIndex(hint int) (where map[*unit]*gpuPlan, units map[*tenant][]*unit, byNode map[string][]*gpuPlan, pos map[*gpuPlan]int) {
	if r.compactPos == nil {
		r.compactWhere, r.compactUnits = map[*unit]*gpuPlan{}, map[*tenant][]*unit{}
		r.compactByNode, r.compactPos = map[string][]*gpuPlan{}, make(map[*gpuPlan]int, hint)
	}
	clear(r.compactWhere)
	truncateAll(r.compactUnits)
	truncateAll(r.compactByNode)
	clear(r.compactPos)
	return r.compactWhere, r.compactUnits, r.compactByNode, r.compactPos
}

// truncateAll empties every slice of m, keeping its array (zeroed, so that it keeps no pointer
// of a packing alive) for the next appends under the same key.
func truncateAll[K comparable, V any](m map[K][]V) {
	for k, vs := range m {
		clear(vs)
		m[k] = vs[:0]
	}
}

// nodeCounts hands out takeGroup's count, empty, and its order, truncated (the caller stores
// the order it grew back in takeOrder).
func (r *reusedMaps) nodeCounts() (map[string]int, []string) {
	if r.takeCount == nil {
		r.takeCount = map[string]int{}
	}
	clear(r.takeCount)
	return r.takeCount, r.takeOrder[:0]
}
