package metrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Engine is what one vLLM replica reported.
type Engine struct {
	PromptTokens, GenerationTokens float64
	TTFT, TPOT                     *Histogram
}

// Tokens is prompt plus generated tokens.
func (e Engine) Tokens() float64 { return e.PromptTokens + e.GenerationTokens }

// ParseVLLM reads vLLM's Prometheus text exposition and sums its counters and histograms over
// every label set (one engine may list one model per label set).
func ParseVLLM(r io.Reader) (Engine, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Engine{}, fmt.Errorf("parse vllm metrics: %w", err)
	}
	var e Engine
	e.PromptTokens = sumCounter(fams[VLLMPromptTokens])
	e.GenerationTokens = sumCounter(fams[VLLMGenerationTokens])
	e.TTFT = sumHistogram(fams[VLLMTTFT])
	e.TPOT = sumHistogram(fams[VLLMTPOT])
	if e.TPOT == nil {
		e.TPOT = sumHistogram(fams[VLLMInterToken])
	}
	for _, v := range []float64{e.PromptTokens, e.GenerationTokens} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return Engine{}, fmt.Errorf("parse vllm metrics: token counter %v is not a count", v)
		}
	}
	return e, nil
}

func sumCounter(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	s := 0.0
	for _, m := range f.GetMetric() {
		if c := m.GetCounter(); c != nil {
			s += c.GetValue()
		} else if u := m.GetUntyped(); u != nil {
			s += u.GetValue()
		}
	}
	return s
}

func sumHistogram(f *dto.MetricFamily) *Histogram {
	if f == nil {
		return nil
	}
	var h *Histogram
	for _, m := range f.GetMetric() {
		mh := m.GetHistogram()
		if mh == nil {
			continue
		}
		if h == nil {
			h = &Histogram{Buckets: map[float64]uint64{}}
		}
		h.Count += mh.GetSampleCount()
		h.Sum += mh.GetSampleSum()
		for _, b := range mh.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				h.Buckets[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	return h
}

// Scrape fetches and parses one replica's /metrics.
func Scrape(ctx context.Context, c *http.Client, url string) (Engine, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Engine{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Engine{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Engine{}, fmt.Errorf("scrape %s: status %s", url, resp.Status)
	}
	e, err := ParseVLLM(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Engine{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	return e, nil
}
