package plan

import (
	"math"
	"math/rand/v2"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
)

// compoundTailRef is compoundTail as it was before its loop stopped computing the bound on the
// rest of the sum where that bound cannot stop it, and before it took e^{−m} once: the reference
// it is held to, bit for bit.
func compoundTailRef(l v1.Lengths, in, m, x float64) float64 {
	if m <= 0 {
		if x < 0 {
			return 1
		}
		return 0
	}
	if m > 50 {
		ex2 := in * in * (1 + 1.0/12)
		if l == v1.LengthsExponential {
			ex2 = 2 * in * in
		}
		return 0.5 * math.Erfc((x-m*in)/math.Sqrt(2*m*ex2))
	}
	s := math.Exp(-m) // N = 0: S = 0
	if x >= 0 {
		s = 0
	}
	hi := int(math.Ceil(m + 12*math.Sqrt(m) + 20))
	pn := math.Exp(-m) // P(N = n), from n = 0
	y := x / in
	gt, gterm := 0.0, math.Exp(-y) // exponential: P(Gamma(n, 1) > y) = Σ_{j<n} e^{−y} y^j/j!, by n
	first := 1
	if l == v1.LengthsUniform && y > 0 {
		// (y − n)/√(n/12) falls with n and is 8.3 at n = r²: below it every term's Irwin–Hall
		// tail is under 1e-16 (irwinHallTail's normal law above 12, 0 at or below, where y is
		// beyond the support), and so is their sum, which is counted as 1e-16.
		const a = 8.3 / 3.4641016151377544 // 8.3/√12
		r := (math.Sqrt(a*a+4*y) - a) / 2
		if k := int(r * r); k > 13 {
			first = k
			lg, _ := math.Lgamma(float64(k))
			pn = math.Exp(float64(k-1)*math.Log(m) - m - lg) // P(N = k − 1)
			s += 1e-16
		}
	}
	for n := first; n <= hi; n++ {
		fn := float64(n)
		pn *= m / fn
		if fn > m {
			// Past the mode P(N = n) only falls, by at least r = m/(n+1) a step: the rest of the
			// sum is at most P(N ≥ n) ≤ P(N = n)/(1 − r), which is added once it is below
			// tailSlack (so the sum never falls below the full one), or once it no longer
			// changes s in float64 (rounding is monotone), when the sum is final.
			rest := pn / (1 - m/(fn+1))
			if s+rest == s {
				break
			}
			if rest <= tailSlack {
				s += rest
				break
			}
		}
		if l == v1.LengthsExponential {
			if y <= 0 {
				s += pn
				continue
			}
			gt += gterm
			gterm *= y / fn
			s += pn * math.Min(gt, 1)
			continue
		}
		z := (x - fn*in/2) / in
		if n > 12 && z > 0 && z < fn {
			// irwinHallTail's normal law, from normalTail's table (never below it).
			s += pn * normalTail((z-fn/2)/math.Sqrt(fn/6))
			continue
		}
		s += pn * irwinHallTail(n, z)
	}
	return s
}

// overContextShareRef is overContextShare's exponential law as it was before it took each
// logarithm once and carried P(I > i − 1) from the step before: its reference, bit for bit (the
// uniform law's branch did not change).
func overContextShareRef(t v1.Traffic, maxContext, ctx int) float64 {
	in, out := t.InputTokens, t.OutputTokens
	if maxContext > 0 || ctx <= 0 || in <= 0 || out <= 0 || lengthLaw(t) != v1.LengthsExponential {
		return 0
	}
	// Geometric prompt I and output O of means in and out: P(I + O > ctx) =
	// P(I ≥ ctx) + Σ_{i<ctx} P(I = i)·P(O > ctx − i), P(L > n) = (1 − 1/m)^n.
	if in <= 1 && out <= 1 {
		if 2 > ctx {
			return 1
		}
		return 0
	}
	surv := func(m, n int) float64 { // P(L > n), L ≥ 1 of mean m
		if m <= 1 {
			if n < 1 {
				return 1
			}
			return 0
		}
		return math.Exp(float64(n) * math.Log1p(-1/float64(m)))
	}
	share := surv(in, ctx-1) // I ≥ ctx: over whatever the output
	for i := 1; i < ctx; i++ {
		pi := surv(in, i-1) - surv(in, i)
		if pi < 1e-18 && i > in {
			break
		}
		share += pi * surv(out, ctx-i)
	}
	return math.Min(share, 1)
}

