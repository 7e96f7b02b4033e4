package plan

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// solveMeanByStep is solveMean as it was written before stepCorners: every iteration's step
// through q.step.
func solveMeanByStep(q *qmodel, lam float64) (float64, bool) {
	o1 := q.out - 1
	t := q.step(1, 0)
	for range 400 {
		nt := q.step(math.Min(float64(q.slots), 1+lam*o1*t), lam*q.k*t)
		if lam*(q.k+o1)*nt >= float64(q.slots) || nt > 1e3 {
			return 0, false
		}
		if math.Abs(nt-t) <= 1e-9+1e-7*t {
			return nt, true
		}
		t = nt
	}
	return 0, false
}

// TestStepCornersAsStep: stepCorners.step is q.step bit for bit, over runs of batches within
// one cell of whole batches (as solveMean's iterations near their fixed point), jumps between
// cells, whole and negative batches.
func TestStepCornersAsStep(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for _, in := range []int{500, 3000, 20000} {
		q := h100Model(t, 64, in, 200)
		var c stepCorners
		d, f := 3.0, 0.5
		for i := range 5000 {
			switch r.IntN(6) {
			case 0: // another cell
				d, f = r.Float64()*80-2, r.Float64()*5-0.5
			case 1: // whole batches
				d, f = math.Floor(d), math.Floor(f)
			case 2:
				d = math.Floor(d)
			default: // within the cell, or next to it
				d += (r.Float64() - 0.5) * 0.3
				f += (r.Float64() - 0.5) * 0.3
			}
			want := q.step(d, f)
			if got := c.step(q, d, f); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("in %d, call %d: stepCorners.step(%v, %v) = %v, q.step %v", in, i, d, f, got, want)
			}
		}
	}
}

// TestSolveMeanAsByStep: solveMean (through stepCorners) finds the mean step of solveMeanByStep
// bit for bit, and the same saturation, on random rates of prompts within one chunk and of
// several, on fresh models and on models whose step memo is already filled.
func TestSolveMeanAsByStep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, sh := range [][3]int{{32, 500, 200}, {8, 3000, 64}, {64, 20000, 300}, {256, 150, 900}} {
		q, ref := h100Model(t, sh[0], sh[1], sh[2]), h100Model(t, sh[0], sh[1], sh[2])
		top := 2 * float64(q.slots) / ((q.k + q.out - 1) * q.step(1, 0))
		sat := 0
		for i := range 300 {
			lam := r.Float64() * top
			if i%3 == 0 {
				lam = top * math.Pow(2, -r.Float64()*20) // light rates too
			}
			got, okGot := q.solveMean(lam)
			want, okWant := solveMeanByStep(ref, lam)
			if okGot != okWant || math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("shape %v at %v req/s: solveMean %v %v, by step %v %v", sh, lam, got, okGot, want, okWant)
			}
			if !okGot {
				sat++
			}
		}
		if sat == 0 || sat == 300 {
			t.Fatalf("shape %v: %d of 300 rates saturated, want some of both", sh, sat)
		}
	}
}

// TestSmallMemoAsMap: smallMemo answers as a map of the same puts, below smallMemoLen keys and
// beyond, for float keys with signed zeros and NaNs.
func TestSmallMemoAsMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var m smallMemo[float64]
		ref := map[float64]float64{}
		keys := []float64{math.Copysign(0, -1), 0, math.NaN()}
		for range 3 * smallMemoLen {
			keys = append(keys, float64(r.IntN(60)), r.Float64())
		}
		for i, k := range keys {
			if _, ok := ref[k]; !ok && r.IntN(2) == 0 { // puts only keys not yet recorded, as the memos do
				v := float64(round*1000 + i)
				m.put(k, v)
				ref[k] = v
			}
			for _, x := range keys {
				gv, gok := m.get(x)
				wv, wok := ref[x]
				if gok != wok || gv != wv {
					t.Fatalf("round %d: get(%v) = %v %v, map %v %v", round, x, gv, gok, wv, wok)
				}
			}
		}
	}
}

// TestMinMaxAsMath: max0 and minF answer as math.Max(x, 0) and math.Min bit for bit, on
// signed zeros, infinities, NaNs and random values.
func TestMinMaxAsMath(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	vals := []float64{0, math.Copysign(0, -1), 1, -1, math.Inf(1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat64, -math.MaxFloat64}
	for range 200 {
		vals = append(vals, (r.Float64()-0.5)*math.Pow(10, float64(r.IntN(20)-10)))
	}
	for _, x := range vals {
		if got, want := max0(x), math.Max(x, 0); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("max0(%v) = %v, math.Max %v", x, got, want)
		}
		for _, y := range vals {
			if got, want := minF(x, y), math.Min(x, y); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("minF(%v, %v) = %v, math.Min %v", x, y, got, want)
			}
		}
	}
}

// TestCompareJoinedAsCompare: compareJoined orders as strings.Compare of the joined strings.
func TestCompareJoinedAsCompare(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	word := func() string {
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = "ab1g."[r.IntN(5)]
		}
		return string(b)
	}
	for range 20000 {
		a1, a2, b1, b2 := word(), word(), word(), word()
		if got, want := compareJoined(a1, a2, b1, b2), strings.Compare(a1+a2, b1+b2); got != want {
			t.Fatalf("compareJoined(%q, %q, %q, %q) = %d, strings.Compare %d", a1, a2, b1, b2, got, want)
		}
	}
}
