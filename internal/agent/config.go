package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
)

// Config is the agent's configuration file. Until the control plane sends desired layouts, they
// come from here.
type Config struct {
	// Node names the node in logs and metrics.
	Node string `json:"node"`
	// StateDir holds the gate journal, the cordon file, the MIG mode record (migmode.json),
	// the MPS daemons' folders and the lock one agent process holds (LockStateDir).
	StateDir string `json:"stateDir"`
	// Listen is the address of /metrics and /healthz; default ":9400".
	Listen string `json:"listen,omitzero"`
	// PollInterval is how often NVML and the engines are read; default "1s".
	PollInterval string `json:"pollInterval,omitzero"`
	Policy       struct {
		// ReconfigCooldown is the least time between two changes of one GPU; default "1h".
		ReconfigCooldown string `json:"reconfigCooldown,omitzero"`
		// MaxChanges is how many changes may start per Window; 0 means no limit.
		MaxChanges int `json:"maxChanges,omitzero"`
		// Window is MaxChanges's period; default "1h".
		Window string `json:"window,omitzero"`
		// Uncordon bounds and spreads the retries of a failed uncordon (docs/adr/0073).
		Uncordon struct {
			// Attempts is how many uncordons are tried in all before the change fails and the
			// node stays cordoned until --reset; 1 to 100, default (0 or absent) 8.
			Attempts int `json:"attempts,omitzero"`
			// MaxDelay caps the wait between attempts, which starts at 1s and doubles; 1s to 1h,
			// default "30s".
			MaxDelay string `json:"maxDelay,omitzero"`
			// Jitter, 0 to 1, is the random share of each wait (a wait of D is D·(1 − jitter·u),
			// u uniform in [0, 1)), so that nodes whose uncordons fail together do not retry in
			// lockstep; default 0.5; 0 keeps the fixed schedule.
			Jitter *float64 `json:"jitter,omitzero"`
		} `json:"uncordon,omitzero"`
	} `json:"policy,omitzero"`
	Smoke struct {
		// Command runs once per new MIG instance (GPUPOOL_GPU, GPUPOOL_INSTANCE in its environment).
		Command []string `json:"command,omitzero"`
		// Timeout bounds one run; default "2m".
		Timeout string `json:"timeout,omitzero"`
	} `json:"smoke,omitzero"`
	// Plan, when set, is a gpupool Plan file (relative paths from the config's folder): the GPUs
	// it lists for Node get their layouts and MPS limits from it (ApplyPlan), unless listed below.
	Plan string `json:"plan,omitzero"`
	// MPSDaemons says who runs the node's MPS control daemons: "agent" (the default) runs one per
	// GPU with an mps block, or per mps GPU of the Plan; "cluster" leaves them to Kubernetes'
	// NVIDIA device plugin (whole GPUs) or DRA driver (per claim), which hand each pod the pipe
	// directory of the device it allocated: the agent then runs none, so two daemons never
	// fight over one GPU, and an mps block is refused.
	MPSDaemons string `json:"mpsDaemons,omitzero"`
	// AllowClocks lets the agent lock clocks and set power limits (per GPU below).
	AllowClocks bool `json:"allowClocks,omitzero"`
	// Cost is the pool's policy.cost (the same block, copied): with it the agent exports each
	// tenant's cost and carbon by docs/cost.md's rule; without it, energy only.
	Cost    *v1.CostPolicy `json:"cost,omitzero"`
	GPUs    []GPUConfig    `json:"gpus"`
	Engines []Engine       `json:"engines,omitzero"`
}

// GPUConfig is the desired state of one GPU.
type GPUConfig struct {
	Index int `json:"index"`
	// Layout is the MIG layout, "3g.40gb@0 3g.40gb@4"; empty keeps the GPU as it is.
	Layout string `json:"layout,omitzero"`
	// MPS, when set, runs an MPS control daemon for the whole GPU with these limits.
	MPS *MPSConfig `json:"mps,omitzero"`
	// Clocks lock the graphics clock (energy class), applied only with AllowClocks.
	Clocks *struct {
		MinMHz uint32 `json:"minMHz"`
		MaxMHz uint32 `json:"maxMHz"`
	} `json:"clocks,omitzero"`
	// PowerLimitWatts sets the power-management limit (energy class), only with AllowClocks.
	PowerLimitWatts float64 `json:"powerLimitWatts,omitzero"`
}

// Who runs the node's MPS control daemons (Config.MPSDaemons).
const (
	MPSDaemonsAgent   = "agent"
	MPSDaemonsCluster = "cluster"
)