// compoundTail gives the same bits as compoundTailRef over both laws (and the fixed one's path),
// below, around and far above the mean (tailAt's grid and beyond it), at negative and zero
// thresholds, for means from below tailAt's grid to the normal law above 50, and at prompt
// lengths of mean other than 1.
func TestCompoundTailSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	n := 0
	for _, l := range []v1.Lengths{v1.LengthsUniform, v1.LengthsExponential, ""} {
		for _, in := range []float64{1, 0.37, 5, 300} {
			for range 3000 {
				m := math.Exp(rng.Float64()*12 - 7) // 0.0009 … 150
				sd := math.Sqrt(2 * m)
				x := in * (m + (rng.Float64()*40-10)*sd)
				switch rng.IntN(20) {
				case 0:
					x = 0
				case 1:
					x = -in * rng.Float64()
				case 2:
					x = in * m * rng.Float64() * 1e3
				}
				got, want := compoundTail(l, in, m, x), compoundTailRef(l, in, m, x)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("%q in=%v m=%v x=%v: %v (%#x), was %v (%#x)", l, in, m, x, got, math.Float64bits(got), want, math.Float64bits(want))
				}
				n++
			}
		}
	}
	for _, m := range []float64{0, -1} {
		for _, x := range []float64{-1, 0, 1} {
			if got, want := compoundTail(v1.LengthsExponential, 1, m, x), compoundTailRef(v1.LengthsExponential, 1, m, x); got != want {
				t.Fatalf("m=%v x=%v: %v, was %v", m, x, got, want)
			}
		}
	}
	t.Logf("%d tails compared", n)
}

// overContextShare gives the same bits as overContextShareRef under exponential lengths, means
// from 1 token to long prompts, and contexts from below the means to far above them.
func TestOverContextShareSameBits(t *testing.T) {
	for _, law := range []v1.Lengths{v1.LengthsExponential} {
		for _, in := range []int{1, 2, 7, 300, 2000, 12000} {
			for _, out := range []int{1, 2, 30, 512, 4000} {
				for _, ctx := range []int{1, 2, 100, 4096, 8192, 32768, 131072} {
					tr := v1.Traffic{InputTokens: in, OutputTokens: out, Lengths: law}
					got, want := overContextShare(tr, 0, ctx), overContextShareRef(tr, 0, ctx)
					if math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("%s in=%d out=%d ctx=%d: %v, was %v", law, in, out, ctx, got, want)
					}
				}
			}
		}
	}
}

// tailTerms, which looks up a block of terms before summing them, answers tailAt's value for
// each, bit for bit, on cells already in the table and on cells it fills, on and off the grid.
func TestTailTermsAreTailAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	steps := make([]float64, 0, spreadGrid)
	for j := 1; len(steps) < 37; j += 1 + rng.IntN(9) {
		steps = append(steps, float64(j))
	}
	for _, l := range []v1.Lengths{v1.LengthsUniform, v1.LengthsExponential} {
		for range 300 {
			lr := math.Exp(rng.Float64()*8 - 6)
			x, pre := rng.Float64()*0.2, rng.Float64()*0.05
			chunk, fx, in := 1+rng.Float64()*4000, rng.Float64()*3, 1+rng.Float64()*8000
			cvs := []promptCost{{}}
			if l == v1.LengthsExponential {
				cvs = append(cvs, promptCost{convex: true, a: rng.Float64() * 1e-4, b: 1e-4 + rng.Float64()*1e-3, p: rng.Float64(), base: x * rng.Float64()})
			}
			for _, cv := range cvs {
				var tb tailTerms
				for b := 0; b < len(steps); b += tailBlock {
					e := tb.look(l, &cv, steps, b, lr, x, pre, chunk, fx, in)
					for i := b; i < e; i++ {
						got := tb.at(l, i-b)
						if want := cv.tail(l, lr, steps[i], x, pre, chunk, fx, in); math.Float64bits(got) != math.Float64bits(want) {
							t.Fatalf("%s term %d: %v, tailAt %v", l, i, got, want)
						}
					}
				}
			}
		}
	}
}

