package sim

import (
	"errors"
	"fmt"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Input is what a simulation runs: a defaulted, validated Pool, a Plan for it, the architectures
// of tenants whose model is a checkpoint directory (keyed by tenant name; catalog models are
// looked up), and optionally a trace that replaces the generated traffic.
type Input struct {
	Pool   *v1.Pool
	Plan   *v1.Plan
	Models map[string]llm.Model
	Trace  *Trace
	// Profiles holds the measured table of every tenant sized from one (ParvaGPU's CSV, read by
	// the caller), by tenant name. Such a tenant needs no LLM model and may name any model: each
	// request is one batch item, served in one step whose time is the table's batch latency
	// (perf.NewMeasuredEngine), and its replicas batch as ParvaGPU's rule chose (the
	// highest-throughput batch within 0.45 × slo.e2eP99).
	Profiles map[string]*perf.Measured
}

// Lengths is how request token lengths are drawn around the Pool's traffic.inputTokens and
// traffic.outputTokens means: the Pool's traffic.lengths (v1.Lengths).
type Lengths = v1.Lengths

const (
	// LengthsFixed: every request has exactly the mean lengths.
	LengthsFixed = v1.LengthsFixed
	// LengthsUniform: uniform on [mean/2, 3·mean/2], rounded, at least 1.
	LengthsUniform = v1.LengthsUniform
	// LengthsExponential: geometric with the mean (the memoryless discrete law), at least 1,
	// capped so that a request fits the tenant's maxContext.
	LengthsExponential = v1.LengthsExponential
)

// Config holds the knobs of a run. The zero value is usable: Defaults fills it.
type Config struct {
	// Duration is the simulated time arrivals are generated over; requests still in flight at
	// the end are reported as unfinished. Default 10m.
	Duration time.Duration `json:"duration"`
	// Seed seeds every random stream (one per tenant, derived from Seed and the tenant's index).
	Seed uint64 `json:"seed"`
	// Lengths, when set (fixed, uniform or exponential), overrides every tenant's
	// traffic.lengths. Empty (the default): each tenant's own, fixed where the Pool states none.
	Lengths Lengths `json:"lengths,omitzero"`
	// Perf are the performance model's constants. Default perf.DefaultOptions().
	Perf perf.Options `json:"-"`
	// MaxQueue is the most requests waiting at one replica; an arrival beyond it is dropped
	// (load shedding). Default 100000.
	MaxQueue int `json:"maxQueue"`
	// IdlePowerFraction is a GPU's idle power as a fraction of its TDP. Default 0.15.
	IdlePowerFraction float64 `json:"idlePowerFraction"`
	// BurstOn and BurstOff are the mean lengths of the on and off periods of the bursty
	// pattern (exponentially distributed). Default 10s on, 30s off.
	BurstOn  time.Duration `json:"burstOn"`
	BurstOff time.Duration `json:"burstOff"`
	// DiurnalPeriod is the period of the diurnal pattern (default 24h) and DiurnalTrough its
	// lowest rate as a fraction of the peak (default 0.15).
	DiurnalPeriod time.Duration `json:"diurnalPeriod"`
	DiurnalTrough float64       `json:"diurnalTrough"`
	// TimelineBuckets is how many equal intervals the utilisation timeline has. Default 120.
	TimelineBuckets int `json:"timelineBuckets"`
	// Progress, when set, is called every few tens of thousands of events with the simulated
	// time reached and the end time. It must not keep the simulation's state.
	Progress func(now, end time.Duration) `json:"-"`
}

// Defaults returns c with every unset field at its default.
func (c Config) Defaults() Config {
	if c.Duration == 0 {
		c.Duration = 10 * time.Minute
	}
	if c.Perf == (perf.Options{}) {
		c.Perf = perf.DefaultOptions()
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = 100000
	}
	if c.IdlePowerFraction == 0 {
		c.IdlePowerFraction = 0.15
	}
	if c.BurstOn == 0 {
		c.BurstOn = 10 * time.Second
	}
	if c.BurstOff == 0 {
		c.BurstOff = 30 * time.Second
	}
	if c.DiurnalPeriod == 0 {
		c.DiurnalPeriod = 24 * time.Hour
	}
	if c.DiurnalTrough == 0 {
		c.DiurnalTrough = 0.15
	}
	if c.TimelineBuckets == 0 {
		c.TimelineBuckets = 120
	}
	return c
}

// Validate returns every out-of-range field at once.
func (c Config) Validate() error {
	var errs []error
	if c.Duration <= 0 || c.Duration > 366*24*time.Hour {
		errs = append(errs, fmt.Errorf("config duration: %s outside (0, 366d]", c.Duration))
	}
	switch c.Lengths {
	case "", LengthsFixed, LengthsUniform, LengthsExponential:
	default:
		errs = append(errs, fmt.Errorf("config lengths: unknown %q (valid: fixed, uniform, exponential)", c.Lengths))
	}
	if c.MaxQueue < 1 {
		errs = append(errs, fmt.Errorf("config max queue: %d must be ≥ 1", c.MaxQueue))
	}
	if !(c.IdlePowerFraction >= 0 && c.IdlePowerFraction <= 1) {
		errs = append(errs, fmt.Errorf("config idle power fraction: %v outside [0, 1]", c.IdlePowerFraction))
	}
	if c.BurstOn <= 0 || c.BurstOff < 0 || c.DiurnalPeriod <= 0 {
		errs = append(errs, errors.New("config burst on/off and diurnal period: must be positive"))
	}
	if !(c.DiurnalTrough >= 0 && c.DiurnalTrough <= 1) {
		errs = append(errs, fmt.Errorf("config diurnal trough: %v outside [0, 1]", c.DiurnalTrough))
	}
	if c.TimelineBuckets < 1 || c.TimelineBuckets > 100000 {
		errs = append(errs, fmt.Errorf("config timeline buckets: %d outside [1, 100000]", c.TimelineBuckets))
	}
	if err := c.Perf.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
