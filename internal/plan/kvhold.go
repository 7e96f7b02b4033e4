package plan

import "math"

// zKVHold is the standard normal quantile of the in-flight requests the KV cache must hold:
// the 99.9th percentile. With the 99th, about 1 % of arrivals would find a full cache (and wait
// or preempt a running request for recompute), which is the whole budget of a p99 target.
const zKVHold = 3.090

// inFlightP999 is the 99.9th percentile of a Poisson count of mean m (normal approximation):
// m + z·√m. By Little's law the mean in-flight count is rate × mean end-to-end latency, and with
// Poisson arrivals and independent service times the in-flight count is Poisson (M/G/∞).
func inFlightP999(m float64) float64 { return m + zKVHold*math.Sqrt(m) }

// meanInFlight inverts inFlightP999: the largest mean m with m + z·√m ≤ n.
func meanInFlight(n float64) float64 {
	if n <= 0 {
		return 0
	}
	s := (-zKVHold + math.Sqrt(zKVHold*zKVHold+4*n)) / 2
	return s * s
}
