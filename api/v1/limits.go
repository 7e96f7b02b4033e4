package v1

import "time"

// Ranges of the Pool's numbers. Every number a Pool holds is checked against these by Validate,
// with its field path; they are chosen so that the arithmetic done on them later (replica counts,
// token and byte products, simulated request counts) cannot overflow, and so that no valid pool
// makes the planner or the simulator run for long on a number alone. They are far above what any
// real deployment writes; docs/api-v1.md lists them.
const (
	// MaxRPS bounds traffic.rps: a million requests per second for one tenant.
	MaxRPS = 1e6
	// MaxTokens bounds traffic.inputTokens, traffic.outputTokens and maxContext: ten million
	// tokens, above the longest context any catalog model has.
	MaxTokens = 10_000_000
	// MaxConcurrency bounds a tenant's concurrency (requests in flight per replica).
	MaxConcurrency = 100_000
	// MaxReplicaCount bounds reservation, cap and replicas: more replicas than the largest fleet
	// a pool file can describe holds slices.
	MaxReplicaCount = 100_000
	// MinWeight and MaxWeight bound a tenant's weight, so that shares (use / weight) stay finite
	// and print in a few digits.
	MinWeight = 1e-6
	MaxWeight = 1e6
	// MaxSLO bounds every slo duration: a day.
	MaxSLO = Duration(24 * time.Hour)
	// MaxCooldown bounds policy.reconfigCooldown: a year.
	MaxCooldown = Duration(365 * 24 * time.Hour)
	// MaxMovesLimit bounds policy.maxMoves.
	MaxMovesLimit = 1_000_000
	// MaxUnavailableCount bounds an integer policy.maxUnavailable.
	MaxUnavailableCount = 1_000_000
	// MaxFleetGPUs bounds the GPUs of a fleet (ten times the largest pool the planner is
	// measured on), MaxTenants the tenants of a pool.
	MaxFleetGPUs = 100_000
	MaxTenants   = 100_000
	// MaxTimeSliceReplicas bounds a Plan replica's limits.timeSliceReplicas (the device
	// plugin's replicas per GPU or instance).
	MaxTimeSliceReplicas = 64
	// MaxMPSClients bounds the replicas one GPU or MIG instance shares by MPS: an MPS server runs
	// at most 48 client processes (Volta and later).
	MaxMPSClients = 48
)
