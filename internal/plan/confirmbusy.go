package plan

import (
	"fmt"
	"strings"
	"time"

	v1 "gpupool.dev/gpupool/api/v1"
)

// Long runs for a busy tenant (ADR 0128).
//
// A tenant whose rate is near what its replicas sustain at any latency (above confirmBusyLoad of
// the queueing model's saturation at its count: busyAt) misses its SLO in rare long busy spells
// rather than a little in every run. Stream 60's pool 87 t15 of the agreement suite (three
// exclusive H200s at 0.97 of that saturation, 18,739-token prompts) is within its SLO for every
// request of most runs and far below it in a few: in 60 runs of 2,000 of its requests 3 fell
// below 99 % (the worst 63 %), in 60 runs of the suite's length 7, and over all of them 98.7 %
// of its requests met the SLO. Runs of the confirmation's length see such a spell seldom: the
// tenant passed its three runs, and six runs more when a busy tenant was tried as borderline,
// and would pass the tail count of ADR 0083 at about two seed sets in three. So a busy tenant that
// its runs pass is simulated over confirmBusyRequests of its requests more, in confirmBusyRuns
// runs of its sharing component (as its borderline runs are), and it is short when less than
// confirmKeep of those requests met the SLO (the share that decides the first runs, now over
// enough requests to hold a few spells: t15 99.23 % of 199,974) or when their own spread puts
// the chance of a run of confirmCheckRequests below confirmCheckKeep above confirmMissMax
// (missEstimate without its floor; pool 74 t7, 99.89 % over them but in rare deep spells).
const (
	confirmBusyRequests = 200_000
	confirmBusyRuns     = 4
)

// confirmBusy runs the long runs above for every tenant of judge that is busy, judged and not
// short on its runs so far (as state gives them). Tenants of one component with runs of one
// length share the runs.
func (p *planner) confirmBusy(judge []*tenant, pl *v1.Plan, state func(*tenant) (*confirmState, int)) error {
	byBoard := components(pl, true)
	lora := map[string]bool{}
	for _, pt := range pl.Tenants {
		lora[pt.Name] = len(pt.LoRAEngines) > 0
	}
	type group struct {
		members []string // nil: the whole plan
		d       time.Duration
		tenants []*tenant
	}
	var groups []*group
	at := map[string]*group{}
	for _, tn := range judge {
		st, _ := state(tn)
		if !st.judged || !st.busy || st.busyRuns > 0 || st.short() {
			continue
		}
		members := p.runMembers(tn, st, byBoard, lora)
		pool := p.pool
		if members != nil {
			pool, _ = restrict(p.pool, pl, setOf(members))
		}
		d := p.runFor(tn, pool, confirmBusyRequests/confirmBusyRuns)
		key := fmt.Sprintf("%s|%d", strings.Join(members, ","), d)
		g := at[key]
		if g == nil {
			g = &group{members: members, d: d}
			at[key] = g
			groups = append(groups, g)
		}
		g.tenants = append(g.tenants, tn)
	}
	for _, g := range groups {
		pool, cut := p.pool, pl
		if g.members != nil {
			pool, cut = restrict(p.pool, pl, setOf(g.members))
		}
		reports, err := p.simulateSeeds(pool, cut, g.d, confirmRuns+confirmExtraRuns+confirmTailRuns, confirmBusyRuns)
		if err != nil {
			return err
		}
		for _, tn := range g.tenants {
			st, _ := state(tn)
			st.tallyBusy(tn.t.Name, g.d, reports)
		}
	}
	return nil
}

// setOf is the set of names.
func setOf(names []string) map[string]bool {
	in := make(map[string]bool, len(names))
	for _, n := range names {
		in[n] = true
	}
	return in
}

// tallyBusy records in st the long runs of tenant name (runs of d, ADR 0128): the requests
// within the SLO and judged over them, each run's word, the worst, and the estimated chance
// that a run of confirmCheckRequests falls below confirmCheckKeep.
func (st *confirmState) tallyBusy(name string, d time.Duration, reports []map[string]SimTenant) {
	st.busyRuns, st.busyD, st.busyWorst, st.busyMet, st.busyOver = 0, d, 1, 0, 0
	st.busyWords = nil
	for _, rep := range reports {
		tr := rep[name]
		if tr.Judged == 0 {
			continue
		}
		st.busyRuns++
		st.busyMet += tr.Attainment * float64(tr.Judged)
		st.busyOver += float64(tr.Judged)
		st.busyWorst = min(st.busyWorst, tr.Attainment)
		st.busyWords = append(st.busyWords, runWord{tr.Attainment, tr.Judged})
	}
	st.busyMiss = missEstimate(st.busyWords, 1)
}

// busyShort reports whether st's long runs (ADR 0128) found it short: less than confirmKeep of
// their requests within the SLO, or more than confirmMissMax estimated from their own spread
// (missEstimate without a floor: runs of 50,000 requests hold the spells whose clustering the
// floor stands in for) that a run of confirmCheckRequests falls below confirmCheckKeep.
func (st *confirmState) busyShort() bool {
	return st.busyOver > 0 && (st.busyMet < confirmKeep*st.busyOver || st.busyMiss > confirmMissMax)
}

// busyText says what a busy tenant's long runs saw, for its Simulated reason ("" when it had
// none).
func (st *confirmState) busyText() string {
	if st.busyRuns == 0 {
		return ""
	}
	return fmt.Sprintf("; its rate is above %.0f %% of what its replicas sustain at any latency, so %d runs of %s more: %.2f %% of their %.0f requests met the SLO (at least %.1f %% passes), %.2f %% in the worst, an estimated %.1f %% chance that a run of %d requests falls below %.0f %% (at most %.0f %% passes)",
		100*confirmBusyLoad, st.busyRuns, roundDur(st.busyD.Round(time.Second)), 100*st.busyMet/st.busyOver, st.busyOver, 100*confirmKeep,
		100*st.busyWorst, 100*st.busyMiss, confirmCheckRequests, 100*confirmCheckKeep, 100*confirmMissMax)
}
