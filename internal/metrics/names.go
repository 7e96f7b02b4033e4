package metrics

// Every metric the agent exposes. Units follow Prometheus conventions (base units, _total for
// counters, _ratio for 0–1 shares).
const (
	NameSliceMemoryUsed    = "gpupool_slice_memory_used_bytes"
	NameSliceMemoryPlanned = "gpupool_slice_memory_planned_bytes"
	NameSliceSMShare       = "gpupool_slice_sm_share_ratio"
	NameTenantTokens       = "gpupool_tenant_tokens_total"
	NameTenantOutputTokens = "gpupool_tenant_output_tokens_total"
	NameTenantEnergy       = "gpupool_tenant_energy_joules_total"
	NameTenantGPUEnergy    = "gpupool_tenant_gpu_energy_joules_total"
	NameTenantJPerToken    = "gpupool_tenant_joules_per_token"
	NameTenantTTFT         = "gpupool_tenant_time_to_first_token_seconds"
	NameTenantTPOT         = "gpupool_tenant_time_per_output_token_seconds"
	NameTenantSLO          = "gpupool_tenant_slo_attainment_ratio"
	NameGPUEnergy          = "gpupool_gpu_energy_joules_total"
	NameGPUIdleEnergy      = "gpupool_gpu_idle_energy_joules_total"
	NameGPUInfo            = "gpupool_gpu_info"
	NameGPUEnergySplit     = "gpupool_gpu_energy_split_info"
	NameGPUXID             = "gpupool_gpu_xid_errors_total"
	NameMPSRestarts        = "gpupool_mps_daemon_restarts_total"
	NameMPSHealthy         = "gpupool_mps_daemon_healthy"
	NameGatePhase          = "gpupool_gate_phase"
	NameGateCordoned       = "gpupool_gate_cordoned"
	NameGateChanges        = "gpupool_gate_changes_total"
	NamePollDuration       = "gpupool_agent_poll_duration_seconds"

	// Cost, from the pool's policy.cost in the agent's config, by docs/cost.md's rule per GPU
	// and polling interval (idle policy none: the idle line stays the node's). Per hour:
	// rate(…[1h]) × 3600.
	NameTenantChargeback     = "gpupool_tenant_chargeback_cost_total"
	NameTenantShowback       = "gpupool_tenant_showback_cost_total"
	NameTenantCarbonLocation = "gpupool_tenant_carbon_location_based_grams_total"
	NameTenantCarbonMarket   = "gpupool_tenant_carbon_market_based_grams_total"
	NameIdleChargeback       = "gpupool_idle_chargeback_cost_total"
	NameIdleShowback         = "gpupool_idle_showback_cost_total"
	NameIdleCarbonLocation   = "gpupool_idle_carbon_location_based_grams_total"
	NameIdleCarbonMarket     = "gpupool_idle_carbon_market_based_grams_total"
)

// vLLM's metric names (vLLM v0.6 and later; TPOT became inter-token latency in v0.10).
const (
	VLLMGenerationTokens = "vllm:generation_tokens_total"
	VLLMPromptTokens     = "vllm:prompt_tokens_total"
	VLLMTTFT             = "vllm:time_to_first_token_seconds"
	VLLMTPOT             = "vllm:time_per_output_token_seconds"
	VLLMInterToken       = "vllm:inter_token_latency_seconds"
)

// GatePhases are the values of the gate-phase gauge's phase label.
var GatePhases = []string{"idle", "cordon", "drain", "observe", "apply", "verify", "smoke", "uncordon", "failed"}