// outLaw's memo on the model is the law computed afresh, also after
// the model's law, mean output or maximum context has changed since it was kept.
func TestOutLawMemoIsFresh(t *testing.T) {
	same := func(a, b []float64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				return false
			}
		}
		return true
	}
	q := &qmodel{}
	for _, c := range []struct {
		l      v1.Lengths
		out    float64
		maxCtx int
	}{
		{v1.LengthsUniform, 200, 0}, {v1.LengthsUniform, 200, 0}, {v1.LengthsUniform, 201, 0},
		{v1.LengthsUniform, 201, 150}, {v1.LengthsExponential, 201, 150}, {v1.LengthsExponential, 201, 0},
		{v1.LengthsExponential, 1, 0}, {"", 64, 0}, {v1.LengthsExponential, 3000, 0}, {v1.LengthsUniform, 200, 0},
	} {
		q.out = c.out
		q.withLengths(c.l, c.maxCtx)
		for _, m := range []*qmodel{q, (&qmodel{out: c.out}).withLengths(c.l, c.maxCtx)} {
			ls, ps := m.outLaw()
			fl, fp := m.outLawFresh()
			if !same(ls, fl) || !same(ps, fp) {
				t.Fatalf("%q out=%v maxCtx=%d: memoised law (%d values) is not the fresh one (%d)", c.l, c.out, c.maxCtx, len(ls), len(fl))
			}
		}
	}
}

// BenchmarkCompoundTail times compoundTail where tpotSpread computes it, table entries within
// tailAt's grid and exact tails far above the mean (beyond the grid's ten deviations), as it is
// (now) and as it was (compoundTailRef).
func BenchmarkCompoundTail(b *testing.B) {
	for _, l := range []v1.Lengths{v1.LengthsUniform, v1.LengthsExponential} {
		for _, c := range []struct {
			name string
			u    float64 // deviations above the mean
		}{{"grid", 3}, {"far", 14}} {
			for _, f := range []struct {
				name string
				f    func(v1.Lengths, float64, float64, float64) float64
			}{{"was", compoundTailRef}, {"now", compoundTail}} {
				b.Run(string(l)+"/"+c.name+"/"+f.name, func(b *testing.B) {
					ms := []float64{0.02, 0.3, 2, 9, 25, 48}
					for b.Loop() {
						for _, m := range ms {
							f.f(l, 1, m, m+c.u*math.Sqrt(2*m))
						}
					}
				})
			}
		}
	}
}

// BenchmarkOverContextShare times overContextShare for a long exponential prompt and output
// against a context they often exceed.
func BenchmarkOverContextShare(b *testing.B) {
	tr := v1.Traffic{InputTokens: 3000, OutputTokens: 800, Lengths: v1.LengthsExponential}
	for b.Loop() {
		overContextShare(tr, 0, 16384)
	}
}

