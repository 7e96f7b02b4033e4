package metrics

// Every metric the agent exposes. Units follow Prometheus conventions (base units, _total for
// counters, _ratio for 0–1 shares).
const (
	namespace = "gpupool"

	NameSliceMemoryUsed    = "gpupool_slice_memory_used_bytes"
	NameSliceMemoryPlanned = "gpupool_slice_memory_planned_bytes"
	NameSliceSMShare       = "gpupool_slice_sm_share_ratio"
	NameTenantTokens       = "gpupool_tenant_tokens_total"
	NameTenantEnergy       = "gpupool_tenant_energy_joules_total"
	NameTenantGPUEnergy    = "gpupool_tenant_gpu_energy_joules_total"
	NameTenantJPerToken    = "gpupool_tenant_joules_per_token"
	NameTenantTTFT         = "gpupool_tenant_time_to_first_token_seconds"
	NameTenantTPOT         = "gpupool_tenant_time_per_output_token_seconds"
	NameTenantSLO          = "gpupool_tenant_slo_attainment_ratio"
	NameGPUEnergy          = "gpupool_gpu_energy_joules_total"
	NameGPUIdleEnergy      = "gpupool_gpu_idle_energy_joules_total"
	NameGPUInfo            = "gpupool_gpu_info"
	NameGPUXID             = "gpupool_gpu_xid_errors_total"
	NameMPSRestarts        = "gpupool_mps_daemon_restarts_total"
	NameMPSHealthy         = "gpupool_mps_daemon_healthy"
	NameGatePhase          = "gpupool_gate_phase"
	NameGateCordoned       = "gpupool_gate_cordoned"
	NameGateChanges        = "gpupool_gate_changes_total"
	NamePollDuration       = "gpupool_agent_poll_duration_seconds"
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
