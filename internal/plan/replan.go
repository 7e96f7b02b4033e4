package plan

import (
	"fmt"
	"slices"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// signature is what changing a GPU disturbs: its mode and, under MIG, the multiset of instances
// with their sharing. Tenants moving between equal slices is a pod move, not a GPU change.
func signature(mode v1.Mode, insts []v1.PlanInstance) string {
	parts := []string{string(mode)}
	for _, in := range insts {
		s := in.Sharing.Mode
		if s == "" {
			s = v1.SharingNone
		}
		parts = append(parts, in.Profile+"/"+string(s))
	}
	slices.Sort(parts[1:])
	return strings.Join(parts, " ")
}

func (g *gpuPlan) signature() string {
	var insts []v1.PlanInstance
	for _, pi := range g.insts {
		in := v1.PlanInstance{Profile: pi.in.Profile, Start: pi.in.Start}
		if pi.u != nil {
			in.Sharing.Mode = sharingOf(pi.u.c.kind)
		}
		insts = append(insts, in)
	}
	mode := g.mode
	if mode == "" {
		mode = "none"
	}
	return signature(mode, insts)
}

func (g *gpuPlan) busy() bool { return len(g.units()) > 0 }

// alignTo moves the planned GPU configurations between GPUs of the same board so that as many
// GPUs as possible keep the configuration they have in cur (a MIG change drains the GPU): a busy
// configuration goes first to a GPU that already has it, then to a GPU that runs nothing now,
// then to one that runs replicas, and last to one that runs a shared LoRA engine (which
// PlaceLoRAEngines then keeps there when the GPU is left idle); matched MIG GPUs keep their
// current instance starts. Canary GPUs stay where they are. A tensor-parallel group that would
// restart on its tenant's old groups' GPUs moves first to GPUs that run nothing (regroupOnFree).
func (p *planner) alignTo(cur *v1.Plan) {
	current := map[v1.GPURef]v1.PlanGPU{}
	for _, g := range cur.GPUs {
		current[g.Ref()] = g
	}
	p.regroupOnFree(current) // before the other configurations are matched to the GPUs left
	for _, b := range p.boards {
		var slots []int // indices into p.gpus of the board's non-canary GPUs
		var contents []*gpuPlan
		for i, g := range p.gpus {
			// tensor-parallel groups stay where the packer put them: moving their GPUs one by
			// one could split a group over nodes
			if g.fg.board == b && !g.fg.canary && (g.whole == nil || g.whole.tp.Size == 0) {
				slots = append(slots, i)
				contents = append(contents, g)
			}
		}
		p.assignContents(b, slots, contents, current)
	}
	p.keepReplicas(current)
}

func (p *planner) assignContents(b *gpu.Board, slots []int, contents []*gpuPlan, current map[v1.GPURef]v1.PlanGPU) {
	taken := make([]bool, len(slots))
	placed := make([]bool, len(contents))
	out := make([]*gpuPlan, len(slots))
	put := func(ci, si int) {
		c := contents[ci]
		c.fg = p.fleet[slots[si]]
		out[si], taken[si], placed[ci] = c, true, true
	}
	curSig := func(si int) (string, bool) {
		g, ok := current[p.fleet[slots[si]].ref]
		return signature(g.Mode, g.Instances), ok && hasReplicas(g)
	}
	// 1. busy configurations onto GPUs that have them now, preferring the GPU where most of the
	// configuration's replicas already run (so that replicas stay where they are).
	for ci, c := range contents {
		if !c.busy() {
			continue
		}
		best, bestKeep := -1, -1
		for si := range slots {
			if s, busy := curSig(si); !taken[si] && busy && s == c.signature() {
				if k := kept(c, current[p.fleet[slots[si]].ref]); k > bestKeep {
					best, bestKeep = si, k
				}
			}
		}
		if best >= 0 {
			put(ci, best)
			c.adoptStarts(b, current[c.fg.ref])
		}
	}
	// A GPU that runs a shared LoRA engine now lists no replicas but is not free: taking it moves
	// the engine, and an engine's move leaves its adapters without it for a while (its pod stops
	// before the new one starts), so such GPUs come last.
	engine := func(si int) bool { return current[p.fleet[slots[si]].ref].LoRAEngine != "" }
	// 2. other busy configurations onto GPUs that run nothing now, then onto GPUs that run
	// replicas, then onto the engines' GPUs; 3. the rest.
	for _, pass := range []func(int) bool{
		func(si int) bool { _, busy := curSig(si); return !busy && !engine(si) },
		func(si int) bool { return !engine(si) },
		func(int) bool { return true },
	} {
		for ci, c := range contents {
			if placed[ci] || !c.busy() {
				continue
			}
			for si := range slots {
				if !taken[si] && pass(si) {
					put(ci, si)
					break
				}
			}
		}
	}
	for ci := range contents {
		if placed[ci] {
			continue
		}
		for si := range slots {
			if !taken[si] {
				put(ci, si)
				break
			}
		}
	}
	for si, g := range out {
		p.gpus[slots[si]] = g
	}
	p.gidx = nil // other GPUs in the same slice
}

// kept counts the replicas of configuration c whose tenant runs on the same kind of slot of cur
// now: the whole GPU, or a MIG instance of the same profile and sharing.
func kept(c *gpuPlan, cur v1.PlanGPU) int {
	have := map[string]int{}
	for _, r := range cur.Replicas {
		have["gpu/"+r.Tenant]++
	}
	for _, in := range cur.Instances {
		for _, r := range in.Replicas {
			have[in.Profile+"/"+string(in.Sharing.Mode)+"/"+r.Tenant]++
		}
	}
	n := 0
	take := func(k string) {
		if have[k] > 0 {
			have[k]--
			n++
		}
	}
	if c.whole != nil {
		for _, r := range c.whole.reps {
			take("gpu/" + r.tn.t.Name)
		}
	}
	for _, pi := range c.insts {
		if pi.u == nil {
			continue
		}
		for _, r := range pi.u.reps {
			take(pi.in.Profile + "/" + string(sharingOf(pi.u.c.kind)) + "/" + r.tn.t.Name)
		}
	}
	return n
}

// adoptStarts gives a MIG GPU the instance starts it has now when its profiles and sharing match,
// so that nothing on it changes.
func (g *gpuPlan) adoptStarts(b *gpu.Board, cur v1.PlanGPU) {
	if g.mode != v1.ModeMIG || len(cur.Instances) != len(g.insts) {
		return
	}
	var l gpu.Layout
	used := make([]bool, len(cur.Instances))
	next := slices.Clone(g.insts)
	for i, pi := range g.insts {
		want := v1.SharingNone
		if pi.u != nil {
			want = sharingOf(pi.u.c.kind)
		}
		for j, in := range cur.Instances {
			s := in.Sharing.Mode
			if s == "" {
				s = v1.SharingNone
			}
			if want == "" {
				want = v1.SharingNone
			}
			if !used[j] && in.Profile == pi.in.Profile && s == want {
				used[j] = true
				next[i].in = gpu.Instance{Profile: in.Profile, Start: in.Start}
				l = append(l, next[i].in)
				break
			}
		}
	}
	if len(l) == len(g.insts) && b.Validate(l) == nil {
		slices.SortFunc(next, func(x, y placedInst) int { return x.in.Start - y.in.Start })
		g.insts = next
	}
}

// Step is one step of a migration from a current plan to a new one: a GPU change, or a replica
// or shared LoRA engine that starts, moves, restarts or stops.
type Step struct {
	// Wave numbers the steps that may run at once (see Migration).
	Wave int `json:"wave"`
	// Kind is gpu, start, move, restart or stop.
	Kind string `json:"kind"`
	// GPU is the GPU changed, or the GPU a replica starts or moves onto (stops: leaves).
	GPU v1.GPURef `json:"gpu"`
	// Tenant is the replica's tenant (replica steps).
	Tenant string `json:"tenant,omitempty"`
	// LoRAEngine is the shared LoRA engine that starts, moves, restarts or stops (engine steps).
	LoRAEngine string `json:"loraEngine,omitempty"`
	// From and To describe the GPU's mode and MIG instances, or the replica's slot, before and
	// after ("none" for a replica that starts or stops); for an engine, its GPUs (a move) or the
	// engine ("lora engine (N adapters, max_loras M)"; "none" for one that starts or stops).
	From string `json:"from"`
	To   string `json:"to"`
	// Drain is set when the GPU runs replicas or a shared LoRA engine now, which must be moved off
	// first (cordon, drain, reconfigure, verify, uncordon).
	Drain bool `json:"drain"`
	// clears marks a stop that frees GPUs for the restart listed after it (it is ordered before).
	clears bool
	// inPlace marks a restart on the replica's own GPU (InPlace).
	inPlace bool
	// from and to are the replica's or engine's slots (nil for a start's from and a stop's to).
	from, to *slot
	// text describes an engine that moves before and after, for the stop and start that a
	// cycle splits its move into.
	text [2]string
}

// Migration lists the GPUs whose mode or MIG layout differs between cur and next and every
// replica and shared LoRA engine that starts, moves, restarts or stops, in waves: GPUs that run
// nothing now first (new capacity comes up without disturbing anyone), then replicas and engines
// moving onto GPUs that are not drained, then busy GPUs (those that run replicas or an engine
// now) with the replicas and engines moving onto them, make-before-break (one moving from a
// drained GPU onto another starts there before its own GPU is drained; one that keeps its slot on
// a drained GPU restarts after the drain), then engines restarting in place, then stops;
// at most maxUnavailable replica or engine steps or drains per wave, in fleet and tenant order,
// engines after replicas. A replica or engine starts on a slot only when it has room (see order):
// after the move away or the stop of the replica or engine it replaces. An engine holds its whole
// GPU, as an exclusive replica does.
func Migration(cur, next *v1.Plan, maxUnavailable int) []Step {
	maxUnavailable = max(maxUnavailable, 1)
	before := map[v1.GPURef]v1.PlanGPU{}
	for _, g := range cur.GPUs {
		before[g.Ref()] = g
	}
	var gpus []Step
	for _, g := range next.GPUs {
		old, ok := before[g.Ref()]
		from := signature(old.Mode, old.Instances)
		if !ok {
			from = "absent"
		}
		to := signature(g.Mode, g.Instances)
		if ok && from == to && layoutText(old) == layoutText(g) {
			continue
		}
		busy := hasReplicas(old) || old.LoRAEngine != "" // a valid plan names its engine on its GPU
		gpus = append(gpus, Step{Kind: StepGPU, GPU: g.Ref(), From: describeGPU(old, ok), To: describeGPU(g, true), Drain: ok && busy})
	}
	was, now := replicaSlots(cur), replicaSlots(next)
	engines, restarts := engineSteps(cur, next)
	c := slotCapacity(withEngines(was, cur), withEngines(now, next))
	reps := append(reslices(stepsBetween(was, now), gpus), restartsInPlace(gpus, was, now)...)
	return order(gpus, append(reps, engines...), restarts, c, maxUnavailable)
}

// reslices turns the moves between two MIG instances of a GPU that is drained (re-partitioned:
// the new instance replaces the old) into restarts in place: the drain stops the replica and it
// starts on the new instance once the GPU is reconfigured; listed as a move it would seem to
// start beside an instance the drain already ended.
func reslices(steps, gpus []Step) []Step {
	drained := map[v1.GPURef]bool{}
	for _, g := range gpus {
		if g.Drain {
			drained[g.GPU] = true
		}
	}
	for i, s := range steps {
		if s.Kind == StepMove && s.inPlace && drained[s.GPU] {
			steps[i].Kind = StepRestart
		}
	}
	return steps
}

// restartsInPlace are the restarts of replicas that keep their slot on a GPU that is drained (an
// MPS GPU's replica that keeps the GPU when it becomes exclusive, a MIG instance kept in a new
// layout): the drain evicts them, so they start again once the GPU is reconfigured.
func restartsInPlace(gpus []Step, before, after map[string][]slot) []Step {
	drained := map[v1.GPURef]bool{}
	for _, g := range gpus {
		if g.Drain {
			drained[g.GPU] = true
		}
	}
	var names []string
	for n := range after {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []Step
	for _, n := range names {
		old := slices.Clone(before[n])
		for _, s := range after[n] {
			j := slices.Index(old, s)
			if j < 0 {
				continue
			}
			old = slices.Delete(old, j, j+1)
			if onAny(&s, drained) {
				out = append(out, Step{Tenant: n, Kind: StepRestart, GPU: s.gpu, From: s.String(), To: s.String(), from: ptr(s), to: ptr(s), inPlace: true})
			}
		}
	}
	return out
}

// Moves counts the replica and engine steps of a migration.
func Moves(steps []Step) int {
	n := 0
	for _, s := range steps {
		if s.Kind != StepGPU {
			n++
		}
	}
	return n
}

func layoutText(g v1.PlanGPU) string {
	var parts []string
	for _, in := range g.Instances {
		parts = append(parts, fmt.Sprintf("%s@%d/%s", in.Profile, in.Start, in.Sharing.Mode))
	}
	return strings.Join(parts, " ")
}

func describeGPU(g v1.PlanGPU, ok bool) string {
	if !ok {
		return "absent"
	}
	if g.Mode != v1.ModeMIG {
		return string(g.Mode)
	}
	parts := []string{"mig"}
	for _, in := range g.Instances {
		s := in.Profile + "@" + fmt.Sprint(in.Start)
		if in.Sharing.Mode != "" && in.Sharing.Mode != v1.SharingNone {
			s += "+" + string(in.Sharing.Mode)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}
