//go:build race

package main

// raceEnabled: the race detector slows a child process several times over.
const raceEnabled = true
