package main

import (
	"bytes"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	v1 "gpupool.dev/gpupool/api/v1"
	"gpupool.dev/gpupool/internal/sim"
)

// renderPlots draws, as PNG and SVG: one latency CDF per metric (TTFT, TPOT, end-to-end; one
// line per tenant, log-scaled milliseconds) and the GPUs' utilisation timeline. The caller
// writes them (atomically, with writeOutDir).
func renderPlots(pool *v1.Pool, res *sim.Result) ([]outFile, error) {
	var files []outFile
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
				return nil, err
			}
			n++
		}
		if n == 0 {
			continue
		}
		if err := savePlot(&files, p, mt.file); err != nil {
			return nil, err
		}
	}
	if err := drawTimeline(&files, pool, res); err != nil {
		return nil, err
	}
	return files, nil
}

func drawTimeline(files *[]outFile, pool *v1.Pool, res *sim.Result) error {
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
	return savePlot(files, p, "utilisation")
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

func savePlot(files *[]outFile, p *plot.Plot, base string) error {
	for _, ext := range []string{"png", "svg"} {
		w, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, ext)
		if err != nil {
			return fmt.Errorf("draw plot %s.%s: %w", base, ext, err)
		}
		var b bytes.Buffer
		if _, err := w.WriteTo(&b); err != nil {
			return fmt.Errorf("draw plot %s.%s: %w", base, ext, err)
		}
		*files = append(*files, outFile{Path: base + "." + ext, Data: b.Bytes()})
	}
	return nil
}
