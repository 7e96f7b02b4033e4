// Package metrics exposes the node agent's measurements to Prometheus (client_golang), and reads
// vLLM's own metrics from each replica.
//
// Names live in names.go and nowhere else. The Collector reads a Snapshot from a Source (one
// method, read-only) at every scrape and emits constant metrics, so a tenant or slice that
// disappears disappears from /metrics too. Per tenant and per slice: device memory used (from
// NVML's per-process numbers) against the plan's budget, SM share, tokens, joules and J/token,
// TTFT and TPOT histograms re-exposed from vLLM, SLO attainment; per daemon: MPS restarts and
// health; per GPU: the energy counter, its idle line and critical XID events; per node: the gate's phase, cordon
// and change outcomes.
//
// # Energy attribution
//
// NVML's energy counter is per GPU. SplitIdle first keeps the GPU's idle power over the interval
// on its idle line (all of the energy while no tenant runs on it; docs/cost.md); Attribute then
// splits the energy above it among the slices on it:
//
//   - MIG: by instance, in proportion to each occupied instance's compute slices (a 3g instance
//     carries 3/7 of a 7-slice GPU's draw when every slice is occupied; unoccupied slices' share
//     is spread over the occupied ones). NVML has no per-instance power, so this is a model.
//   - MPS and time-slicing: by each process's SM utilisation over the interval (NVML's
//     per-process samples); when no process reports any, evenly.
//
// J/token divides a tenant's joules by the tokens its engines generated over the same interval
// (vllm:generation_tokens_total and vllm:prompt_tokens_total differences scraped from each
// replica's /metrics by Scrape).
package metrics
