package v1

// CostPolicy holds the prices and factors a bill is computed from (docs/cost.md). Every price
// and factor names the source the operator took it from; gpupool never fills in a price the
// operator did not give: a bill without one says which figures it could not compute.
type CostPolicy struct {
	// Currency is the ISO 4217 code every price is in, three upper-case letters. Required when
	// any price is given.
	Currency string `json:"currency,omitzero"`
	// Boards prices each board: an hourly price, or capital cost amortised over years.
	Boards []BoardCost `json:"boards,omitzero"`
	// EnergyPrice is the price of one kWh drawn from the grid (facility energy, after PUE).
	EnergyPrice *SourcedValue `json:"energyPricePerKWh,omitzero"`
	// PUE is the facility's power usage effectiveness, 1–3: facility energy = IT energy × PUE.
	PUE *SourcedValue `json:"pue,omitzero"`
	// CarbonIntensity is the grid's emission factor in gCO2e per kWh.
	CarbonIntensity *CarbonIntensity `json:"carbonIntensity,omitzero"`
	// IdlePolicy says who pays for idle energy and unallocated capacity: none (they stay on the
	// pool's idle line), reservation (spread by reserved GPU-hours) or use (spread by active
	// energy). Default none.
	IdlePolicy IdlePolicy `json:"idlePolicy,omitzero"`
}

// BoardCost is one board's price. Exactly one of HourlyPrice and Capex is set.
type BoardCost struct {
	// Board is a board name the catalog knows.
	Board string `json:"board"`
	// HourlyPrice is what one GPU of the board costs per hour (a cloud or internal rate).
	HourlyPrice *float64 `json:"hourlyPrice,omitzero"`
	// Capex is the purchase price of one GPU (its share of the server), amortised over
	// AmortizationYears (8,760 h a year).
	Capex             *float64 `json:"capex,omitzero"`
	AmortizationYears *float64 `json:"amortizationYears,omitzero"`
	// MaintenancePercent is the yearly maintenance, support and hosting cost as a percentage of
	// Capex, 0–100. Only with Capex.
	MaintenancePercent *float64 `json:"maintenancePercent,omitzero"`
	// Source names where the price comes from (a quote, a price list and its date).
	Source string `json:"source"`
}

// SourcedValue is a number and where it comes from.
type SourcedValue struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
}

// CarbonIntensity is the grid's emission factor, gCO2e/kWh, location-based (the grid average
// where the pool runs) and, where the operator has contracts (PPAs, certificates),
// market-based, as the GHG Protocol's Scope 2 guidance asks for both.
type CarbonIntensity struct {
	LocationBased *SourcedValue `json:"locationBased,omitzero"`
	MarketBased   *SourcedValue `json:"marketBased,omitzero"`
}

// IdlePolicy says how idle energy and unallocated capacity are spread over tenants.
type IdlePolicy string

// Idle policies.
const (
	IdleNone        IdlePolicy = "none"
	IdleReservation IdlePolicy = "reservation"
	IdleUse         IdlePolicy = "use"
)

var idlePolicies = []IdlePolicy{IdleNone, IdleReservation, IdleUse}

// Ranges of the cost policy's values.
const (
	MaxHourlyPrice       = 1000.0   // per GPU-hour
	MaxCapex             = 10000000 // per GPU
	MaxAmortizationYears = 20.0
	MaxEnergyPrice       = 10.0 // per kWh
	MaxPUE               = 3.0
	MaxCarbonIntensity   = 2000.0 // gCO2e/kWh; coal-fired grids are about 1,000
	maxSourceLen         = 300
)
