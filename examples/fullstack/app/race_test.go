//go:build race

package app_test

// raceEnabled: the race detector slows the server several times over.
const raceEnabled = true
