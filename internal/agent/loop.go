package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/cost"
	"gpupool.dev/gpupool/internal/gate"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/metrics"
)

// GPUInfo is one GPU as the inventory reports it.
type GPUInfo struct {
	Index     int
	UUID      string
	Board     string
	MIG       bool
	Instances gpu.Layout
}

// Proc is one compute process on a GPU.
type Proc struct {
	PID       uint32
	UsedBytes uint64
	SMPercent uint32
}

// Telemetry reads the GPUs (internal/nvml.Lib through an adapter).
type Telemetry interface {
	Inventory() ([]GPUInfo, error)
	EnergyMilliJoules(uuid string) (uint64, error)
	Processes(uuid string) ([]Proc, error)
}

// InstanceActivity is an optional part of Telemetry: each MIG instance's SM activity, 0-1,
// since the previous call for the GPU (NVML's GPM; nvml.Lib.InstanceActivity). An instance
// sampled for the first time has no entry; an error (no GPM on the GPU) leaves the GPU's energy
// split by instance size.
type InstanceActivity interface {
	InstanceActivity(uuid, board string) (map[gpu.Instance]float64, error)
}

// Energy split bases a GPU's active energy is attributed by (metrics.GPU.Split, docs/cost.md).
const (
	SplitMIGActivity = "mig-activity-x-size" // GPM SM activity × instance size
	SplitMIGSize     = "mig-size"            // instance size alone (no GPM, or no activity yet)
	SplitProcessSM   = "process-sm"          // MPS or time-slicing: each process's SM utilisation
	SplitEven        = "even"                // no utilisation reported: evenly
)

// MPS runs and reports MPS daemons (internal/mps.Supervisor through an adapter).
type MPS interface {
	Ensure(ctx context.Context, uuid string, limits MPSConfig) error
	Status() []metrics.MPSDaemon
}

// Clocks applies an energy class's clock lock and power limit.
type Clocks interface {
	LockClocks(uuid string, minMHz, maxMHz uint32) error
	SetPowerLimit(uuid string, milliwatts uint32) error
}

// XIDs reports XID error events; Next returns ok=false when none is queued.
type XIDs interface {
	Next() (gpu string, code uint64, ok bool, err error)
}

// Scraper reads one engine's metrics.
type Scraper interface {
	Scrape(ctx context.Context, url string) (metrics.Engine, error)
}

// Agent is the node's reconcile loop: read the GPUs, drive the gate toward the desired layouts,
// keep MPS daemons up, measure. It implements metrics.Source.
type Agent struct {
	Config   Config
	Settings Settings
	Tel      Telemetry
	Exec     *Executor
	MPS      MPS     // nil: no MPS daemons
	Clocks   Clocks  // nil: clocks never touched
	Scraper  Scraper // nil: no engine metrics
	XIDs     XIDs    // nil: XID events not watched
	Now      func() time.Time
	Log      *slog.Logger

	mu       sync.Mutex
	snap     metrics.Snapshot
	lastErr  error
	lastPoll time.Time
	prev     map[string]float64 // last energy reading per GPU (J) and tokens per engine URL
	tenants  map[string]*metrics.Tenant
	cost     *metrics.Cost // the node's bill since the agent started; nil without Config.Cost
	prices   cost.Prices
	xids     map[[2]string]int // (GPU, code) → events
	lastXID  string            // the newest XID, for /healthz
	applied  map[string]bool   // GPUs whose clocks and power limit are set

	// From the control plane (Link): desired layouts by GPU UUID, the gate's outcome of each
	// GPU's last operation, and the GPUs of the last poll.
	desired   map[string]DesiredGPU
	ready     []string
	epoch     uint64 // of the last desired layout from the control plane
	outcomes  map[string]GateOutcome
	inventory []GPUInfo
	// modeOnFor is, by GPU, the control plane's operation for which this agent turned MIG mode
	// on: when that operation's attempt ends without its layout, the mode is turned off again.
	// It is kept in StateDir (migmode.json), read once (modeLoaded), so that a restart between
	// the rollback and the mode change still turns the mode off. heard says a desired layout
	// came from the control plane since the agent started.
	modeOnFor  map[string]uint64
	modeLoaded bool
	heard      bool
}

// Snapshot returns the latest measurements.
func (a *Agent) Snapshot() metrics.Snapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.snap
}

