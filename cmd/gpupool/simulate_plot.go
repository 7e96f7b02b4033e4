package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// writePlots writes into dir, as PNG and SVG: one latency CDF per metric (TTFT, TPOT,
// end-to-end; one line per tenant, log-scaled milliseconds) and the GPUs' utilisation timeline.
func writePlots(dir string, pool *v1.Pool, res *sim.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write plots: %w", err)
	}
	metrics := []struct {
		m          sim.Metric
		file, name string
	}{{sim.TTFT, "latency-ttft", "time to first token"}, {sim.TPOT, "latency-tpot", "time per output token"},
		{sim.E2E, "latency-e2e", "end-to-end latency"}}
	for _, mt := range metrics {
		p := plot.New()
		p.Title.Text = pool.Metadata.Name + ": " + mt.name + " (CDF)"
		p.X.Label.Text = "milliseconds"
		p.Y.Label.Text = "fraction of requests"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = 0, 1
		p.Legend.Top, p.Legend.Left = false, false
		n := 0
		for i, t := range res.Report.Tenants {
			pts := res.CDF(i, mt.m)
			if len(pts) == 0 {
				continue
			}
			xys := make(plotter.XYs, 0, len(pts))
			for _, q := range pts {
				xys = append(xys, plotter.XY{X: max(q.Ms, 0.001), Y: q.Fraction})
			}
			if err := addLine(p, t.Name, xys, n); err != nil {
				return err
			}
			n++
		}
		if n == 0 {
			continue
		}
		if err := savePlot(p, dir, mt.file); err != nil {
			return err
		}
	}
	return writeTimeline(dir, pool, res)
}

func writeTimeline(dir string, pool *v1.Pool, res *sim.Result) error {
	tl, bucket := res.Timeline()
	p := plot.New()
	p.Title.Text = pool.Metadata.Name + ": GPU utilisation"
	p.X.Label.Text = "minutes"
	p.Y.Label.Text = "SM-weighted busy fraction"
	p.Y.Min, p.Y.Max = 0, 1.05
	for g, series := range tl {
		xys := make(plotter.XYs, len(series))
		for k, u := range series {
			xys[k] = plotter.XY{X: (float64(k) + 0.5) * bucket.Minutes(), Y: u}
		}
		if err := addLine(p, res.Report.GPUs[g].GPU+" ("+res.Report.GPUs[g].Mode+")", xys, g); err != nil {
			return err
		}
	}
	return savePlot(p, dir, "utilisation")
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, i int) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	l.Color = plotutil.Color(i)
	l.Dashes = plotutil.Dashes(i / 7)
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func savePlot(p *plot.Plot, dir, base string) error {
	for _, ext := range []string{".png", ".svg"} {
		path := filepath.Join(dir, base+ext)
		if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
			return fmt.Errorf("write plot %s: %w", path, err)
		}
	}
	return nil
}
