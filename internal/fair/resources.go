package fair

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Vector is an amount per named resource: `cpu`, `mem`, `sm`, `hbm` (MiB), `bandwidth` (GB/s),
// `power` (W), or a slice-kind count such as `H100-SXM5-80GB/3g.40gb`. Amounts are non-negative
// and are held internally in millionths of a unit, so sums and capacity checks are exact.
type Vector map[string]float64

// microPerUnit is the fixed-point scale of every amount.
const microPerUnit = 1_000_000

// maxMicro bounds one amount (and one capacity) so that it converts to float64 exactly.
const maxMicro = 1 << 53

// tieTolerance is the relative tolerance under which two shares are equal.
const tieTolerance = 1e-9

// IsSliceKind reports whether a resource name is a slice-kind count (`BOARD/KIND`). Slice-kind
// counts are capacity constraints only: they never enter a dominant share, because a slice kind is a
// package of the physical resources (`sm`, `hbm`, `bandwidth`) it is already charged for.
func IsSliceKind(name string) bool { return strings.Contains(name, "/") }

// resIndex maps resource names to dense positions.
type resIndex struct {
	names []string       // sorted
	pos   map[string]int // name → position
	share []int          // positions that enter dominant shares
}

func newResIndex(names []string) resIndex {
	names = slices.Clone(names)
	sort.Strings(names)
	names = slices.Compact(names)
	r := resIndex{names: names, pos: make(map[string]int, len(names))}
	for i, n := range names {
		r.pos[n] = i
		if !IsSliceKind(n) {
			r.share = append(r.share, i)
		}
	}
	return r
}

// toMicro converts one amount to fixed point.
func toMicro(x float64) (int64, error) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("amount %v is not a finite number", x)
	}
	if x < 0 {
		return 0, fmt.Errorf("amount %v is negative", x)
	}
	m := math.Round(x * microPerUnit)
	if m > maxMicro {
		return 0, fmt.Errorf("amount %v is larger than %v", x, float64(maxMicro)/microPerUnit)
	}
	return int64(m), nil
}

func fromMicro(x int64) float64 { return float64(x) / microPerUnit }

// dense converts v to a dense vector over r; names outside r are errors.
func (r *resIndex) dense(v Vector) ([]int64, error) {
	out := make([]int64, len(r.names))
	var errs []error
	for _, name := range sortedKeys(v) {
		j, ok := r.pos[name]
		if !ok {
			errs = append(errs, fmt.Errorf("resource %q is not in the pool capacity", name))
			continue
		}
		m, err := toMicro(v[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("resource %q: %w", name, err))
			continue
		}
		out[j] = m
	}
	return out, errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dominant is max over share dimensions of u_j / c_j: the unweighted dominant share of usage u
// against capacity c. A positive use of a resource whose capacity is zero is an infinite share.
func dominant(u, c []int64, dims []int) float64 {
	var s float64
	for _, j := range dims {
		if u[j] == 0 {
			continue
		}
		if c[j] == 0 {
			return math.Inf(1)
		}
		if x := float64(u[j]) / float64(c[j]); x > s {
			s = x
		}
	}
	return s
}

// dominantInv is dominant over a usage kept only for the share dimensions (u[i] is dimension
// dims[i]) with precomputed reciprocals of their capacities (inv[i] = 1/c, +Inf for a zero
// capacity). It can differ from dominant in the last bit, far inside the tie tolerance.
func dominantInv(u []int64, inv []float64) float64 {
	var s float64
	for i, x := range u {
		if x == 0 {
			continue
		}
		if f := float64(x) * inv[i]; f > s {
			s = f
		}
	}
	return s
}

// dominantDelta is dominantInv(u + k1·d1 + k2·d2) without building the sum; d1 and d2 are full
// vectors, read at dims.
func dominantDelta(u []int64, inv []float64, dims []int, d1 []int64, k1 int64, d2 []int64, k2 int64) float64 {
	var s float64
	for i, j := range dims {
		x := u[i]
		if d1 != nil {
			x += k1 * d1[j]
		}
		if d2 != nil {
			x += k2 * d2[j]
		}
		if x <= 0 {
			continue
		}
		if f := float64(x) * inv[i]; f > s {
			s = f
		}
	}
	return s
}

// tie reports whether two shares (non-negative, possibly +Inf) are equal within the relative
// tolerance.
func tie(a, b float64) bool {
	if a == b {
		return true
	}
	d, m := a-b, a
	if d < 0 {
		d, m = -d, b
	}
	return d <= tieTolerance*m && d <= math.MaxFloat64 // an infinite gap is no tie
}

// lessTol reports a < b by more than the tie tolerance.
func lessTol(a, b float64) bool { return a < b && !tie(a, b) }

// fits reports whether used + d ≤ c in every dimension.
func fits(used, c, d []int64) bool {
	for j, x := range d {
		if used[j]+x > c[j] {
			return false
		}
	}
	return true
}

// over reports whether used exceeds c in some dimension.
func over(used, c []int64) bool {
	for j, x := range used {
		if x > c[j] {
			return true
		}
	}
	return false
}

// addScaled does u += k·d.
func addScaled(u, d []int64, k int64) {
	for j, x := range d {
		u[j] += k * x
	}
}

// firstShort returns the first dimension where used + d > c, or -1.
func firstShort(used, c, d []int64) int {
	for j, x := range d {
		if used[j]+x > c[j] {
			return j
		}
	}
	return -1
}

// tasksToCover is the least k with used + d_need − k·d_victim ≤ c on every dimension where
// used + d_need exceeds c; -1 when d_victim cannot cover some short dimension.
func tasksToCover(used, c, need, victim []int64) int64 {
	var k int64
	for j, x := range need {
		short := used[j] + x - c[j]
		if short <= 0 {
			continue
		}
		if victim[j] <= 0 {
			return -1
		}
		if n := (short + victim[j] - 1) / victim[j]; n > k {
			k = n
		}
	}
	return k
}
