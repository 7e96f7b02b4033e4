package perf

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Measured is a measured profile table: for each instance size (GPCs, i.e. MIG compute slices;
// 7 is the whole A100/H100), number of processes sharing it through MPS, and batch size, the
// throughput per process and the latency of one batch. Where a tenant carries one, it wins over
// the model (Engine.WithMeasured).
type Measured struct {
	name string
	rows map[measuredKey][]MeasuredPoint // sorted by batch
}

type measuredKey struct{ gpcs, procs int }

// MeasuredPoint is one row of a table. Runnable is false for rows measured as not runnable
// (ParvaGPU writes 0,0, e.g. out of memory).
type MeasuredPoint struct {
	GPCs       int           `json:"gpcs"`
	Procs      int           `json:"procs"`
	Batch      float64       `json:"batch"`
	Throughput float64       `json:"throughput"` // requests/s per process
	Latency    time.Duration `json:"latency"`    // one batch
	Runnable   bool          `json:"runnable"`
}

// parvaHeader is ParvaGPU's profile CSV header (prof_data/<model>.csv).
var parvaHeader = []string{"mig instance", "batch size", "workload number", "throughput", "latency"}

// maxParseErrors bounds how many row errors one parse reports.
const maxParseErrors = 20

// ParseParvaGPU reads a ParvaGPU (SC'24) profile CSV: columns Mig instance (GPCs), Batch size,
// Workload Number (MPS processes), Throughput (requests/s per process), Latency (seconds per
// batch); a row of 0,0 is not runnable. Every bad row is reported, each with its line.
func ParseParvaGPU(name string, r io.Reader) (*Measured, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	wrap := func(err error) error { return fmt.Errorf("parse measured profile %s: %w", name, err) }
	head, err := cr.Read()
	if err != nil {
		return nil, wrap(fmt.Errorf("line 1: header: %w", err))
	}
	if err := checkHeader(head); err != nil {
		return nil, wrap(err)
	}
	m := &Measured{name: name, rows: map[measuredKey][]MeasuredPoint{}}
	seen := map[[3]float64]int{}
	var errs []error
	last := 1
	for len(errs) < maxParseErrors {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				errs = append(errs, fmt.Errorf("line %d: %w", pe.Line, pe.Err))
				continue
			}
			errs = append(errs, fmt.Errorf("line %d: %w", last+1, err))
			break
		}
		line, _ := cr.FieldPos(0) // a record always has a field 0
		last = line
		p, err := parseParvaRow(rec)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", line, err))
			continue
		}
		k := [3]float64{float64(p.GPCs), float64(p.Procs), p.Batch}
		if first, dup := seen[k]; dup {
			errs = append(errs, fmt.Errorf("line %d: duplicate of line %d (instance %d, batch %v, processes %d)",
				line, first, p.GPCs, p.Batch, p.Procs))
			continue
		}
		seen[k] = line
		key := measuredKey{p.GPCs, p.Procs}
		m.rows[key] = append(m.rows[key], p)
	}
	if len(errs) > 0 {
		return nil, wrap(errors.Join(errs...))
	}
	if len(m.rows) == 0 {
		return nil, wrap(errors.New("no rows"))
	}
	for _, ps := range m.rows {
		slices.SortFunc(ps, func(a, b MeasuredPoint) int { return cmpFloat(a.Batch, b.Batch) })
	}
	return m, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func checkHeader(head []string) error {
	if len(head) != len(parvaHeader) {
		return fmt.Errorf("line 1: header has %d columns, want %d (%s)", len(head), len(parvaHeader), strings.Join(parvaHeader, ", "))
	}
	for i, h := range head {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if h != parvaHeader[i] {
			return fmt.Errorf("line 1: column %d is %q, want %q", i+1, head[i], parvaHeader[i])
		}
	}
	return nil
}

func parseParvaRow(rec []string) (MeasuredPoint, error) {
	if len(rec) != len(parvaHeader) {
		return MeasuredPoint{}, fmt.Errorf("%d fields, want %d", len(rec), len(parvaHeader))
	}
	var errs []error
	integer := func(col string, s string, lo, hi int) int {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < lo || v > hi {
			errs = append(errs, fmt.Errorf("field %s: %q is not an integer in [%d, %d]", col, s, lo, hi))
		}
		return v
	}
	number := func(col string, s string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v > 1e12 {
			errs = append(errs, fmt.Errorf("field %s: %q is not a finite number ≥ 0", col, s))
		}
		return v
	}
	p := MeasuredPoint{
		GPCs:  integer(parvaHeader[0], rec[0], 1, 8),
		Batch: float64(integer(parvaHeader[1], rec[1], 1, 1<<20)),
		Procs: integer(parvaHeader[2], rec[2], 1, 64),
	}
	tput, lat := number(parvaHeader[3], rec[3]), number(parvaHeader[4], rec[4])
	if len(errs) > 0 {
		return MeasuredPoint{}, errors.Join(errs...)
	}
	switch {
	case tput == 0 && lat == 0:
	case tput > 0 && lat > 0:
		p.Throughput, p.Latency, p.Runnable = tput, seconds(lat), true
	default:
		return MeasuredPoint{}, fmt.Errorf("throughput %v and latency %v: both must be positive, or both 0 (not runnable)", tput, lat)
	}
	return p, nil
}