// Healthy returns nil when the last poll succeeded and no change failed.
func (a *Agent) Healthy() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lastPoll.IsZero() {
		return errors.New("no poll yet")
	}
	if a.lastErr != nil {
		return a.lastErr
	}
	st := a.Exec.State()
	if st.Phase() == gate.PhaseFailed {
		return fmt.Errorf("gate failed: %s", st.CordonReason)
	}
	if st.UncordonFailures > 0 && st.Pending != nil && st.Pending.Kind == gate.ActUncordon {
		return fmt.Errorf("gate: uncordon failed %d of %d attempts, the last with: %s; next attempt at %s",
			st.UncordonFailures, st.Policy.Uncordon.Limit(), st.UncordonError, st.Pending.NotBefore.Format(time.RFC3339))
	}
	if a.lastXID != "" {
		return errors.New(a.lastXID)
	}
	return nil
}

// drainXIDs reads every queued XID event (at most 64 per poll).
func (a *Agent) drainXIDs() error {
	if a.XIDs == nil {
		return nil
	}
	for range 64 {
		g, code, ok, err := a.XIDs.Next()
		if err != nil {
			return fmt.Errorf("read xid events: %w", err)
		}
		if !ok {
			return nil
		}
		a.mu.Lock()
		if a.xids == nil {
			a.xids = map[[2]string]int{}
		}
		a.xids[[2]string{g, fmt.Sprint(code)}]++
		// Critical XIDs (NVML's XidCriticalError class) mean the GPU needs attention; the agent
		// reports unhealthy until restarted.
		a.lastXID = fmt.Sprintf("GPU %s reported XID %d at %s", g, code, a.Now().Format(time.RFC3339))
		a.mu.Unlock()
		a.Log.Warn("xid", "gpu", g, "code", code)
	}
	return nil
}

