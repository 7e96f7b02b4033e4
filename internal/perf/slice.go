package perf

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"gpupool.dev/gpupool/internal/gpu"
)

// Mode is how an engine shares the GPU, or the MIG instance when Slice.Profile is set.
type Mode int

const (
	// Exclusive: the engine owns the GPU or MIG instance.
	Exclusive Mode = iota
	// MPS: the engine is an MPS client with an SM cap (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE); it
	// contends with the other busy clients for the memory bandwidth of the GPU or instance.
	MPS
	// TimeSlice: the engine is one of several CUDA contexts the scheduler runs in turn; it gets
	// the whole GPU or instance while it holds the time slice.
	TimeSlice
)

var modeNames = [...]string{Exclusive: "exclusive", MPS: "mps", TimeSlice: "timeslice"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode accepts exclusive, mps and timeslice (also time-slice, time-slicing).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "exclusive", "":
		return Exclusive, nil
	case "mps":
		return MPS, nil
	case "timeslice", "time-slice", "time-slicing", "timeslicing":
		return TimeSlice, nil
	}
	return 0, fmt.Errorf("parse mode %q: unknown (valid: exclusive, mps, timeslice)", s)
}

// Slice is what one engine replica runs on: a whole GPU or a MIG instance of a board, used
// exclusively, as an MPS client, or as one of several time-sliced contexts. MIG + MPS and
// MIG + time-slicing are a Profile with Mode MPS or TimeSlice: the sharing acts inside the
// instance, never across instances.
type Slice struct {
	Board   *gpu.Board
	Profile *gpu.Profile // a MIG instance of Board; nil: the whole GPU
	Mode    Mode
	// SMPercent is the MPS active-thread percentage, of the GPU's or the instance's SMs, in
	// [1, 100]; 0 means 100 (no cap). Only with Mode MPS.
	SMPercent float64
	// Replicas is how many engines share the GPU or instance through MPS or time-slicing
	// (this one included); 0 or 1: one. With MemoryMiB 0 each gets an equal part of the memory.
	Replicas int
	// MemoryMiB caps the engine's memory (an MPS pinned-memory limit, or a time-slice share);
	// 0: the GPU's or instance's memory divided by Replicas.
	MemoryMiB int64
	// TensorParallel is how many identical slices on as many GPUs the model is split over;
	// 0 or 1: none.
	TensorParallel int
	// ClockCap locks the GPU's graphics clock at this fraction of boost (an energy class, see
	// Options.ClockCap); 0: no lock, the power-limited boost clock.
	ClockCap float64
}

// Name describes the slice for people: "exclusive", "mig 3g.40gb", "mps 50%",
// "mig 3g.40gb + timeslice", with "×2 tp" when tensor-parallel.
func (s Slice) Name() string {
	n := ""
	if s.Profile != nil {
		n = "mig " + s.Profile.Name
	}
	switch s.Mode {
	case MPS:
		pct := s.SMPercent
		if pct == 0 {
			pct = 100
		}
		n = join(n, "mps "+strconv.FormatFloat(pct, 'f', -1, 64)+"%")
	case TimeSlice:
		n = join(n, "timeslice")
	default:
		if n == "" {
			n = "exclusive"
		}
	}
	if s.Mode != Exclusive && s.Replicas > 1 {
		n += " 1/" + strconv.Itoa(s.Replicas)
	}
	if s.TensorParallel > 1 {
		n += " ×" + strconv.Itoa(s.TensorParallel) + " tp"
	}
	if s.ClockCap > 0 && s.ClockCap < 1 {
		n += " @" + strconv.FormatFloat(100*s.ClockCap, 'f', -1, 64) + "% clock"
	}
	return n
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + " + " + b
}

// Validate returns every problem with the slice at once.
func (s Slice) Validate() error {
	if s.Board == nil {
		return errors.New("validate slice: no board")
	}
	b := s.Board
	var errs []error
	if b.SMs <= 0 || b.BandwidthGBs <= 0 || b.BF16TFLOPS <= 0 {
		errs = append(errs, fmt.Errorf("validate slice: board %s: SMs, bandwidth and BF16 TFLOPS must be positive (have %d, %v, %v)",
			b.Name, b.SMs, b.BandwidthGBs, b.BF16TFLOPS))
	}
	if p := s.Profile; p != nil {
		if b.MemorySlices <= 0 {
			errs = append(errs, fmt.Errorf("validate slice: board %s has no MIG but profile %s was given", b.Name, p.Name))
		} else if p.MemorySlices <= 0 || p.MemorySlices > b.MemorySlices {
			errs = append(errs, fmt.Errorf("validate slice: board %s profile %s: memory slices %d outside [1, %d]",
				b.Name, p.Name, p.MemorySlices, b.MemorySlices))
		}
		if p.SMs <= 0 && (p.ComputeSlices <= 0 || b.ComputeSlices <= 0) {
			errs = append(errs, fmt.Errorf("validate slice: board %s profile %s: neither SMs nor compute slices known", b.Name, p.Name))
		}
	}
	if s.Mode < Exclusive || s.Mode > TimeSlice {
		errs = append(errs, fmt.Errorf("validate slice: unknown mode %d", int(s.Mode)))
	}
	if !(s.SMPercent == 0 || s.SMPercent >= 1 && s.SMPercent <= 100) {
		errs = append(errs, fmt.Errorf("validate slice: SM percent %v outside [1, 100] (0: no cap)", s.SMPercent))
	}
	if s.SMPercent != 0 && s.Mode != MPS {
		errs = append(errs, fmt.Errorf("validate slice: SM percent %v set but mode is %s, not mps", s.SMPercent, s.Mode))
	}
	if !(s.ClockCap == 0 || s.ClockCap > 0 && s.ClockCap <= 1) {
		errs = append(errs, fmt.Errorf("validate slice: clock cap %v outside (0, 1] (0: none)", s.ClockCap))
	}
	if s.MemoryMiB < 0 {
		errs = append(errs, fmt.Errorf("validate slice: memory %d MiB is negative", s.MemoryMiB))
	}
	if s.Replicas < 0 || s.Replicas > 1024 {
		errs = append(errs, fmt.Errorf("validate slice: replicas %d outside [0, 1024]", s.Replicas))
	}
	if s.TensorParallel < 0 || s.TensorParallel > 64 {
		errs = append(errs, fmt.Errorf("validate slice: tensor parallel %d outside [0, 64]", s.TensorParallel))
	}
	if s.TensorParallel > 1 && s.Profile != nil {
		errs = append(errs, fmt.Errorf("validate slice: tensor parallel %d over MIG instances (%s): NCCL does not run between MIG instances; use whole GPUs",
			s.TensorParallel, s.Profile.Name))
	}
	if n := b.Interconnect.MaxGPUs; s.TensorParallel > 1 && n > 0 && s.TensorParallel > n {
		errs = append(errs, fmt.Errorf("validate slice: tensor parallel %d beyond the %d GPUs board %s's %s connects",
			s.TensorParallel, n, b.Name, b.Interconnect.Kind))
	}
	return errors.Join(errs...)
}

