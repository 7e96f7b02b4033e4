package plan

import (
	"math"

	v1 "gpupool.dev/gpupool/api/v1"
)

// boardCapIters is how many subgradient steps boardCapBound takes per price λ.
const boardCapIters = 200

// boardCapBound is the volume bound with the fleet's GPUs of each board as a limit. Every plan
// uses at most N_b GPUs of board b (the fleet holds no more), and the contents of each GPU of
// board b cost at most 1 at the volume bound's prices (π = 1 for a whole GPU, tp for a
// tensor-parallel group, λ·memory share + (1−λ)·compute share for a MIG instance), so the GPUs
// G_b a plan uses on board b are at least V_b, the price of what it places there, and for every
// μ ≥ 0 (one multiplier per board)
//
//	Σ_b G_b ≥ Σ_b G_b + Σ_b μ_b (G_b − N_b) ≥ Σ_b (1 + μ_b) V_b − Σ_b μ_b N_b
//	        ≥ Σ_t min_c (1 + μ_b(c)) · replicas_c / share_c · π_c − Σ_b μ_b N_b,
//
// the last step as in the volume bound (each tenant counted at its cheapest candidate, now
// priced by its board's multiplier). At μ = 0 it is the volume bound. Where the tenants'
// cheapest candidates lie on one board, as on a fleet of several boards whose newest board is
// the cheapest for most tenants, they cannot all go there, and a μ > 0 on that board counts the
// dearer boards some of them must take. The multipliers are found by projected subgradient
// ascent (any μ ≥ 0 gives a valid bound; the search only picks a good one), at each price λ of
// the volume bound's 21-point grid. Returns 0 on a fleet of one board, where it is the volume
// bound.
//
// Where the fleet is too small to serve every tenant no plan serves them all, and the limits
// would lift the bound past any plan's GPUs; so a tenant the packing left short of GPUs
// (ReasonNoCapacity) is left out of this term, which then bounds every plan that serves the
// tenants this plan serves in full (fewer tenants only lower it).
func (p *planner) boardCapBound() float64 {
	bidx := map[string]int{}
	var capN []float64
	for _, g := range p.fleet {
		i, ok := bidx[g.board.Name]
		if !ok {
			i = len(capN)
			bidx[g.board.Name] = i
			capN = append(capN, 0)
		}
		capN[i]++
	}
	nb := len(capN)
	if nb < 2 {
		return 0
	}
	var ts []*tenant
	for _, tn := range p.tenants {
		if tn.choice != nil && !shortOfGPUs(tn) {
			ts = append(ts, tn)
		}
	}
	if len(ts) == 0 {
		return 0
	}
	m := make([]float64, len(ts)*nb) // tenant × board: its cheapest priced volume there
	mu := make([]float64, nb)
	use := make([]float64, nb)
	best := 0.0
	for gi := 0; gi <= 20; gi++ {
		lam := float64(gi) / 20
		for i, tn := range ts {
			row := m[i*nb : (i+1)*nb]
			for b := range row {
				row[b] = math.Inf(1)
			}
			for _, c := range tn.feasible {
				b := bidx[c.board.Name]
				row[b] = min(row[b], float64(c.replicas)/float64(c.share)*unitPrice(c, lam))
			}
		}
		clear(mu)
		for k := range boardCapIters {
			clear(use)
			v := 0.0
			for b := range nb {
				v -= mu[b] * capN[b]
			}
			for i := range ts {
				row := m[i*nb : (i+1)*nb]
				bb, bv := -1, math.Inf(1)
				for b, x := range row {
					if y := (1 + mu[b]) * x; y < bv {
						bb, bv = b, y
					}
				}
				if bb < 0 {
					continue // no candidate (the volume bound would be infinite)
				}
				v += bv
				use[bb] += row[bb]
			}
			best = max(best, v)
			// Step along the subgradient use − N, projected on μ ≥ 0.
			norm := 0.0
			for b := range nb {
				g := use[b] - capN[b]
				if mu[b] == 0 && g < 0 {
					g = 0
				}
				use[b] = g
				norm += g * g
			}
			if norm == 0 {
				break // μ is optimal at this λ
			}
			step := 0.5 / math.Sqrt(float64(k+1)) / math.Sqrt(norm)
			for b := range nb {
				mu[b] = max(0, mu[b]+step*use[b])
			}
		}
	}
	return best
}

// shortOfGPUs says whether the packing left tn short of GPUs (some or all of its replicas).
func shortOfGPUs(tn *tenant) bool {
	for _, r := range tn.infeas {
		if r.Code == v1.ReasonNoCapacity {
			return true
		}
	}
	return false
}
