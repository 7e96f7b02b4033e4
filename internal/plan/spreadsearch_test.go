package plan

import (
	"math"
	"slices"
	"testing"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
)

// spreadSearchFull is tpotSpread's search before it deferred the rest of the sum at tpot:
// every probe at tpot summed whole. The reference the shortcuts are held to.
func spreadSearchFull(q *qmodel, lr, d99, tpot, bound float64) float64 {
	if q.lengths == "" || q.out < 2 || lr <= 0 {
		return tpot
	}
	if bound > 0 && (tpot > bound || math.IsInf(bound, 1)) {
		return tpot
	}
	decided := func(lo, hi float64) bool { return bound > 0 && (lo >= bound || hi <= bound) }
	// At or above bound a miss above 1 % decides (the answer is above x), whatever its value:
	// the sum stops there. Summed in the same order, a sum that does not stop is the full one.
	whole := func(x float64) bool { return bound <= 0 || x < bound }
	const grid = spreadGrid
	sp := q.spreadSteps()
	steps, count := sp.steps, sp.count // distinct decode steps of the output quantiles, and how many
	base := q.step(d99, 0)
	chunk := q.in / q.k
	pre := q.step(d99, 1)
	cv := q.convexCost(d99, base)
	// At or below bound a miss of at most 1 % decides (the answer is at most x), whatever its
	// value: the sum stops once the terms left are bounded (tailBound) below what is left of
	// 1 %, and returns at most 1 % (the sum with the bounds).
	var rest []float64
	miss := func(x float64, full bool) float64 { // full: the whole sum, not only until above 1 %
		fx := q.chunksAt(d99, x)
		prune := bound > 0 && x <= bound
		if prune {
			if rest == nil {
				rest = make([]float64, len(steps)+1)
			}
			for i := len(steps) - 1; i >= 0; i-- {
				j := steps[i]
				rest[i] = rest[i+1] + count[i]*cv.bound(lr, j, x, pre, chunk, fx, q.in)
			}
		}
		s := 0.0
		for i, j := range steps {
			if prune && s+rest[i] <= pruneBelow*grid {
				return (s + rest[i]) / grid
			}
			s += count[i] * cv.tail(q.lengths, lr, j, x, pre, chunk, fx, q.in)
			if !full && s/grid > 0.01 {
				break
			}
		}
		return s / grid
	}
	mlo := miss(tpot, true)
	if mlo <= 0.01 {
		return tpot
	}
	lo, hi := tpot, math.Max(tpot, base)*2
	mhi := miss(hi, whole(hi))
	for mhi > 0.01 {
		if hi > 1e3 {
			return math.Inf(1)
		}
		lo, hi, mlo = hi, 2*hi, mhi
		if decided(lo, math.Inf(1)) {
			return hi
		}
		mhi = miss(hi, whole(hi))
	}
	if decided(lo, hi) {
		return hi
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
		mx := miss(x, whole(x))
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

// spreadCase is one question to tpotSpread, as stateFor asks it at lam req/s on one replica
// (the TPOT at the mean length before the prompts' fixed point stands in for stateFor's).
type spreadCase struct{ lr, d99, tpot, bound float64 }

// spreadCases are the questions of TestTPOTSpreadShortcuts and BenchmarkTPOTSpread: long and
// short prompts and outputs under both laws, at rates from a trickle to near saturation, with
// no bound (the p99 itself) and bounds below, near and above the answer.
func spreadCases(t testing.TB) (qs []*qmodel, cases [][]spreadCase) {
	shapes := []struct {
		model, board string
		in, out      int
	}{
		{"llama-3.2-1b", "H100", 8000, 20},
		{"llama-3.1-8b", "A100-SXM4-80GB", 2000, 300},
		{"llama-3.1-8b", "H100", 300, 800},
		{"llama-3.2-1b", "A100-SXM4-80GB", 4000, 80},
	}
	for _, s := range shapes {
		for _, law := range []v1.Lengths{v1.LengthsUniform, v1.LengthsExponential} {
			q := tpModel(t, s.model, llm.QuantBF16, s.board, 1, s.in, s.out).withLengths(law, 0)
			var cs []spreadCase
			for lam := 0.05; lam < 200; lam *= 1.37 {
				mt, ok := q.meanStep(lam)
				if !ok {
					break
				}
				d99 := math.Min(float64(q.slots), 1+poissonP99(lam*(q.out-1)*mt))
				tpot := q.step(d99, lam*q.k*mt)
				for _, b := range []float64{0, 0.9, 1.05, 1.3, 1.7, 2.5, 4} {
					cs = append(cs, spreadCase{lam, d99, tpot, b * tpot})
				}
			}
			qs, cases = append(qs, q), append(cases, cs)
		}
	}
	return qs, cases
}

// tpotSpread's shortcuts (the sum at tpot finished only where the false position starts from
// it, the output quantiles shared between models) give the same bits as the search that sums
// every probe at tpot whole, on every question and when asked again.
func TestTPOTSpreadShortcuts(t *testing.T) {
	qs, cases := spreadCases(t)
	searched, finite := 0, 0
	for i, q := range qs {
		if got, want := q.spreadSteps(), spreadLawOf(q); !slices.Equal(got.steps, want.steps) || !slices.Equal(got.count, want.count) {
			t.Errorf("%s out %v: shared quantiles %v × %v, computed %v × %v", q.lengths, q.out, got.steps, got.count, want.steps, want.count)
		}
		fresh := *q
		for _, c := range cases[i] {
			want := spreadSearchFull(&fresh, c.lr, c.d99, c.tpot, c.bound)
			for range 2 { // asked again, with the shared quantiles in place
				if got := q.tpotSpread(c.lr, c.d99, 0, c.tpot, c.bound); math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("%s in %v out %v at %+v: %v, the whole search's %v", q.lengths, q.in, q.out, c, got, want)
				}
			}
			if want != c.tpot {
				searched++
				if !math.IsInf(want, 1) && c.bound == 0 {
					finite++
				}
			}
		}
	}
	t.Logf("%d questions searched past tpot, %d of them p99s", searched, finite)
	if searched < 100 || finite < 20 {
		t.Fatalf("only %d questions searched past tpot (%d p99s): the cases no longer reach the search", searched, finite)
	}
}

// BenchmarkTPOTSpread runs the questions of spreadCases through the search as it was (whole)
// and as it is (deferred), for the ratio of the two.
func BenchmarkTPOTSpread(b *testing.B) {
	qs, cases := spreadCases(b)
	for _, bc := range []struct {
		name string
		f    func(q *qmodel, c spreadCase) float64
	}{
		{"whole", func(q *qmodel, c spreadCase) float64 { return spreadSearchFull(q, c.lr, c.d99, c.tpot, c.bound) }},
		{"deferred", func(q *qmodel, c spreadCase) float64 { return q.tpotSpread(c.lr, c.d99, 0, c.tpot, c.bound) }},
	} {
		run := func() (s float64) {
			for i, q := range qs {
				for _, c := range cases[i] {
					s += bc.f(q, c)
				}
			}
			return s
		}
		run() // the tail tables, filled once for all
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				run()
			}
		})
	}
}
