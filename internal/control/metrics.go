package control

// Prometheus collectors of the API. They live here until the shared metrics package exists; the
// names follow gpupool_<subsystem>_<name>.

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type apiMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newAPIMetrics(loop *Loop) *apiMetrics {
	m := &apiMetrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gpupool_api_requests_total",
		Help: "API requests by route and status code."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gpupool_api_request_duration_seconds",
		Help: "API request latency by route.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"route"})
	m.reg.MustRegister(m.requests, m.latency, grantsCollector{loop},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *apiMetrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

func (m *apiMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	descGrants = prometheus.NewDesc("gpupool_grants", "Slices granted per tenant.", []string{"tenant"}, nil)
	descDemand = prometheus.NewDesc("gpupool_demand_replicas", "Replicas each tenant asks for.", []string{"tenant"}, nil)
	descCap    = prometheus.NewDesc("gpupool_capacity_slices", "Live slices in the pool.", nil, nil)
)

// grantsCollector reads the latest view at scrape time.
type grantsCollector struct{ loop *Loop }

func (grantsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGrants
	ch <- descDemand
	ch <- descCap
}

func (c grantsCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.loop.View()
	ch <- prometheus.MustNewConstMetric(descCap, prometheus.GaugeValue, float64(v.Capacity))
	for _, t := range v.Tenants {
		ch <- prometheus.MustNewConstMetric(descGrants, prometheus.GaugeValue, float64(t.Granted), t.Name)
		ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, float64(t.Demand), t.Name)
	}
}
