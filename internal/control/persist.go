package control

import (
	"encoding/json"
	"fmt"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/store"
)

// Record kinds in the store.
const (
	kindTenants = "tenants"
	kindGrants  = "grants"
	kindNodes   = "nodes"
	kindTokens  = "tokens"
	kindRemoved = "removed"
	kindEvents  = "events"
	kindMeta    = "meta"
	metaCounter = "counters"
	kindPlans   = "plans"
	planCurrent = "current"
)

// appliedPlan is the plan in force and its Pool document, the base of the next re-plan.
type appliedPlan struct {
	Pool *v1.Pool `json:"pool"`
	Plan *v1.Plan `json:"plan"`
}

type counters struct {
	NextGrant uint64 `json:"nextGrant"`
	NextEvent uint64 `json:"nextEvent"`
}

func eventKey(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// batchFor turns an engine's changes into one store batch.
func (e *Engine) batchFor(c Changes) (store.Batch, error) {
	var b store.Batch
	put := func(kind, key string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s/%s: %w", kind, key, err)
		}
		b.Puts = append(b.Puts, store.Record{Kind: kind, Key: key, Value: raw})
		return nil
	}
	var err error
	each := func(kind string, m map[string]bool, get func(string) any) {
		for k, live := range m {
			if !live {
				b.Deletes = append(b.Deletes, store.Ref{Kind: kind, Key: k})
			} else if err == nil {
				err = put(kind, k, get(k))
			}
		}
	}
	each(kindTenants, c.Tenants, func(k string) any { return e.tenants[k] })
	each(kindGrants, c.Grants, func(k string) any { return e.grants[k] })
	each(kindNodes, c.Nodes, func(k string) any { return e.nodes[k] })
	each(kindTokens, c.Tokens, func(k string) any { return e.tokens[k] })
	each(kindRemoved, c.Removed, func(k string) any { return e.removed[k] })
	for _, ev := range c.Events {
		if err == nil {
			err = put(kindEvents, eventKey(ev.Seq), ev)
		}
	}
	if c.Plan && err == nil {
		err = put(kindPlans, planCurrent, appliedPlan{Pool: e.pool, Plan: e.plan})
	}
	for _, seq := range c.Dropped {
		b.Deletes = append(b.Deletes, store.Ref{Kind: kindEvents, Key: eventKey(seq)})
	}
	if err == nil && !c.Empty() {
		err = put(kindMeta, metaCounter, counters{NextGrant: e.nextGrant, NextEvent: e.nextEvent})
	}
	return b, err
}

// stateFrom decodes a store snapshot.
func stateFrom(s store.Snapshot) (State, error) {
	var st State
	var errs []error
	dec := func(kind, key string, raw []byte, v any) bool {
		if err := json.Unmarshal(raw, v); err != nil {
			errs = append(errs, fmt.Errorf("decode %s/%s: %w", kind, key, err))
			return false
		}
		return true
	}
	for k, raw := range s.Records[kindTenants] {
		var t Tenant
		if dec(kindTenants, k, raw, &t) {
			st.Tenants = append(st.Tenants, t)
		}
	}
	for k, raw := range s.Records[kindNodes] {
		var n Node
		if dec(kindNodes, k, raw, &n) {
			st.Nodes = append(st.Nodes, n)
		}
	}
	for k, raw := range s.Records[kindGrants] {
		var g Grant
		if dec(kindGrants, k, raw, &g) {
			st.Grants = append(st.Grants, g)
		}
	}
	st.Tokens = map[string]TokenRecord{}
	for k, raw := range s.Records[kindTokens] {
		var p TokenRecord
		if dec(kindTokens, k, raw, &p) {
			st.Tokens[k] = p
		}
	}
	for k, raw := range s.Records[kindRemoved] {
		var r Removal
		if dec(kindRemoved, k, raw, &r) {
			if st.Removed == nil {
				st.Removed = map[string]Removal{}
			}
			st.Removed[k] = r
		}
	}
	keys := make([]string, 0, len(s.Records[kindEvents]))
	for k := range s.Records[kindEvents] {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		var ev Event
		if dec(kindEvents, k, s.Records[kindEvents][k], &ev) {
			st.Events = append(st.Events, ev)
		}
	}
	if raw, ok := s.Get(kindPlans, planCurrent); ok {
		var ap appliedPlan
		if dec(kindPlans, planCurrent, raw, &ap) {
			st.Pool, st.Plan = ap.Pool, ap.Plan
		}
	}
	if raw, ok := s.Get(kindMeta, metaCounter); ok {
		var c counters
		if dec(kindMeta, metaCounter, raw, &c) {
			st.NextGrant, st.NextEvent = c.NextGrant, c.NextEvent
		}
	}
	if len(errs) > 0 {
		return st, fmt.Errorf("read stored state: %d records unreadable, first: %w", len(errs), errs[0])
	}
	return st, nil
}

func sortStrings(s []string) { slices.Sort(s) }