// Name is the table's name (the model it measures).
func (m *Measured) Name() string { return m.name }

// Points returns every row, sorted by instance size, processes, then batch.
func (m *Measured) Points() []MeasuredPoint {
	var out []MeasuredPoint
	for _, ps := range m.rows {
		out = append(out, ps...)
	}
	slices.SortFunc(out, func(a, b MeasuredPoint) int {
		if a.GPCs != b.GPCs {
			return a.GPCs - b.GPCs
		}
		if a.Procs != b.Procs {
			return a.Procs - b.Procs
		}
		return cmpFloat(a.Batch, b.Batch)
	})
	return out
}

// At returns the row at (gpcs, procs, batch), interpolating linearly in batch between the two
// measured batches around it. It fails, naming what is missing, when the instance size or process
// count was not measured, when batch is outside the measured range, or when a neighbouring row
// is not runnable.
func (m *Measured) At(gpcs, procs int, batch float64) (MeasuredPoint, error) {
	p, err := m.at(gpcs, procs, batch)
	if err != nil {
		return MeasuredPoint{}, fmt.Errorf("look up measured profile %s: %w", m.name, err)
	}
	return p, nil
}

var errNotRunnable = errors.New("not runnable (measured as 0,0)")

func (m *Measured) at(gpcs, procs int, batch float64) (MeasuredPoint, error) {
	ps := m.rows[measuredKey{gpcs, procs}]
	if len(ps) == 0 {
		return MeasuredPoint{}, fmt.Errorf("no rows for a %d-GPC instance with %d processes", gpcs, procs)
	}
	if !(batch >= ps[0].Batch && batch <= ps[len(ps)-1].Batch) {
		return MeasuredPoint{}, fmt.Errorf("batch %v outside the measured range [%v, %v] of the %d-GPC instance with %d processes",
			batch, ps[0].Batch, ps[len(ps)-1].Batch, gpcs, procs)
	}
	i, _ := slices.BinarySearchFunc(ps, batch, func(p MeasuredPoint, b float64) int { return cmpFloat(p.Batch, b) })
	if ps[i].Batch == batch {
		if !ps[i].Runnable {
			return MeasuredPoint{}, fmt.Errorf("batch %v on a %d-GPC instance with %d processes: %w", batch, gpcs, procs, errNotRunnable)
		}
		return ps[i], nil
	}
	a, b := ps[i-1], ps[i]
	if !a.Runnable || !b.Runnable {
		return MeasuredPoint{}, fmt.Errorf("batch %v on a %d-GPC instance with %d processes: a neighbouring batch is %w",
			batch, gpcs, procs, errNotRunnable)
	}
	f := (batch - a.Batch) / (b.Batch - a.Batch)
	return MeasuredPoint{GPCs: gpcs, Procs: procs, Batch: batch, Runnable: true,
		Throughput: a.Throughput + f*(b.Throughput-a.Throughput),
		Latency:    a.Latency + time.Duration(f*float64(b.Latency-a.Latency))}, nil
}

// Best returns the measured row with the highest total throughput (per process × processes)
// whose batch latency is within latency, as ParvaGPU's configurator picks; an error when none is.
func (m *Measured) Best(gpcs, procs int, latency time.Duration) (MeasuredPoint, error) {
	var best MeasuredPoint
	for _, p := range m.rows[measuredKey{gpcs, procs}] {
		if p.Runnable && p.Latency <= latency && p.Throughput > best.Throughput {
			best = p
		}
	}
	if !best.Runnable {
		return MeasuredPoint{}, fmt.Errorf("look up measured profile %s: no runnable row for a %d-GPC instance with %d processes within %v",
			m.name, gpcs, procs, latency)
	}
	return best, nil
}

// measuredBinding is a table bound to an engine's instance size.
type measuredBinding struct {
	t    *Measured
	gpcs int
}

// latency is the measured batch latency in seconds at batch d with 1 + l.Active processes.
func (b *measuredBinding) latency(d float64, l Load) (float64, bool) {
	p, err := b.t.at(b.gpcs, 1+max(l.Active, 0), d)
	if err != nil {
		return 0, false
	}
	return p.Latency.Seconds(), true
}

// WithMeasured returns a copy of e whose decode-only steps take the table's latency at the batch
// (decode sequences) and process count (1 + active neighbours) of the engine's instance size:
// measured data wins over the model. Steps outside the table fall back to the model. It fails
// when the table has nothing for the instance size with one process.
func (e *Engine) WithMeasured(t *Measured) (*Engine, error) {
	if t == nil {
		return nil, fmt.Errorf("bind measured profile to %s: no table", e.s.Name())
	}
	gpcs := e.s.Board.ComputeSlices
	if e.s.Profile != nil {
		gpcs = e.s.Profile.ComputeSlices
	}
	if len(t.rows[measuredKey{gpcs, 1}]) == 0 {
		return nil, fmt.Errorf("bind measured profile %s to %s: no rows for a %d-GPC instance with 1 process",
			t.name, e.s.Name(), gpcs)
	}
	c := *e
	c.measured = &measuredBinding{t: t, gpcs: gpcs}
	return &c, nil
}
