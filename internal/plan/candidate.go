package plan

import (
	"fmt"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
	"gpupool.dev/gpupool/internal/llm"
	"gpupool.dev/gpupool/internal/perf"
)

// Shares tried per sharing mode: how many replicas split one GPU or MIG instance.
var (
	mpsShares      = []int{2, 3, 4, 5, 6, 7, 8}
	timeShares     = []int{2, 3, 4, 6, 8}
	migMPSShares   = []int{2, 3, 4}
	migTimeShares  = []int{2, 4}
	kindPreference = []v1.SliceKind{v1.SliceExclusive, v1.SliceMIG, v1.SliceMIGMPS, v1.SliceMPS, v1.SliceMIGTimeSlice, v1.SliceTimeSlice}
)

// cand is one way to serve a tenant: a slice kind on a board, evaluated.
type cand struct {
	board   *gpu.Board
	kind    v1.SliceKind
	profile *gpu.Profile // MIG kinds
	share   int          // replicas per GPU or instance: 1 for exclusive and mig
	// unitFrac is the GPU-equivalents of one unit (a GPU, or a MIG instance:
	// max(memory slices / board's, compute slices / board's)); memFrac and compFrac are its two parts.
	unitFrac, memFrac, compFrac float64
	ev                          *evalResult
	replicas                    int
	cost                        float64 // replicas / share × unitFrac
	reject                      v1.ReasonCode
	why                         string
}

// evalResult is the memory fit and the performance of one replica on a slice.
type evalResult struct {
	fit      llm.Fit
	rate     perf.Rate
	smPct    int   // MPS active-thread percentage, 0 when not MPS
	capBytes int64 // memory cap of a shared replica, 0 when not shared
	// kv is what the KV cache allows; rate is already derated to kv.rate when kv.need > 0.
	kv  kvHold
	err error
	// point is the measured row chosen for a tenant with a measured profile; why says why
	// none meets its latency limit.
	point perf.MeasuredPoint
	why   string
}

// label names the candidate for people: "mig 3g.40gb", "mps 1/4", "mig 3g.40gb + mps 1/2".
func (c *cand) label() string {
	switch c.kind {
	case v1.SliceExclusive:
		return "exclusive GPU"
	case v1.SliceMIG:
		return "mig " + c.profile.Name
	case v1.SliceMIGMPS:
		return fmt.Sprintf("mig %s + mps 1/%d", c.profile.Name, c.share)
	case v1.SliceMIGTimeSlice:
		return fmt.Sprintf("mig %s + timeslice 1/%d", c.profile.Name, c.share)
	case v1.SliceMPS:
		return fmt.Sprintf("mps 1/%d", c.share)
	}
	return fmt.Sprintf("timeslice 1/%d", c.share)
}

func (c *cand) shared() bool {
	return c.share > 1 || c.kind == v1.SliceMPS || c.kind == v1.SliceTimeSlice
}

func (c *cand) whole() bool {
	return c.kind == v1.SliceExclusive || c.kind == v1.SliceMPS || c.kind == v1.SliceTimeSlice
}

func kindRank(k v1.SliceKind) int {
	for i, x := range kindPreference {
		if x == k {
			return i
		}
	}
	return len(kindPreference)
}