// MPSConfig are an MPS daemon's default client limits.
type MPSConfig struct {
	ActiveThreadPercent int    `json:"activeThreadPercent,omitzero"`
	PinnedMemory        string `json:"pinnedMemory,omitzero"`
}

// Engine is one vLLM replica whose /metrics the agent reads.
type Engine struct {
	Tenant string `json:"tenant"`
	GPU    int    `json:"gpu"`
	// Slice is the MIG instance ("3g.40gb@4"), or "mps", "timeslice" or "whole".
	Slice string `json:"slice"`
	URL   string `json:"url"`
	// PID is the engine's process, to match NVML's per-process memory and utilisation; 0 if unknown.
	PID uint32 `json:"pid,omitzero"`
	// MemoryPlanned is the plan's memory budget for the replica, in bytes.
	MemoryPlanned int64 `json:"memoryPlanned,omitzero"`
	// SMShare is the plan's SM share of the replica, 0–1.
	SMShare float64 `json:"smShare,omitzero"`
}

// Settings are the parsed durations of a Config.
type Settings struct {
	Poll, Cooldown, Window, SmokeTimeout time.Duration
	Layouts                              map[int]gpu.Layout
	// Uncordon is policy.uncordon with its defaults filled in.
	Uncordon gate.UncordonPolicy
}

// Defaults of policy.uncordon (ADR 0073 and its amendment).
const (
	DefaultUncordonAttempts = gate.MaxUncordonAttempts
	DefaultUncordonMaxDelay = gate.UncordonBackoffMax
	DefaultUncordonJitter   = 0.5
	maxUncordonAttempts     = 100
	maxUncordonMaxDelay     = time.Hour
)

// ParseConfig decodes strictly (DecodeConfig) and validates, returning every problem at once with
// its field path.
func ParseConfig(data []byte) (Config, Settings, error) {
	c, err := DecodeConfig(data)
	if err != nil {
		return c, Settings{}, err
	}
	s, err := c.Validate()
	return c, s, err
}

// DecodeConfig decodes a config file strictly: unknown fields and repeated keys are errors, and
// so is a field name written in other letter case ("maxchanges" for "maxChanges"), which the
// JSON decoder would otherwise take as the field, the last of the two silently winning.
func DecodeConfig(data []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return c, fmt.Errorf("parse agent config: %w", err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return c, fmt.Errorf("parse agent config: %w", err)
	}
	var tree any
	if err := json.Unmarshal(j, &tree); err != nil {
		return c, fmt.Errorf("parse agent config: %w", err)
	}
	var errs []error
	exactFieldNames(reflect.TypeFor[Config](), tree, "", &errs)
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("parse agent config: %w", err)
	}
	return c, nil
}

// exactFieldNames reports every key of v that names a field of t only when letter case is
// ignored. Keys are visited in sorted order, so the errors come out the same on every read.
func exactFieldNames(t reflect.Type, v any, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				fields[name] = t.Field(i).Type
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if ft, ok := fields[k]; ok {
				exactFieldNames(ft, m[k], p, errs)
				continue
			}
			for name := range fields {
				if strings.EqualFold(name, k) {
					*errs = append(*errs, fmt.Errorf("%s: unknown field (field names are case-sensitive: %q)", p, name))
				}
			}
		}
	case reflect.Slice, reflect.Array:
		items, ok := v.([]any)
		if !ok {
			return
		}
		for i, item := range items {
			exactFieldNames(t.Elem(), item, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			exactFieldNames(t.Elem(), m[k], path+"."+k, errs)
		}
	}
}

