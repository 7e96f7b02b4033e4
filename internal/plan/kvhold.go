package plan

import (
	"fmt"
	"math"

	"gpupool.dev/gpupool/internal/perf"
)

// zKVHold is the standard normal quantile of the in-flight requests the KV cache must hold:
// the 99.9th percentile. With the 99th, about 1 % of arrivals would find a full cache (and wait
// or preempt a running request for recompute), which is the whole budget of a p99 target.
const zKVHold = 3.090

// kvHold is what the KV cache of one replica allows: the highest Poisson rate at which it holds
// the in-flight requests' tokens with probability 99.9 %.
type kvHold struct {
	tokens int64   // the replica's KV-cache capacity
	seq    int     // tokens one request holds at its end: prompt + output
	rate   float64 // the highest rate the cache holds (req/s); 0 when it holds no request
	// need is the cache, in tokens, that the performance model's rate would need; 0 when the
	// cache does not bind.
	need int64
	// model is the rate the performance model allows before the cache is considered.
	model float64
}

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

// holdKV derates rate so that the replica's KV cache (tokens) holds the p99.9 of the requests in
// flight, each counted at its full prompt + output length (a request's blocks are all allocated
// by its end, and vLLM preempts by recompute when they run out). The mean end-to-end latency at
// a mean concurrency m comes from the performance model's closed loop (Estimate at ⌈m⌉ requests
// in flight, slower than at m), so m / E2E is the rate with m in flight by Little's law.
func holdKV(e *perf.Engine, w perf.Workload, l perf.Load, tokens int64, rate float64) (kvHold, error) {
	h := kvHold{tokens: tokens, seq: w.InputTokens + w.OutputTokens, model: rate}
	m := meanInFlight(float64(tokens) / float64(h.seq))
	if m <= 0 {
		return h, nil
	}
	cw := w
	cw.Concurrency = int(math.Ceil(m))
	res, err := e.Estimate(cw, l)
	if err != nil {
		return h, fmt.Errorf("hold kv cache: %w", err)
	}
	if res.E2E <= 0 {
		return h, nil
	}
	h.rate = m / res.E2E.Seconds()
	if h.rate < rate {
		// The model's own rate would keep rate × E2E in flight; its p99.9 needs this many tokens.
		h.need = int64(math.Ceil(inFlightP999(rate*res.E2E.Seconds()) * float64(h.seq)))
	}
	return h, nil
}

// sentence says what the KV cache holds against what the rate would need, for reasons.
func (h kvHold) sentence() string {
	if h.rate <= 0 {
		return fmt.Sprintf("the KV cache holds %s tokens, less than one %d-token request with room for Poisson bursts", group(h.tokens), h.seq)
	}
	return fmt.Sprintf("the KV cache holds %s tokens: the 99.9th percentile of in-flight %d-token requests fits only up to %.3g req/s (%.3g req/s would need %s tokens)",
		group(h.tokens), h.seq, h.rate, h.model, group(h.need))
}

// group writes n with thousands separators: 7328 → "7,328".
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