// Load is the sharing situation at one moment: how many other engines on the same GPU (or MIG
// instance) have work right now. Idle neighbours cost nothing; only active ones slow this engine.
// A simulator that knows which neighbours are busy during a step passes Active = that number and
// Duty = 1; a planner that only knows how many replicas share the GPU passes Active = the others
// and Duty = 0 (symmetric replicas).
type Load struct {
	// Active is the number of other MPS clients or time-sliced contexts with pending work on the
	// same GPU or MIG instance. Ignored for Mode Exclusive.
	Active int `json:"active"`
	// Duty is the fraction of time each active neighbour keeps the GPU busy; 0 means "like this
	// engine" (symmetric replicas): the engine's own GPU-busy fraction of the step.
	Duty float64 `json:"duty,omitempty"`
	// SMPercent is each active MPS neighbour's cap in % of the GPU or instance; 0: this slice's.
	SMPercent float64 `json:"smPercent,omitempty"`
	// BoardBusy is the fraction of the board's SMs kept busy by other slices (other MIG
	// instances); it lowers the power-limited clock of everyone on the board.
	BoardBusy float64 `json:"boardBusy,omitempty"`
}

// resources are a slice's static shares of its board, as fractions of the whole board.
type resources struct {
	instSM       float64 // SMs of the GPU or instance, as a fraction of the board's SMs
	sm           float64 // SMs this engine may use when alone (instance × MPS cap)
	bw           float64 // memory bandwidth share of the GPU or instance
	peakFLOPS    float64 // board peak for the model's compute type, FLOP/s
	peakBW       float64 // board bandwidth, bytes/s
	memBytes     float64 // memory the engine may use, bytes
	instMemBytes float64 // memory of the GPU or instance, bytes
	tp           float64 // tensor-parallel degree, ≥ 1
	kvShare      float64 // the part of each token's KV cache one tensor-parallel GPU holds
	busBW        float64 // all-reduce bus bandwidth between the tensor-parallel GPUs, bytes/s
	commSM       float64 // SMs an all-reduce kernel occupies, as a fraction of the board's SMs
}

// resolve turns a validated slice into its shares of the board.
func (s Slice) resolve(computeTFLOPS float64) resources {
	b := s.Board
	r := resources{instSM: 1, bw: 1, peakFLOPS: computeTFLOPS * 1e12, peakBW: b.BandwidthGBs * 1e9, tp: 1}
	mem := float64(b.MemoryMiB)
	if p := s.Profile; p != nil {
		sms := float64(p.SMs)
		if sms <= 0 {
			inMIG := b.SMsInMIG
			if inMIG <= 0 {
				inMIG = b.SMs
			}
			sms = float64(p.ComputeSlices) / float64(b.ComputeSlices) * float64(inMIG)
		}
		r.instSM = math.Min(1, sms/float64(b.SMs))
		r.bw = float64(p.MemorySlices) / float64(b.MemorySlices)
		if p.MemoryMiB > 0 {
			mem = float64(p.MemoryMiB)
		} else {
			mem *= r.bw
		}
	}
	r.sm = r.instSM
	if s.Mode == MPS && s.SMPercent > 0 {
		r.sm = r.instSM * s.SMPercent / 100
	}
	r.instMemBytes = mem * mib
	switch {
	case s.MemoryMiB > 0 && float64(s.MemoryMiB) < mem:
		mem = float64(s.MemoryMiB)
	case s.MemoryMiB == 0 && s.Mode != Exclusive && s.Replicas > 1:
		mem /= float64(s.Replicas)
	}
	r.memBytes = mem * mib
	if s.TensorParallel > 1 {
		r.tp = float64(s.TensorParallel)
	}
	return r
}

const mib = 1 << 20
