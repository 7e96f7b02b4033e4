package v1

import (
	"regexp"
	"strings"
)

var currencyRe = regexp.MustCompile(`^[A-Z]{3}$`)

// Cost checks a cost policy given outside a Pool (the node agent's config carries the pool's
// policy.cost), reporting every problem at once with its field path under base.
func (v Validator) Cost(cp *CostPolicy, base string) error {
	c := &poolChecker{cat: v.catalog()}
	c.boards = newBoards(c.cat)
	c.checkCostAt(cp, base)
	return c.errs.result()
}

// checkCost validates policy.cost; every problem is reported with its field path.
func (c *poolChecker) checkCost() {
	c.checkCostAt(c.p.Policy.Cost, "policy.cost")
}

func (c *poolChecker) checkCostAt(cp *CostPolicy, base string) {
	if cp == nil {
		return
	}
	priced := len(cp.Boards) > 0 || cp.EnergyPrice != nil
	switch {
	case cp.Currency == "" && priced:
		c.errs.add(field(base, "currency"), "required when a price is given (an ISO 4217 code such as USD)")
	case cp.Currency != "" && !currencyRe.MatchString(cp.Currency):
		c.errs.add(field(base, "currency"), "must be an ISO 4217 code, three upper-case letters (got %q)", cp.Currency)
	}
	seen := dupTracker{}
	for i, b := range cp.Boards {
		c.checkBoardCost(index(field(base, "boards"), i), b, seen)
	}
	checkSourced(&c.errs, field(base, "energyPricePerKWh"), cp.EnergyPrice, 0, MaxEnergyPrice)
	checkSourced(&c.errs, field(base, "pue"), cp.PUE, 1, MaxPUE)
	if ci := cp.CarbonIntensity; ci != nil {
		p := field(base, "carbonIntensity")
		if ci.LocationBased == nil {
			c.errs.add(field(p, "locationBased"), "required (the grid average where the pool runs)")
		}
		checkSourced(&c.errs, field(p, "locationBased"), ci.LocationBased, 0, MaxCarbonIntensity)
		checkSourced(&c.errs, field(p, "marketBased"), ci.MarketBased, 0, MaxCarbonIntensity)
	}
	if cp.IdlePolicy != "" {
		checkEnum(&c.errs, field(base, "idlePolicy"), cp.IdlePolicy, idlePolicies)
	}
}

func (c *poolChecker) checkBoardCost(p string, b BoardCost, seen dupTracker) {
	if bd := c.boards.check(&c.errs, field(p, "board"), b.Board); bd != nil {
		seen.check(&c.errs, field(p, "board"), "board", bd.Name)
	}
	switch {
	case b.HourlyPrice == nil && b.Capex == nil:
		c.errs.add(p, "needs hourlyPrice or capex")
	case b.HourlyPrice != nil && b.Capex != nil:
		c.errs.add(p, "hourlyPrice and capex are exclusive")
	}
	checkRange(&c.errs, field(p, "hourlyPrice"), b.HourlyPrice, 0, MaxHourlyPrice)
	checkRange(&c.errs, field(p, "capex"), b.Capex, 0, MaxCapex)
	if b.Capex != nil && b.AmortizationYears == nil {
		c.errs.add(field(p, "amortizationYears"), "required with capex")
	}
	if y := b.AmortizationYears; y != nil && !(*y > 0 && *y <= MaxAmortizationYears) {
		c.errs.add(field(p, "amortizationYears"), "must be above 0 and at most %g (got %g)", MaxAmortizationYears, *y)
	}
	checkRange(&c.errs, field(p, "maintenancePercent"), b.MaintenancePercent, 0, 100)
	if b.Capex == nil {
		if b.AmortizationYears != nil {
			c.errs.add(field(p, "amortizationYears"), "only with capex")
		}
		if b.MaintenancePercent != nil {
			c.errs.add(field(p, "maintenancePercent"), "only with capex")
		}
	}
	checkSource(&c.errs, field(p, "source"), b.Source)
}

func checkRange(errs *errList, p string, v *float64, lo, hi float64) {
	if v != nil && !(*v >= lo && *v <= hi) {
		errs.add(p, "must be between %g and %g (got %g)", lo, hi, *v)
	}
}

func checkSourced(errs *errList, p string, v *SourcedValue, lo, hi float64) {
	if v == nil {
		return
	}
	checkRange(errs, field(p, "value"), &v.Value, lo, hi)
	checkSource(errs, field(p, "source"), v.Source)
}

func checkSource(errs *errList, p, s string) {
	switch {
	case strings.TrimSpace(s) == "":
		errs.add(p, "required: name where the figure comes from (a price list, a quote, a grid operator and its date)")
	case len(s) > maxSourceLen:
		errs.add(p, "at most %d characters (got %d)", maxSourceLen, len(s))
	}
}
