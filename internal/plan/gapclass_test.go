package plan

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// TestGapByClass decomposes the gap to the lower bound of the pool file named by GAP_POOL
// (skipped when unset), for pools that are not in the repository, such as the ones
// testdata/review7/genscale.py writes:
//
//	python3 testdata/review7/genscale.py 1000 1000 1 fixed > /some/dir/fix1000.yaml
//	GAP_POOL=/some/dir/fix1000.yaml go test -run TestGapByClass -v ./internal/plan
//
// It logs TestGapDecomposition's split (SLO margin × packing), the bound's terms at the bound's
// counts and the board-limit term at the sized counts, the least total cost of the sized
// candidates within the boards' pool GPUs (capChoiceFigure), and then per tenant three
// GPU-equivalents (replicas / share × the unit's fraction of a GPU): the bound's cheapest
// column (its count), the cheapest feasible candidate at the sized count, and the plan's
// choice; summed by class of tenant (tier, tensor-parallel degree of the choice, redundancy,
// fixed or minimum count, energy class, length law, low frequency, concurrency, model, request
// rate, board of each column, whether the bound's column is one the sizing rejects under busy
// neighbours, whether the choice is not the cheapest sized candidate), and the 60 tenants with
// the most plan − bound. GAP_DUMP=name also lists that tenant's candidates.
func TestGapByClass(t *testing.T) {
	path := os.Getenv("GAP_POOL")
	if path == "" {
		t.Skip("GAP_POOL unset")
	}
	pool := loadPool(t, path)
	p, pl := planWith(t, pool, func(*planner) {})
	used, lb := pl.Summary.GPUsUsed, pl.Summary.LowerBound
	slo := max(p.volumeBound(), p.groupBound())
	if v, ok := p.lpBound(); ok {
		slo = max(slo, v)
	}
	grp := p.groupBoundAt(append(p.bestLambdas(groupBoundLambdas), 1))
	slo = max(slo, int(math.Ceil(grp-boundSlack)))
	t.Logf("used %d, bound %d (gap %.3f) = SLO margin %d/%d (%.3f) x packing %d/%d (%.3f)",
		used, lb, float64(used)/float64(lb), slo, lb, float64(slo)/float64(lb), used, slo, float64(used)/float64(slo))

	capSized := p.boardCapBound()
	var capLB, grpLB float64
	var volLB, lpLB int
	var lpok bool
	p.atBoundCounts(func() {
		capLB, volLB, grpLB = p.boardCapBound(), p.volumeBound(), p.groupBoundAt(append(p.bestLambdas(groupBoundLambdas), 1))
		lpLB, lpok = p.lpBound()
	})
	t.Logf("at bound counts: volume %d, group %.2f, LP %d (%v), board capacity %.2f; at sized counts: volume %d, board capacity %.2f",
		volLB, grpLB, lpLB, lpok, capLB, p.volumeBound(), capSized)
	capPool := map[string]float64{}
	for _, g := range pl.GPUs {
		if g.Role != v1.RoleBurst {
			capPool[g.Board]++
		}
	}
	fig, figUse := capChoiceFigure(p, capPool)
	t.Logf("the choice's figure under the boards' pool GPUs %v: %.1f GPU-equivalents (by board at the last best multipliers %v)", capPool, fig, figUse)
	byBoard := map[string][3]float64{}
	type row struct {
		tn           *tenant
		bnd, sz, pln float64
		bc, sc       *cand
		classes      []string
	}
	var rows []row
	infeas := 0
	for _, tn := range p.tenants {
		if tn.choice == nil {
			infeas++
			continue
		}
		r := row{tn: tn, bnd: math.Inf(1), sz: math.Inf(1)}
		for _, c := range append(slices.Clip(tn.feasible), tn.boundExtra...) {
			n := c.replicas
			if c.lbReplicas > 0 && (c.lbReplicas < n || n == 0) {
				n = c.lbReplicas
			}
			v := float64(n) / float64(c.share) * c.unitFrac
			if v < r.bnd {
				r.bnd, r.bc = v, c
			}
		}
		for _, c := range tn.feasible {
			if c.cost < r.sz {
				r.sz, r.sc = c.cost, c
			}
		}
		r.pln = tn.choice.cost
		for i, c := range []*cand{r.bc, r.sc, tn.choice} {
			a := byBoard[c.board.Name]
			a[i] += []float64{r.bnd, r.sz, r.pln}[i]
			byBoard[c.board.Name] = a
		}
		r.classes = append(r.classes, fmt.Sprintf("concv=%d", tn.t.Concurrency), fmt.Sprintf("boundcol-rejected=%v", r.bc.inBound || r.bc.reject != ""))
		if tn.t.Concurrency > 0 {
			r.classes = append(r.classes, fmt.Sprintf("conc-law=%d-%s", tn.t.Concurrency, tn.t.Traffic.Lengths))
		}
		r.classes = append(r.classes, "boundboard="+r.bc.board.Name, "sizedboard="+r.sc.board.Name, "planboard="+tn.choice.board.Name)
		if r.sc != tn.choice {
			r.classes = append(r.classes, "choice!=sizedcheapest")
			if r.sc.board != tn.choice.board {
				r.classes = append(r.classes, "choice-other-board")
			}
		}
		x := tn.t
		r.classes = append(r.classes, "tier="+string(x.Isolation))
		r.classes = append(r.classes, fmt.Sprintf("tp=%d", max(tn.choice.tp, 1)))
		r.classes = append(r.classes, fmt.Sprintf("redundancy=%v", x.Redundancy))
		switch {
		case x.Replicas != nil:
			r.classes = append(r.classes, "count=fixed")
		case x.MinReplicas != nil:
			r.classes = append(r.classes, "count=min")
		default:
			r.classes = append(r.classes, "count=free")
		}
		r.classes = append(r.classes, "energy="+string(x.EnergyClass))
		r.classes = append(r.classes, "law="+string(x.Traffic.Lengths))
		r.classes = append(r.classes, fmt.Sprintf("low=%v", x.LowFrequency))
		r.classes = append(r.classes, fmt.Sprintf("conc=%v", x.Concurrency > 0))
		r.classes = append(r.classes, "model="+x.Model.Name)
		r.classes = append(r.classes, "plankind="+string(tn.choice.kind))
		r.classes = append(r.classes, fmt.Sprintf("rps=%g", x.Traffic.RPS))
		r.classes = append(r.classes, fmt.Sprintf("e2eonly=%v", x.SLO.TTFTP99 == nil))
		rows = append(rows, r)
	}
	var sb, ss, sp float64
	agg := map[string][4]float64{}
	for _, r := range rows {
		sb, ss, sp = sb+r.bnd, ss+r.sz, sp+r.pln
		for _, c := range r.classes {
			a := agg[c]
			a[0]++
			a[1] += r.bnd
			a[2] += r.sz
			a[3] += r.pln
			agg[c] = a
		}
	}
	t.Logf("%d tenants (%d infeasible): sum bound cols %.1f, sum sized cheapest %.1f, sum plan choice %.1f, used %d", len(rows), infeas, sb, ss, sp, used)
	t.Logf("by board (bound col, sized cheapest, plan): %v", byBoard)
	keys := make([]string, 0, len(agg))
	for k := range agg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %5s %8s %8s %8s %8s\n", "class", "n", "bound", "sized", "plan", "plan-bnd")
	for _, k := range keys {
		a := agg[k]
		fmt.Fprintf(&b, "%-28s %5.0f %8.1f %8.1f %8.1f %8.1f\n", k, a[0], a[1], a[2], a[3], a[3]-a[1])
	}
	t.Log("\n" + b.String())
	slices.SortFunc(rows, func(a, b row) int { return cmpF(b.pln-b.bnd, a.pln-a.bnd) })
	b.Reset()
	for _, r := range rows[:min(60, len(rows))] {
		x := r.tn.t
		fmt.Fprintf(&b, "%s %s %s rps=%g in=%d out=%d conc=%d slo=%s red=%v fixed=%v min=%v en=%s | bound %s %s x%d (sized %d) %.3f | sized %s %s x%d %.3f | plan %s %s x%d %.3f\n",
			x.Name, x.Model.Name, x.Isolation, x.Traffic.RPS, x.Traffic.InputTokens, x.Traffic.OutputTokens, x.Concurrency,
			sloStr(x.SLO), x.Redundancy, x.Replicas != nil, x.MinReplicas != nil, x.EnergyClass,
			r.bc.board.Name, r.bc.label(), r.bc.lbReplicas, r.bc.replicas, r.bnd,
			r.sc.board.Name, r.sc.label(), r.sc.replicas, r.sz,
			r.tn.choice.board.Name, r.tn.choice.label(), r.tn.choice.replicas, r.pln)
	}
	t.Log("\n" + b.String())
	for _, tn := range p.tenants {
		if tn.t.Name != os.Getenv("GAP_DUMP") {
			continue
		}
		for _, c := range append(slices.Clip(tn.cands), tn.boundExtra...) {
			t.Logf("%s %s %s: replicas %d lb %d need %d asked %d reject %q inBound %v cost %.3f why %s", tn.t.Name, c.board.Name, c.label(), c.replicas, c.lbReplicas, c.need, c.asked, c.reject, c.inBound, c.cost, c.why)
		}
	}
	_ = v1.SliceMPS
}