// Validate checks the configuration and parses its durations and layouts.
func (c *Config) Validate() (Settings, error) {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	dur := func(path, v, def string) time.Duration {
		if v == "" {
			v = def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			bad(path, "%q is not a duration like 90s or 1h", v)
		}
		return d
	}
	s := Settings{Layouts: map[int]gpu.Layout{}}
	if c.StateDir == "" {
		bad("stateDir", "required")
	}
	if c.Plan != "" && c.Node == "" {
		bad("node", "required with plan (the plan's GPUs are found by node name)")
	}
	if c.Listen == "" {
		c.Listen = ":9400"
	}
	s.Poll = dur("pollInterval", c.PollInterval, "1s")
	if s.Poll > 0 && s.Poll < 100*time.Millisecond {
		bad("pollInterval", "%s is below 100ms", s.Poll)
	}
	s.Cooldown = dur("policy.reconfigCooldown", c.Policy.ReconfigCooldown, "1h")
	s.Window = dur("policy.window", c.Policy.Window, "1h")
	s.SmokeTimeout = dur("smoke.timeout", c.Smoke.Timeout, "2m")
	if c.Policy.MaxChanges < 0 {
		bad("policy.maxChanges", "%d is negative", c.Policy.MaxChanges)
	}
	u := c.Policy.Uncordon
	s.Uncordon = gate.UncordonPolicy{Attempts: u.Attempts, Jitter: DefaultUncordonJitter}
	if u.Attempts == 0 {
		s.Uncordon.Attempts = DefaultUncordonAttempts
	}
	if u.Attempts < 0 || u.Attempts > maxUncordonAttempts {
		bad("policy.uncordon.attempts", "%d outside 1..%d", u.Attempts, maxUncordonAttempts)
	}
	s.Uncordon.MaxDelay = dur("policy.uncordon.maxDelay", u.MaxDelay, DefaultUncordonMaxDelay.String())
	if u.MaxDelay != "" && s.Uncordon.MaxDelay >= 0 && (s.Uncordon.MaxDelay < gate.UncordonBackoff || s.Uncordon.MaxDelay > maxUncordonMaxDelay) {
		bad("policy.uncordon.maxDelay", "%s outside %s..%s (the first wait is %s)", s.Uncordon.MaxDelay,
			gate.UncordonBackoff, maxUncordonMaxDelay, gate.UncordonBackoff)
	}
	if u.Jitter != nil {
		s.Uncordon.Jitter = *u.Jitter
		if !(*u.Jitter >= 0 && *u.Jitter <= 1) {
			bad("policy.uncordon.jitter", "%v outside 0..1", *u.Jitter)
		}
	}
	switch c.MPSDaemons {
	case "", MPSDaemonsAgent, MPSDaemonsCluster:
	default:
		bad("mpsDaemons", "%q is not %s or %s", c.MPSDaemons, MPSDaemonsAgent, MPSDaemonsCluster)
	}
	seen := map[int]bool{}
	for i, g := range c.GPUs {
		p := fmt.Sprintf("gpus[%d]", i)
		if g.Index < 0 || g.Index > 63 {
			bad(p+".index", "%d outside 0..63", g.Index)
		}
		if seen[g.Index] {
			bad(p+".index", "GPU %d listed twice", g.Index)
		}
		seen[g.Index] = true
		if g.Layout != "" {
			l, err := gpu.ParseLayout(g.Layout)
			if err != nil {
				bad(p+".layout", "%v", err)
			}
			s.Layouts[g.Index] = l
		}
		if g.MPS != nil && c.MPSDaemons == MPSDaemonsCluster {
			bad(p+".mps", "the cluster runs the MPS daemons (mpsDaemons: %s): set the limits in the device plugin's or DRA driver's config", MPSDaemonsCluster)
		}
		if g.MPS != nil && (g.MPS.ActiveThreadPercent < 0 || g.MPS.ActiveThreadPercent > 100) {
			bad(p+".mps.activeThreadPercent", "%d outside 0..100", g.MPS.ActiveThreadPercent)
		}
		if g.PowerLimitWatts < 0 || g.PowerLimitWatts > 2000 {
			bad(p+".powerLimitWatts", "%v outside 0..2000", g.PowerLimitWatts)
		}
		if g.Clocks != nil && (g.Clocks.MinMHz == 0 || g.Clocks.MinMHz > g.Clocks.MaxMHz) {
			bad(p+".clocks", "want 0 < minMHz (%d) <= maxMHz (%d)", g.Clocks.MinMHz, g.Clocks.MaxMHz)
		}
	}
	for i, e := range c.Engines {
		p := fmt.Sprintf("engines[%d]", i)
		if e.Tenant == "" {
			bad(p+".tenant", "required")
		}
		if e.URL == "" {
			bad(p+".url", "required")
		}
		if e.SMShare < 0 || e.SMShare > 1 {
			bad(p+".smShare", "%v outside 0..1", e.SMShare)
		}
		if e.Slice == "" {
			bad(p+".slice", "required (a MIG instance like 3g.40gb@4, or mps, timeslice, whole)")
		}
	}
	if c.Cost != nil {
		if err := (v1.Validator{}).Cost(c.Cost, "cost"); err != nil {
			errs = append(errs, err)
		}
	}
	return s, errors.Join(errs...)
}
