// Package plansim runs the planner's confirming simulations on internal/sim: Run is the
// plan.Simulator that gpupool plan passes in plan.Options.Simulate, so that the planner (the
// policy core) does not depend on the simulator and the simulator's tests may use the planner.
package plansim
