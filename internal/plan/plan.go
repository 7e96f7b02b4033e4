package plan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync/atomic"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Options tune the planner. The zero value is ready to use.
type Options struct {
	// Models holds the loaded model of every tenant that names a model.dir, by tenant name. The
	// planner does no IO: the caller reads the directory (llm.LoadDir) and passes it here.
	Models map[string]llm.Model
	// Profiles holds the measured profile of every tenant sized from one, by tenant name (the
	// caller reads the tenant's profile file, e.g. with perf.ParseParvaGPU). Such a tenant is
	// sized by ParvaGPU's rule (a batch's measured latency ≤ 0.45 × slo.e2eP99, at most 3 MPS
	// processes per instance) instead of the LLM models, and its model name need not be in the
	// LLM catalog. A tenant with a profile path but no entry here uses the LLM models.
	Profiles map[string]*perf.Measured
	// Perf overrides the performance model's constants; nil: perf.DefaultOptions().
	Perf *perf.Options
	// ExactUnits is the largest number of MIG instances of one board and energy class that the
	// packer solves exactly by branch and bound; 0: DefaultExactUnits.
	ExactUnits int
	// Current is the plan in force, when re-planning: planned GPU configurations are moved
	// between GPUs of the same board so that as many GPUs as possible keep theirs (see
	// Migration for the steps), and that re-pack is weighed against keeping every tenant whose
	// replicas in force still serve it where they are (see replan): a re-pack that saves no GPU
	// is not made. nil: plan from scratch.
	Current *v1.Plan
	// MaxMoves, with Current, is the most replicas the migration may move to another GPU
	// (CountMoves; restarts and moves on a replica's own GPU are reconfigurations, not counted).
	// Of the re-pack, the plan in force kept for the tenants it still serves (keepServed) and,
	// when the re-pack moves more, a partial re-pack (the changes that free the most GPUs within
	// the budget, see partialRepack), the best within the budget that leaves no tenant short the
	// re-pack serves is returned, with a MoveBudget reason on every tenant saying what was given
	// up; failing that, the best within the budget that leaves tenants short, saying which and
	// why (keepHolding), but none that stops a tenant that runs now; otherwise Build fails,
	// naming the tenants that must move. nil: no limit.
	MaxMoves *int
	// LPVariables is the largest LP (tenant choices + layout patterns) solved with the simplex
	// method for the lower bound; larger inputs use the Lagrangian volume bound. 0: DefaultLPVariables.
	LPVariables int
	// Simulate, when set, is the simulator Build confirms the queueing model's replica counts
	// with, by simulating the plan it chose (confirm.go, pools of at most 64 tenants);
	// internal/plansim.Run is internal/sim's. nil: the model alone decides.
	Simulate Simulator
	// SimulateLoRA, when set, is the LoRA engine simulator BuildWithLoRA confirms the shared
	// LoRA engines' counts with (confirm_lora.go), under the same ConfirmRequests and
	// ConfirmSeed; internal/plansim.RunLoRA is internal/sim's. nil: the model alone decides.
	SimulateLoRA LoRASimulator
	// ConfirmRequests is the most requests one of those simulations may generate; 0:
	// DefaultConfirmRequests; negative: no simulation.
	ConfirmRequests int
	// ConfirmSeed seeds those simulations (the simulator's Config.Seed): the plan is a function
	// of the pool, the options and this seed.
	ConfirmSeed uint64
	// noRelease skips releaseShort (tests plan pools as the planner did before it).
	noRelease bool
	// repackOnly, with Current, returns the re-packed plan without weighing it against the plan
	// in force (replan): tests replay the re-pack's migration with it.
	repackOnly bool
	// noWeighFill keeps optimise from weighing a fill plan refused before the rescue after it
	// (weighFill; tests compare with and without it).
	noWeighFill bool
	// noWeighWithheld keeps withholdNodeMPS from weighing a round's plan refused before the
	// rescue after it (rescuesBetter; tests compare with and without it).
	noWeighWithheld bool
	// fixedStepPackings, when positive, stands for fixedStepPackings, stepDownFixed's budget
	// (fixedStepTries; tests make it bind on small pools).
	fixedStepPackings int
	// noDominance keeps the choice's local search weighing the candidates another one dominates
	// (markDominated; tests compare with and without it).
	noDominance bool
}

// Defaults of Options.
const (
	DefaultExactUnits  = 120
	DefaultLPVariables = 1500
)