func sloStr(s v1.SLO) string {
	f := func(d *v1.Duration) string {
		if d == nil {
			return "-"
		}
		return fmt.Sprint(*d)
	}
	return f(s.TTFTP99) + "/" + f(s.TPOTP99) + "/" + f(s.E2EP99)
}

// capChoiceFigure is the least Σ over tenants of a candidate's cost (replicas / share × the
// unit's fraction of a GPU, the choice's own price) at the sized counts with at most capN[b]
// GPU-equivalents on board b, fractional (the Lagrangian dual by subgradient ascent, 2,000
// steps): what the candidate choice could reach under the boards' limits before packing.
func capChoiceFigure(p *planner, capN map[string]float64) (float64, map[string]float64) {
	var boards []string
	bidx := map[string]int{}
	for b := range capN {
		bidx[b] = len(boards)
		boards = append(boards, b)
	}
	slices.Sort(boards)
	for i, b := range boards {
		bidx[b] = i
	}
	nb := len(boards)
	var rows [][]float64
	for _, tn := range p.tenants {
		if tn.choice == nil || shortOfGPUs(tn) {
			continue
		}
		row := make([]float64, nb)
		for b := range row {
			row[b] = math.Inf(1)
		}
		for _, c := range tn.feasible {
			row[bidx[c.board.Name]] = min(row[bidx[c.board.Name]], c.cost)
		}
		rows = append(rows, row)
	}
	mu := make([]float64, nb)
	best, bestUse := math.Inf(-1), map[string]float64{}
	for k := range 2000 {
		use := make([]float64, nb)
		v := 0.0
		for b := range nb {
			v -= mu[b] * capN[boards[b]]
		}
		for _, row := range rows {
			bb, bv := -1, math.Inf(1)
			for b, x := range row {
				if y := (1 + mu[b]) * x; y < bv {
					bb, bv = b, y
				}
			}
			v += bv
			use[bb] += row[bb]
		}
		if v > best {
			best = v
			for b := range nb {
				bestUse[boards[b]] = use[b]
			}
		}
		norm := 0.0
		for b := range nb {
			g := use[b] - capN[boards[b]]
			if mu[b] == 0 && g < 0 {
				g = 0
			}
			use[b] = g
			norm += g * g
		}
		if norm == 0 {
			break
		}
		step := 0.5 / math.Sqrt(float64(k+1)) / math.Sqrt(norm)
		for b := range nb {
			mu[b] = max(0, mu[b]+step*use[b])
		}
	}
	return best, bestUse
}