// tpotSpreadRef is tpotSpread as it was before its sum at tpot stopped once bounded below 1 %
// whatever the bound, and before it bounded only the terms whose bounds can stop a sum: the
// reference it is held to, bit for bit.
func tpotSpreadRef(q *qmodel, lr, d99, held, tpot, bound float64) float64 {
	if q.lengths == "" || q.out < 2 || lr <= 0 {
		return tpot
	}
	if bound > 0 && (tpot > bound || math.IsInf(bound, 1)) {
		return tpot // the answer is at least tpot; an infinite bound asks nothing
	}
	decided := func(lo, hi float64) bool { return bound > 0 && (lo >= bound || hi <= bound) }
	// At or above bound a miss above 1 % decides (the answer is above x), whatever its value:
	// the sum stops there. Summed in the same order, a sum that does not stop is the full one.
	whole := func(x float64) bool { return bound <= 0 || x < bound }
	const grid = spreadGrid
	sp := q.spreadSteps()
	steps, count := sp.steps, sp.count // distinct decode steps of the output quantiles, and how many
	base := q.step(d99, 0) + held
	chunk := q.in / q.k
	pre := q.step(d99, 1) // its own last prefill step, whose arrivals its first decode step takes
	cv := q.convexCost(d99, base)
	// At or below bound a miss of at most 1 % decides (the answer is at most x), whatever its
	// value: the sum stops once the terms left are bounded (tailBound) below what is left of
	// 1 %, and returns at most 1 % (the sum with the bounds).
	var restBuf [spreadGrid + 1]float64 // the law has at most spreadGrid steps
	var rest []float64
	// miss is the miss at x, and where its sum stopped: the next term and the sum so far when it
	// stopped above 1 % with terms left (part), the steps' count otherwise.
	miss := func(x float64, full bool) (m float64, next int, part float64) { // full: the whole sum, not only until above 1 %
		fx := q.chunksAt(d99, x-held)
		prune := bound > 0 && x <= bound
		if prune {
			if rest == nil {
				rest = restBuf[:len(steps)+1]
			}
			for i := len(steps) - 1; i >= 0; i-- {
				j := steps[i]
				rest[i] = rest[i+1] + count[i]*cv.bound(lr, j, x, pre, chunk, fx, q.in)
			}
		}
		s := 0.0
		var tb tailTerms
		for b := 0; b < len(steps); b += tailBlock {
			e := tb.look(q.lengths, &cv, steps, b, lr, x, pre, chunk, fx, q.in)
			for i := b; i < e; i++ {
				if prune && s+rest[i] <= pruneBelow*grid {
					return (s + rest[i]) / grid, len(steps), 0
				}
				s += count[i] * tb.at(q.lengths, i-b)
				if !full && s/grid > 0.01 {
					return s / grid, i + 1, s
				}
			}
		}
		return s / grid, len(steps), s
	}
	// rest of a sum that miss(x, false) stopped above 1 % at next with part: the whole sum's
	// miss, the same bits as miss(x, true), whose terms are the same and summed in the same
	// order (its pruning never applies above 1 %: s + rest[i] ≥ s there).
	finish := func(x float64, next int, part float64) float64 {
		fx := q.chunksAt(d99, x-held)
		s := part
		var tb tailTerms
		for b := next; b < len(steps); b += tailBlock {
			e := tb.look(q.lengths, &cv, steps, b, lr, x, pre, chunk, fx, q.in)
			for i := b; i < e; i++ {
				s += count[i] * tb.at(q.lengths, i-b)
			}
		}
		return s / grid
	}
	// The miss at tpot is only needed whole where the false position starts from it: it is
	// summed until above 1 % first, and the rest of its sum only then (most searches are
	// decided by their first doubling, or move their lower end up).
	mlo, next, part := miss(tpot, false)
	if mlo <= 0.01 {
		return tpot
	}
	pending := next < len(steps)
	lo, hi := tpot, math.Max(tpot, base)*2
	mhi, _, _ := miss(hi, whole(hi))
	for mhi > 0.01 {
		if hi > 1e3 {
			return math.Inf(1)
		}
		lo, hi, mlo, pending = hi, 2*hi, mhi, false
		if decided(lo, math.Inf(1)) {
			return hi
		}
		mhi, _, _ = miss(hi, whole(hi))
	}
	if decided(lo, hi) {
		return hi
	}
	if pending {
		mlo = finish(tpot, next, part)
	}
	// Illinois' false position on log(miss/1 %), which the tails make nearly linear near the
	// answer (an end kept twice in a row has its value halved); a bisection step while the
	// upper end's miss is 0, and every fourth step, so that the bracket at least halves every
	// four steps whatever the values.
	gap := func(m float64) float64 { return math.Log(m / 0.01) }
	glo, ghi := gap(mlo), gap(mhi)
	side := 0
	for it := range 60 {
		w := hi - lo
		if w <= spreadTol*hi {
			break
		}
		x := (lo + hi) / 2
		if it%4 != 3 && !math.IsInf(ghi, 0) && glo > ghi {
			x = hi - ghi*w/(ghi-glo)
			x = math.Min(math.Max(x, lo+w*spreadTol/4), hi-w*spreadTol/4)
		}
		mx, _, _ := miss(x, whole(x))
		if gx := gap(mx); mx > 0.01 {
			lo, glo = x, gx
			if side == -1 {
				ghi /= 2
			}
			side = -1
		} else {
			hi, ghi = x, gx
			if side == 1 {
				glo /= 2
			}
			side = 1
		}
		if decided(lo, hi) {
			break
		}
	}
	return hi
}