// Build plans pool: a role, mode and layout for every GPU, and replicas on concrete slices for
// every tenant, with reasons, a lower bound and baselines. pool must have had v1.Default applied
// and passed v1.Validate. A tenant that cannot be served is marked infeasible in the plan (the
// rest is still planned); the error is for input the planner cannot work with at all. When ctx
// is cancelled the long loops stop early and Build returns ctx's error and no plan.
func Build(ctx context.Context, pool *v1.Pool, o Options) (*v1.Plan, error) {
	if pool == nil {
		return nil, errors.New("build plan: no pool")
	}
	p, err := newPlanner(pool, o)
	if err != nil {
		return nil, err
	}
	p.ctx = ctx
	p.evaluate()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	if err := p.optimise(); err != nil {
		return nil, err
	}
	if err := p.confirm(); err != nil {
		return nil, err
	}
	if o.Current != nil {
		p.alignTo(o.Current)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	next, err := p.result()
	if err != nil || o.Current == nil || o.repackOnly {
		markEstimated(next)
		return next, err
	}
	pl, err := p.replan(next)
	markEstimated(pl)
	return pl, err
}

// stopped reports whether the run was cancelled; loops that see it return early and Build
// discards what they left.
func (p *planner) stopped() bool { return p.ctx != nil && p.ctx.Err() != nil }

// optimise chooses and packs twice — with each MIG profile of a board used one way only, and
// with that left to the node-aware packer — and keeps the better plan: fewest tenants short of
// GPUs, then fewest nodes where a MIG profile is used two ways (the device plugin cannot serve
// them), then fewest GPUs, then the lowest objective; ties go to the board-wide plan. On the DRA
// path fewest GPUs come before those nodes (score): nothing there needs one way per node.
//
// The choice sees no nodes: a tenant's cheapest slice kind may break a node rule the packer
// keeps (whole-GPU MPS on a node with MIG GPUs, two sharing settings of one resource on a node),
// and its replicas are then left short although free GPUs remain. When the best plan leaves
// tenants short that way, their blocked kinds are forbidden to them and the choice and packing
// run again (at most maxBlockedRetries times, each forbidding more); the best plan of all runs
// is kept, so a retry never makes the plan worse.
//
// Nor does the choice see how many GPUs each board has. When the best plan leaves units short on
// a board while another board where their tenants could run keeps idle pool GPUs, the same
// retry also limits each board (capBoards, boardCap), so that tenants leave a full board for
// their cheapest candidate on another. When the best plan was chosen under such limits, the
// retries run again with each tenant kept to the board of a greedy fill (fillBoards), and that
// plan is kept where it leaves no tenant short of GPUs on fewer GPUs; where none is, a fill plan
// refused although within reach is weighed against the plain plan after the steps below
// (weighFill). Last, the tenants the kept
// plan leaves short try their other candidates on the GPUs it left idle (rescueShort), and then,
// when tenants are still short, releaseShort gives up placements of short or early-packed
// tenants where that serves more tenants in full (release.go).
func (p *planner) optimise() error {
	best, err := p.optimiseRetries()
	if err != nil {
		return err
	}
	full, best, fill, err := p.fillBoards(best)
	if err != nil {
		return err
	}
	if fill != nil && !p.o.noWeighFill {
		return p.weighFill(best, fill)
	}
	return p.settle(full, best)
}

// settle is optimise's steps once it chose best (and full, as fillBoards returned it): the plan
// on the coarse ladders, whole-GPU MPS withheld, and the rescue and the steps after it.
func (p *planner) settle(full [][]*cand, best *packed) error {
	if best.score[0] > 0 && usesFineShares(best.choice) {
		// Tenants are short: plan again on the coarse ladders alone and keep the better plan.
		// Finer shares split a sharing group's replicas over more shares, and on the device
		// plugin's path each share of a trust path takes nodes of its own (one sharing setting
		// per resource and node); where GPUs run out that can leave more tenants short.
		forbid, nodeRule, nodeMPS := p.forbid, p.nodeRule, p.nodeMPS
		feasible := make([][]*cand, len(p.tenants))
		for i, tn := range p.tenants {
			feasible[i] = tn.feasible
			tn.feasible = slices.DeleteFunc(slices.Clone(tn.feasible), fineShare)
		}
		p.forbid, p.nodeRule, p.nodeMPS, p.caps, p.packFirst = nil, nil, nil, nil, nil
		coarse, err := p.optimiseRetries()
		if err != nil {
			return err
		}
		if slices.Compare(coarse.score[:], best.score[:]) < 0 {
			best = coarse // the tenants keep the coarse ladders for the rescue
			for i := range full {
				full[i] = slices.DeleteFunc(slices.Clone(full[i]), fineShare)
			}
		} else {
			p.forbid, p.nodeRule, p.nodeMPS = forbid, nodeRule, nodeMPS
			for i, tn := range p.tenants {
				tn.feasible = feasible[i]
			}
		}
	}
	best, err := p.withholdNodeMPS(best, full)
	if err != nil {
		return err
	}
	p.gpus, p.caps, p.packFirst = best.gpus, best.caps, best.packFirst
	for i, tn := range p.tenants {
		tn.choice, tn.infeas = best.choice[i], best.infeas[i]
		if full != nil {
			tn.feasible = full[i] // the rescue and the steps after it try every board again
		}
	}
	p.capLoad = nil
	if p.caps != nil {
		p.capLoad = p.chosenBoardLoad()
	}
	p.usedMIGServed = map[*tenant]bool{}
	defer func() { p.usedMIGServed, p.usedMIGAgain = nil, false }()
	if err := p.rescueShort(best.unplaced); err != nil {
		return err
	}
	// The steps after the rescue pack the pool again; in used GPUs' MIG room their rescues seat
	// again the tenants the pass served here, and no others (ADR 0121).
	maps.DeleteFunc(p.usedMIGServed, func(tn *tenant, _ bool) bool { return !servedInFull(tn) })
	p.usedMIGAgain = true
	if err := p.stepDownFixed(); err != nil {
		return err
	}
	if err := p.stepUpFixed(); err != nil {
		return err
	}
	if err := p.releaseShort(); err != nil {
		return err
	}
	p.vacateForSpread()
	return nil
}

// maxWithholdRounds bounds withholdNodeMPS's re-plans: each round withholds whole-GPU MPS from
// the tenants that chose it on a board where the last plan left units short for a node rule.
const maxWithholdRounds = 3

// withholdNodeMPS plans again, on the device-plugin path, when best leaves tenants short for a
// node rule: whole-GPU MPS on the boards where units were kept off free GPUs is withheld from the
// tenants that chose it there, and the retries run again (optimiseRetries), warm: with the kinds
// forbidden before kept and each choice started from the plan it improves (withholdRound, ADR
// 0117); a warm round that gains nothing runs again cold, as the rounds ran before. A node whose
// nvidia.com/gpu is MPS-shared runs migStrategy none and serves one share and trust path, so
// the few tenants that chose MPS first can keep a whole node's MIG instances and exclusive
// replicas from the rest; the blocked-kind retry only forbids the blocked tenants' kinds and
// counts MPS in nodes, which leaves the MPS tenants where they are (testdata/review13's d1: 4
// of 12 tenants served on 2 of 7 GPUs). Each round adds the tenants on MPS of the new plan's
// blocked boards; a round's plan is kept when it scores better, in the retries' order (score:
// tenants short first), or, where it does not and both plans leave tenants short, when the
// rescue serves more of it (rescuesBetter, ADR 0119: the scores are taken before the rescue,
// which may serve a round's short tenants and not the kept plan's), and the withheld tenants'
// reasons say why they are not on MPS. The planner's forbidden kinds are left as the kept plan
// had them.
func (p *planner) withholdNodeMPS(best *packed, full [][]*cand) (*packed, error) {
	p.withheld = nil
	if p.perClaim || best.score[0] == 0 {
		return best, nil
	}
	withheld := map[*tenant]map[forbidKey]string{}
	for round := 0; round < maxWithholdRounds && best.score[0] > 0; round++ {
		grew := false
		for i, tn := range p.tenants {
			c := best.choice[i]
			if c == nil || c.kind != v1.SliceMPS {
				continue
			}
			rule := mpsBlockRule(best, c.board.Name)
			if rule == "" {
				continue
			}
			k := forbidKey{c.board.Name, v1.SliceMPS}
			if _, ok := withheld[tn][k]; ok {
				continue
			}
			if withheld[tn] == nil {
				withheld[tn] = map[forbidKey]string{}
			}
			withheld[tn][k], grew = fmt.Sprintf("whole-GPU MPS on %s was withheld from it: with it a node runs migStrategy none and one share and trust path (the device plugin's one sharing setting per resource and node), and a plan with it left tenants short (%s)", c.board.Name, rule), true
		}
		if !grew {
			break
		}
		forbid, nodeRule, nodeMPS := p.forbid, p.nodeRule, p.nodeMPS
		alt, err := p.withholdRound(best, withheld, forbid, nodeRule, nodeMPS, !p.coldRounds)
		if err != nil {
			return nil, err
		}
		if !p.coldRounds && slices.Compare(alt.score[:], best.score[:]) >= 0 {
			// The warm round gained nothing: the round again from cold, as before (ADR 0117).
			if alt, err = p.withholdRound(best, withheld, forbid, nodeRule, nodeMPS, false); err != nil {
				return nil, err
			}
		}
		if slices.Compare(alt.score[:], best.score[:]) >= 0 {
			better := false
			if alt.score[0] > 0 && !p.o.noWeighWithheld {
				// Both leave tenants short: weigh them after the rescue too (ADR 0119).
				if better, err = p.rescuesBetter(alt, best, full); err != nil {
					return nil, err
				}
			}
			if !better {
				p.forbid, p.nodeRule, p.nodeMPS = forbid, nodeRule, nodeMPS
				break
			}
		}
		best = alt
		p.withheld = map[*tenant]map[forbidKey]string{}
		for tn, m := range withheld {
			p.withheld[tn] = maps.Clone(m)
		}
	}
	return best, nil
}

// rescuesBetter reports whether the rescue (rescueShort) serves more of alt than of best:
// every tenant served in full after best's rescue served after alt's, and more of them, or as
// many on fewer pool GPUs (settled.betterThan). Each rescue runs on a copy of its plan's
// packing (clonePacking), the tenants' feasible candidates full as settle gives them (nil:
// as they are), and the planner is left as it was.
func (p *planner) rescuesBetter(alt, best *packed, full [][]*cand) (bool, error) {
	a, err := p.afterRescue(alt, full)
	if err != nil {
		return false, err
	}
	b, err := p.afterRescue(best, full)
	if err != nil {
		return false, err
	}
	return a.betterThan(b), nil
}

// afterRescue is what the rescue makes of a copy of pk, settled as settle sets a plan up for it;
// the planner is put back as it was.
func (p *planner) afterRescue(pk *packed, full [][]*cand) (*settled, error) {
	start := p.saveSettled()
	defer start.restore(p)
	p.gpus, p.unplaced = clonePacking(pk.gpus, pk.unplaced)
	p.caps, p.packFirst = pk.caps, pk.packFirst
	for i, tn := range p.tenants {
		tn.choice, tn.infeas = pk.choice[i], slices.Clone(pk.infeas[i])
		if full != nil {
			tn.feasible = full[i]
		}
	}
	p.capLoad = nil
	if p.caps != nil {
		p.capLoad = p.chosenBoardLoad()
	}
	if err := p.rescueShort(p.unplaced); err != nil {
		return nil, err
	}
	return p.saveSettled(), nil
}

// clonePacking copies a packing's GPUs and the units it left without one, each unit once (a
// tensor-parallel unit is on each of its GPUs) with its replicas, so that the rescue can run on
// the copy and leave the packing as it was.
func clonePacking(gpus []*gpuPlan, unplaced []*unit) ([]*gpuPlan, []*unit) {
	units := map[*unit]*unit{}
	cp := func(u *unit) *unit {
		if u == nil {
			return nil
		}
		if c, ok := units[u]; ok {
			return c
		}
		c := *u
		c.reps = slices.Clone(u.reps)
		units[u] = &c
		return &c
	}
	out := make([]*gpuPlan, len(gpus))
	for i, g := range gpus {
		c := *g
		c.whole = cp(g.whole)
		if g.insts != nil {
			c.insts = make([]placedInst, len(g.insts))
			for j, pi := range g.insts {
				c.insts[j] = placedInst{in: pi.in, u: cp(pi.u)}
			}
		}
		out[i] = &c
	}
	left := make([]*unit, len(unplaced))
	for i, u := range unplaced {
		left[i] = cp(u)
	}
	return out, left
}

// withholdRound runs withholdNodeMPS's retries with withheld's kinds forbidden. Cold, they
// start afresh: no other kind forbidden, no board counted in nodes or limited. Warm, the kinds
// forbidden before (forbid, nodeRule, nodeMPS: the planner's as best left them) stay, and the
// first choice starts from best's (warmFrom).
func (p *planner) withholdRound(best *packed, withheld, forbid, nodeRule map[*tenant]map[forbidKey]string, nodeMPS map[string]int, warm bool) (*packed, error) {
	p.forbid, p.nodeRule, p.nodeMPS, p.caps, p.packFirst = map[*tenant]map[forbidKey]string{}, map[*tenant]map[forbidKey]string{}, nil, nil, nil
	if warm {
		for tn, m := range forbid {
			p.forbid[tn] = maps.Clone(m)
		}
		for tn, m := range nodeRule {
			p.nodeRule[tn] = maps.Clone(m)
		}
		p.nodeMPS, p.warmFrom = maps.Clone(nodeMPS), best
	}
	for tn, m := range withheld {
		if p.forbid[tn] == nil {
			p.forbid[tn] = map[forbidKey]string{}
		}
		maps.Copy(p.forbid[tn], m)
	}
	p.warmRound = warm
	defer func() { p.warmRound = false }()
	return p.optimiseRetries()
}

// mpsBlockRule is the least node rule that kept units of best off free GPUs of board (the
// rules name the setting a node's first units fixed), "" when none.
func mpsBlockRule(best *packed, board string) string {
	rule := ""
	for _, b := range best.blocked {
		if b.key.board == board && (rule == "" || b.rule < rule) {
			rule = b.rule
		}
	}
	return rule
}

// usesFineShares reports whether a choice puts a tenant on a share finer than the coarse ladders.
func usesFineShares(choice []*cand) bool {
	return slices.ContainsFunc(choice, func(c *cand) bool { return c != nil && fineShare(c) })
}

// optimiseRetries is optimise's first choice and packing and its retries; it returns the best
// plan found. Its effort is bounded (ADR 0103): after a retry that kept the best plan as it was
// (no variant of its choice scored better), the retries left record the kinds they would forbid
// and the boards they would limit, as before, but choose and pack no more (stale); and a retry's
// plan without counting in nodes (withoutCounting) is made only while optimise's packings have
// packed at most altWork tenants in all (maxAltWork). Each retry chooses and packs the whole
// pool again; on pools of thousands of tenants short, with withholdNodeMPS's rounds and the
// coarse ladders' pass each running these retries afresh, the plans that gained nothing were
// 15 of 31 choices and packings (genscale.py 4000 2000 1 fixed).
func (p *planner) optimiseRetries() (*packed, error) {
	var seed []*cand
	if p.warmFrom != nil {
		seed = p.warmFrom.choice
	}
	p.warmFrom = nil
	best, err := p.optimiseOnce(nil, seed)
	if err != nil {
		return nil, err
	}
	// alt is the best plan of the retries run as before countNodes (withoutCounting). The retries
	// go on from best, and alt replaces it at the end only with as many tenants short and a
	// better score: the plans are scored before the rescue, which serves more of the tenants a
	// plan counted in nodes leaves short (the six-board 200 tenants: 13 short against 20).
	var alt *packed
	stale := false
	for retry := 0; retry < maxBlockedRetries && (len(best.blocked) > 0 || len(best.spill) > 0); retry++ {
		if p.forbid == nil {
			p.forbid, p.nodeRule = map[*tenant]map[forbidKey]string{}, map[*tenant]map[forbidKey]string{}
		}
		counted := p.countNodes(best)
		grew := len(counted) > 0
		for tn, b := range best.blocked {
			if counted[b.key.board] { // counted in nodes now, the kind stays open on the board
				if p.nodeRule[tn] == nil {
					p.nodeRule[tn] = map[forbidKey]string{}
				}
				p.nodeRule[tn][b.key] = b.rule
				continue
			}
			if p.forbid[tn] == nil {
				p.forbid[tn] = map[forbidKey]string{}
			}
			if _, ok := p.forbid[tn][b.key]; !ok {
				p.forbid[tn][b.key], grew = b.rule, true
			}
		}
		if capped := p.capBoards(best); !grew && !capped {
			break
		}
		if stale && !p.fullEffort {
			continue // the kinds and limits recorded as before, no choice and packing of them
		}
		if len(counted) > 0 && (p.packedWork <= p.altWork || p.fullEffort) { // also the retry as it was: those boards' kinds forbidden, not counted in nodes
			p.altPlans, p.altStart = p.altPlans+1, p.packedWork
			if alt, err = p.withoutCounting(alt, counted); err != nil {
				return nil, err
			}
		}
		prevBest := best
		if best, err = p.optimiseOnce(best, p.warmSeed(best)); err != nil {
			return nil, err
		}
		stale = best == prevBest
	}
	if alt != nil && alt.score[0] == best.score[0] && slices.Compare(alt.score[:], best.score[:]) < 0 {
		best = alt // as many tenants short, fewer GPUs (or node/profile pairs used two ways)
	}
	if p.raiseIdleCaps(best) {
		if best, err = p.optimiseOnce(best, p.warmSeed(best)); err != nil { // kept only where it scores better
			return nil, err
		}
	}
	return best, nil
}

// warmSeed is the choice a retry of best starts from: best's in a warm withholding round
// (withholdRound), nil (each tenant's cheapest allowed) elsewhere.
func (p *planner) warmSeed(best *packed) []*cand {
	if !p.warmRound {
		return nil
	}
	return best.choice
}

// raiseIdleCaps raises, after the board-limit retries, the limit of each board on which the
// limited plan best, serving every tenant, keeps idle pool GPUs by those GPUs (at most to the
// board's pool GPUs), and reports whether a limit rose. A plan with tenants short is left as it
// is: the plans are scored before the rescue, which seats short tenants on those idle GPUs, and
// a choice that scores better before it may leave more short after it (the six-board 250
// tenants: 21 short against 12). capBoards takes a board's packing waste off its limit, the GPUs
// the first packing took beyond the load the choice counted there; where the limited choice then
// packs that board with GPUs to spare, the waste did not recur, and the limit held off the board
// tenants that would have cost fewer GPU-equivalents there (testdata/review12's r1: one
// llama-3.2-1b and one qwen2.5-0.5b on a whole A100 took 0.857 off the A100s' limit of 3, and
// `capped` went to two A30s beside an idle A100 that serves it as two MPS halves).
func (p *planner) raiseIdleCaps(best *packed) bool {
	if best.caps == nil || best.score[0] > 0 {
		return false
	}
	pool := p.poolGPUs()
	caps, raised := maps.Clone(best.caps), false
	for b, c := range caps {
		if idle := pool[b] - best.used[b]; idle > 0 && c < float64(pool[b]) {
			caps[b], raised = min(float64(pool[b]), c+float64(idle)), true
		}
	}
	if raised {
		p.caps = caps
	}
	return raised
}

// rescueShort gives the tenants the chosen plan left short a second chance on the pool GPUs it
// left idle (rescue): a tenant placed in full loses its NoCapacity reason; one still short has its
// reason say why no idle GPU took it.
func (p *planner) rescueShort(unplaced []*unit) error {
	if len(unplaced) == 0 {
		return nil
	}
	p.nodeUse, p.blocked = map[string]map[string]migUse{}, map[*unit]blockage{}
	p.moved, p.unmoved, p.unmovedOwn, p.unmovedServed = map[*tenant]string{}, map[*tenant]string{}, map[*tenant]string{}, map[*tenant]string{}
	nodes := map[string]bool{}
	for _, g := range p.gpus {
		nodes[g.fg.ref.Node] = true
	}
	p.resetNodeUses(nodes)
	p.greedyOnly = true
	left, err := p.rescue(unplaced, newPatternCache())
	p.greedyOnly = false
	if err != nil {
		return err
	}
	short := map[*tenant]bool{}
	for _, u := range left {
		for _, r := range u.reps {
			short[r.tn] = true
		}
	}
	idle := p.idleBoards()
	for _, tn := range p.tenants {
		i := slices.IndexFunc(tn.infeas, func(r v1.Reason) bool { return r.Code == v1.ReasonNoCapacity })
		if _, out := p.released[tn]; i < 0 || out { // a released tenant keeps its release reason
			continue
		}
		if !short[tn] {
			tn.infeas = slices.Delete(tn.infeas, i, i+1)
			if len(tn.infeas) == 0 {
				tn.infeas = nil
			}
			continue
		}
		switch w := p.unmoved[tn]; {
		case w != "":
			tn.infeas[i].Message += "; no other candidate of it fits the idle pool GPUs either: " + w
		case idle != "":
			tn.infeas[i].Message += "; none of its candidates runs on the boards with idle pool GPUs (" + idle + ")"
		}
		if w := p.unmovedOwn[tn]; w != "" {
			tn.infeas[i].Message += "; " + w
		}
		if w := p.unmovedServed[tn]; w != "" {
			tn.infeas[i].Message += "; " + w
		}
	}
	p.spreadRedundant()
	return nil
}

// noteSpill records on s the pool GPUs each board's packing used and, when the packing left units
// without a GPU while idle pool GPUs remain on another board where one of their tenants has a
// candidate, the GPU-equivalents left per board and the load the choice counted on each board.
func (p *planner) noteSpill(s *packed) {
	s.used = map[string]int{}
	idle := map[string]bool{}
	for _, g := range p.gpus {
		switch g.role {
		case v1.RolePool:
			s.used[g.fg.board.Name]++
		case v1.RoleIdle:
			idle[g.fg.board.Name] = true
		}
	}
	if len(p.unplaced) == 0 || len(idle) == 0 {
		return
	}
	for _, u := range p.unplaced {
		b := u.c.board.Name
		elsewhere := false
		for _, r := range u.reps {
			for _, c := range r.tn.feasible {
				if c.board.Name != b && idle[c.board.Name] {
					elsewhere = true
					break
				}
			}
		}
		if !elsewhere {
			continue
		}
		if s.spill == nil {
			s.spill = map[string]float64{}
		}
		s.spill[b] += unitVolume(u)
	}
	if s.spill == nil {
		return
	}
	s.load = p.chosenBoardLoad()
}

// chosenBoardLoad is the GPU-equivalents the tenants' chosen candidates put on each board, as the
// choice's board limits count them (boardCap).
func (p *planner) chosenBoardLoad() map[string]float64 {
	f := newFractional(p.ids)
	f.cap = newBoardCap(p.ids, nil)
	f.node = p.nodeMPS
	p.fillChosen(f)
	load := map[string]float64{}
	for name, i := range f.cap.names {
		load[name] = f.cap.byBoard[i]
	}
	return load
}

// unitVolume is the GPU-equivalents of one unit: its GPUs, or its MIG instance's share of one.
func unitVolume(u *unit) float64 {
	if u.c.whole() {
		return float64(max(u.c.tp, 1))
	}
	return u.c.unitFrac
}

// capBoards sets the limits the next choice holds each board to, after best left units short on
// a board while another board where their tenants could run kept idle GPUs (best.spill). A
// board's limit is its pool GPUs less the packing's waste there (the GPUs its packing took or
// lacked beyond the load the choice counted, boardCap); a board already limited and still short
// loses at least what was left short. The first time, every board gets a limit, so that the
// tenants that leave a full board do not overfill another. It reports whether a limit changed.
func (p *planner) capBoards(best *packed) bool {
	if len(best.spill) == 0 {
		return false
	}
	pool := p.poolGPUs()
	limit := func(b string) float64 {
		return float64(pool[b]) - max(0, float64(best.used[b])+best.spill[b]-best.load[b])
	}
	caps := map[string]float64{}
	if best.caps == nil {
		for _, b := range p.boards {
			caps[b.Name] = limit(b.Name)
		}
	} else {
		maps.Copy(caps, best.caps)
		for b, vol := range best.spill {
			caps[b] = min(limit(b), caps[b]-vol)
		}
	}
	if maps.Equal(caps, p.caps) {
		return false
	}
	p.caps = caps
	return true
}

// countNodes makes the next choices count whole-GPU MPS in whole nodes (nodeMPS) on the boards
// where best left units short for a node rule, and reports whether a board was added. On the
// device-plugin path a node whose nvidia.com/gpu is MPS-shared serves it one way and to one
// trust path, with migStrategy none: its other GPUs take no MIG instance, no exclusive replica
// and no other group's share. A choice that counts a group by its GPUs alone opens more such
// groups on a board than it has nodes, and the packer leaves the rest short beside GPUs those
// nodes strand. Counted by the node, a small group's tenants take MIG instances or another
// share of their path's nodes instead, where that costs less than the node.
func (p *planner) countNodes(best *packed) map[string]bool {
	if p.perClaim {
		return nil
	}
	var grew map[string]bool
	for _, b := range best.blocked {
		if _, ok := p.nodeMPS[b.key.board]; ok {
			continue
		}
		for _, bd := range p.boards {
			if bd.Name == b.key.board {
				if p.nodeMPS == nil {
					p.nodeMPS = map[string]int{}
				}
				p.nodeMPS[bd.Name] = p.maxNodeGPUs(bd)
				if grew == nil {
					grew = map[string]bool{}
				}
				grew[bd.Name] = true
			}
		}
	}
	return grew
}

// withoutCounting runs optimiseOnce from alt as the retry ran before countNodes: the boards just
// counted in nodes are not, and the kinds a node rule kept off them are forbidden to their
// tenants. Where the node rules bound little, forbidding a few kinds costs fewer GPUs than
// counting every MPS group of the board by the node; optimise keeps the better plan. The
// planner's forbidden kinds and counted boards are as they were after it.
func (p *planner) withoutCounting(best *packed, counted map[string]bool) (*packed, error) {
	forbid, nodeMPS := p.forbid, p.nodeMPS
	p.forbid, p.nodeMPS = map[*tenant]map[forbidKey]string{}, map[string]int{}
	for tn, m := range forbid {
		p.forbid[tn] = maps.Clone(m)
	}
	for tn, m := range p.nodeRule {
		for k, rule := range m {
			if !counted[k.board] {
				continue
			}
			if p.forbid[tn] == nil {
				p.forbid[tn] = map[forbidKey]string{}
			}
			p.forbid[tn][k] = rule
		}
	}
	for b, n := range nodeMPS {
		if !counted[b] {
			p.nodeMPS[b] = n
		}
	}
	if len(p.nodeMPS) == 0 {
		p.nodeMPS = nil
	}
	out, err := p.optimiseOnce(best, nil)
	p.forbid, p.nodeMPS = forbid, nodeMPS
	return out, err
}

// maxBlockedRetries bounds the re-choices of optimise after tenants were left short by a node rule.
const maxBlockedRetries = 3

// maxAltWork is the tenant-packings (one tenant in one of optimise's packings, packScored) after
// which the retries make no plan without counting in nodes (withoutCounting; ADR 0103): 30
// packings of a pool of 1,000 tenants, 120 of one of 250 (the repository's pools take at most
// 96 packings of 200 tenants in all); a pool of 2,000 makes the first retry's, one of 4,000 none.
const maxAltWork = 30_000

// forbidKey is a slice kind on a board, as optimise forbids it to a tenant.
type forbidKey struct {
	board string
	kind  v1.SliceKind
}

// packed is one chosen and packed plan: every tenant's choice and reasons, the GPUs, the score,
// the slice kind of each tenant left short by a node rule, and the boards' limits it was chosen
// under with what its packing left short on each board.
type packed struct {
	choice  []*cand
	infeas  [][]v1.Reason
	gpus    []*gpuPlan
	score   [4]float64
	blocked map[*tenant]blockedKind
	caps    map[string]float64
	// unplaced are the units its packing left without a GPU.
	unplaced []*unit
	// spill is, per board whose packing left units without a GPU while another board where one
	// of their tenants has a candidate kept idle pool GPUs, the GPU-equivalents left (capBoards).
	spill map[string]float64
	// used is the pool GPUs each board's packing took, load what the choice's objective counted
	// on it (boardCap).
	used map[string]int
	load map[string]float64
	// packFirst is the groups its packing placed first (planner.packFirst).
	packFirst map[groupKey]bool
}

// blockedKind is a tenant's slice kind that a node rule kept off every free GPU, and the rule.
type blockedKind struct {
	key  forbidKey
	rule string
}

// optimiseOnce runs the four choice variants under the current forbidden kinds, each started
// from seed (chooseWarm; nil: each tenant's cheapest allowed), and returns the best plan of them
// and best (nil: none yet). A variant whose packing left units short for a
// node rule is packed again with those units' groups first (packFirst), and the better packing
// counts: the first unit on a node fixes its device-plugin setting, and in group order that may
// be the fewer tenants' (an exclusive GPU before a time-sliced one of four tenants).
func (p *planner) optimiseOnce(best *packed, seed []*cand) (*packed, error) {
	p.onces++
	for _, v := range [][2]bool{{true, false}, {false, false}, {true, true}, {false, true}} {
		p.chooseWarm(v[0], v[1], seed)
		p.packFirst = nil
		chosen := make([][]v1.Reason, len(p.tenants))
		for i, tn := range p.tenants {
			chosen[i] = slices.Clone(tn.infeas)
		}
		s, err := p.packScored()
		if err != nil {
			return nil, err
		}
		if first := p.blockedKeys(); first != nil {
			// The units a node rule kept off their board's free GPUs pack first this time: the
			// units that set the rule may be the fewer tenants (docs/planner.md, "Plans the
			// device plugin can serve").
			p.packFirst = first
			for i, tn := range p.tenants {
				tn.infeas = slices.Clone(chosen[i])
			}
			alt, err := p.packScored()
			if err != nil {
				return nil, err
			}
			if slices.Compare(alt.score[:], s.score[:]) < 0 {
				s = alt
			}
		}
		if best == nil || slices.Compare(s.score[:], best.score[:]) < 0 {
			best = s
		}
	}
	p.packFirst = best.packFirst
	return best, nil
}

// packScored packs the current choice (pack) and returns it as a packed plan with its score.
func (p *planner) packScored() (*packed, error) {
	if err := p.pack(); err != nil {
		return nil, err
	}
	if err := p.ctx.Err(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	p.packedWork += len(p.tenants)
	s := &packed{gpus: p.gpus, score: p.score(), blocked: make(map[*tenant]blockedKind, len(p.blocked)), caps: p.caps, unplaced: p.unplaced, packFirst: p.packFirst}
	p.noteSpill(s)
	s.choice, s.infeas = make([]*cand, len(p.tenants)), make([][]v1.Reason, len(p.tenants))
	for i, tn := range p.tenants {
		s.choice[i], s.infeas[i] = tn.choice, tn.infeas
	}
	for u, b := range p.blocked {
		for _, r := range u.reps { // the least rule, so that map order does not show
			if old, ok := s.blocked[r.tn]; !ok || b.rule < old.rule {
				s.blocked[r.tn] = blockedKind{forbidKey{u.c.board.Name, b.kind}, b.rule}
			}
		}
	}
	return s, nil
}

// blockedKeys is the groups of the units the last packing left without a GPU for a node rule
// although free GPUs of their board were left (p.blocked); nil when there are none.
func (p *planner) blockedKeys() map[groupKey]bool {
	if len(p.blocked) == 0 {
		return nil
	}
	keys := map[groupKey]bool{}
	for u := range p.blocked {
		keys[u.key] = true
	}
	return keys
}

// score ranks a packed plan, lower is better: tenants short of GPUs, nodes with a MIG profile
// shared two ways, GPUs used, objective. On the DRA path, where a node may use a profile several
// ways (perClaim), GPUs used come before those nodes.
func (p *planner) score() [4]float64 {
	short, used := 0, 0
	for _, tn := range p.tenants {
		if len(tn.infeas) > 0 {
			short++
		}
	}
	uses, conflicts := p.reuse.scoreIndex()
	for _, g := range p.gpus {
		if g.role == v1.RolePool {
			used++
		}
		for _, pi := range g.insts {
			if pi.u == nil {
				continue
			}
			k := nodeProfile{g.fg.ref.Node, pi.in.Profile}
			if u, ok := uses[k]; ok && u != useOf(pi.u) {
				conflicts[k] = true
			}
			uses[k] = useOf(pi.u)
		}
	}
	if p.perClaim { // no rule broken: a preference for plans the device plugin could serve too, after GPUs
		return [4]float64{float64(short), float64(used), float64(len(conflicts)), p.objective()}
	}
	return [4]float64{float64(short), float64(len(conflicts)), float64(used), p.objective()}
}

// planner holds one planning run.
type planner struct {
	ctx     context.Context
	pool    *v1.Pool
	o       Options
	popts   perf.Options
	fleet   []fleetGPU
	boards  []*gpu.Board // distinct boards of the fleet, in fleet order
	tenants []*tenant
	cache   *evalCache
	ids     *keyIDs // the choice's group keys, numbered
	// scGen counts the fillings of the tenants' search candidates and the changes of their
	// disallowed flags (searchCands, fixedUses), so that bestMove knows they are as they were.
	scGen   uint64
	modes   map[v1.Mode]bool
	burst   int // GPUs held for the burst pool
	gpus    []*gpuPlan
	keep    map[string]migUse            // the one sharing setting of each board's MIG profile, where fixed
	nodeUse map[string]map[string]migUse // node → MIG profile → how it is shared there
	// nodeGPUs caches maxNodeGPUs per board
	nodeGPUs map[*gpu.Board]int
	// lastMembers is emptyLastUnits' buffer of the tenants of each group, by the group's number.
	lastMembers [][]*tenant
	// packPats holds each board's MIG patterns for pack's packings (patternCache.byBoard): they
	// depend on the board alone, and every packing of the run asks for them.
	packPats map[string]*patterns
	// blocked holds, for the units the last packing left without a GPU although free GPUs of
	// their board were left, the node rule that kept them off (noteBlocked).
	blocked map[*unit]blockage
	// forbid holds, per tenant, the slice kinds on a board that an earlier packing could not
	// place for a node rule; the choice avoids them (retryBlocked).
	forbid map[*tenant]map[forbidKey]string
	// withheld holds, per tenant, whole-GPU MPS on a board that withholdNodeMPS kept from it, with
	// why: its reasons say so.
	withheld map[*tenant]map[forbidKey]string
	// released holds the tenants short of GPUs that gave up their placed replicas so that others
	// are served in full (releaseShort), each with its NoCapacity reason; the packer leaves them
	// out.
	released map[*tenant]string
	// noRelease skips releaseShort (tests compare with and without it).
	noRelease bool
	// fixedSteps holds the fixed-count tenants that gave up their kind for a smaller one so that
	// others are served in full (stepDownFixed), or took a larger one on GPUs left idle
	// (stepUpFixed).
	fixedSteps map[*tenant]fixedStep
	// stepUpMissed holds, for the fixed-count tenants that stepUpFixed left on their kind while
	// a kind where a replica carries more exists, why: not tried, or tried and no room.
	stepUpMissed map[*tenant]fixedStep
	// caps, when set, limits the GPU-equivalents the choice puts on each board (boardCap); optimise
	// sets it when a packing left tenants short on a board while GPUs of another board where they
	// could run stayed idle (capBoards).
	caps map[string]float64
	// nodeRule holds, per tenant, the slice kinds on a board that a packing could not place for a
	// node rule where the next choice counted whole-GPU MPS in nodes instead of forbidding them
	// (countNodes): reasons name them as they name forbidden kinds.
	nodeRule map[*tenant]map[forbidKey]string
	// nodeMPS, when set, is the GPUs per node of the boards on which the choice counts whole-GPU
	// MPS groups in whole nodes (countNodes).
	nodeMPS map[string]int
	// filled is, when optimise kept the plan with each tenant kept to one board (fillBoards),
	// that board per tenant (a tenant not in it was free to take any).
	filled map[*tenant]string
	// fillShare is, with filled, the share of each board's pool GPUs its tenants were held to.
	fillShare float64
	// capLoad is, with caps, the load the kept plan's choice puts on each board (boardCap).
	capLoad map[string]float64
	// greedyOnly makes packMIG keep its greedy packing (the rescue's trial placements).
	greedyOnly bool
	// raising is set while a confirmation's raise is made by moving served tenants
	// (raiseByMoves): the move step's reason for the raised tenant says so.
	raising bool
	// unplaced are the units the last packing left without a GPU.
	unplaced []*unit
	// packedWork is the tenants optimise's packings have packed so far, one count per tenant and
	// packing (packScored); altWork is the most of it after which no plan without counting in
	// nodes starts (withoutCounting; newPlanner sets maxAltWork, tests less).
	packedWork, altWork int
	// fullEffort lifts the bounds on optimise's re-plans (tests compare with and without them):
	// the retries after one that kept the best plan, and altWork.
	fullEffort bool
	// onces counts optimise's choices and packings (optimiseOnce), altPlans the plans without
	// counting in nodes, altStart the packedWork at the last one's start; for tests.
	onces, altPlans, altStart int
	// coldRounds makes withholdNodeMPS's rounds start cold only, as before ADR 0117 (tests
	// compare). warmFrom, when set, is the plan the next optimiseRetries's first choice starts
	// from, and warmRound is set while a warm round's retries run (withholdRound).
	coldRounds bool
	warmFrom   *packed
	warmRound  bool
	// packFirst, when set, is the groups whose units pack before all others (pack): those a
	// node rule kept off their board's free GPUs in the packing before (optimiseOnce).
	packFirst map[groupKey]bool
	// gidx lists the GPUs of gpus by node and by board (gpuIndex), rebuilt when gpus is another
	// slice.
	gidx *gpuIndex
	// gpuReads counts the GPUs resetNodeUses and placedOf have read (tests: they read one
	// node's or one board's GPUs, not the fleet's).
	gpuReads int
	// rescueKeys holds, during a pass of the rescue, each short tenant's first candidate of
	// each group key (candsOfKey).
	rescueKeys map[*tenant]candsByKey
	// rkeys numbers the group keys the rescue weighs (rescueKeyIDs), for the whole planning run.
	rkeys *rescueKeyIDs
	// placedMarks counts placedOf's calls, each unit marked with the last that listed it.
	placedMarks uint64
	// pidx lists, during a pass of the rescue, the GPUs that have held a unit of each group key
	// since it began (placedIndex).
	pidx *placedIndex
	// moved says, per tenant the packing's rescue moved to another candidate, why; unmoved, per
	// tenant it could not, why not (rescue); unmovedOwn, per tenant that also found no room on
	// the GPUs its own replicas held beside the idle ones, why not (rescueOnOwn); unmovedServed,
	// per tenant still short after served tenants were tried off its choice's board, what was
	// tried (moveServed).
	moved, unmoved, unmovedOwn, unmovedServed map[*tenant]string
	// noOwnRescue keeps the rescue to idle pool GPUs (tests compare with and without
	// rescueOnOwn).
	noOwnRescue bool
	// noUsedMIGRescue keeps the rescue off the free MIG room of pool GPUs in use (tests compare
	// with and without rescueOnUsedMIG).
	noUsedMIGRescue bool
	// usedMIGServed is the tenants settle's rescue served through its pass onto used GPUs' MIG
	// room (those still served in full when it ends), whom the pass seats again, and no others,
	// within the repackings of the steps after it (usedMIGAgain; rescueUsedMIGPass, ADR 0121).
	usedMIGServed map[*tenant]bool
	usedMIGAgain  bool
	// usedMIGTrial is, during a trial of the step down of fixed counts (trialFixed), the
	// tenants short before it, whom the pass may seat too; usedMIGNew, those of them it seated
	// (ADR 0123).
	usedMIGTrial, usedMIGNew map[*tenant]bool
	// usedMIGLast is set during the repacking after the release (seatShortInUsedMIG), where the
	// pass seats its own first and then the tenants still short (ADR 0124).
	usedMIGLast bool
	// noMoveServed keeps the rescue from moving served tenants (tests compare with and without
	// moveServed).
	noMoveServed bool
	// noMoveSearch keeps the move of served tenants to the set found one at a time for the short
	// tenant's choice (tests compare with and without the search).
	noMoveSearch bool
	// moveUsed counts the packings the move of served tenants has made in this pass of the
	// rescue (or confirmation's raise), against movePass; movePackings counts them all, for
	// tests.
	moveUsed, movePackings int
	// moveMost is the most packings one pass has made, for tests (movePass).
	moveMost int
	// movePasses counts the passes given a budget of movePass packings, for tests.
	movePasses int
	// moveSkipped counts the short tenants the move of served tenants did not try because their
	// pass had spent its budget, over all passes, kept or not, for tests.
	moveSkipped int
	// noRaiseMoves keeps the confirmation from making a raise by moving served tenants
	// (raiseByMoves; tests compare with and without it).
	noRaiseMoves bool
	// noRaiseSubset keeps the confirmation's raises all or nothing (raiseSubset; tests compare
	// with and without it).
	noRaiseSubset bool
	// raiseNoRoom holds the tenants whose raise the confirmation tried alone and found no room
	// for (raiseSubset), with why: found short again, they are left short, not raised.
	raiseNoRoom map[*tenant]string
	// noCompact skips the compaction after packing (tests compare with and without it).
	noCompact bool
	// perClaim is set when the pool takes the DRA path (policy.kubernetesDeviceAPI: dra): each
	// device is its own claim with its own sharing setting, so the device plugin's per-node rules
	// (compatible) do not bind the packing there.
	perClaim bool
	// boardsOn lists, per node with GPUs of more than one board, its boards (mixedboard.go);
	// nodes of one board are not in it.
	boardsOn map[string][]*gpu.Board
	// confirmed holds what the plan's simulations said about each simulated tenant's chosen
	// candidate (confirm.go); nil when the plan was not simulated.
	confirmed map[*cand]*confirmState
	// confirmShort lists, per tenant, the slices and counts a simulation found short before
	// they were raised (the tenant's choice may have moved on since).
	confirmShort map[*tenant][]string
	// confirmTooLarge: the plan was not simulated because the pool has more than
	// confirmMaxTenants tenants (with a simulator and a budget it would have been)
	confirmTooLarge bool
	// unspreadRoom says, per redundant tenant the filling of a kept plan's room did not start
	// (fillKept), where that room had its kind (spreadRoom); placeOnIdle adds it to the
	// reason of a tenant the GPUs left idle then hold on one GPU.
	unspreadRoom map[string]string
	// reuse holds maps the packing's steps build afresh on every packing (reuse.go), kept
	// across packings so that they do not grow from empty each time.
	reuse reusedMaps
	// replicasSet counts the changes of its candidates' replicas (setCandReplicas,
	// atBoundCounts): a tenant's search candidates are kept without reading its candidates while
	// none changed since they were filled (searchCands). Atomic: the lower bound's counts change
	// replicas on a goroutine of their own (result).
	replicasSet atomic.Uint64
}

// fleetGPU is one GPU of the fleet.
type fleetGPU struct {
	ref    v1.GPURef
	board  *gpu.Board
	canary bool
}

func newPlanner(pool *v1.Pool, o Options) (*planner, error) {
	p := &planner{ctx: context.Background(), pool: pool, o: o, popts: perf.DefaultOptions(), cache: newEvalCache(), ids: newKeyIDs(), modes: map[v1.Mode]bool{}, noRelease: o.noRelease, altWork: maxAltWork}
	if o.Perf != nil {
		p.popts = *o.Perf
	}
	if p.o.ExactUnits == 0 {
		p.o.ExactUnits = DefaultExactUnits
	}
	p.perClaim = pool.Policy.DeviceAPI() == v1.DeviceAPIDRA
	if p.o.LPVariables == 0 {
		p.o.LPVariables = DefaultLPVariables
	}
	if err := p.popts.Validate(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	modes := pool.Policy.AllowedModes
	if len(modes) == 0 {
		modes = []v1.Mode{v1.ModeExclusive, v1.ModeMIG, v1.ModeMPS, v1.ModeTimeSlice}
	}
	for _, m := range modes {
		p.modes[m] = true
	}
	var errs []error
	for _, n := range pool.Fleet.Nodes {
		idx := 0
		for gi, g := range n.GPUs {
			b, err := gpu.Lookup(g.Board)
			if err != nil {
				errs = append(errs, fmt.Errorf("build plan: node %s gpus[%d]: %w", n.Name, gi, err))
				idx += g.Count
				continue
			}
			if !slices.Contains(p.boards, b) {
				p.boards = append(p.boards, b)
			}
			for range g.Count {
				ref := v1.GPURef{Node: n.Name, Index: idx}
				p.fleet = append(p.fleet, fleetGPU{ref: ref, board: b, canary: slices.Contains(pool.Policy.CanaryGPUs, ref)})
				idx++
			}
		}
	}
	for i, t := range pool.Tenants {
		tn, err := newTenant(i, t, o, p.popts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.tenants = append(p.tenants, tn)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.burst = burstGPUs(pool, len(p.fleet)-p.canaries())
	p.boardsOn = mixedBoardNodes(p.fleet)
	return p, nil
}

func (p *planner) canaries() int {
	n := 0
	for _, g := range p.fleet {
		if g.canary {
			n++
		}
	}
	return n
}

// burstGPUs is ceil(burstPoolPercent × pool GPUs / 100): the pool keeps at least the share the
// policy asks for.
func burstGPUs(pool *v1.Pool, poolGPUs int) int {
	pct := v1.DefaultBurstPoolPercent
	if pool.Policy.BurstPoolPercent != nil {
		pct = *pool.Policy.BurstPoolPercent
	}
	if pct <= 0 || poolGPUs <= 0 {
		return 0
	}
	return int(math.Ceil(float64(pct*poolGPUs)/100 - 1e-9))
}
