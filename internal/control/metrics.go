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
	descGates  = prometheus.NewDesc("gpupool_gate_operations", "Unfinished gate operations (MIG changes) by state; lost counts the started ones of lost nodes, which do not hold maxUnavailable.", []string{"state"}, nil)
	descNodes  = prometheus.NewDesc("gpupool_nodes", "Registered nodes by state.", []string{"state"}, nil)
	descGaveUp = prometheus.NewDesc("gpupool_gate_given_up_gpus", "GPUs whose last MIG change was given up after its attempts (a re-plan does not ask it again).", nil, nil)
)

// grantsCollector reads the latest view at scrape time.
type grantsCollector struct{ loop *Loop }

func (grantsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGrants
	ch <- descDemand
	ch <- descCap
	ch <- descGates
	ch <- descNodes
	ch <- descGaveUp
}

func (c grantsCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.loop.View()
	ch <- prometheus.MustNewConstMetric(descCap, prometheus.GaugeValue, float64(v.Capacity))
	gates := map[string]int{string(GateWaiting): 0, string(GateDraining): 0, string(GateApplying): 0, "lost": 0}
	nodes := map[string]int{"ready": 0, "cordoned": 0, "lost": 0}
	gaveUp := 0
	for _, n := range v.Nodes {
		switch {
		case n.Lost:
			nodes["lost"]++
		case n.Cordoned:
			nodes["cordoned"]++
		default:
			nodes["ready"]++
		}
		gaveUp += len(n.GaveUp)
		for _, op := range n.Gates {
			gates[string(op.State)]++
			if n.Lost && op.State != GateWaiting {
				gates["lost"]++
			}
		}
	}
	for state, k := range gates {
		ch <- prometheus.MustNewConstMetric(descGates, prometheus.GaugeValue, float64(k), state)
	}
	for state, k := range nodes {
		ch <- prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(k), state)
	}
	ch <- prometheus.MustNewConstMetric(descGaveUp, prometheus.GaugeValue, float64(gaveUp))
	for _, t := range v.Tenants {
		ch <- prometheus.MustNewConstMetric(descGrants, prometheus.GaugeValue, float64(t.Granted), t.Name)
		ch <- prometheus.MustNewConstMetric(descDemand, prometheus.GaugeValue, float64(t.Demand), t.Name)
	}
}
