package plan

import (
	"slices"
	"strconv"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Kinds of migration step.
const (
	StepGPU   = "gpu"   // a GPU changes mode or MIG layout
	StepStart = "start" // a new replica starts (nothing stops)
	StepMove  = "move"  // a replica moves: start the new one, wait until it is ready, stop the old
	StepStop  = "stop"  // a replica stops (nothing replaces it)
	// StepRestart: a replica moves onto GPUs its old slot holds (a tensor-parallel group that
	// grows, shrinks or shifts on its node), so the two cannot run side by side: stop the old,
	// then start the new; the tenant is a replica short meanwhile. A replica that keeps its slot
	// on a GPU that is drained restarts there too (From and To are the same slot): the drain
	// stops it, and it starts once the GPU is reconfigured. So does a replica whose MIG instance
	// is replaced by another on the same GPU (a re-slice: From and To name the two instances).
	StepRestart = "restart"
)

// InPlace reports whether s keeps a replica on the GPU it runs on: a restart there (its slot kept
// in a new layout, or a new MIG instance of the GPU it re-partitions), or a move between two MIG
// instances of a GPU whose layout stays. That is a reconfiguration, not a move: it is listed and
// counted (Reconfigurations) but not against a move budget (CountMoves).
func (s Step) InPlace() bool { return s.inPlace }

// CountMoves counts the replicas and engines a migration moves to another GPU: its moves and its
// restarts that are not in place (a tensor-parallel group onto GPUs its old groups hold).
func CountMoves(steps []Step) int {
	n := 0
	for _, s := range steps {
		if (s.Kind == StepMove || s.Kind == StepRestart) && !s.inPlace {
			n++
		}
	}
	return n
}

// Reconfigurations counts the replicas a migration restarts or moves on their own GPU (InPlace).
func Reconfigurations(steps []Step) int {
	n := 0
	for _, s := range steps {
		if s.inPlace {
			n++
		}
	}
	return n
}

// sameInstanceGPU reports whether a and b are MIG instances of one GPU.
func sameInstanceGPU(a, b slot) bool {
	return a.tp == "" && b.tp == "" && a.inst.Profile != "" && b.inst.Profile != "" && a.gpu == b.gpu
}

// slot is where a replica runs: a GPU and, under MIG, its instance.
type slot struct {
	gpu  v1.GPURef
	inst v1.InstanceRef
	tp   string // a tensor-parallel group's GPU indices ("0,1"); gpu is its first
}

// gpuIndices are the GPUs of its node the slot holds: a tensor-parallel group's, else its GPU's.
func (s slot) gpuIndices() []int {
	if s.tp == "" {
		return []int{s.gpu.Index}
	}
	var out []int
	for _, f := range strings.Split(s.tp, ",") {
		if i, err := strconv.Atoi(f); err == nil {
			out = append(out, i)
		}
	}
	return out
}

// gpus are the GPUs the slot holds (a tensor-parallel group's, else its GPU).
func (s slot) gpus() []v1.GPURef {
	var out []v1.GPURef
	for _, i := range s.gpuIndices() {
		out = append(out, v1.GPURef{Node: s.gpu.Node, Index: i})
	}
	return out
}

// onAny reports whether p holds a GPU of set (false for nil).
func onAny(p *slot, set map[v1.GPURef]bool) bool {
	if p == nil {
		return false
	}
	return slices.ContainsFunc(p.gpus(), func(g v1.GPURef) bool { return set[g] })
}

// overlaps reports whether a replica on s and one on o would need a GPU at the same time, one of
// them being a tensor-parallel group (two slots on one whole GPU are the same slot; MIG
// instances of one GPU are told apart by the GPU's layout step).
func (s slot) overlaps(o slot) bool {
	if s.gpu.Node != o.gpu.Node || s.tp == "" && o.tp == "" {
		return false
	}
	for _, i := range s.gpuIndices() {
		if slices.Contains(o.gpuIndices(), i) {
			return true
		}
	}
	return false
}

func (s slot) String() string {
	if s.tp != "" {
		return s.gpu.Node + "/" + s.tp
	}
	if s.inst.Profile == "" {
		return s.gpu.String()
	}
	return s.gpu.String() + " " + s.inst.String()
}

// ptr is a pointer to a copy of s.
func ptr(s slot) *slot { return &s }

// replicaSlots lists, per tenant, the slots of its replicas, one entry per replica, from the
// replicas listed under the plan's GPUs.
func replicaSlots(pl *v1.Plan) map[string][]slot {
	out := map[string][]slot{}
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			s := slot{gpu: g.Ref()}
			if tp := r.TensorParallel.GPUs; len(tp) > 0 {
				if tp[0] != g.Index {
					continue // one slot per tensor-parallel replica, at its group's first GPU
				}
				parts := make([]string, len(tp))
				for i, x := range tp {
					parts[i] = strconv.Itoa(x)
				}
				s.tp = strings.Join(parts, ",")
			}
			out[r.Tenant] = append(out[r.Tenant], s)
		}
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				out[r.Tenant] = append(out[r.Tenant], slot{gpu: g.Ref(), inst: in.Ref()})
			}
		}
	}
	return out
}

