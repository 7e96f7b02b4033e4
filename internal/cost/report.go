package cost

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// HoursPerMonth is a twelfth of 8,760 h, the month of the monthly table.
const HoursPerMonth = 730.0

// Prices are the operator's prices and factors, from the Pool's policy.cost. A nil pointer is a
// price the operator did not give: the figures that need it are not computed.
type Prices struct {
	Currency string
	// Hourly is each board's price per GPU-hour, by canonical board name; HourlySource where
	// each comes from.
	Hourly         map[string]float64
	HourlySource   map[string]string
	EnergyPerKWh   *float64
	PUE            *float64
	CarbonLocation *float64 // gCO2e/kWh
	CarbonMarket   *float64
	IdlePolicy     v1.IdlePolicy
}

// PricesFrom reads policy.cost (validated) into Prices; nil gives no prices at all.
func PricesFrom(c *v1.CostPolicy) Prices {
	p := Prices{Hourly: map[string]float64{}, HourlySource: map[string]string{}, IdlePolicy: v1.IdleNone}
	if c == nil {
		return p
	}
	p.Currency = c.Currency
	for _, b := range c.Boards {
		name := b.Board
		if bd, err := gpu.Lookup(name); err == nil {
			name = bd.Name
		}
		p.Hourly[name], p.HourlySource[name] = HourlyPrice(b), b.Source
	}
	val := func(s *v1.SourcedValue) *float64 {
		if s == nil {
			return nil
		}
		v := s.Value
		return &v
	}
	p.EnergyPerKWh, p.PUE = val(c.EnergyPrice), val(c.PUE)
	if ci := c.CarbonIntensity; ci != nil {
		p.CarbonLocation, p.CarbonMarket = val(ci.LocationBased), val(ci.MarketBased)
	}
	if c.IdlePolicy != "" {
		p.IdlePolicy = c.IdlePolicy
	}
	return p
}

// HourlyPrice is a board's price per GPU-hour: the hourly price, or capex × (1/years +
// maintenance%/100) / 8,760.
func HourlyPrice(b v1.BoardCost) float64 {
	if b.HourlyPrice != nil {
		return *b.HourlyPrice
	}
	if b.Capex == nil || b.AmortizationYears == nil || *b.AmortizationYears <= 0 {
		return 0
	}
	m := 0.0
	if b.MaintenancePercent != nil {
		m = *b.MaintenancePercent / 100
	}
	return *b.Capex * (1 / *b.AmortizationYears + m) / 8760
}

// Line is one line of the bill: additive Figures plus what follows from them. Pointers are nil
// where a price or factor is missing.
type Line struct {
	Name  string `json:"name"`
	Basis Basis  `json:"basis"`
	Figures
	// IdleShare is the part of the line that came from the idle line by the idle policy.
	IdleShare Figures `json:"idleShare"`

	ReservedGPUs      float64  `json:"reservedGpus"` // reserved GPU-seconds / period: the reserved GPU fraction
	ITEnergyKWh       float64  `json:"itEnergyKWh"`
	FacilityKWh       *float64 `json:"facilityEnergyKWh,omitempty"`
	JPerOutputToken   float64  `json:"joulesPerOutputToken,omitempty"`
	JPerToken         float64  `json:"joulesPerToken,omitempty"`
	ChargebackPerHour *float64 `json:"chargebackPerHour,omitempty"` // hardware (allocation) + energy
	ShowbackPerHour   *float64 `json:"showbackPerHour,omitempty"`   // hardware (usage) + energy
	IdleCostPerHour   *float64 `json:"idleCostPerHour,omitempty"`   // hardware, allocation basis, from the idle spread
	EnergyCostPerHour *float64 `json:"energyCostPerHour,omitempty"`
	CostPer1MOutput   *float64 `json:"costPer1MOutputTokens,omitempty"` // chargeback basis
	GCO2eLocation     *float64 `json:"gCO2eLocationBased,omitempty"`
	GCO2eMarket       *float64 `json:"gCO2eMarketBased,omitempty"`
	GCO2ePer1MLoc     *float64 `json:"gCO2ePer1MTokensLocationBased,omitempty"`
	GCO2ePer1MMarket  *float64 `json:"gCO2ePer1MTokensMarketBased,omitempty"`
}

