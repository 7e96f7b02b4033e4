package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	v1 "gpupool.dev/gpupool/api/v1"
)

// --max-moves on the articles' node after dropping two tenants: re-packing moves some replicas;
// with a budget at least that large the re-packed plan stands, with a smaller one the plan in
// force is kept (no replica moves, the dropped tenants' replicas stop), every tenant says how
// many GPUs that gives up, and the kept plan is valid for the smaller pool.
func TestMaxMoves(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	smaller := *pool
	smaller.Tenants = slices.DeleteFunc(slices.Clone(pool.Tenants), func(t v1.Tenant) bool {
		return t.Name == "product-0" || t.Name == "tools-1"
	})
	free, err := Build(context.Background(), &smaller, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	moves := countMoves(Migration(first, free, 1))
	if moves == 0 {
		t.Fatal("re-packing moves nothing; the test needs a pool where it does")
	}
	same, err := Build(context.Background(), &smaller, Options{Current: first, MaxMoves: &moves})
	if err != nil {
		t.Fatal(err)
	}
	if same.Summary.GPUsUsed != free.Summary.GPUsUsed || countMoves(Migration(first, same, 1)) != moves {
		t.Errorf("with max-moves %d = the moves needed: %d GPUs, want the re-packed %d", moves, same.Summary.GPUsUsed, free.Summary.GPUsUsed)
	}
	less := moves - 1
	kept, err := Build(context.Background(), &smaller, Options{Current: first, MaxMoves: &less})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(&smaller, kept); err != nil {
		t.Fatal(err)
	}
	steps := Migration(first, kept, 1)
	if n := countMoves(steps); n > less {
		t.Errorf("%d moves with max-moves %d", n, less)
	}
	for _, s := range steps {
		if s.Kind != StepStop || (s.Tenant != "product-0" && s.Tenant != "tools-1") {
			t.Errorf("step %+v: keeping the plan in force should only stop the dropped tenants", s)
		}
	}
	if kept.Summary.GPUsUsed < free.Summary.GPUsUsed {
		t.Errorf("kept plan uses %d GPUs, fewer than the re-packed %d", kept.Summary.GPUsUsed, free.Summary.GPUsUsed)
	}
	for _, tn := range kept.Tenants {
		r := tn.Reasons[len(tn.Reasons)-1]
		if r.Code != v1.ReasonMoveBudget || !strings.Contains(r.Message, "max-moves") {
			t.Errorf("tenant %s: last reason %s: %s", tn.Name, r.Code, r.Message)
		}
	}
	t.Logf("re-packed: %d GPUs, %d moves; kept: %d GPUs (%s)", free.Summary.GPUsUsed, moves, kept.Summary.GPUsUsed,
		kept.Tenants[0].Reasons[len(kept.Tenants[0].Reasons)-1].Message)
}

// A budget limits changes, not service. On the articles' node without chat-3, product-0 and
// tools-1, a new tenant chat-9 needs two GPUs: the plan in force leaves one idle, the re-pack
// (2 moves) serves everyone; with max-moves 0 or 1 no plan within the budget serves chat-9, so
// the best one within it is returned: every other tenant kept, chat-9 short, and a MoveBudget
// reason saying so (before, Build failed); never a plan with more moves than allowed. With 2 the
// re-pack stands. And when
// the re-pack serves fewer tenants than the plan in force (chat-0's load ×4 on the full node: the
// re-pack gives it two GPUs and leaves two tools tenants short), the plan in force is kept, chat-0
// short, nothing moved.
func TestMaxMovesCannotKeep(t *testing.T) {
	pool := loadPool(t, "../../examples/h100x8-mixed.yaml")
	first := build(t, pool)
	changed := *pool
	changed.Tenants = slices.DeleteFunc(slices.Clone(pool.Tenants), func(t v1.Tenant) bool {
		return t.Name == "chat-3" || t.Name == "product-0" || t.Name == "tools-1"
	})
	big := pool.Tenants[0]
	big.Name, big.Traffic.RPS = "chat-9", 2.5
	changed.Tenants = append(changed.Tenants, big)
	free, err := Build(context.Background(), &changed, Options{Current: first, repackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := countMoves(Migration(first, free, 1)); m != 2 || shortTenants(free) != 0 {
		t.Fatalf("setup: re-packing moves %d replicas and leaves %d tenants short, want 2 and 0", m, shortTenants(free))
	}
	for _, budget := range []int{0, 1, 2} {
		pl, err := Build(context.Background(), &changed, Options{Current: first, MaxMoves: &budget})
		if budget < 2 {
			if err != nil {
				t.Fatalf("max-moves %d: %v", budget, err)
			}
			if err := checkPlan(&changed, pl); err != nil {
				t.Fatalf("max-moves %d: %v", budget, err)
			}
			short := shortNames(pl, free)
			m := countMoves(Migration(first, pl, 1))
			r := pl.Tenants[0].Reasons[len(pl.Tenants[0].Reasons)-1]
			if !slices.Equal(short, []string{"chat-9"}) || m > budget || r.Code != v1.ReasonMoveBudget ||
				!strings.Contains(r.Message, fmt.Sprintf("no plan within max-moves %d serves every tenant", budget)) || !strings.Contains(r.Message, "leaves chat-9 short") {
				t.Errorf("max-moves %d: %d moves, short %v, last reason %s; want chat-9 alone short within the budget, and why", budget, m, short, r.Message)
			}
			continue
		}
		if err != nil || shortTenants(pl) != 0 || countMoves(Migration(first, pl, 1)) != 2 {
			t.Errorf("max-moves 2: err %v, want the re-pack", err)
		}
	}

	busier := *pool
	busier.Tenants = slices.Clone(pool.Tenants)
	busier.Tenants[0].Traffic.RPS *= 4
	if free, err = Build(context.Background(), &busier, Options{Current: first, repackOnly: true}); err != nil {
		t.Fatal(err)
	}
	zero := 0
	pl, err := Build(context.Background(), &busier, Options{Current: first, MaxMoves: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(&busier, pl); err != nil {
		t.Fatal(err)
	}
	var freeShort []string
	for _, tp := range free.Tenants {
		if tp.Infeasible {
			freeShort = append(freeShort, tp.Name)
		}
	}
	t.Logf("chat-0 ×4: the re-pack leaves %v short", freeShort)
	if n := countMoves(Migration(first, pl, 1)); n != 0 || shortTenants(pl) != 1 || !pl.Tenants[0].Infeasible || shortTenants(free) < 1 {
		t.Errorf("chat-0 ×4: %d moves, %d tenants short (chat-0: %v), re-pack %d short; want 0 moves, chat-0 alone short, the re-pack no fewer",
			n, shortTenants(pl), pl.Tenants[0].Infeasible, shortTenants(free))
	}
}

// mpsPool is one node of eight H100s, MPS only, with a shared llama-3.2-3b tenant per name at a
// light load (eight of them share a GPU: at a 4,096-token context 1/8 is the finest MPS share
// whose memory holds one replica, so the plan cannot seat more).
func mpsPool(t *testing.T, names []string) *v1.Pool {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: gpupool.dev/v1\nkind: Pool\nmetadata: {name: mps}\nfleet:\n  nodes:\n  - name: n0\n    gpus: [{board: H100-SXM5-80GB, count: 8}]\npolicy: {burstPoolPercent: 0, allowedModes: [mps]}\ntenants:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "- name: %s\n  model: {name: llama-3.2-3b}\n  maxContext: 4096\n  isolation: shared\n  concurrency: 8\n  traffic: {rps: 0.2, inputTokens: 256, outputTokens: 64}\n  slo: {ttftP99: 2s, tpotP99: 100ms}\n", n)
	}
	pool, err := v1.LoadPool([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// A move budget below what re-packing needs re-packs part of the pool: 32 tenants on four MPS
// GPUs lose half of each GPU's tenants; re-packing moves four tenants from GPU 1 to GPU 0 and four
// from GPU 3 to GPU 2 (two independent changes, each freeing one GPU for four moves). With 4–7
// moves allowed one of them is made (three GPUs), with fewer none (the plan in force, four GPUs,
// only the dropped tenants stop), with 8 both; never more moves than allowed, every plan valid,
// and more budget never uses more GPUs.
func TestMaxMovesPartial(t *testing.T) {
	var names, half []string
	for i := range 32 {
		names = append(names, fmt.Sprintf("t%02d", i))
		if i%8 < 4 {
			half = append(half, names[i])
		}
	}
	first := build(t, mpsPool(t, names))
	if first.Summary.GPUsUsed != 4 {
		t.Fatalf("setup: 32 tenants on %d GPUs, want 4 of 8 each", first.Summary.GPUsUsed)
	}
	pool := mpsPool(t, half)
	free, err := Build(context.Background(), pool, Options{Current: first})
	if err != nil {
		t.Fatal(err)
	}
	if m := countMoves(Migration(first, free, 1)); m != 8 || free.Summary.GPUsUsed != 2 {
		t.Fatalf("setup: re-packing moves %d replicas onto %d GPUs, want 8 onto 2", m, free.Summary.GPUsUsed)
	}
	prev := 5
	for budget := 0; budget <= 8; budget++ {
		pl, err := Build(context.Background(), pool, Options{Current: first, MaxMoves: &budget})
		if err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		steps := Migration(first, pl, 1)
		moves := countMoves(steps)
		want := map[bool]int{true: 4, false: 3}[budget < 4]
		if budget == 8 {
			want = 2
		}
		if pl.Summary.GPUsUsed != want || moves > budget {
			t.Errorf("max-moves %d: %d GPUs with %d moves, want %d GPUs within the budget", budget, pl.Summary.GPUsUsed, moves, want)
		}
		if pl.Summary.GPUsUsed > prev {
			t.Errorf("max-moves %d: %d GPUs, more than with a smaller budget (%d)", budget, pl.Summary.GPUsUsed, prev)
		}
		prev = pl.Summary.GPUsUsed
		if budget >= 4 && budget < 8 {
			r := pl.Tenants[0].Reasons[len(pl.Tenants[0].Reasons)-1]
			if r.Code != v1.ReasonMoveBudget || !strings.Contains(r.Message, "partly re-packed") {
				t.Errorf("max-moves %d: last reason %s: %s", budget, r.Code, r.Message)
			}
			// every tenant's replica list mirrors the GPUs, numbered from 0
			for _, tn := range pl.Tenants {
				for i, r := range tn.Replicas {
					if r.Index != i {
						t.Errorf("max-moves %d: tenant %s replica %d has index %d", budget, tn.Name, i, r.Index)
					}
				}
			}
		}
	}
}

// bestParts is a 0/1 knapsack: within the budget, and as good as every subset (enumerated) for
// up to 10 components.
func TestBestPartsKnapsack(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(0, 10).Draw(rt, "n")
		parts := make([]repackPart, n)
		var optional []int
		for i := range parts {
			parts[i] = repackPart{moves: rapid.IntRange(0, 6).Draw(rt, "moves"), saved: rapid.IntRange(1, 4).Draw(rt, "saved")}
			optional = append(optional, i)
		}
		budget := rapid.IntRange(0, 20).Draw(rt, "budget")
		got, gotMoves := 0, 0
		for _, i := range bestParts(parts, optional, budget) {
			got += parts[i].saved
			gotMoves += parts[i].moves
		}
		if gotMoves > budget {
			rt.Fatalf("%d moves over budget %d", gotMoves, budget)
		}
		best := 0
		for mask := 0; mask < 1<<n; mask++ {
			v, m := 0, 0
			for i := range n {
				if mask>>i&1 == 1 {
					v += parts[i].saved
					m += parts[i].moves
				}
			}
			if m <= budget && v > best {
				best = v
			}
		}
		if got != best {
			rt.Fatalf("saves %d GPUs, the best subset %d", got, best)
		}
	})
}

// review is a pool and the plan in force of cmd/gpupool/testdata/review (the plan of
// random/rnd-203.yaml, four GPUs: t4 on four MIG 2g.24gb instances, t0 on an A100 1g.5gb).
const review = "../../cmd/gpupool/testdata/review/"

func loadReviewPlan(t *testing.T) *v1.Plan {
	t.Helper()
	data, err := os.ReadFile(review + "c6-rnd-203.plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := v1.DecodePlan(data)
	if err != nil {
		t.Fatal(err)
	}
	return cur
}

// replicasOn lists tenant's replicas in pl as "board kind profile" per replica.
func replicasOn(pl *v1.Plan, tenant string) []string {
	var out []string
	for _, g := range pl.GPUs {
		for _, r := range g.Replicas {
			if r.Tenant == tenant {
				out = append(out, g.Ref().String()+" "+string(g.Mode))
			}
		}
		for _, in := range g.Instances {
			for _, r := range in.Replicas {
				if r.Tenant == tenant {
					out = append(out, g.Ref().String()+" "+in.Ref().String())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// With a move budget the plan in force is kept when every tenant's replicas there still meet its
// SLO on the slices they run on: c6-rnd-203-v3 drops t3 and lowers t4 from 1.264 to 0.6 req/s.
// The re-pack would run t4 on three 1g.24gb instances (7 moves, 2 GPUs), but its four 2g.24gb
// replicas in force still carry 0.6 req/s, and t0's A100 1g.5gb still carries its unchanged rate:
// with max-moves 0, 1 and 2 nothing moves and no GPU changes, only t3 stops. Before, the check
// compared against the re-pack's slice kinds and Build failed ("t4 runs 4 replicas there, 0 of
// them on mig 1g.24gb … the pool now needs 3").
func TestMaxMovesKeepsServedReview(t *testing.T) {
	cur := loadReviewPlan(t)
	pool := loadPool(t, review+"c6-rnd-203-v3.yaml")
	for _, budget := range []int{0, 1, 2} {
		pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &budget})
		if err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		for _, s := range Migration(cur, pl, 1) {
			if s.Kind != StepStop || s.Tenant != "t3-llama-3-2-3b" {
				t.Errorf("max-moves %d: step %+v, want only t3's stop", budget, s)
			}
		}
		if got, want := replicasOn(pl, "t4-qwen2-5-7b"), replicasOn(cur, "t4-qwen2-5-7b"); !slices.Equal(got, want) {
			t.Errorf("max-moves %d: t4 on %v, want %v as in force", budget, got, want)
		}
		for _, tn := range pl.Tenants {
			if r := tn.Reasons[len(tn.Reasons)-1]; r.Code != v1.ReasonMoveBudget || !strings.Contains(r.Message, "plan in force is kept") {
				t.Errorf("max-moves %d: tenant %s: last reason %s: %s", budget, tn.Name, r.Code, r.Message)
			}
		}
	}
}

// c6-rnd-203-v2 triples t1 (10.1 to 30.2 req/s: its one replica no longer carries it), cuts t4
// to 0.38 req/s, drops t3 and adds t5. t1's replica stays and two more start on its slice kind,
// t5 starts, both on a GPU that ran nothing: with max-moves 0, 1 and 3 nothing moves, nothing is
// drained, and the other tenants stay as they are. Before, every budget failed on t4 and t0. When
// the policy takes MIG away, every tenant must move, and max-moves 2 fails naming them and why.
func TestMaxMovesMovesOnlyUnservedReview(t *testing.T) {
	cur := loadReviewPlan(t)
	pool := loadPool(t, review+"c6-rnd-203-v2.yaml")
	for _, budget := range []int{0, 1, 3} {
		pl, err := Build(context.Background(), pool, Options{Current: cur, MaxMoves: &budget})
		if err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		if err := checkPlan(pool, pl); err != nil {
			t.Fatalf("max-moves %d: %v", budget, err)
		}
		steps := Migration(cur, pl, 1)
		if n := countMoves(steps); n > 0 {
			t.Errorf("max-moves %d: %d moves", budget, n)
		}
		for _, s := range steps {
			if s.Tenant != "" && s.Tenant != "t1-qwen2-5-3b" && s.Tenant != "t5-new-8b" && s.Tenant != "t3-llama-3-2-3b" {
				t.Errorf("max-moves %d: step %+v of a tenant the plan in force serves", budget, s)
			}
			if s.Kind == StepGPU && s.Drain {
				t.Errorf("max-moves %d: drains %s", budget, s.GPU)
			}
		}
		for _, tn := range pl.Tenants {
			if tn.Infeasible {
				t.Errorf("max-moves %d: tenant %s short", budget, tn.Name)
			}
		}
		t1 := replicasOn(pl, "t1-qwen2-5-3b")
		if len(t1) != 3 || !slices.Contains(t1, replicasOn(cur, "t1-qwen2-5-3b")[0]) {
			t.Errorf("max-moves %d: t1 on %v, want 3 replicas, one where it runs now", budget, t1)
		}
		if r := pl.Tenants[1].Reasons[len(pl.Tenants[1].Reasons)-1]; !strings.Contains(r.Message, "t1-qwen2-5-3b grows") {
			t.Errorf("max-moves %d: last reason %s", budget, r.Message)
		}
	}
	noMIG := *pool
	noMIG.Policy.AllowedModes = []v1.Mode{v1.ModeExclusive}
	two := 2
	_, err := Build(context.Background(), &noMIG, Options{Current: cur, MaxMoves: &two})
	if err == nil || !strings.Contains(err.Error(), "tenant t4-qwen2-5-7b must move: mig 2g.24gb of H100-NVL-94GB is no longer one of its slice kinds") ||
		!strings.Contains(err.Error(), "max-moves 2") {
		t.Errorf("without MIG, max-moves 2: err = %v, want one naming t4's slice kind", err)
	}
}

// Without a move budget a re-pack that saves no GPU is not made: c6-rnd-203-drop-t3 only drops
// t3; against the plan of random/rnd-203.yaml as the planner makes it now, the re-pack runs the
// pool on as many GPUs as the plan in force but moves replicas. Now only t3 stops, and every
// tenant says what was given up. (The stored c6-rnd-203.plan.yaml is an older, larger plan: a
// re-pack of it saves a GPU since the TPOT tail of two-chunk prompts counts the router.)
func TestReplanKeepsWhenNothingSaved(t *testing.T) {
	cur := build(t, loadPool(t, review+"random/rnd-203.yaml"))
	pool := loadPool(t, review+"c6-rnd-203-drop-t3.yaml")
	repacked, err := Build(context.Background(), pool, Options{Current: cur, repackOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if steps := Migration(cur, repacked, 1); repacked.Summary.GPUsUsed != cur.Summary.GPUsUsed || countMoves(steps) == 0 {
		t.Fatalf("setup: the re-pack uses %d GPUs and moves %d replicas, want %d GPUs and some moves", repacked.Summary.GPUsUsed, countMoves(steps), cur.Summary.GPUsUsed)
	}
	pl, err := Build(context.Background(), pool, Options{Current: cur})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPlan(pool, pl); err != nil {
		t.Fatal(err)
	}
	for _, s := range Migration(cur, pl, 1) {
		if s.Kind != StepStop || s.Tenant != "t3-llama-3-2-3b" {
			t.Errorf("step %+v, want only t3's stop", s)
		}
	}
	r := pl.Tenants[0].Reasons[len(pl.Tenants[0].Reasons)-1]
	if r.Code != v1.ReasonMoveBudget || !strings.Contains(r.Message, "re-packing would save no GPU") || strings.Contains(r.Message, "fewer") {
		t.Errorf("last reason %s: %s", r.Code, r.Message)
	}
	// a re-pack that saves GPUs is still made: v3 runs on 2 GPUs re-packed
	pool = loadPool(t, review+"c6-rnd-203-v3.yaml")
	pl, err = Build(context.Background(), pool, Options{Current: cur})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Summary.GPUsUsed >= cur.Summary.GPUsUsed {
		t.Errorf("v3 without a budget: %d GPUs, want the re-pack's fewer than %d", pl.Summary.GPUsUsed, cur.Summary.GPUsUsed)
	}
}

// Re-planning a pool against its own plan with every rate unchanged or lowered, and some tenants
// dropped: with max-moves 0 it moves nothing and reconfigures nothing (every tenant's replicas in
// force still meet its SLO; only the dropped tenants' replicas stop), never an error; without a
// budget it changes something only for fewer GPUs than that, and nothing when nothing changed.
// Random synthetic pools (6–16 tenants, varied or not, on 16 H100s), each tenant kept, scaled by
// 0.05–1, cut to 0.001 req/s or dropped, and a few pools left as they are.
func TestReplanLowerRatesMovesNothing(t *testing.T) {
	seeds := uint64(16)
	if testing.Short() {
		seeds = 6
	}
	tried := 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 29))
		pool := Synthetic(SyntheticOptions{Tenants: 6 + rng.IntN(11), GPUs: 16, Varied: seed%2 == 1}, rng)
		same := seed%5 == 4 // the pool as it is
		first := build(t, pool)
		if slices.ContainsFunc(first.Tenants, func(tn v1.PlanTenant) bool { return tn.Infeasible }) {
			continue // a tenant short in the first plan may start more replicas now
		}
		tried++
		changed := *pool
		changed.Tenants = nil
		dropped, lowered := map[string]bool{}, false
		for i, tn := range pool.Tenants {
			change := rng.IntN(4)
			if same {
				change = 0
			}
			switch change {
			case 1:
				tn.Traffic.RPS *= 0.05 + 0.95*rng.Float64()
				lowered = true
			case 2:
				tn.Traffic.RPS, lowered = 0.001, true
			case 3:
				if i > 0 {
					dropped[tn.Name] = true
					continue
				}
			}
			changed.Tenants = append(changed.Tenants, tn)
		}
		zero := 0
		kept, err := Build(context.Background(), &changed, Options{Current: first, MaxMoves: &zero})
		if err != nil {
			t.Fatalf("seed %d, max-moves 0: %v", seed, err)
		}
		free, err := Build(context.Background(), &changed, Options{Current: first})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, pl := range []*v1.Plan{kept, free} {
			if err := checkPlan(&changed, pl); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		for _, s := range Migration(first, kept, 1) {
			if s.Kind != StepStop || !dropped[s.Tenant] {
				t.Errorf("seed %d, max-moves 0: step %+v; want only the dropped tenants' stops", seed, s)
			}
		}
		changes := slices.DeleteFunc(Migration(first, free, 1), func(s Step) bool { return s.Kind == StepStop && dropped[s.Tenant] })
		if len(changes) > 0 && free.Summary.GPUsUsed >= kept.Summary.GPUsUsed {
			t.Errorf("seed %d: %d steps besides the dropped tenants' stops for %d GPUs, the plan in force's %d", seed, len(changes), free.Summary.GPUsUsed, kept.Summary.GPUsUsed)
		}
		if len(dropped) == 0 && !lowered && len(changes) > 0 {
			t.Errorf("seed %d: nothing changed, yet %d steps", seed, len(changes))
		}
		t.Logf("seed %d: %d tenants, %d dropped; plan in force %d GPUs, re-plan %d GPUs with %d steps", seed, len(pool.Tenants), len(dropped), kept.Summary.GPUsUsed, free.Summary.GPUsUsed, len(changes))
	}
	if tried < int(seeds)/2 {
		t.Errorf("only %d of %d pools were served in full by their first plan", tried, seeds)
	}
}