// replicaSteps compares where each tenant's replicas run in cur and next. Replicas are matched by
// slot, not by index (indices are renumbered when a plan is assembled): a slot in both plans is
// no step. A new slot that overlaps old slots of the tenant that go away (a tensor-parallel group
// that grows, shrinks or shifts on its node) takes the first of them as a restart (stop, then
// start) after the others stop (clearing stops); the tenant's other new slots are paired with
// its other old slots as moves (start the new, wait, stop the old), in order; what is left over
// starts or stops.
func replicaSteps(cur, next *v1.Plan) []Step {
	return stepsBetween(replicaSlots(cur), replicaSlots(next))
}

// stepsBetween is replicaSteps on the plans' slots (replicaSlots).
func stepsBetween(before, after map[string][]slot) []Step {
	var names []string
	for n := range after {
		names = append(names, n)
	}
	for n := range before {
		if _, ok := after[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var out []Step
	for _, n := range names {
		old, now := slices.Clone(before[n]), slices.Clone(after[n])
		for i := 0; i < len(now); {
			if j := slices.Index(old, now[i]); j >= 0 {
				old = slices.Delete(old, j, j+1)
				now = slices.Delete(now, i, i+1)
				continue
			}
			i++
		}
		var rest []slot
		for _, to := range now {
			var hit []int
			for j, from := range old {
				if from.overlaps(to) {
					hit = append(hit, j)
				}
			}
			if len(hit) == 0 {
				rest = append(rest, to)
				continue
			}
			for _, j := range hit[1:] {
				out = append(out, Step{Tenant: n, Kind: StepStop, GPU: old[j].gpu, From: old[j].String(), To: "none", clears: true, from: ptr(old[j])})
			}
			out = append(out, Step{Tenant: n, Kind: StepRestart, GPU: to.gpu, From: old[hit[0]].String(), To: to.String(), from: ptr(old[hit[0]]), to: ptr(to)})
			for k := len(hit) - 1; k >= 0; k-- {
				old = slices.Delete(old, hit[k], hit[k]+1)
			}
		}
		now = rest
		for i := 0; i < max(len(old), len(now)); i++ {
			s := Step{Tenant: n}
			switch {
			case i < len(old) && i < len(now):
				s.Kind, s.GPU, s.From, s.To, s.from, s.to = StepMove, now[i].gpu, old[i].String(), now[i].String(), ptr(old[i]), ptr(now[i])
				s.inPlace = sameInstanceGPU(old[i], now[i])
			case i < len(now):
				s.Kind, s.GPU, s.From, s.To, s.to = StepStart, now[i].gpu, "none", now[i].String(), ptr(now[i])
			default:
				s.Kind, s.GPU, s.From, s.To, s.from = StepStop, old[i].gpu, old[i].String(), "none", ptr(old[i])
			}
			out = append(out, s)
		}
	}
	return out
}

// cellsOf is p's cells, none for nil.
func cellsOf(p *slot) []string {
	if p == nil {
		return nil
	}
	return p.cells()
}

// cells are what a slot occupies: its MIG instance, or each whole GPU it holds.
func (s slot) cells() []string {
	if s.inst.Profile != "" {
		return []string{s.gpu.String() + " " + s.inst.String()}
	}
	var out []string
	for _, i := range s.gpuIndices() {
		out = append(out, v1.GPURef{Node: s.gpu.Node, Index: i}.String())
	}
	return out
}

// capacity is, per cell, the replicas it holds in the plan in force (now) and the most it may
// hold during the migration (most): as many as it holds in either plan. A whole GPU that runs
// one replica in both (an exclusive GPU) takes no second one before the first leaves; one
// shared by k replicas in both takes a new one only after one of its k leaves.
type capacity struct{ now, most map[string]int }

// slotCapacity counts the cells' replicas before and after (replicaSlots of the two plans).
func slotCapacity(before, after map[string][]slot) capacity {
	c := capacity{now: map[string]int{}, most: map[string]int{}}
	count := func(slots map[string][]slot, into map[string]int) {
		for _, ss := range slots {
			for _, sl := range ss {
				for _, x := range sl.cells() {
					into[x]++
				}
			}
		}
	}
	then := map[string]int{}
	count(before, c.now)
	count(after, then)
	for x, n := range c.now {
		c.most[x] = n
	}
	for x, n := range then {
		c.most[x] = max(c.most[x], n)
	}
	return c
}

// order numbers the waves of a migration: GPUs that run nothing now are reconfigured first (wave
// 1); then replicas start or move onto GPUs that are not drained, at most maxUnavailable per wave
// (a move starts the new replica and waits for it before stopping the old one, so the tenant keeps
// its capacity; a restart's clearing stops come in the waves before it); then busy GPUs are
// drained, at most maxUnavailable per wave, with the replica steps onto them, a replica moving
// from one drained GPU to another starting there before its own GPU is drained (see drain); then
// shared LoRA engines restart in place (restarts: they change no slot's occupants), at most
// maxUnavailable per wave; stops come last. The shared LoRA engines' starts, moves and stops are
// among repSteps: an engine occupies its whole GPU's cell (c counts it) and is ordered as a
// replica on that slot is.
//
// An engine that moves is stop-old-then-start-new in reality (its Deployment does not surge), yet
// for room it holds both GPUs during its wave, like a replica move: the new GPU must be free when
// the wave starts, and the old one is free for others only from the next wave. That is the
// conservative reading: nothing is ever listed to start on the old GPU while the old pod may
// still be terminating, and a trade of GPUs between an engine and a replica is a cycle, broken as
// any other (one of the two stops first), instead of an engine stop and a replica start listed in
// one wave.
//
// A replica starts on a slot only when the slot has room (capacity): onto a GPU or MIG instance
// another replica leaves in the same migration it comes after that replica's move away, or its
// stop, which is then brought forward to the wave before. A cycle of such moves (two tenants
// trading exclusive GPUs) is broken by stopping one of its replicas first (a clearing stop) and
// starting it once its new slot is free: that tenant is a replica short meanwhile.
func order(gpuSteps, repSteps, restarts []Step, c capacity, maxUnavailable int) []Step {
	var idle, busy []Step
	drained := map[v1.GPURef]bool{}
	for _, s := range gpuSteps {
		if s.Drain {
			busy = append(busy, s)
			drained[s.GPU] = true
		} else {
			idle = append(idle, s)
		}
	}
	var early, late, stops, earlyClear []Step
	var lateClear []clearing
	for i, s := range repSteps {
		switch {
		case s.clears:
			// a stop that frees GPUs for the restart after it: in waves before the restart's
			if r := restartAfter(repSteps, i); r != nil && onAny(r.to, drained) {
				lateClear = append(lateClear, clearing{s, r.to})
			} else {
				earlyClear = append(earlyClear, s)
			}
		case s.Kind == StepStop:
			stops = append(stops, s)
		case onAny(s.to, drained): // any GPU of a group: its first may not be drained
			late = append(late, s)
		default:
			early = append(early, s)
		}
	}
	w := &waves{occ: c.now, most: c.most, gone: map[string]int{}, per: maxUnavailable}
	w.put(idle, max(len(idle), 1))
	w.put(earlyClear, maxUnavailable)
	deferred := w.fill(early, &stops, false)
	w.drain(busy, lateClear, append(late, deferred...), &stops)
	w.put(restarts, maxUnavailable)
	w.put(stops, maxUnavailable)
	for i := range w.out {
		w.out[i].from, w.out[i].to, w.out[i].text = nil, nil, [2]string{}
	}
	return w.out
}

// cellOn reports whether cell x is on GPU g (the GPU itself, or one of its MIG instances).
func cellOn(x string, g v1.GPURef) bool {
	return x == g.String() || strings.HasPrefix(x, g.String()+" ")
}

// waves assigns waves to steps in order, keeping the cells' occupancy.
type waves struct {
	occ, most map[string]int
	// gone counts, per cell, the occupants a drain evicted whose steps have not left yet: their
	// departures are already out of occ.
	gone map[string]int
	per  int
	wave int
	out  []Step
}

// put gives ss waves of per steps each, in order (GPU steps, clearing stops, stops).
func (w *waves) put(ss []Step, per int) {
	for i := range ss {
		if i%per == 0 {
			w.wave++
		}
		ss[i].Wave = w.wave
		w.out = append(w.out, ss[i])
		w.leave(ss[i])
	}
}

// leave applies a step's departure (a stop's, or a move's old slot once its new one runs).
func (w *waves) leave(s Step) {
	for _, x := range cellsOf(s.from) {
		if w.gone[x] > 0 {
			w.gone[x]-- // evicted by its GPU's drain
			continue
		}
		w.occ[x] = max(w.occ[x]-1, 0)
	}
}

// fits reports whether s's new slot has room, with the arrivals already in this wave (taken).
func (w *waves) fits(s Step, taken map[string]int) bool {
	for _, x := range cellsOf(s.to) {
		n := w.occ[x] + taken[x] + 1
		if s.Kind == StepRestart && slices.Contains(cellsOf(s.from), x) && w.gone[x] == 0 {
			n-- // a restart stops its old replica before it starts the new one
		}
		if n > max(w.most[x], 1) {
			return false
		}
	}
	return true
}

// fill gives the replica steps ss waves of at most per steps, each step once its new slot has
// room. When none has room, the stops (of stops) that free a waiting step's slot come first, in a
// wave of their own; when none does either, the steps still waiting are returned (last: the
// drained GPUs' steps may free their slots), or, last, one move of a cycle is split into a
// clearing stop now and a start once its slot is free.
func (w *waves) fill(ss []Step, stops *[]Step, last bool) (waiting []Step) {
	pending := slices.Clone(ss)
	for len(pending) > 0 {
		if rest, ran := w.runWave(pending, nil); ran {
			pending = rest
			continue
		}
		if w.stopsFor(pending, stops) {
			continue
		}
		if !last {
			return pending
		}
		var ok bool
		if pending, ok = w.split(pending); !ok {
			// Nothing waiting can be freed (a slot fuller than either plan holds it): run them
			// as they are rather than lose them.
			w.put(pending, w.per)
			return nil
		}
	}
	return nil
}

// runWave runs, in a wave of its own, the first steps of pending (at most per) that are ready (all
// when ready is nil) and whose new slots have room, those that bring back a replica a drain
// evicted before the others, and returns the others; ran is false, and nothing is run, when none
// can.
func (w *waves) runWave(pending []Step, ready func(Step) bool) (rest []Step, ran bool) {
	taken := map[string]int{}
	picked := make([]bool, len(pending))
	n := 0
	for _, first := range []bool{true, false} { // the replicas a drain evicted first
		for i, s := range pending {
			if picked[i] || first && !w.down(s) || n == w.per || ready != nil && !ready(s) || !w.fits(s, taken) {
				continue
			}
			picked[i], n = true, n+1
			for _, x := range cellsOf(s.to) {
				taken[x]++
			}
		}
	}
	if n == 0 {
		return pending, false
	}
	var now []Step
	for i, s := range pending {
		if picked[i] {
			now = append(now, s)
		} else {
			rest = append(rest, s)
		}
	}
	w.wave++
	for i := range now {
		now[i].Wave = w.wave
		for _, x := range cellsOf(now[i].to) {
			w.occ[x]++
		}
		if now[i].Kind == StepRestart {
			w.leave(now[i]) // its old replica stopped first
		}
	}
	for i := range now {
		if now[i].Kind == StepMove {
			w.leave(now[i]) // the old replica stops once the new one runs
		}
	}
	w.out = append(w.out, now...)
	return rest, true
}

// down reports whether s brings back a replica or engine that a drain evicted.
func (w *waves) down(s Step) bool {
	for _, x := range cellsOf(s.from) {
		if w.gone[x] > 0 {
			return true
		}
	}
	return false
}

// stopsFor brings forward, in a wave of their own, the stops (of stops) that free a slot one of
// waiting needs, and reports whether there were any.
func (w *waves) stopsFor(waiting []Step, stops *[]Step) bool {
	need := map[string]bool{}
	for _, s := range waiting {
		for _, x := range cellsOf(s.to) {
			need[x] = true
		}
	}
	var early, keep []Step
	for _, st := range *stops {
		frees := false
		for _, x := range cellsOf(st.from) {
			frees = frees || need[x]
		}
		if frees {
			early = append(early, st)
		} else {
			keep = append(keep, st)
		}
	}
	if len(early) == 0 {
		return false
	}
	*stops = keep
	w.put(early, w.per)
	return true
}

// split breaks a cycle of moves that wait for each other's slots: the first waiting move's old
// replica stops now (a clearing stop, in a wave of its own), and the move becomes a start once
// its slot is free. ok is false when no move waits.
func (w *waves) split(pending []Step) (out []Step, ok bool) {
	i := slices.IndexFunc(pending, func(s Step) bool { return s.Kind == StepMove })
	if i < 0 {
		return pending, false
	}
	m := pending[i]
	stop := Step{Tenant: m.Tenant, LoRAEngine: m.LoRAEngine, Kind: StepStop, GPU: m.from.gpu, From: m.From, To: "none", clears: true, from: m.from}
	start := Step{Tenant: m.Tenant, LoRAEngine: m.LoRAEngine, Kind: StepStart, GPU: m.GPU, From: "none", To: m.To, to: m.to}
	if m.LoRAEngine != "" { // an engine's stop and start name the engine, as engineSteps does
		stop.From, start.To = m.text[0], m.text[1]
	}
	w.put([]Step{stop}, 1)
	pending = slices.Clone(pending)
	pending[i] = start
	return pending, true
}

// clearing is a stop that frees GPUs for a restart onto drained GPUs (to, the restart's new
// slot): it runs once those GPUs are drained, before the restart.
type clearing struct {
	stop Step
	to   *slot
}

// drain orders the drains of busy GPUs (their GPU steps) with the replica steps onto them
// (pending: the steps onto drained GPUs, and those onto other GPUs still waiting for room; clears:
// the clearing stops of restarts onto drained GPUs, each put once its restart's GPUs are drained),
// at most per drains or replica steps a wave, make-before-break: a replica or engine that moves
// off a drained GPU onto another drained GPU starts there, once that GPU is drained and
// reconfigured, before its own GPU is drained, so the drain does not evict it. A GPU is drained
// once no step still waiting moves anything off it (a step onto the GPU itself needs its drain).
// When every GPU left is waited on, the GPUs whose replicas move onto each other (a cycle) are
// drained together, in one wave as far as per allows, and their replicas are evicted and start on
// their new GPUs in the waves after; a move that waits for room on GPUs that are not drained is
// split as fill splits it; failing both, the GPU with the fewest waiting departures is drained.
func (w *waves) drain(busy []Step, clears []clearing, pending []Step, stops *[]Step) {
	undrained := map[v1.GPURef]bool{}
	for _, b := range busy {
		undrained[b.GPU] = true
	}
	ready := func(s Step) bool { return !onAny(s.to, undrained) }
	// departs reports whether s moves something off g before g's drain could evict it.
	departs := func(s Step, g v1.GPURef) bool {
		if s.from == nil || s.Kind == StepStop || onAny(s.to, map[v1.GPURef]bool{g: true}) {
			return false
		}
		return slices.Contains(s.from.gpus(), g)
	}
	drainNow := func(gs []v1.GPURef) {
		// the stops of replicas or engines on these GPUs come first, in waves of their own: the
		// drain would end them anyway, and a stop listed after it would be of one already gone
		on := map[v1.GPURef]bool{}
		for _, g := range gs {
			on[g] = true
		}
		var first, keep []Step
		for _, st := range *stops {
			if onAny(st.from, on) {
				first = append(first, st)
			} else {
				keep = append(keep, st)
			}
		}
		*stops = keep
		w.put(first, w.per)
		var ss []Step
		for _, b := range busy {
			if slices.Contains(gs, b.GPU) {
				ss = append(ss, b)
			}
		}
		w.put(ss, len(ss))
		for _, g := range gs {
			delete(undrained, g)
			for x := range w.occ { // what still runs on the GPU is gone: moved away, or evicted
				if cellOn(x, g) {
					w.gone[x] += w.occ[x]
					w.occ[x] = 0
				}
			}
		}
	}
	for len(undrained) > 0 {
		var now []Step
		var later []clearing
		for _, c := range clears {
			if !onAny(c.to, undrained) {
				now = append(now, c.stop)
			} else {
				later = append(later, c)
			}
		}
		if len(now) > 0 {
			w.put(now, w.per)
			clears = later
			continue
		}
		var ran bool
		if pending, ran = w.runWave(pending, ready); ran {
			continue
		}
		waiting := slices.DeleteFunc(slices.Clone(pending), func(s Step) bool { return !ready(s) })
		if w.stopsFor(waiting, stops) {
			continue
		}
		// departures counts, per GPU left, the waiting steps that move something off it; edges
		// are the GPUs left that a GPU's departures go to.
		departures, edges := map[v1.GPURef]int{}, map[v1.GPURef][]v1.GPURef{}
		for _, s := range pending {
			var to []v1.GPURef
			if s.to != nil {
				for _, h := range s.to.gpus() {
					if undrained[h] {
						to = append(to, h)
					}
				}
			}
			if s.from == nil {
				continue
			}
			for _, g := range s.from.gpus() {
				if undrained[g] && departs(s, g) {
					departures[g]++
					for _, h := range to {
						if !slices.Contains(edges[g], h) {
							edges[g] = append(edges[g], h)
						}
					}
				}
			}
		}
		var left []v1.GPURef
		for _, b := range busy {
			if undrained[b.GPU] {
				left = append(left, b.GPU)
			}
		}
		var safe []v1.GPURef
		for _, g := range left {
			if departures[g] == 0 {
				safe = append(safe, g)
			}
		}
		if len(safe) > 0 {
			drainNow(safe[:min(len(safe), w.per)])
			continue
		}
		byDepartures := func(a, b v1.GPURef) int { return departures[a] - departures[b] }
		if cyc := sinkCycle(left, edges); len(cyc) > 0 {
			slices.SortStableFunc(cyc, byDepartures)
			drainNow(cyc[:min(len(cyc), w.per)])
			continue
		}
		if sp, ok := w.split(waiting); ok {
			pending = append(sp, slices.DeleteFunc(slices.Clone(pending), ready)...)
			continue
		}
		slices.SortStableFunc(left, byDepartures)
		drainNow(left[:1])
	}
	for _, c := range clears {
		w.put([]Step{c.stop}, w.per)
	}
	w.fill(pending, stops, true)
}

// sinkCycle is a set of GPUs of left (two or more) whose waiting steps move replicas or engines
// off each of them onto others of the set (out: g → the GPUs of left its departures go to), none
// onto other GPUs of left: a strongly connected component of that graph with no edge out. Nil
// when there is none.
func sinkCycle(left []v1.GPURef, out map[v1.GPURef][]v1.GPURef) []v1.GPURef {
	idx := map[v1.GPURef]int{}
	for i, g := range left {
		idx[g] = i
	}
	edges := make([][]int, len(left))
	for i, g := range left {
		for _, h := range out[g] {
			if j, ok := idx[h]; ok && j != i {
				edges[i] = append(edges[i], j)
			}
		}
	}
	// Tarjan's strongly connected components.
	index, low, comp := make([]int, len(left)), make([]int, len(left)), make([]int, len(left))
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int
	onStack := make([]bool, len(left))
	next, ncomp := 0, 0
	var visit func(int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, u := range edges[v] {
			if index[u] < 0 {
				visit(u)
				low[v] = min(low[v], low[u])
			} else if onStack[u] {
				low[v] = min(low[v], index[u])
			}
		}
		if low[v] == index[v] {
			for {
				u := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[u], comp[u] = false, ncomp
				if u == v {
					break
				}
			}
			ncomp++
		}
	}
	for v := range left {
		if index[v] < 0 {
			visit(v)
		}
	}
	size, exits := make([]int, ncomp), make([]bool, ncomp)
	for v := range left {
		size[comp[v]]++
		for _, u := range edges[v] {
			if comp[u] != comp[v] {
				exits[comp[v]] = true
			}
		}
	}
	for c := range ncomp {
		if size[c] < 2 || exits[c] {
			continue
		}
		var gs []v1.GPURef
		for v, g := range left {
			if comp[v] == c {
				gs = append(gs, g)
			}
		}
		return gs
	}
	return nil
}

// restartAfter is the restart that the clearing stops from steps[i] on lead to.
func restartAfter(steps []Step, i int) *Step {
	for ; i < len(steps); i++ {
		if steps[i].Kind == StepRestart {
			return &steps[i]
		}
	}
	return nil
}
