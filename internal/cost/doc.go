// Package cost turns a pool's energy and GPU-time into per-tenant cost, energy and carbon, by
// the one attribution rule of docs/cost.md, the same for planned, simulated and measured runs.
//
// Per GPU over a period: the energy (the board's counter when measured; the step power model
// when simulated, and when planned at each replica's offered rate, given as
// PlanOptions.DynamicWatts by plan.ReplicaPower) is split into idle energy (the idle power over the period, capped at the
// total) and active energy (the rest). Active energy is split among the GPU's slices in
// proportion to their activity in GPU-seconds: a MIG instance's busy fraction (GPM's SM
// activity when measured) × its share of the board's compute slices, an MPS or time-sliced
// process's SM utilisation; a Device's Split says which the agent used. The GPU's hardware
// cost is split twice: by reserved fraction (allocation basis, chargeback) and by activity
// (usage basis, showback). Idle energy, unallocated capacity and unused time go to the pool's
// idle line; the operator's idle policy (none, reservation, use) then spreads that line over
// tenants, pool-wide. Energy cost and carbon are linear in energy (facility energy = IT energy ×
// PUE), so every figure of every tenant plus the idle line adds up to the devices' totals.
//
// The package is pure: devices and prices in, a Report out. Prices come only from the Pool's
// policy.cost; a figure whose price is missing is left out and the Report's notes say why.
//
// Inside a shared LoRA engine, SplitByTokens divides the engine's figures among its adapters by the
// tokens it computed for each (docs/lora.md); the parts add up to the whole.
package cost
