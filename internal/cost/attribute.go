package cost

import (
	"fmt"
	"sort"
)

// Basis says how a device's energy and activity were obtained.
type Basis string

// Bases.
const (
	Measured  Basis = "measured"  // the board's energy counter and the driver's utilisation
	Simulated Basis = "simulated" // the simulator's steps through the power model
	Planned   Basis = "planned"   // the plan's predicted load through the power model
)

// Slice is one tenant replica's claim on a GPU over the period.
type Slice struct {
	Tenant string
	// Reserved is the fraction of the GPU the slice holds, 0–1: a MIG instance's compute slices
	// over the board's (divided among the replicas sharing it), an MPS share's SM percentage, a
	// time-slice replica's 1/k, a whole GPU's 1.
	Reserved float64
	// Active is the slice's work in GPU-seconds: a MIG instance's busy fraction × its size ×
	// seconds, an MPS or time-sliced process's SM utilisation × seconds. Only ratios split
	// energy; against the period it is the usage basis of the hardware cost.
	Active float64
	// OutputTokens and Tokens (prompt + output) the slice served.
	OutputTokens, Tokens float64
}

// Device is one GPU over a period.
type Device struct {
	GPU, Board string
	Basis      Basis
	Seconds    float64
	// EnergyJ is the GPU's IT energy over the period; IdleWatts its idle power (the power model's
	// idle fraction of TDP, or the measured floor).
	EnergyJ, IdleWatts float64
	Slices             []Slice
	// Split, when known, says how the device's active energy was split among its slices
	// ("mig-activity-x-size", "mig-size", ...: the agent's split); the report counts the devices
	// of each split in its attribution.
	Split string
}

// Figures are the additive quantities of one line of the bill (a tenant, the idle line, the
// total). Money is in the policy's currency, energy in joules of IT energy, carbon in gCO2e.
type Figures struct {
	ReservedGPUSeconds float64 `json:"reservedGpuSeconds"`
	ActiveGPUSeconds   float64 `json:"activeGpuSeconds"`
	ActiveJ            float64 `json:"activeJoules"`
	IdleJ              float64 `json:"idleJoules"`
	Chargeback         float64 `json:"chargeback"` // hardware cost, allocation basis
	Showback           float64 `json:"showback"`   // hardware cost, usage basis
	OutputTokens       float64 `json:"outputTokens"`
	Tokens             float64 `json:"tokens"`
}

func (f *Figures) add(g Figures) {
	f.ReservedGPUSeconds += g.ReservedGPUSeconds
	f.ActiveGPUSeconds += g.ActiveGPUSeconds
	f.ActiveJ += g.ActiveJ
	f.IdleJ += g.IdleJ
	f.Chargeback += g.Chargeback
	f.Showback += g.Showback
	f.OutputTokens += g.OutputTokens
	f.Tokens += g.Tokens
}

// scaled returns the money and energy of f times k (GPU-seconds and tokens are not spread).
func (f Figures) scaled(k float64) Figures {
	return Figures{IdleJ: f.IdleJ * k, ActiveJ: f.ActiveJ * k, Chargeback: f.Chargeback * k, Showback: f.Showback * k}
}

// split is the per-tenant result of one device and the device's idle line.
type split struct {
	tenants map[string]*Figures
	idle    Figures
}

// attributeDevice applies the rule to one GPU. hourly is its price per hour (0 when unpriced).
func attributeDevice(d Device, hourly float64, out *split) error {
	if !(d.Seconds > 0) || !(d.EnergyJ >= 0) || !(d.IdleWatts >= 0) {
		return fmt.Errorf("attribute gpu %s: period %g s, energy %g J and idle power %g W must be positive", d.GPU, d.Seconds, d.EnergyJ, d.IdleWatts)
	}
	idleJ := min(d.IdleWatts*d.Seconds, d.EnergyJ)
	activeJ := d.EnergyJ - idleJ
	hw := hourly * d.Seconds / 3600
	var sumRes, sumAct float64
	for i, s := range d.Slices {
		if !(s.Reserved >= 0) || !(s.Active >= 0) || !(s.OutputTokens >= 0) || !(s.Tokens >= 0) {
			return fmt.Errorf("attribute gpu %s: slice %d (%s) has a negative or undefined figure", d.GPU, i, s.Tenant)
		}
		sumRes += s.Reserved
		sumAct += s.Active
	}
	// Reservations above the whole GPU (oversubscribed MPS) and activity above the period are
	// scaled down: one GPU is never billed more than once.
	resScale, actScale := 1.0, 1.0/d.Seconds
	if sumRes > 1 {
		resScale = 1 / sumRes
	}
	if sumAct > d.Seconds {
		actScale = 1 / sumAct
	}
	var usedRes, usedAct float64
	for _, s := range d.Slices {
		f := out.tenant(s.Tenant)
		r, a := s.Reserved*resScale, s.Active*actScale
		usedRes += r
		usedAct += a
		f.ReservedGPUSeconds += r * d.Seconds
		f.ActiveGPUSeconds += a * d.Seconds
		f.Chargeback += hw * r
		f.Showback += hw * a
		f.OutputTokens += s.OutputTokens
		f.Tokens += s.Tokens
		if sumAct > 0 {
			f.ActiveJ += activeJ * s.Active / sumAct
		}
	}
	out.idle.IdleJ += idleJ
	out.idle.ReservedGPUSeconds += max(0, 1-usedRes) * d.Seconds // unallocated capacity
	out.idle.ActiveGPUSeconds += max(0, 1-usedAct) * d.Seconds   // unused time
	out.idle.Chargeback += hw * max(0, 1-usedRes)
	out.idle.Showback += hw * max(0, 1-usedAct)
	if sumAct == 0 {
		// Energy above idle with no recorded activity (or no tenant): nobody's work, the idle line's.
		out.idle.ActiveJ += activeJ
	}
	return nil
}

func (s *split) tenant(name string) *Figures {
	f, ok := s.tenants[name]
	if !ok {
		f = &Figures{}
		s.tenants[name] = f
	}
	return f
}

// spread moves the idle line's money and energy onto tenants in proportion to weight (reserved
// GPU-seconds or active energy), when the weights are not all zero. It returns each tenant's
// share of the idle line.
func spread(s *split, names []string, weight func(*Figures) float64) map[string]Figures {
	total := 0.0
	for _, n := range names {
		total += weight(s.tenants[n])
	}
	shares := map[string]Figures{}
	if !(total > 0) {
		return shares
	}
	idle := s.idle
	for _, n := range names {
		sh := idle.scaled(weight(s.tenants[n]) / total)
		shares[n] = sh
		s.tenants[n].add(sh)
	}
	s.idle = Figures{ReservedGPUSeconds: idle.ReservedGPUSeconds, ActiveGPUSeconds: idle.ActiveGPUSeconds}
	return shares
}

func sortedNames(m map[string]*Figures) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
