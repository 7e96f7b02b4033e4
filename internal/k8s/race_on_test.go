//go:build race

package k8s

// raceEnabled: the race detector slows the controller and the test's own clients several times
// over, so timing budgets measured without it are scaled where a test says so.
const raceEnabled = true
