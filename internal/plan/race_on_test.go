//go:build race

package plan

// raceEnabled: the race detector slows the simulator-backed suites about tenfold, so under it
// they run their -short sizes; scripts/test.sh runs them at full size without the detector.
const raceEnabled = true