// tpotSpread gives the same bits as tpotSpreadRef on the questions of spreadCases and on many
// varied ones around them: rates, decode batches, held steps, TPOTs at the mean length and
// bounds drawn at random about each, none, below, near and above the answer.
func TestTPOTSpreadSameBits(t *testing.T) {
	qs, cases := spreadCases(t)
	rng := rand.New(rand.NewPCG(13, 17))
	n, atTpot, searched, decided := 0, 0, 0, 0
	for i, q := range qs {
		for _, c := range cases[i] {
			for k := range 12 {
				lr, d99, tpot, bound, held := c.lr, c.d99, c.tpot, c.bound, 0.0
				if k > 0 {
					lr *= math.Exp(rng.Float64()*2 - 1)
					d99 = math.Max(1, d99*math.Exp(rng.Float64()-0.5))
					tpot *= math.Exp(rng.Float64()*0.6 - 0.3)
					held = tpot * rng.Float64() * 0.3 * float64(rng.IntN(2))
					switch rng.IntN(4) {
					case 0:
						bound = 0
					case 1:
						bound = tpot * math.Exp(rng.Float64()*3-0.5)
					}
				}
				got, want := q.tpotSpread(lr, d99, held, tpot, bound), tpotSpreadRef(q, lr, d99, held, tpot, bound)
				if math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("%s in %v out %v lr %v d99 %v held %v tpot %v bound %v: %v (%#x), was %v (%#x)", q.lengths, q.in, q.out, lr, d99, held, tpot, bound, got, math.Float64bits(got), want, math.Float64bits(want))
				}
				n++
				switch {
				case want == tpot && bound <= 0:
					atTpot++
				case bound <= 0:
					searched++
				default:
					decided++
				}
			}
		}
	}
	t.Logf("%d questions: %d answered tpot without a bound, %d searched without one, %d with a bound", n, atTpot, searched, decided)
	if atTpot < 200 || searched < 200 || decided < 1000 {
		t.Fatalf("the questions no longer reach every path: %d at tpot, %d searched, %d bounded", atTpot, searched, decided)
	}
}

// BenchmarkTPOTSpreadWasNow times the questions of spreadCases, with held steps and bounds
// varied as TestTPOTSpreadSameBits varies them, through tpotSpread as it was (tpotSpreadRef)
// and as it is.
func BenchmarkTPOTSpreadWasNow(b *testing.B) {
	qs, cases := spreadCases(b)
	type question struct {
		q                          *qmodel
		lr, d99, held, tpot, bound float64
	}
	rng := rand.New(rand.NewPCG(13, 17))
	var qu []question
	for i, q := range qs {
		for _, c := range cases[i] {
			for range 4 {
				held, bound := 0.0, c.bound
				if rng.IntN(2) == 0 {
					held = c.tpot * rng.Float64() * 0.3
				}
				if rng.IntN(4) == 0 {
					bound = 0
				}
				qu = append(qu, question{q, c.lr * math.Exp(rng.Float64()-0.5), c.d99, held, c.tpot, bound})
			}
		}
	}
	for _, f := range []struct {
		name string
		f    func(c question) float64
	}{
		{"was", func(c question) float64 { return tpotSpreadRef(c.q, c.lr, c.d99, c.held, c.tpot, c.bound) }},
		{"now", func(c question) float64 { return c.q.tpotSpread(c.lr, c.d99, c.held, c.tpot, c.bound) }},
	} {
		for _, c := range qu { // the tail tables, filled once for all
			f.f(c)
		}
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				for _, c := range qu {
					f.f(c)
				}
			}
		})
	}
}
