package fair

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gpupool.dev/gpupool/internal/gpu"
)

// Resource names a slice kind is charged in.
const (
	ResourceSM        = "sm"        // streaming multiprocessors
	ResourceHBM       = "hbm"       // device memory, MiB
	ResourceBandwidth = "bandwidth" // memory bandwidth, GB/s
)

// SliceShape is what one slice of a kind is charged as: one count of the kind itself (a
// capacity constraint) plus its SMs, memory and bandwidth, which make different kinds on
// different boards comparable in dominant shares.
type SliceShape struct {
	Kind   string `json:"kind"`
	Vector Vector `json:"vector"`
	// Estimated names the fields derived by proportion because the board table has no measured
	// value for them (for example SMs of a profile no public `nvidia-smi mig -lgip` shows).
	Estimated []string `json:"estimated,omitempty"`
}

// SliceVector maps a slice kind to its shape through the board table. Kinds are
//
//	BOARD/PROFILE    a MIG instance, e.g. H100-SXM5-80GB/3g.40gb: the profile's SMs and MiB, and
//	                 the board's bandwidth times the profile's share of memory slices (a memory
//	                 slice carries its memory controllers, so bandwidth follows memory slices);
//	BOARD/mps-P      an MPS share of P percent (1..100): P% of the board's SMs, memory and bandwidth;
//	BOARD/exclusive  the whole GPU without MIG.
//
// so H100-SXM5-80GB/3g.40gb is sm 60 (of 132), hbm 40448 MiB and bandwidth 4/8 of 3350 GB/s.
func SliceVector(kind string) (SliceShape, error) {
	i := strings.LastIndexByte(kind, '/')
	if i <= 0 || i == len(kind)-1 {
		return SliceShape{}, fmt.Errorf("parse slice kind %q: want BOARD/PROFILE, BOARD/mps-P or BOARD/exclusive", kind)
	}
	b, err := gpu.Lookup(kind[:i])
	if err != nil {
		return SliceShape{}, fmt.Errorf("parse slice kind %q: %w", kind, err)
	}
	s, err := sliceShapeOn(b, kind[i+1:])
	if err != nil {
		return SliceShape{}, fmt.Errorf("parse slice kind %q: %w", kind, err)
	}
	s.Kind = b.Name + "/" + kind[i+1:]
	s.Vector[s.Kind] = 1
	return s, nil
}

// sliceShapeOn computes the physical part of a shape on board b (without the kind count).
func sliceShapeOn(b *gpu.Board, sub string) (SliceShape, error) {
	switch {
	case sub == "exclusive":
		return wholeShare(b, 1)
	case strings.HasPrefix(sub, "mps-"):
		p, err := strconv.Atoi(strings.TrimPrefix(sub, "mps-"))
		if err != nil || p < 1 || p > 100 {
			return SliceShape{}, fmt.Errorf("MPS share %q: want mps-P with P a whole percentage 1..100", sub)
		}
		return wholeShare(b, float64(p)/100)
	}
	p, err := b.Profile(sub)
	if err != nil {
		return SliceShape{}, err
	}
	if b.MemorySlices == 0 || b.ComputeSlices == 0 {
		return SliceShape{}, fmt.Errorf("board %s: no MIG slice geometry", b.Name)
	}
	s := SliceShape{Vector: Vector{}}
	s.Vector[ResourceSM] = float64(p.SMs)
	if p.SMs == 0 {
		migSMs := b.SMsInMIG
		if migSMs == 0 {
			migSMs = b.SMs
		}
		if migSMs == 0 {
			return SliceShape{}, fmt.Errorf("board %s profile %s: SM count unknown", b.Name, p.Name)
		}
		s.Vector[ResourceSM] = float64(migSMs) * float64(p.ComputeSlices) / float64(b.ComputeSlices)
		s.Estimated = append(s.Estimated, ResourceSM)
	}
	s.Vector[ResourceHBM] = float64(p.MemoryMiB)
	if p.MemoryMiB == 0 {
		s.Vector[ResourceHBM] = float64(b.MemoryMiB) * float64(p.MemorySlices) / float64(b.MemorySlices)
		s.Estimated = append(s.Estimated, ResourceHBM)
	}
	s.Vector[ResourceBandwidth] = b.BandwidthGBs * float64(p.MemorySlices) / float64(b.MemorySlices)
	return s, nil
}

func wholeShare(b *gpu.Board, f float64) (SliceShape, error) {
	if b.SMs == 0 {
		return SliceShape{}, fmt.Errorf("board %s: SM count unknown", b.Name)
	}
	return SliceShape{Vector: Vector{
		ResourceSM:        float64(b.SMs) * f,
		ResourceHBM:       float64(b.MemoryMiB) * f,
		ResourceBandwidth: b.BandwidthGBs * f,
	}}, nil
}

// SliceCapacity sums counts of slice kinds into a pool capacity: each kind's count plus the
// SMs, memory and bandwidth of all its slices. It also returns the estimated fields per kind.
func SliceCapacity(counts map[string]int) (Vector, map[string][]string, error) {
	out, est := Vector{}, map[string][]string{}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var errs []error
	for _, k := range kinds {
		n := counts[k]
		if n < 0 {
			errs = append(errs, fmt.Errorf("slice kind %q: count %d is negative", k, n))
			continue
		}
		s, err := SliceVector(k)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for r, x := range s.Vector {
			out[r] += x * float64(n)
		}
		if len(s.Estimated) > 0 {
			est[s.Kind] = s.Estimated
		}
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	return out, est, nil
}