// migProfiles are the MIG profiles of b the planner uses: those with a known memory size, media
// variants folded into their base profile (llm.Slices).
func migProfiles(b *gpu.Board) []*gpu.Profile {
	if !b.MIGCapable() {
		return nil
	}
	var out []*gpu.Profile
	for _, s := range llm.Slices(b) {
		if s.Kind != llm.SliceMIG {
			continue
		}
		if p, err := b.Profile(s.Name); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// candidates lists the slice kinds the tenant's isolation tier and the policy allow on b.
func (p *planner) candidates(tn *tenant, b *gpu.Board) []*cand {
	var out []*cand
	add := func(kind v1.SliceKind, prof *gpu.Profile, share int) {
		c := &cand{board: b, kind: kind, profile: prof, share: share, unitFrac: 1, memFrac: 1, compFrac: 1}
		if prof != nil {
			c.memFrac = float64(prof.MemorySlices) / float64(b.MemorySlices)
			c.compFrac = float64(prof.ComputeSlices) / float64(b.ComputeSlices)
			c.unitFrac = max(c.memFrac, c.compFrac)
		}
		out = append(out, c)
	}
	shareMPS := tn.group != "" && p.modes[v1.ModeMPS]
	shareTS := tn.group == "shared" && tn.t.LowFrequency && p.modes[v1.ModeTimeSlice]
	if tn.measured != nil { // measured: MPS up to measuredMaxProcs processes, no time-slicing
		shareTS = false
		add = measuredAdd(add)
	}
	if p.modes[v1.ModeExclusive] {
		add(v1.SliceExclusive, nil, 1)
	}
	if p.modes[v1.ModeMIG] {
		for _, prof := range migProfiles(b) {
			add(v1.SliceMIG, prof, 1)
			for _, k := range migMPSShares {
				if shareMPS {
					add(v1.SliceMIGMPS, prof, k)
				}
			}
			for _, k := range migTimeShares {
				if shareTS {
					add(v1.SliceMIGTimeSlice, prof, k)
				}
			}
		}
	}
	for _, k := range mpsShares {
		if shareMPS {
			add(v1.SliceMPS, nil, k)
		}
	}
	for _, k := range timeShares {
		if shareTS {
			add(v1.SliceTimeSlice, nil, k)
		}
	}
	return out
}

// exclusions explains the slice kinds the tenant may not use, or "".
func (p *planner) exclusions(tn *tenant) (v1.ReasonCode, string) {
	var parts []string
	code := v1.ReasonModeNotAllowed
	for _, m := range []v1.Mode{v1.ModeExclusive, v1.ModeMIG, v1.ModeMPS, v1.ModeTimeSlice} {
		if !p.modes[m] {
			parts = append(parts, fmt.Sprintf("%s is not in policy.allowedModes", m))
		}
	}
	switch {
	case tn.group == "":
		code = v1.ReasonIsolationHard
		parts = append(parts, "isolation hard allows only exclusive GPUs and unshared MIG instances (no MPS or time-slice neighbour)")
	case strings.HasPrefix(tn.group, "solo:"):
		code = v1.ReasonTrustGroup
		parts = append(parts, "isolation soft without a path has no trust group: MPS only among its own replicas, no time-slicing")
	case strings.HasPrefix(tn.group, "soft:"):
		code = v1.ReasonTrustGroup
		parts = append(parts, fmt.Sprintf("isolation soft: MPS only within trust group %q, no time-slicing", strings.TrimPrefix(tn.group, "soft:")))
	case !tn.t.LowFrequency:
		parts = append(parts, "time-slicing is kept for low-frequency tenants")
	}
	if len(parts) == 0 {
		return "", ""
	}
	return code, strings.Join(parts, "; ")
}

// evaluate fits every tenant on every candidate slice, sizes its replicas and keeps the feasible
// candidates sorted cheapest first.
func (p *planner) evaluate() {
	for _, tn := range p.tenants {
		if p.stopped() {
			return
		}
		for _, b := range p.boards {
			for _, c := range p.candidates(tn, b) {
				p.evalCand(tn, c)
				tn.cands = append(tn.cands, c)
				if c.reject == "" {
					tn.feasible = append(tn.feasible, c)
				}
			}
		}
		sortCands(tn.feasible)
	}
}

func sortCands(cs []*cand) {
	less := func(a, b *cand) int {
		switch {
		case a.cost < b.cost-1e-12:
			return -1
		case a.cost > b.cost+1e-12:
			return 1
		case a.replicas != b.replicas:
			return a.replicas - b.replicas
		case kindRank(a.kind) != kindRank(b.kind):
			return kindRank(a.kind) - kindRank(b.kind)
		case a.share != b.share:
			return a.share - b.share
		}
		return strings.Compare(a.board.Name+profName(a.profile), b.board.Name+profName(b.profile))
	}
	sortFunc(cs, less)
}

func profName(p *gpu.Profile) string {
	if p == nil {
		return ""
	}
	return p.Name
}

// evalCand fills c's evaluation, replicas, cost or rejection.
func (p *planner) evalCand(tn *tenant, c *cand) {
	ev := p.cache.get(tn, c, func() *evalResult { return p.measure(tn, c) })
	c.ev = ev
	switch {
	case ev.err != nil:
		c.reject, c.why = v1.ReasonNoFit, ev.err.Error()
		return
	case !ev.fit.Fits:
		c.reject, c.why = v1.ReasonNoFit, strings.Join(ev.fit.Reasons, "; ")
		return
	case ev.why != "":
		c.reject, c.why = v1.ReasonSLOUnmet, ev.why
		return
	case ev.rate.RequestsPerSec <= 0 && tn.t.Traffic.RPS > 0:
		c.reject, c.why = v1.ReasonSLOUnmet, fmt.Sprintf("no rate meets the SLO (limit %s: p99 TTFT %s, TPOT %s at a trickle)",
			ev.rate.Limit, roundDur(ev.rate.TTFT), roundDur(ev.rate.TPOT))
		if ev.kv.need > 0 {
			c.why += ": " + ev.kv.sentence()
		}
		return
	case tn.t.Replicas != nil && float64(*tn.t.Replicas)*ev.rate.RequestsPerSec < tn.t.Traffic.RPS:
		c.reject, c.why = v1.ReasonSLOUnmet, fmt.Sprintf("the fixed %d replica(s) sustain %.3g req/s within the SLO, less than the %.3g req/s offered",
			*tn.t.Replicas, float64(*tn.t.Replicas)*ev.rate.RequestsPerSec, tn.t.Traffic.RPS)
		if ev.kv.need > 0 {
			c.why += "; " + ev.kv.sentence()
		}
		return
	}
	c.replicas = demandReplicas(tn.t, ev.rate.RequestsPerSec)
	if most := len(p.fleet) * 7 * max(c.share, 1); c.replicas > most { // 7: the most MIG instances a GPU holds
		c.reject, c.why = v1.ReasonNoCapacity, fmt.Sprintf("needs %d replicas of %.3g req/s each for %.3g req/s, more than the %d GPUs of the fleet can hold on this slice kind (%d)",
			c.replicas, ev.rate.RequestsPerSec, tn.t.Traffic.RPS, len(p.fleet), most)
		return
	}
	if tn.t.Cap != nil && c.replicas > *tn.t.Cap {
		c.reject, c.why = v1.ReasonOverCap, fmt.Sprintf("needs %d replicas, more than cap %d", c.replicas, *tn.t.Cap)
		return
	}
	c.cost = float64(c.replicas) / float64(c.share) * c.unitFrac
}

// measure runs the memory fit and the performance model for one replica on c's slice.
func (p *planner) measure(tn *tenant, c *cand) *evalResult {
	if tn.measured != nil {
		return p.measureProfile(tn, c)
	}
	b := c.board
	ps := perf.Slice{Board: b, Profile: c.profile, Replicas: c.share}
	devBytes := llm.VisibleBytes(b.MemoryMiB)
	sl := llm.Slice{Board: b.Name, Kind: llm.SliceGPU, Name: "gpu", MemoryBytes: devBytes, GPUBytes: devBytes, SMs: b.SMs}
	if c.profile != nil {
		devBytes = c.profile.MemoryMiB * llm.MiB
		sl = llm.Slice{Board: b.Name, Kind: llm.SliceMIG, Name: c.profile.Name, MemoryBytes: devBytes, GPUBytes: devBytes, SMs: c.profile.SMs}
	}
	r := &evalResult{}
	switch c.kind {
	case v1.SliceMPS, v1.SliceMIGMPS:
		ps.Mode, r.smPct = perf.MPS, 100/c.share
		ps.SMPercent = float64(r.smPct)
	case v1.SliceTimeSlice, v1.SliceMIGTimeSlice:
		ps.Mode = perf.TimeSlice
	}
	if c.shared() {
		r.capBytes = devBytes / int64(c.share) / llm.MiB * llm.MiB
		sl = llm.Slice{Board: b.Name, Kind: llm.SliceShared, Name: "shared-" + llm.FormatGiB(r.capBytes), MemoryBytes: r.capBytes, GPUBytes: devBytes}
		ps.MemoryMiB = r.capBytes / llm.MiB
	}
	fit, err := llm.FitSlice(tn.model, tn.llmOpt, sl)
	if err != nil {
		r.err = fmt.Errorf("fit %s on %s %s: %w", tn.t.Name, b.Name, c.label(), err)
		return r
	}
	r.fit = fit
	if !fit.Fits {
		return r
	}
	e, err := tn.perfM.Place(ps)
	if err != nil {
		r.err = err
		return r
	}
	e = e.WithKVCapacity(fit.MaxTokens)
	load := perf.Load{Active: c.share - 1}
	if r.rate, r.err = e.MaxRate(tn.work, tn.slo, load); r.err != nil || r.rate.RequestsPerSec <= 0 {
		return r
	}
	if r.kv, r.err = holdKV(e, tn.work, load, fit.MaxTokens, r.rate.RequestsPerSec); r.err == nil && r.kv.need > 0 {
		r.rate.RequestsPerSec = r.kv.rate
		r.rate.OutputTokensPerSec = r.kv.rate * float64(tn.work.OutputTokens)
		r.rate.Limit = perf.LimitKV
	}
	return r
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// evalCache memoises evaluations: the rate one replica sustains does not depend on the tenant's
// request rate, so tenants with the same model, serving options, request shape and SLO share it.
type evalCache struct{ m map[evalKey]*evalResult }

type evalKey struct {
	model                string
	quant                llm.Quantization
	kv                   string
	ctx, conc            int
	in, out              int
	ttft, tpot, batch    time.Duration
	board, kind, profile string
	share                int
}

func newEvalCache() *evalCache { return &evalCache{m: map[evalKey]*evalResult{}} }

func (c *evalCache) get(tn *tenant, cd *cand, f func() *evalResult) *evalResult {
	k := evalKey{model: tn.modKey, quant: tn.llmOpt.Quantization, kv: tn.llmOpt.KVCacheDType, ctx: tn.llmOpt.Context,
		conc: tn.llmOpt.Concurrency, in: tn.work.InputTokens, out: tn.work.OutputTokens, ttft: tn.slo.TTFT, tpot: tn.slo.TPOT, batch: tn.batchLimit,
		board: cd.board.Name, kind: string(cd.kind), profile: profName(cd.profile), share: cd.share}
	if r, ok := c.m[k]; ok {
		return r
	}
	r := f()
	c.m[k] = r
	return r
}
