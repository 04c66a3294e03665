//go:build race

package store

// raceSlowdown scales timing bounds in -race builds, whose instrumentation
// slows Pebble roughly tenfold.
const raceSlowdown = 15