// Run polls every Settings.Poll until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.Settings.Poll)
	defer t.Stop()
	for {
		if err := a.Poll(ctx); err != nil {
			a.Log.Warn("poll", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Poll does one round: inventory, desired layouts into the gate, MPS, clocks, measurements.
func (a *Agent) Poll(ctx context.Context) error {
	start := time.Now()
	err := a.poll(ctx)
	a.mu.Lock()
	a.lastErr, a.lastPoll = err, a.Now()
	a.snap.PollSeconds = time.Since(start).Seconds()
	a.mu.Unlock()
	return err
}

func (a *Agent) poll(ctx context.Context) error {
	inv, err := a.Tel.Inventory()
	if err != nil {
		return fmt.Errorf("poll inventory: %w", err)
	}
	var errs []error
	if set, err := a.migModes(inv); err != nil {
		errs = append(errs, err)
	} else if set {
		if inv, err = a.Tel.Inventory(); err != nil {
			return fmt.Errorf("poll inventory: %w", err)
		}
	}
	a.mu.Lock()
	a.inventory = inv
	a.mu.Unlock()
	byIndex := map[int]GPUInfo{}
	byUUID := map[string]GPUInfo{}
	for _, g := range inv {
		byIndex[g.Index] = g
		byUUID[g.UUID] = g
	}
	// The control plane's layouts come first; the config's apply to the GPUs it does not name.
	control := a.controlDesired()
	for _, uuid := range slices.Sorted(maps.Keys(control)) {
		g, ok := byUUID[uuid]
		if !ok {
			errs = append(errs, fmt.Errorf("control plane layout: no GPU %s on the node", uuid))
			continue
		}
		if _, modes := a.Exec.MIG.(MIGMode); modes && len(control[uuid]) > 0 && !g.MIG {
			continue // migModes turns MIG mode on first, once the gate is idle
		}
		if want := control[uuid]; !slices.Equal(want.Sorted(), g.Instances.Sorted()) {
			if err := a.Exec.Submit(ctx, gate.Desired{GPU: g.UUID, Board: g.Board, Layout: want, Current: g.Instances}); err != nil {
				errs = append(errs, fmt.Errorf("control plane layout of GPU %s: %w", uuid, err))
			}
		}
	}
	for _, gc := range a.Config.GPUs {
		g, ok := byIndex[gc.Index]
		if !ok {
			errs = append(errs, fmt.Errorf("gpus[%d]: no GPU %d on the node", gc.Index, gc.Index))
			continue
		}
		if _, ok := control[g.UUID]; ok {
			// the control plane's layout was submitted above
		} else if want, ok := a.Settings.Layouts[gc.Index]; ok && !slices.Equal(want.Sorted(), g.Instances.Sorted()) {
			if err := a.Exec.Submit(ctx, gate.Desired{GPU: g.UUID, Board: g.Board, Layout: want, Current: g.Instances}); err != nil {
				errs = append(errs, fmt.Errorf("gpus[%d]: %w", gc.Index, err))
			}
		}
		if gc.MPS != nil && a.MPS != nil {
			if err := a.MPS.Ensure(ctx, g.UUID, *gc.MPS); err != nil {
				errs = append(errs, fmt.Errorf("gpus[%d].mps: %w", gc.Index, err))
			}
		}
		if err := a.applyEnergy(gc, g.UUID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.Exec.Tick(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := a.drainXIDs(); err != nil {
		errs = append(errs, err)
	}
	a.measure(ctx, inv, byIndex)
	return errors.Join(errs...)
}

// migModes sets the MIG mode the control plane wants of its GPUs (Executor.SetMIGMode): on for a
// GPU it cuts into instances, before the gate creates them; off for a GPU its plan runs whole,
// once the gate has removed its instances. It runs before the inventory is published, so that the
// control plane never settles an operation on a GPU whose mode is about to change, and says
// whether it changed a GPU's mode.
func (a *Agent) migModes(inv []GPUInfo) (bool, error) {
	want := a.modesWanted()
	changed := false
	var errs []error
	var forget []string
	for _, g := range inv {
		on, ok := want[g.UUID]
		if !ok {
			continue
		}
		if on && !g.MIG {
			// Write ahead: the record is durable before the mode changes, so that no crash
			// leaves a GPU in MIG mode that this agent does not know it turned on.
			a.mu.Lock()
			op := a.desired[g.UUID].Op
			a.mu.Unlock()
			if err := a.rememberModeOn(g.UUID, op); err != nil {
				errs = append(errs, fmt.Errorf("control plane: MIG mode on GPU %s: %w", g.UUID, err))
				continue
			}
		}
		did, err := a.Exec.SetMIGMode(g, on)
		if err != nil {
			errs = append(errs, fmt.Errorf("control plane: %w", err))
		}
		if did {
			a.Log.Info("MIG mode set", "gpu", g.UUID, "on", on)
			if !on {
				forget = append(forget, g.UUID)
			}
		}
		changed = changed || did
	}
	// A remembered GPU whose mode is off (and not about to be turned on), or whose mode now
	// serves instances the gate made and is done with, needs no remembering.
	idle := a.Exec.State().Phase() == gate.PhaseIdle
	a.mu.Lock()
	for _, g := range inv {
		if _, ok := a.modeOnFor[g.UUID]; !ok || slices.Contains(forget, g.UUID) {
			continue
		}
		if !g.MIG && !want[g.UUID] || g.MIG && len(g.Instances) > 0 && idle {
			forget = append(forget, g.UUID)
		}
	}
	a.mu.Unlock()
	if len(forget) > 0 {
		if err := a.forgetModeOn(forget...); err != nil {
			errs = append(errs, err)
		}
	}
	return changed, errors.Join(errs...)
}

// applyEnergy locks clocks and sets the power limit of an energy class, once per GPU, and only
// when the operator allows it (Config.AllowClocks).
func (a *Agent) applyEnergy(gc GPUConfig, uuid string) error {
	if !a.Config.AllowClocks || a.Clocks == nil || (gc.Clocks == nil && gc.PowerLimitWatts == 0) {
		return nil
	}
	a.mu.Lock()
	if a.applied == nil {
		a.applied = map[string]bool{}
	}
	done := a.applied[uuid]
	a.mu.Unlock()
	if done {
		return nil
	}
	if gc.Clocks != nil {
		if err := a.Clocks.LockClocks(uuid, gc.Clocks.MinMHz, gc.Clocks.MaxMHz); err != nil {
			return fmt.Errorf("gpus[%d].clocks: %w", gc.Index, err)
		}
	}
	if gc.PowerLimitWatts > 0 {
		if err := a.Clocks.SetPowerLimit(uuid, uint32(gc.PowerLimitWatts*1000)); err != nil {
			return fmt.Errorf("gpus[%d].powerLimitWatts: %w", gc.Index, err)
		}
	}
	a.mu.Lock()
	a.applied[uuid] = true
	a.mu.Unlock()
	return nil
}

// measure reads energy, processes and engines, and attributes each GPU's energy to its tenants.
func (a *Agent) measure(ctx context.Context, inv []GPUInfo, byIndex map[int]GPUInfo) {
	a.mu.Lock()
	if a.prev == nil {
		a.prev, a.tenants = map[string]float64{}, map[string]*metrics.Tenant{}
		if c := a.Config.Cost; c != nil {
			a.prices = cost.PricesFrom(c)
			a.prices.IdlePolicy = v1.IdleNone
			a.cost = &metrics.Cost{Currency: c.Currency, Money: c.Currency != "" && c.EnergyPrice != nil,
				Location: c.CarbonIntensity != nil && c.CarbonIntensity.LocationBased != nil,
				Market:   c.CarbonIntensity != nil && c.CarbonIntensity.MarketBased != nil}
		}
	}
	a.mu.Unlock()
	var snap metrics.Snapshot
	procs := map[string][]Proc{}
	activity := map[string]map[gpu.Instance]float64{}
	ia, withActivity := a.Tel.(InstanceActivity)
	for _, g := range inv {
		if withActivity && g.MIG {
			if act, err := ia.InstanceActivity(g.UUID, g.Board); err == nil {
				activity[g.UUID] = act
			} else {
				a.Log.Debug("instance activity", "gpu", g.UUID, "err", err)
			}
		}
		mj, err := a.Tel.EnergyMilliJoules(g.UUID)
		if err != nil {
			a.Log.Debug("energy", "gpu", g.UUID, "err", err)
			continue
		}
		snap.GPUs = append(snap.GPUs, metrics.GPU{UUID: g.UUID, Board: g.Board, Node: a.Config.Node, Index: g.Index, EnergyJoules: float64(mj) / 1000})
		if ps, err := a.Tel.Processes(g.UUID); err == nil {
			procs[g.UUID] = ps
		}
	}
	// Per GPU: the shares of its engines (MIG: compute slices of the instance; else SM utilisation).
	shares := map[string][]metrics.Share{}
	migShares := map[string][]migShare{} // per GPU: its MIG shares, to reweigh by activity
	costSlices := map[string][]costSlice{}
	tokens, outTokens := map[string]float64{}, map[string]float64{}
	for _, e := range a.Config.Engines {
		g, ok := byIndex[e.GPU]
		if !ok {
			continue
		}
		sl := metrics.Slice{GPU: g.UUID, Slice: e.Slice, Tenant: e.Tenant, MemoryPlanned: float64(e.MemoryPlanned), SMShare: e.SMShare}
		w := 0.0
		cs := costSlice{tenant: e.Tenant, kind: e.Slice, share: e.SMShare}
		for _, p := range procs[g.UUID] {
			if p.PID == e.PID && e.PID != 0 {
				sl.MemoryUsed, w = float64(p.UsedBytes), float64(p.SMPercent)
			}
		}
		if in, err := gpu.ParseInstance(e.Slice); err == nil {
			cs.kind, cs.inst = "mig", e.Slice
			if b, err := gpu.Lookup(g.Board); err == nil {
				if p, err := b.Profile(in.Profile); err == nil {
					w = float64(p.ComputeSlices)
					cs.size = w / float64(max(b.ComputeSlices, 1))
					migShares[g.UUID] = append(migShares[g.UUID], migShare{i: len(shares[g.UUID]), in: in, size: w})
				}
			}
		}
		costSlices[g.UUID] = append(costSlices[g.UUID], cs)
		shares[g.UUID] = append(shares[g.UUID], metrics.Share{Tenant: e.Tenant, Weight: w})
		snap.Slices = append(snap.Slices, sl)
		if a.Scraper != nil {
			if eng, err := a.Scraper.Scrape(ctx, e.URL); err == nil {
				a.mu.Lock()
				tokens[e.Tenant] += metrics.CounterDelta(a.prev["tok:"+e.URL], eng.Tokens())
				a.prev["tok:"+e.URL] = eng.Tokens()
				outTokens[e.Tenant] += metrics.CounterDelta(a.prev["out:"+e.URL], eng.GenerationTokens)
				a.prev["out:"+e.URL] = eng.GenerationTokens
				t := a.tenant(e.Tenant)
				t.TTFT, t.TPOT = eng.TTFT, eng.TPOT
				a.mu.Unlock()
			}
		}
	}
	split := map[string]string{}
	for uuid, sh := range shares {
		split[uuid] = splitBy(sh, migShares[uuid], activity[uuid])
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	joules := map[string]float64{}
	now := float64(a.Now().UnixNano()) / 1e9
	for i, g := range snap.GPUs {
		prev, seen := a.prev["e:"+g.UUID]
		prevT := a.prev["t:"+g.UUID]
		a.prev["e:"+g.UUID], a.prev["t:"+g.UUID] = g.EnergyJoules, now
		if seen {
			// Idle power stays on the GPU's idle line; only the energy above it goes to tenants.
			delta := metrics.CounterDelta(prev, g.EnergyJoules)
			active, idle := metrics.SplitIdle(delta, idleWatts(g.Board), now-prevT, len(shares[g.UUID]) > 0)
			a.prev["idle:"+g.UUID] += idle
			split := metrics.Attribute(active, shares[g.UUID])
			for t, j := range split {
				joules[t] += j
				a.prev["tg:"+g.UUID+"\x00"+t] += j
			}
			if a.cost != nil {
				if err := addCost(a.cost, a.prices, costDevice(g.UUID, g.Board, now-prevT, delta, costSlices[g.UUID], split)); err != nil {
					a.Log.Debug("cost", "gpu", g.UUID, "err", err)
				}
			}
		}
		snap.GPUs[i].IdleEnergyJoules = a.prev["idle:"+g.UUID]
		snap.GPUs[i].Split = split[g.UUID]
	}
	for name, tok := range tokens {
		t := a.tenant(name)
		t.Tokens += tok
		t.OutputTokens += outTokens[name]
		t.JoulesPerTok = metrics.JoulesPerToken(joules[name], tok)
	}
	for name, j := range joules {
		a.tenant(name).EnergyJoules += j
	}
	for _, k := range slices.Sorted(maps.Keys(a.prev)) {
		if rest, ok := strings.CutPrefix(k, "tg:"); ok {
			uuid, tenant, _ := strings.Cut(rest, "\x00")
			snap.TenantGPUs = append(snap.TenantGPUs, metrics.TenantGPU{GPU: uuid, Tenant: tenant, EnergyJoules: a.prev[k]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.tenants)) {
		snap.Tenants = append(snap.Tenants, *a.tenants[name])
	}
	if a.MPS != nil {
		snap.MPS = a.MPS.Status()
	}
	for k, n := range a.xids {
		snap.XIDs = append(snap.XIDs, metrics.XID{GPU: k[0], Code: k[1], Count: n})
	}
	st := a.Exec.State()
	changes := map[string]int{}
	for _, code := range []string{gate.ReasonDone, gate.ReasonRolledBack, gate.ReasonRollbackFailed, gate.ReasonCordonFailed, gate.ReasonDrainFailed} {
		changes[code] = st.Counts[code]
	}
	snap.Gate = metrics.Gate{Phase: string(st.Phase()), Cordoned: st.Cordoned, Changes: changes}
	snap.PollSeconds = a.snap.PollSeconds
	if a.cost != nil {
		c := *a.cost
		c.Tenants = slices.Clone(c.Tenants)
		slices.SortFunc(c.Tenants, func(x, y metrics.TenantCost) int { return strings.Compare(x.Tenant, y.Tenant) })
		snap.Cost = &c
	}
	a.snap = snap
}

func (a *Agent) tenant(name string) *metrics.Tenant {
	t, ok := a.tenants[name]
	if !ok {
		t = &metrics.Tenant{Name: name, SLOAttainment: -1}
		a.tenants[name] = t
	}
	return t
}

// idlePowerFraction is a board's idle power as a fraction of its TDP, the performance model's
// default (perf.Options.IdlePowerFraction; docs/cost.md).
const idlePowerFraction = 0.15

// idleWatts is the idle power of a board, 0 for a board the catalog does not know.
func idleWatts(board string) float64 {
	b, err := gpu.Lookup(board)
	if err != nil {
		return 0
	}
	return idlePowerFraction * b.TDPWatts
}

// migShare is a MIG engine's share on its GPU: its index in the GPU's shares, its instance and
// its compute slices.
type migShare struct {
	i    int
	in   gpu.Instance
	size float64
}

// splitBy reweighs a GPU's MIG shares by their instances' activity when GPM gave one for every
// MIG share and not all are idle (weight: activity × compute slices), and returns the basis the
// GPU's active energy is split by. Without activity the MIG shares keep their size.
func splitBy(sh []metrics.Share, mig []migShare, act map[gpu.Instance]float64) string {
	if len(mig) > 0 {
		busy := 0.0
		for _, m := range mig {
			a, ok := act[m.in]
			if !ok {
				return SplitMIGSize
			}
			busy += a * m.size
		}
		if !(busy > 0) {
			return SplitMIGSize
		}
		for _, m := range mig {
			sh[m.i].Weight = act[m.in] * m.size
		}
		return SplitMIGActivity
	}
	for _, s := range sh {
		if s.Weight > 0 {
			return SplitProcessSM
		}
	}
	return SplitEven
}
