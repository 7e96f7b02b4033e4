package agent

import (
	"fmt"
	"slices"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/gpu"
)

// ApplyPlan fills the desired state of this node's GPUs (Config.Node) from a Plan: a mig GPU's
// instances become its layout; an mps GPU gets an MPS daemon whose default limits are the
// smallest of its replicas' (a client that sets no limit of its own then gets the least share
// any replica was planned with; each replica's own limit is set in its environment by the
// deployment render writes; with mpsDaemons: cluster the cluster runs them and the agent none).
// GPUs the Config lists itself keep the Config's values. It returns
// how many GPUs of the node the plan had.
func ApplyPlan(c *Config, s *Settings, p *v1.Plan) (int, error) {
	if c.Node == "" {
		return 0, fmt.Errorf("apply plan %s: config has no node name to find the node's GPUs", p.Metadata.Name)
	}
	listed := map[int]bool{}
	for _, g := range c.GPUs {
		listed[g.Index] = true
	}
	n := 0
	for i, g := range p.GPUs {
		if g.Node != c.Node {
			continue
		}
		n++
		if listed[g.Index] {
			continue
		}
		gc := GPUConfig{Index: g.Index}
		switch g.Mode {
		case v1.ModeMIG:
			l := gpu.Layout{}
			for _, in := range g.Instances {
				l = append(l, gpu.Instance{Profile: in.Profile, Start: in.Start})
			}
			if b, err := gpu.Lookup(g.Board); err == nil {
				if err := b.Validate(l); err != nil {
					return n, fmt.Errorf("apply plan %s: gpus[%d] (%s/%d): %w", p.Metadata.Name, i, g.Node, g.Index, err)
				}
			}
			gc.Layout = l.String()
			s.Layouts[g.Index] = l
		case v1.ModeMPS:
			if c.MPSDaemons != MPSDaemonsCluster {
				gc.MPS = mpsDefaults(g.Replicas)
			}
		}
		c.GPUs = append(c.GPUs, gc)
	}
	slices.SortFunc(c.GPUs, func(a, b GPUConfig) int { return a.Index - b.Index })
	return n, nil
}

func mpsDefaults(rs []v1.PlanReplica) *MPSConfig {
	m := &MPSConfig{}
	var mem v1.Bytes
	for _, r := range rs {
		if r.Limits.SMPercent > 0 && (m.ActiveThreadPercent == 0 || r.Limits.SMPercent < m.ActiveThreadPercent) {
			m.ActiveThreadPercent = r.Limits.SMPercent
		}
		if r.Limits.Memory > 0 && (mem == 0 || r.Limits.Memory < mem) {
			mem = r.Limits.Memory
		}
	}
	if mem > 0 {
		m.PinnedMemory = fmt.Sprintf("%dM", int64(mem)/(1<<20))
	}
	return m
}