// Report is the bill for one period.
type Report struct {
	Basis      Basis         `json:"basis"`
	Seconds    float64       `json:"periodSeconds"`
	Currency   string        `json:"currency,omitempty"`
	IdlePolicy v1.IdlePolicy `json:"idlePolicy"`
	Tenants    []Line        `json:"tenants"`
	// Idle is idle energy, unallocated capacity and unused time left after the idle policy; its
	// GPU-seconds are the unallocated (reserved) and unused (active) GPU-seconds, which stay on
	// the line whatever the policy. IdleBeforePolicy is the line before the policy spread it.
	Idle             Line `json:"idle"`
	IdleBeforePolicy Line `json:"idleBeforePolicy"`
	// Total is the devices' own totals (not the sum of the lines: a test checks they agree).
	Total Line `json:"total"`
	// Attribution says how each figure was obtained.
	Attribution map[string]string `json:"attribution"`
	Notes       []string          `json:"notes,omitempty"`
}

// Compute applies the rule to devices, all over the same period, with prices p.
func Compute(devs []Device, p Prices) (*Report, error) {
	if len(devs) == 0 {
		return nil, errors.New("compute cost: no devices")
	}
	r := &Report{Basis: devs[0].Basis, Seconds: devs[0].Seconds, Currency: p.Currency, IdlePolicy: p.IdlePolicy}
	s := &split{tenants: map[string]*Figures{}}
	var total Figures
	unpriced := map[string]bool{}
	var errs []error
	for _, d := range devs {
		if d.Basis != r.Basis || d.Seconds != r.Seconds {
			errs = append(errs, fmt.Errorf("compute cost: gpu %s is %s over %g s, the others %s over %g s", d.GPU, d.Basis, d.Seconds, r.Basis, r.Seconds))
			continue
		}
		h, ok := p.Hourly[d.Board]
		if !ok {
			unpriced[d.Board] = true
		}
		if err := attributeDevice(d, h, s); err != nil {
			errs = append(errs, err)
			continue
		}
		hw := h * d.Seconds / 3600
		total.add(Figures{IdleJ: min(d.IdleWatts*d.Seconds, d.EnergyJ), ActiveJ: d.EnergyJ - min(d.IdleWatts*d.Seconds, d.EnergyJ),
			Chargeback: hw, Showback: hw, ReservedGPUSeconds: d.Seconds, ActiveGPUSeconds: d.Seconds})
		for _, sl := range d.Slices {
			total.OutputTokens += sl.OutputTokens
			total.Tokens += sl.Tokens
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	names := sortedNames(s.tenants)
	priced := len(unpriced) == 0
	r.IdleBeforePolicy = r.line("(idle before policy)", s.idle, Figures{}, p, priced)
	var shares map[string]Figures
	switch p.IdlePolicy {
	case v1.IdleReservation:
		shares = spread(s, names, func(f *Figures) float64 { return f.ReservedGPUSeconds })
	case v1.IdleUse:
		shares = spread(s, names, func(f *Figures) float64 { return f.ActiveJ })
	}
	for _, n := range names {
		r.Tenants = append(r.Tenants, r.line(n, *s.tenants[n], shares[n], p, priced))
	}
	r.Idle = r.line("(idle)", s.idle, Figures{}, p, priced)
	r.Total = r.line("(total)", total, Figures{}, p, priced)
	r.Attribution = attribution(r.Basis, p.IdlePolicy)
	if s := splits(devs); s != "" {
		r.Attribution["activeSplit"] = s
	}
	r.Notes = notes(p, unpriced)
	return r, nil
}

func (r *Report) line(name string, f, idle Figures, p Prices, priced bool) Line {
	l := Line{Name: name, Basis: r.Basis, Figures: f, IdleShare: idle}
	h := r.Seconds / 3600
	l.ReservedGPUs = f.ReservedGPUSeconds / r.Seconds
	it := f.ActiveJ + f.IdleJ
	l.ITEnergyKWh = it / 3.6e6
	meter := l.ITEnergyKWh // energy priced and emitting: facility energy when PUE is known
	if p.PUE != nil {
		meter *= *p.PUE
		l.FacilityKWh = ptr(meter)
	}
	if f.OutputTokens > 0 {
		l.JPerOutputToken = it / f.OutputTokens
	}
	if f.Tokens > 0 {
		l.JPerToken = it / f.Tokens
	}
	var energyCost float64
	if p.EnergyPerKWh != nil {
		energyCost = meter * *p.EnergyPerKWh
		l.EnergyCostPerHour = ptr(energyCost / h)
	}
	if priced && p.EnergyPerKWh != nil {
		l.ChargebackPerHour = ptr((f.Chargeback + energyCost) / h)
		l.ShowbackPerHour = ptr((f.Showback + energyCost) / h)
		l.IdleCostPerHour = ptr(idle.Chargeback / h)
		if f.OutputTokens > 0 {
			l.CostPer1MOutput = ptr((f.Chargeback + energyCost) / f.OutputTokens * 1e6)
		}
	}
	carbon := func(ci *float64) (*float64, *float64) {
		if ci == nil {
			return nil, nil
		}
		g := meter * *ci
		if f.Tokens > 0 {
			return ptr(g), ptr(g / f.Tokens * 1e6)
		}
		return ptr(g), nil
	}
	l.GCO2eLocation, l.GCO2ePer1MLoc = carbon(p.CarbonLocation)
	l.GCO2eMarket, l.GCO2ePer1MMarket = carbon(p.CarbonMarket)
	return l
}

func attribution(b Basis, idle v1.IdlePolicy) map[string]string {
	src := map[Basis]string{
		Measured:  "each GPU's energy counter over the period",
		Simulated: "the simulator's steps through the power model, plus idle power over the period",
		Planned:   "idle power plus each replica's power at its planned load (the tenant's offered rate over its replicas) through the fitted step power model; a replica the model cannot evaluate: TDP above idle while busy (offered rate / the rate its replicas sustain)",
	}[b]
	spreadBy := map[v1.IdlePolicy]string{
		v1.IdleNone:        "kept on the idle line",
		v1.IdleReservation: "spread over tenants by reserved GPU-seconds, pool-wide",
		v1.IdleUse:         "spread over tenants by active energy, pool-wide",
	}[idle]
	return map[string]string{
		"energy":     string(b) + ": " + src,
		"activeJ":    "a GPU's energy above its idle power, split by activity: MIG instance busy fraction × instance size, MPS and time-slicing SM utilisation",
		"idleJ":      "idle power over the period; " + spreadBy,
		"chargeback": "GPU price × period × reserved fraction (MIG compute slices / board, MPS SM %, 1/k time-slices), plus energy cost; unallocated capacity " + spreadBy,
		"showback":   "GPU price × active GPU-seconds, plus energy cost; unused time " + spreadBy,
		"carbon":     "facility energy (IT × PUE) × grid intensity, location- and market-based",
	}
}

// splits counts the devices by the split their active energy was attributed by, where known:
// "mig-activity-x-size on 3 GPU(s), mig-size on 1 GPU(s)".
func splits(devs []Device) string {
	n := map[string]int{}
	for _, d := range devs {
		if d.Split != "" {
			n[d.Split]++
		}
	}
	names := make([]string, 0, len(n))
	for k := range n {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s on %d GPU(s)", k, n[k])
	}
	return strings.Join(parts, ", ")
}

func notes(p Prices, unpriced map[string]bool) []string {
	var out []string
	if len(unpriced) > 0 {
		bs := make([]string, 0, len(unpriced))
		for b := range unpriced {
			bs = append(bs, b)
		}
		sort.Strings(bs)
		out = append(out, "no price for board(s) "+strings.Join(bs, ", ")+" in policy.cost.boards: no cost figures")
	}
	if p.EnergyPerKWh == nil {
		out = append(out, "no policy.cost.energyPricePerKWh: no cost figures (energy figures only)")
	}
	if p.PUE == nil {
		out = append(out, "no policy.cost.pue: energy cost and carbon are on IT energy alone, below the facility's")
	}
	if p.CarbonLocation == nil {
		out = append(out, "no policy.cost.carbonIntensity: no carbon figures")
	} else if p.CarbonMarket == nil {
		out = append(out, "no market-based carbon intensity: location-based only")
	}
	return out
}

func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
